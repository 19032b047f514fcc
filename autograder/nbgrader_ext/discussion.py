"""Keep the answers to graded questions off the student's page, and give them back in feedback.

A discussion cell (tag ``discussion``) explains the answer to a graded question: it follows the
question's test cell in the solution notebook, and a run of such cells may mix markdown and code.
``WithholdDiscussion`` runs in generate_assignment and replaces each run with one note that says
where the discussion will be, so the student version never answers its own questions.
``RestoreDiscussions`` runs in generate_feedback and puts each run back after the test cell it
follows in the source, so a graded student reads the explanation beside their score. The solutions
notebook and the solutions site keep them as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

DISCUSSION_TAG = "discussion"
WITHHELD_NOTE = (
    "*The discussion of this question is not shown here, so that it does not give the answer away. "
    "You will find it in your feedback once your notebook is graded, and in the solutions notebook.*"
)


def is_discussion(cell: NotebookNode | dict[str, Any]) -> bool:
    return DISCUSSION_TAG in cell.get("metadata", {}).get("tags", [])


def _grade_id(cell: NotebookNode | dict[str, Any]) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def discussion_runs(cells: list[Any]) -> list[tuple[str | None, list[Any]]]:
    """Each run of consecutive discussion cells, with the grade id of the cell just before it
    (the question's test cell in a well-formed notebook; None when it is not a graded cell)."""
    runs: list[tuple[str | None, list[Any]]] = []
    for index, cell in enumerate(cells):
        if not is_discussion(cell):
            continue
        if index > 0 and is_discussion(cells[index - 1]):
            runs[-1][1].append(cell)
        else:
            runs.append((_grade_id(cells[index - 1]) if index > 0 else None, [cell]))
    return runs


class WithholdDiscussion(NbGraderPreprocessor):
    """Replaces each run of discussion cells with one note saying where the discussion is."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        cells: list[NotebookNode] = []
        previous: NotebookNode | None = None
        for cell in nb.cells:
            if not is_discussion(cell):
                cells.append(cell)
            elif previous is None or not is_discussion(previous):  # one note for a whole run
                note = nbformat.v4.new_markdown_cell(WITHHELD_NOTE)
                note["id"] = f"{cell.get('id', 'discussion')}-withheld"[:64]  # stable: from the first cell withheld
                cells.append(note)
            previous = cell
        nb.cells = cells
        return nb, resources


class RestoreDiscussions(NbGraderPreprocessor):
    """Puts each discussion from the source notebook back after the test cell it follows there.

    The note that ``WithholdDiscussion`` left in its place goes, and so does a copy of a discussion the
    submission already holds (the solution file handed in), so each shows once. A run whose test cell the
    submission lacks (nbgrader restores deleted test cells, so this is rare) is left out.
    """

    source_dir = Unicode("", help="the course's source folder (the solution notebooks)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        source = self._source_notebook(resources)
        if source is None:
            return nb, resources
        after = {grade_id: run for grade_id, run in discussion_runs(source.cells) if grade_id}
        restored_ids = {cell.get("id") for run in after.values() for cell in run} - {None}
        cells: list[NotebookNode] = []
        for cell in nb.cells:
            if cell.cell_type == "markdown" and cell.source.strip() == WITHHELD_NOTE:
                continue
            if cell.get("id") in restored_ids:  # a notebook that already holds the discussion (the solution handed in)
                continue
            cells.append(cell)
            for discussed in after.get(_grade_id(cell) or "", []):
                restored = nbformat.from_dict(discussed)
                if restored.cell_type == "code":
                    restored.outputs, restored.execution_count = [], None
                cells.append(restored)
        nb.cells = cells
        return nb, resources

    def _source_notebook(self, resources: dict[str, Any]) -> NotebookNode | None:
        names = resources.get("nbgrader", {})
        assignment, notebook = names.get("assignment"), names.get("notebook")
        if not (self.source_dir and assignment and notebook):
            return None
        path = Path(self.source_dir) / assignment / f"{notebook}.ipynb"
        return nbformat.read(path, as_version=4) if path.is_file() else None
