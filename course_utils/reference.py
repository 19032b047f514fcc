"""Load the instructor's solution code, for hidden tests to compare against.

The solutions live only in the instructor's ``solutions/`` folder, never in the
student notebooks. A hidden test cell calls ``load_solution("01_soft_dictionary_lookup")``
and gets a module holding that notebook's graded functions, built from:

* every top-level ``import`` in the notebook's code cells, and
* every nbgrader solution cell (which, by the grading contract, holds only definitions).

Where the solutions are: ``$COURSE_SOLUTIONS_DIR`` (the autograder sets it), else the
nearest ``solutions/`` folder above the working directory (an instructor running a
solution notebook in place).
"""

from __future__ import annotations

import ast
import json
import linecache
import os
import re
import types
from pathlib import Path
from typing import Any

from .guards import Guards

SOLUTIONS_ENV_VAR = "COURSE_SOLUTIONS_DIR"
# The solutions are the grader's: a student line that loads them, names this module or the variable
# that says where they lie is flagged for review (course_utils.guards).
GUARDS = Guards(names=("load_solution",), values=("SOLUTIONS_ENV_VAR",), module=True)
# What a notebook's hidden tests import from here (tests/test_public_surface.py); the rest reads notebooks for the grader.
__all__ = ["load_solution"]

_cache: dict[Path, types.ModuleType] = {}


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


def top_level_imports(notebook: dict[str, Any]) -> str:
    """Every top-level import statement of the notebook's code cells, as source."""
    lines: list[str] = []
    for cell in notebook["cells"]:
        if cell.get("cell_type") != "code":
            continue
        try:
            tree = ast.parse(_without_magics(cell_source(cell)))
        except SyntaxError:
            continue
        lines += [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(dict.fromkeys(lines))  # keep order, drop repeats


def _without_magics(source: str) -> str:
    # IPython magics (%matplotlib, !pip) are not Python; blank them before parsing.
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def solutions_dir() -> Path:
    """The folder that holds ``NN_name/NN_name.ipynb`` solution notebooks."""
    configured = os.environ.get(SOLUTIONS_ENV_VAR)
    if configured:
        return Path(configured)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / "solutions"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "Hidden tests need the instructor's solutions/ folder, and none was found: "
        f"set ${SOLUTIONS_ENV_VAR} or run from inside the course repository."
    )


def assignment_notebook(folder: Path, assignment: str) -> Path:
    """Where an assignment's notebook lives in a course folder: ``FOLDER/NAME/NAME.ipynb``."""
    return Path(folder) / assignment / f"{assignment}.ipynb"


def solution_notebook_path(assignment: str) -> Path:
    path = assignment_notebook(solutions_dir(), assignment)
    if not path.is_file():
        raise FileNotFoundError(f"no solution notebook for {assignment!r} at {path}")
    return path


def load_solution(assignment: str) -> types.ModuleType:
    """The solution notebook's graded functions as a module (loaded once, then cached).

    In the sealed grading run, which never sees the solutions, it is a stand-in that absorbs
    every use: there nothing is compared, and the trusted replay loads the real one.
    """
    from .recording import Mode, Withheld, mode

    if mode() is Mode.RECORD:
        return Withheld(f"load_solution({assignment!r})")  # type: ignore[return-value]
    path = solution_notebook_path(assignment).resolve()
    if path not in _cache:
        _cache[path] = solution_module(assignment)
    return _cache[path]


def solution_module(assignment: str, rewritten: dict[str, str] | None = None, name: str = "") -> types.ModuleType:
    """A fresh module of the solution notebook's graded code, with the cells named in ``rewritten``
    (grade id -> source) replaced: a catalogued mistake, run where no student code is."""
    path = solution_notebook_path(assignment).resolve()
    notebook = json.loads(path.read_text(encoding="utf-8"))
    module = types.ModuleType(f"solution_{assignment}")
    module.__file__ = str(path)
    cells = {**solution_cells(notebook), **(rewritten or {})}
    code = top_level_imports(notebook) + "\n\n" + "\n\n".join(cells.values())
    # Register the source under its own name, as IPython does for cells, so that tools which
    # read a function's source (inspect.getsource, triton.jit, tracebacks) find these lines.
    filename = f"<solution {assignment}{' ' + name if name else ''}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    exec(compile(code, filename, "exec"), module.__dict__)  # noqa: S102 - instructor's own code
    return module


def defined_names(source: str) -> set[str]:
    """Top-level functions and classes a cell defines (by regex when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(re.findall(r"^(?:def|class)\s+([A-Za-z_]\w*)", source, flags=re.MULTILINE))
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
