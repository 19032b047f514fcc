"""The course's standard cells, stamped into every notebook, and the cell builders they use.

The ``.ipynb`` files in ``solutions/`` are the source of truth; edit them in JupyterLab
(nbgrader's "Create Assignment" toolbar) or with nbformat from a script. ``release`` calls
``stamp_course_cells`` on each of them (and nbgrader_ext.course_cells on each student version).
"""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING

import nbformat
from nbformat.notebooknode import NotebookNode

if TYPE_CHECKING:
    from course_utils.colab import CourseAddress

SCHEMA_VERSION = 3  # nbgrader's cell-metadata schema in 0.9.x


def _clean(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def markdown(text: str) -> NotebookNode:
    """Prose: intuition, math, worked numbers."""
    return nbformat.v4.new_markdown_cell(_clean(text))


def code(text: str) -> NotebookNode:
    """An ordinary, ungraded code cell (demos, plots)."""
    return nbformat.v4.new_code_cell(_clean(text))


def tests(grade_id: str, points: float, text: str) -> NotebookNode:
    """An autograder-tests cell worth ``points``, with the metadata the grading contract expects."""
    cell = nbformat.v4.new_code_cell(_clean(text))
    cell.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": grade_id,
        "locked": True,
        "points": points,
        "schema_version": SCHEMA_VERSION,
        "solution": False,
        "task": False,
    }
    return cell


SELF_CHECK_INTRO_ID = "self-check-intro"
SELF_CHECK_ID = "self-check"


COURSE_POSITION = re.compile(r"(notebook \d+ of )\d+")  # in the title cell: "notebook 3 of 9"


def stamp_course_cells(
    nb: NotebookNode, path: str, *, student: bool, address: CourseAddress | None = None, course_size: int | None = None
) -> bool:
    """Put the course's standard cells into ``nb``; ``path`` is its place in the repository.

    With ``course_size``, the title cell's "notebook N of M" says how many notebooks the course has now, so a
    new notebook needs no edit of the others.

    First, under the title: the Colab badge and the setup cell, from ``course_utils.colab`` and
    the course's address (``course.toml`` unless ``address`` is given). Last: the self-check
    (``course_utils.selfcheck``). Returns whether anything changed; stamping twice changes nothing.
    """
    from course_utils.colab import (
        BADGE_CELL_ID,
        SETUP_CELL_ID,
        badge_markdown,
        course_address,
        setup_source,
    )

    address = address or course_address()

    name = path.rsplit("/", 1)[-1].removesuffix(".ipynb")
    needs_triton = any(
        c.cell_type == "code" and ("import triton" in c.source or "course_utils.kernels import" in c.source) for c in nb.cells
    )
    stamped = {
        BADGE_CELL_ID: markdown(badge_markdown(path, student=student, address=address)),
        SETUP_CELL_ID: code(setup_source(address, ("kernels",) if needs_triton else ())),
        SELF_CHECK_INTRO_ID: markdown(
            """
            ## Check your work

            The cell below runs this notebook's visible tests again, on the functions as you last ran them,
            and reports which pass and why the others fail. It needs no nbgrader, so it works on Colab too.
            Hidden tests run only when the course grades your notebook.
            """
        ),
        SELF_CHECK_ID: code(f'from course_utils import check_my_work\n\ncheck_my_work("{name}");'),
    }
    for cell_id, cell in stamped.items():
        cell["id"] = cell_id
    rest = [c for c in nb.cells if c.get("id") not in stamped]
    if course_size is not None and rest and COURSE_POSITION.search(rest[0].source):
        title = nbformat.from_dict(dict(rest[0]))  # a new cell: the comparison below must see the change
        title.source = COURSE_POSITION.sub(rf"\g<1>{course_size}", title.source, count=1)
        rest[0] = title
    # The badge right under the title, on the first screen; the setup cell before any import.
    cells = rest[:1] + [stamped[BADGE_CELL_ID], stamped[SETUP_CELL_ID]] + rest[1:] + [stamped[SELF_CHECK_INTRO_ID], stamped[SELF_CHECK_ID]]
    changed = [(c.cell_type, c.get("id"), c.source) for c in cells] != [(c.cell_type, c.get("id"), c.source) for c in nb.cells]
    nb.cells = cells
    return changed
