"""What a handout must not hold: the grader, the solutions, or any text that answers a graded item.

``release --check`` and the tests scan two trees with ``handout_leaks``: the handout folder as
``release --handout`` writes it, and the students' package as pip installs it from a wheel built from
that folder (``autograder.handout.installed_package``). A tree leaks when it holds

* a part of the grader or the course: a package or folder named ``autograder``, ``solutions`` or
  ``mistakes``, or nbgrader's solution and hidden-test markers;
* ``RUN`` consecutive lines (``autograder.given_away``'s rule) of a solution region, of a hidden
  test, or of a showcase cell, of any notebook. A handout notebook's own scaffold, the given lines of
  the exercise in its own notebook, is no leak, as for ``release --check``;
* the formula of a question's answer: the right-hand side of a line of an ``answer_*`` solution
  region (``pairs = sum(L * (L + 1) // 2 for L in lengths)``) anywhere, even inside another line.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from course_utils.notebook_cells import (
    cell_source,
    defined_names,
    hidden_part,
    is_showcase,
    is_solution_cell,
    is_test_cell,
    nbgrader_meta,
    visible_part,
)

from .course import list_assignments
from .given_away import normalised, runs_of

FORBIDDEN_PARTS = ("autograder", "solutions", "mistakes")  # folder or module names that are the course's, not the students'
MARKERS = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".cfg", ".json", ".ipynb", ".yml", ".yaml", ".html", ""}
MIN_FORMULA_CHARS = 12  # shorter right-hand sides (``T - L``) are arithmetic any text may hold
ANSWER_PREFIX = "answer_"


@dataclass(frozen=True)
class AnswerText:
    """The text of one graded item that no handout file may repeat."""

    answer: str  # "04_masking:causal_mask", "04_masking:test_padding_mask (hidden test)"
    runs: frozenset[tuple[str, ...]]
    formulas: frozenset[str] = frozenset()
    notebook: str = ""
    grade_id: str = ""  # the exercise's cell: its own given lines in its own notebook are no leak
    defines: frozenset[str] = frozenset()  # the graded names the solution cell defines


@dataclass(frozen=True)
class Leak:
    path: str  # relative to the scanned tree
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def answer_texts(solutions_dir: Path) -> list[AnswerText]:
    """Every solution region, showcase cell and hidden test of the course, with the formulas of its questions.

    A hidden test or a showcase may repeat lines the notebooks give students anyway (a visible test's call, a
    kernel's signature in its scaffold): such runs are public by design, so only a solution region is held to
    every run of its lines.
    """
    notebooks = {
        name: json.loads((solutions_dir / name / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]
        for name in list_assignments(solutions_dir)
    }
    public = set().union(*(runs_of(normalised(_public_part(cell))) for cells in notebooks.values() for cell in cells))
    texts = []
    for name, cells in notebooks.items():
        for cell in cells:
            grade_id = str(nbgrader_meta(cell).get("grade_id", cell.get("id", "")))
            source = cell_source(cell)
            if is_test_cell(cell):
                runs = runs_of(normalised(hidden_part(source))) - public
                texts.append(AnswerText(f"{name}:{grade_id} (hidden test)", frozenset(runs)))
            elif is_showcase(cell):
                texts.append(AnswerText(f"{name}:{grade_id} (showcase)", frozenset(runs_of(normalised(source)) - public)))
            elif is_solution_cell(cell):
                region = solution_region(source)
                formulas = frozenset(answer_formulas(region)) if grade_id.startswith(ANSWER_PREFIX) else frozenset()
                runs = frozenset(runs_of(normalised(region)))
                texts.append(AnswerText(f"{name}:{grade_id}", runs, formulas, name, grade_id, frozenset(defined_names(source))))
    return texts


def _public_part(cell: dict) -> str:
    """What a released notebook shows of a solution notebook's code cell: no region, no hidden test, no showcase."""
    if cell.get("cell_type") != "code" or is_showcase(cell):
        return ""
    source = cell_source(cell)
    if is_test_cell(cell):
        return visible_part(source)
    if is_solution_cell(cell):
        region = solution_region(source)
        return "\n".join(line for line in source.splitlines() if line not in region.splitlines())
    return source


def solution_region(source: str) -> str:
    """The lines between nbgrader's solution markers (the whole cell where it has none)."""
    if "### BEGIN SOLUTION" not in source:
        return source
    inside, kept = False, []
    for line in source.splitlines():
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside:
            kept.append(line)
    return "\n".join(kept)


def answer_formulas(region: str) -> set[str]:
    """The right-hand sides of an answer's assignments and returns that compute something (an operator in them), as written."""
    region = textwrap.dedent(region)
    try:
        tree = ast.parse(region)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        value = node.value if isinstance(node, (ast.Assign, ast.Return, ast.AugAssign)) else None
        if value is None or not any(isinstance(n, (ast.BinOp, ast.Compare, ast.BoolOp)) for n in ast.walk(value)):
            continue
        text = re.sub(r"\s+", " ", ast.get_source_segment(region, value) or "").strip()
        if len(text) >= MIN_FORMULA_CHARS:
            found.add(text)
    return found


def handout_leaks(root: Path, solutions_dir: Path) -> list[Leak]:
    """Every leak in the tree at ``root`` (a handout folder, or an installed package's files)."""
    texts = answer_texts(solutions_dir)
    leaks = []
    for path in sorted(p for p in root.rglob("*") if ".git" not in p.relative_to(root).parts):
        relative = path.relative_to(root)
        if path.is_dir() or path.name in FORBIDDEN_PARTS or path.stem in FORBIDDEN_PARTS:
            if path.stem in FORBIDDEN_PARTS:
                leaks.append(Leak(str(relative), "is the course's, not the students': the grader, the solutions or the catalogue"))
            continue
        if path.suffix not in TEXT_SUFFIXES or "__pycache__" in relative.parts:
            continue
        leaks += [Leak(str(relative), what) for what in _leaks_in(path, texts)]
    return leaks


def _leaks_in(path: Path, texts: list[AnswerText]) -> list[str]:
    try:
        raw = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return [f"cannot be read as text ({path.suffix or 'no suffix'})"]
    # The markers matter in a notebook (a region nbgrader left in); the package's own notebook reader names them.
    found = [f"holds nbgrader's marker {marker!r}" for marker in MARKERS if marker in raw and path.suffix == ".ipynb"]
    stand_ins = declared_stand_ins(raw) if path.suffix == ".py" else []
    for where, grade_id, lines in _pieces(path, raw):
        for answer in texts:
            if answer.notebook and answer.notebook == _notebook_name(path) and answer.grade_id == grade_id:
                continue  # the exercise's own scaffold in its own notebook
            exempt = [s for s in stand_ins if s.stands_in_for(answer)]
            seen = normalised(_without(raw, exempt)) if exempt else lines  # a .py file is one piece: its whole text
            text, flat = "\n".join(seen), " ".join(seen)
            run = next((run for run in sorted(answer.runs) if "\n".join(run) in text), None)
            if run:
                found.append(f"{where}repeats {answer.answer}: {' / '.join(run)}")
            formula = next((f for f in sorted(answer.formulas) if f in flat), None)
            if formula:
                found.append(f"{where}holds the formula of {answer.answer}: {formula}")
    return found


@dataclass(frozen=True)
class StandIn:
    """A definition of the package declared, with ``@answers(notebook, *functions)`` (``course_utils.tripwires``), to
    be the course's own version of graded functions: the one exception a handout may hold, for carried code. The
    grade makes it useless as an answer (a graded function that runs it loses its tests), so its lines may repeat
    those of what it stands in for, and of nothing else."""

    notebook: str
    functions: frozenset[str]
    lines: tuple[int, int]  # first and last line of its definition, decorators included (1-based)

    def stands_in_for(self, answer: AnswerText) -> bool:
        return answer.notebook == self.notebook and bool(self.functions & answer.defines)


def declared_stand_ins(source: str) -> list[StandIn]:
    """Every definition in ``source`` that an ``@answers(...)`` decorator declares, with what it answers."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for decorator in node.decorator_list:
            called = decorator.func if isinstance(decorator, ast.Call) else None
            name = called.id if isinstance(called, ast.Name) else called.attr if isinstance(called, ast.Attribute) else ""
            args = [a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)] if called else []
            if name == "answers" and len(args) >= 2:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append(StandIn(args[0], frozenset(args[1:]), (first, node.end_lineno or node.lineno)))
    return found


def _without(source: str, stand_ins: list[StandIn]) -> str:
    """``source`` with the definitions of ``stand_ins`` blanked out."""
    lines = source.splitlines()
    for stand_in in stand_ins:
        first, last = stand_in.lines
        lines[first - 1 : last] = [""] * (last - first + 1)
    return "\n".join(lines)


def _notebook_name(path: Path) -> str:
    return path.stem if path.suffix == ".ipynb" else ""


def _pieces(path: Path, raw: str) -> list[tuple[str, str | None, list[str]]]:
    """(where, the cell's grade id, normalised lines) for each code cell of a notebook, or the whole file otherwise."""
    if path.suffix != ".ipynb":
        return [("", None, normalised(raw))]
    try:
        cells = json.loads(raw).get("cells", [])
    except (ValueError, AttributeError):
        return [("", None, normalised(raw))]
    return [
        (f"cell {cell.get('id', index)} ", nbgrader_meta(cell).get("grade_id"), normalised(cell_source(cell)))
        for index, cell in enumerate(cells)
        if isinstance(cell, dict) and cell.get("cell_type") == "code"
    ]
