"""What a notebook may import from the course package: a small, listed set, each with a true ``__all__``.

Test cells, visible and hidden, use one helper layer (``course_utils.checks``), as a project's tests use
one adapter; hidden tests add ``load_solution`` from ``autograder.solutions``. Other cells use the
package itself, plus Triton's module (``course_utils.kernels``, which must choose the interpreter before
Triton loads) and the operator timer (``course_utils.operators``, guarded: a student line that names it is
flagged, so the package does not hand its names on). The setup cell also imports the checks the test cells
call without importing (``call``, ``check_close``): the tests' preamble, used by no other cell. The list is
``course_utils``' own docstring.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import nbformat
import pytest
from helpers import ASSIGNMENTS

import course_utils
from autograder.settings import SOLUTIONS_DIR
from course_utils.guards import declared
from course_utils.notebook_cells import is_solution_cell, is_test_cell

BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
SETUP_CALL = "course_utils.init("  # the setup cell is the one that starts the runtime

# Where each kind of cell may import from.
ALLOWED = {
    "test": {"course_utils.checks"},
    "hidden test": {"course_utils.checks", "autograder.solutions"},
    "setup": {"course_utils", "course_utils.checks", "course_utils.kernels"},
    "other": {"course_utils", "course_utils.kernels", "course_utils.operators"},
}
SURFACE = sorted(set().union(*ALLOWED.values()))
COURSE_PACKAGES = ("course_utils", "autograder")  # the students' package, and what only the grader adds


def notebook_of(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)


def parsed(source: str) -> ast.Module:
    """A cell's code as Python, its IPython magics and shell lines blanked (line numbers kept)."""
    return ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()))


