"""Build nbgrader source notebooks from Python: cells with the right metadata.

The ``.ipynb`` files in ``solutions/`` are the source of truth; edit them in
JupyterLab (nbgrader's "Create Assignment" toolbar) or with these helpers from a
script. The helpers write exactly the metadata the grading contract expects
(see ``autograder/CONTRACT.md``), so a notebook built with them passes
``autograder.contract`` checks by construction of its metadata.
"""

from __future__ import annotations

import textwrap
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode

SCHEMA_VERSION = 3  # nbgrader's cell-metadata schema in 0.9.x

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def _clean(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def _nbgrader(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": SCHEMA_VERSION,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return meta


def markdown(text: str) -> NotebookNode:
    """Prose: intuition, math, worked numbers."""
    return nbformat.v4.new_markdown_cell(_clean(text))


def code(text: str) -> NotebookNode:
    """An ordinary, ungraded code cell (demos, plots)."""
    return nbformat.v4.new_code_cell(_clean(text))


def solution(grade_id: str, text: str) -> NotebookNode:
    """An autograded-answer cell: definitions only, with ``### BEGIN/END SOLUTION`` regions."""
    cell = nbformat.v4.new_code_cell(_clean(text))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=False, solution=True, locked=False)
    return cell


def tests(grade_id: str, points: float, text: str) -> NotebookNode:
    """An autograder-tests cell worth ``points``; may hold a ``### BEGIN/END HIDDEN TESTS`` region."""
    cell = nbformat.v4.new_code_cell(_clean(text))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=True, solution=False, locked=True, points=points)
    return cell


def notebook(cells: list[NotebookNode], *, title_id: str) -> NotebookNode:
    """A notebook with stable cell ids (grade ids for graded cells), so rebuilding changes no byte."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for index, cell in enumerate(cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell["id"] = grade_id or f"{title_id}-{index:02d}"
    nb.cells = cells
    nbformat.validate(nb)
    return nb


SELF_CHECK_INTRO_ID = "self-check-intro"
SELF_CHECK_ID = "self-check"


def stamp_course_cells(nb: NotebookNode, path: str, *, student: bool) -> bool:
    """Put the course's standard cells into ``nb``; ``path`` is its place in the repository.

    First, under the title: the Colab badge and the setup cell, from ``course_utils.colab`` (the
    repository address lives there alone). Last: the self-check (``course_utils.selfcheck``).
    Returns whether anything changed; stamping twice changes nothing.
    """
    from course_utils.colab import (
        BADGE_CELL_ID,
        SETUP_CELL_ID,
        badge_markdown,
        setup_source,
    )

    name = path.rsplit("/", 1)[-1].removesuffix(".ipynb")
    needs_triton = any(c.cell_type == "code" and ("import triton" in c.source or "course_utils.kernels import" in c.source) for c in nb.cells)
    stamped = {
        BADGE_CELL_ID: markdown(badge_markdown(path, student=student)),
        SETUP_CELL_ID: code(setup_source(("kernels",) if needs_triton else ())),
        SELF_CHECK_INTRO_ID: markdown(
            """
            ## Check your work

            The cell below runs this notebook's visible tests again, on the functions as you last ran them,
            and reports which pass and why the others fail. It needs no nbgrader, so it works on Colab too.
            Hidden tests run only when the course grades your notebook.
            """
        ),
        SELF_CHECK_ID: code(f'from course_utils.selfcheck import check_my_work\n\ncheck_my_work("{name}");'),
    }
    for cell_id, cell in stamped.items():
        cell["id"] = cell_id
    rest = [c for c in nb.cells if c.get("id") not in stamped]
    # The badge right under the title, on the first screen; the setup cell before any import.
    cells = rest[:1] + [stamped[BADGE_CELL_ID], stamped[SETUP_CELL_ID]] + rest[1:] + [stamped[SELF_CHECK_INTRO_ID], stamped[SELF_CHECK_ID]]
    changed = [(c.cell_type, c.get("id"), c.source) for c in cells] != [(c.cell_type, c.get("id"), c.source) for c in nb.cells]
    nb.cells = cells
    return changed
