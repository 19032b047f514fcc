"""The student version's course cells, stamped by generate_assignment itself.

The solution notebooks carry the course's standard cells (``authoring.stamp_course_cells``)
with a Colab badge that opens the solution. ``StampStudentCells`` runs last in
generate_assignment and points the badge at the student version instead, so that a stock
``nbgrader generate_assignment`` writes exactly what ``python -m autograder release`` commits.
It also writes the student's ``STUDENT_ID = ""`` line where the solutions set ``EXAMPLE_ID``
(``course_utils.student_values``): the solutions show the example values on purpose, a student's
notebook asks for the student's id.
"""

from __future__ import annotations

from typing import Any

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from course_utils.student_values import ID_CELL, STUDENT_ID_LINE

from ..authoring import stamp_course_cells


class StampStudentCells(NbGraderPreprocessor):
    """Writes the student's badge, setup cell and self-check into the generated notebook."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        stamp_course_cells(nb, f"notebooks/{info['assignment']}/{info['notebook']}.ipynb", student=True)
        for cell in nb.cells:
            if cell.get("id") == ID_CELL and cell.cell_type == "code":
                cell.source = STUDENT_ID_LINE
        return nb, resources
