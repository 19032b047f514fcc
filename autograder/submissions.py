"""Synthetic submissions: what a student would hand in, built from the released notebook.

Used by ``demo`` and by the test suite. A "solved" submission is the released
student notebook with each solution cell filled in from ``solutions/``, which is
exactly what a student who wrote the solution would submit. Variants rewrite one
solution cell (``autograder.mistakes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import nbformat
from nbformat.notebooknode import NotebookNode

from course_utils.notebook_cells import (
    assignment_notebook,
    is_solution_cell,
    nbgrader_meta,
    solution_cells,
)

from .mistakes import Variant
from .settings import NOTEBOOKS_DIR, SOLUTIONS_DIR


def released(assignment: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> NotebookNode:
    """The student version, as released (the untouched submission)."""
    return nbformat.read(assignment_notebook(notebooks_dir, assignment), as_version=4)


def solved(
    assignment: str,
    variants: Iterable[Variant] = (),
    *,
    solutions_dir: Path = SOLUTIONS_DIR,
    notebooks_dir: Path = NOTEBOOKS_DIR,
) -> NotebookNode:
    """The released notebook with every solution cell answered, some of them by ``variants``."""
    source = nbformat.read(assignment_notebook(solutions_dir, assignment), as_version=4)
    answers = solution_cells(source)
    for variant in variants:
        if variant.cell not in answers:
            raise ValueError(f"variant {variant.name!r} names no solution cell of {assignment}: {variant.cell!r}")
        answers[variant.cell] = variant.apply(answers[variant.cell])
    notebook = released(assignment, notebooks_dir)
    for cell in notebook.cells:
        if is_solution_cell(cell):
            cell.source = answers[nbgrader_meta(cell)["grade_id"]]
    return notebook


def write_submission(folder: Path, student_id: str, assignment: str, notebook: NotebookNode) -> Path:
    """Save ``notebook`` as ``folder/student_id/assignment.ipynb``, as a student hands it in."""
    path = folder / student_id / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path