def course_imports(source: str) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) for each import of the course package in a cell's code."""
    found = []
    for node in ast.walk(parsed(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in COURSE_PACKAGES:
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names if alias.name.split(".")[0] in COURSE_PACKAGES]
    return found


def hidden_lines(source: str) -> set[int]:
    """The (1-based) lines between each BEGIN and END HIDDEN TESTS marker."""
    hidden, inside = set(), False
    for number, text in enumerate(source.splitlines(), start=1):
        if text.strip() in (BEGIN_HIDDEN, END_HIDDEN):
            inside = text.strip() == BEGIN_HIDDEN
        elif inside:
            hidden.add(number)
    return hidden


def kind_of(cell: dict, line: int) -> str:
    if is_test_cell(cell):
        return "hidden test" if line in hidden_lines(cell["source"]) else "test"
    return "setup" if SETUP_CALL in cell["source"] else "other"


def misplaced_imports(notebook: dict, name: str) -> list[str]:
    """'notebook, cell, line: import (why)' for each import outside what its kind of cell may use."""
    wrong = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code" or is_solution_cell(cell):
            continue  # an answer cell is the student's: what it imports is graded by the tests, not here
        for line, module, names in course_imports(cell["source"]):
            kind = kind_of(cell, line)
            if module not in ALLOWED[kind]:
                what = f"from {module} import {', '.join(names)}" if names else f"import {module}"
                wrong.append(f"{name}, cell {index}, line {line}: {what} ({kind} cells import from {sorted(ALLOWED[kind])})")
    return wrong


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_cell_imports_from_the_listed_modules_for_its_kind(assignment: str) -> None:
    wrong = misplaced_imports(notebook_of(assignment), assignment)
    assert not wrong, "import these from the module their kind of cell uses:\n" + "\n".join(wrong)


def test_the_check_sees_an_import_from_elsewhere() -> None:
    test = nbformat.v4.new_code_cell(
        f"from course_utils.checks import call\n{BEGIN_HIDDEN}\nfrom course_utils.stand_ins import SCORES_STAND_IN\n"
        f"from autograder.solutions import load_solution\n{END_HIDDEN}\nfrom autograder.solutions import load_solution"
    )
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_x", "points": 1}
    given = nbformat.v4.new_code_cell("from course_utils.plots import heatmap\nimport course_utils\nimport course_utils.checks")
    wrong = misplaced_imports(nbformat.v4.new_notebook(cells=[given, test]), "toy")
    assert wrong == [
        "toy, cell 0, line 1: from course_utils.plots import heatmap (other cells import from "
        "['course_utils', 'course_utils.kernels', 'course_utils.operators'])",
        "toy, cell 0, line 3: import course_utils.checks (other cells import from ['course_utils', 'course_utils.kernels', "
        "'course_utils.operators'])",
        "toy, cell 1, line 3: from course_utils.stand_ins import SCORES_STAND_IN (hidden test cells import from "
        "['autograder.solutions', 'course_utils.checks'])",
        "toy, cell 1, line 6: from autograder.solutions import load_solution (test cells import from ['course_utils.checks'])",
    ]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_setup_imports_checks_for_the_tests_alone(assignment: str) -> None:
    # The setup cell's checks are the test cells' preamble: a given cell that called one would be a test in the open.
    notebook = notebook_of(assignment)
    setup = [cell for cell in notebook.cells if cell.cell_type == "code" and SETUP_CALL in cell.source]
    assert len(setup) == 1, "one setup cell"
    for_tests = {n for _, module, names in course_imports(setup[0].source) if module == "course_utils.checks" for n in names}
    misused = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and cell is not setup[0] and not is_test_cell(cell):
            used = {node.id for node in ast.walk(parsed(cell.source)) if isinstance(node, ast.Name)}
            misused += [f"{assignment}, cell {index}: {n}" for n in sorted(used & for_tests)]
    assert not misused, "a cell other than a test uses a check the setup imports for the tests:\n" + "\n".join(misused)


@pytest.mark.parametrize("module", SURFACE)
def test_each_listed_module_has_a_true_all(module: str) -> None:
    imported = importlib.import_module(module)
    names = imported.__all__
    assert names == sorted(set(names)), "sorted, each once"
    assert [n for n in names if n.startswith("_")] == [], "nothing private on the surface"
    assert [n for n in names if not hasattr(imported, n)] == [], "listed but missing"


def test_the_package_hands_on_nothing_guarded() -> None:
    # A name re-exported here from a module guarded as a whole would reach a student without naming that module,
    # and a guarded string constant without its text, so the grader's review (course_utils.guards) would not see
    # them. A guarded name is flagged by the name itself, whichever route it came by, so it may be handed on.
    package_of = course_utils._FROM
    for owner, guards in declared().items():
        leaf = owner.rpartition(".")[2]
        if guards.module:
            assert sorted(n for n, home in package_of.items() if home == leaf) == [], owner
        assert sorted(set(package_of) & set(guards.values)) == [], owner


def test_the_package_loads_no_torch_and_its_names_no_triton() -> None:
    # Light to import (the sealed runs' wire format needs no torch), and Triton stays unloaded until
    # course_utils.kernels has chosen the interpreter, whatever a setup cell imports before it.
    code = (
        "import sys, course_utils\n"
        "assert 'torch' not in sys.modules, 'import course_utils loaded torch'\n"
        "[getattr(course_utils, name) for name in course_utils.__all__]\n"
        "import course_utils.checks\n"
        "assert 'triton' not in sys.modules, 'a package name, or the checks, loaded triton'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_name_a_notebook_imports_is_listed(assignment: str) -> None:
    unlisted = []
    for index, cell in enumerate(notebook_of(assignment).cells):
        if cell.cell_type != "code" or is_solution_cell(cell):
            continue
        for line, module, names in course_imports(cell.source):
            if module in SURFACE:  # an import from elsewhere is the test above's to report
                public = importlib.import_module(module).__all__
                unlisted += [f"{assignment}, cell {index}, line {line}: {module}.{n}" for n in names if n not in public]
        # ``import course_utils`` and then course_utils.init(...): an attribute is a package name too.
        for node in ast.walk(parsed(cell.source)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "course_utils":
                if node.attr not in course_utils.__all__:
                    unlisted.append(f"{assignment}, cell {index}, line {node.lineno}: course_utils.{node.attr}")
    assert not unlisted, "add these to their module's __all__ (or import what is listed):\n" + "\n".join(unlisted)
