"""Keep the solution's showcase code out of the student version.

A showcase cell (tag ``showcase``) holds code a self-learner should read in the solutions
notebook but a student must not see, because it would give away a graded exercise: notebook
07's fast kernel is a complete FlashAttention kernel. ``WithholdShowcase`` runs in
generate_assignment before ClearSolutions and replaces each run of consecutive showcase cells
with one markdown note, so the student version neither shows the code nor stops at a stub.
"""

from __future__ import annotations

from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from course_utils.notebook_cells import is_showcase

WITHHELD_NOTE = (
    "*The solutions notebook has code here: {what}. It is not graded, and it is left out of this version "
    "because it would give away an exercise. Once you have done yours, read it on the course's solutions site "
    '(the course README, section "Self-learners"), or ask your instructor when they share the solutions.*'
)


def _what_it_shows(run: list[NotebookNode]) -> str:
    graded_ids = [f"`{c.metadata['nbgrader']['grade_id']}`" for c in run if "nbgrader" in c.get("metadata", {})]
    demos = len(run) - len(graded_ids)
    return " and ".join(graded_ids + (["a demonstration of it" if graded_ids else "a demonstration"] if demos else []))


class WithholdShowcase(NbGraderPreprocessor):
    """Replaces each run of showcase cells with one note that says what the solutions notebook shows."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        cells: list[NotebookNode] = []
        run: list[NotebookNode] = []
        for cell in [*nb.cells, None]:
            if cell is not None and is_showcase(cell):
                run.append(cell)
                continue
            if run:
                note = nbformat.v4.new_markdown_cell(WITHHELD_NOTE.format(what=_what_it_shows(run)))
                note["id"] = run[0].get("id", note["id"])  # stable: the id of the first cell withheld
                cells.append(note)
                run = []
            if cell is not None:
                cells.append(cell)
        nb.cells = cells
        return nb, resources
