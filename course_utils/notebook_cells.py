"""Reading course notebooks: nbgrader's cell metadata, test cells' visible and hidden parts, what each test uses.

The students' self-check and the grader both read notebooks through these; nothing here runs a cell
or knows where the solutions are (``autograder.solutions`` loads them, for hidden tests).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any


def nbgrader_meta(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell's nbgrader metadata ({} for an ordinary cell, or for metadata that is not a mapping)."""
    metadata = cell.get("metadata", {})
    meta = metadata.get("nbgrader", {}) if isinstance(metadata, dict) else {}
    return meta if isinstance(meta, dict) else {}


def cell_source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def is_solution_cell(cell: dict[str, Any]) -> bool:
    """A code cell the student fills in (nbgrader "Autograded answer")."""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("solution")) and not meta.get("grade")


def is_test_cell(cell: dict[str, Any]) -> bool:
    """A code cell whose outcome is scored (nbgrader "Autograder tests")."""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


CARRIED_TAG = "carried"  # a function carried over from an earlier notebook: the student pastes their own
SHOWCASE_TAG = "showcase"  # solutions only: code that would give an exercise away, withheld from the release


def is_carried(cell: dict[str, Any]) -> bool:
    return CARRIED_TAG in cell.get("metadata", {}).get("tags", [])


def is_showcase(cell: dict[str, Any]) -> bool:
    return SHOWCASE_TAG in cell.get("metadata", {}).get("tags", [])


def cells_tested_by(notebook: dict[str, Any]) -> dict[str, set[str]]:
    """test grade id -> the graded cells whose names the test cell uses (carried and showcase cells are not graded here).

    What a test reaches through a stand-in does not count: a stood-in name is used by the stand-in's key
    (``{"DecoderBlock": ReferenceBlock}``), not as a name.
    """
    owner = {}
    for cell in notebook["cells"]:
        if is_solution_cell(cell) and not is_carried(cell) and not is_showcase(cell):
            for node in ast.parse(cell_source(cell)).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    owner[node.name] = nbgrader_meta(cell)["grade_id"]
    tested = {}
    for cell in notebook["cells"]:
        if is_test_cell(cell):
            names = {node.id for node in ast.walk(ast.parse(cell_source(cell))) if isinstance(node, ast.Name)}
            tested[nbgrader_meta(cell)["grade_id"]] = {owner[name] for name in names if name in owner}
    return tested


def _split_hidden(source: str) -> tuple[str, str]:
    """(visible, hidden) lines of a test cell, delimited the way nbgrader's ClearHiddenTests does it."""
    visible, hidden, inside = [], [], False
    for line in source.split("\n"):
        if "BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "END HIDDEN TESTS" in line:
            inside = False
        else:
            (hidden if inside else visible).append(line)
    return "\n".join(visible), "\n".join(hidden)


def visible_part(source: str) -> str:
    """A test cell as students see it: the hidden region removed."""
    return _split_hidden(source)[0]


def hidden_part(source: str) -> str:
    return _split_hidden(source)[1]


def solution_cells(notebook: dict[str, Any]) -> dict[str, str]:
    """grade_id -> source of each solution cell, in notebook order."""
    return {nbgrader_meta(c)["grade_id"]: cell_source(c) for c in notebook["cells"] if is_solution_cell(c)}


def defined_names(source: str) -> set[str]:
    """Top-level functions and classes a cell defines (by regex when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(re.findall(r"^(?:def|class)\s+([A-Za-z_]\w*)", source, flags=re.MULTILINE))
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def assignment_notebook(folder: Path, assignment: str) -> Path:
    """Where an assignment's notebook lives in a course folder: ``FOLDER/NAME/NAME.ipynb``."""
    return Path(folder) / assignment / f"{assignment}.ipynb"
