"""Load the instructor's solution code, for hidden tests to compare against.

The grader's side of the course, never the students' package: the solutions live only in the
instructor's ``solutions/`` folder, never in a handout. A hidden test cell calls
``load_solution("01_soft_dictionary_lookup")`` and gets a module holding that notebook's graded
functions, built from:

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
import types
from pathlib import Path
from typing import Any

from course_utils.guards import Guards
from course_utils.notebook_cells import assignment_notebook, cell_source, solution_cells

SOLUTIONS_ENV_VAR = "COURSE_SOLUTIONS_DIR"
# The solutions are the grader's: a student line that loads them, names this module or the variable
# that says where they lie is flagged for review (course_utils.guards).
GUARDS = Guards(names=("load_solution",), values=("SOLUTIONS_ENV_VAR",), module=True)
# What a notebook's hidden tests import from here (tests/test_public_surface.py); the rest is the grader's.
__all__ = ["load_solution"]

_cache: dict[Path, types.ModuleType] = {}


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
    from course_utils.recording import Mode, Withheld, mode

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
