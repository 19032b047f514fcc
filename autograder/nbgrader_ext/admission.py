"""Admission for nbgrader's own ``autograde``: the repairs ``grade`` makes, before nbgrader reads the cells.

nbgrader's OverwriteCells stops with a KeyError on a cell whose nbgrader metadata names a grade id
the release lacks (a forged test cell, say). ``repair`` (``autograder/grading/admission.py``) drops
such metadata and restores what a student's editor stripped, so stock ``nbgrader autograde`` grades
what ``python -m autograder grade`` grades. On a notebook ``grade`` has already repaired it changes nothing. A notebook
past ``NotebookLimits`` is refused here as ``grade`` refuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor, OverwriteCells
from traitlets import Unicode

from ..grading.admission import repair
from ..grading.notebook_size import too_large


class AdmitSubmission(NbGraderPreprocessor):  # enabled by default, as nbconvert's own are not
    """The first sanitizing step of autograde: repair the submission against the released notebook."""

    release_dir = Unicode("", help="the course's release folder, which holds ASSIGNMENT/NOTEBOOK.ipynb").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        about = resources.get("nbgrader", {})
        if (why := too_large(nb)) is not None:  # nbgrader then fails this one submission, and says why
            raise ValueError(f"{about.get('student', '?')}: not graded: {why}")
        released_path = Path(self.release_dir) / str(about.get("assignment", "")) / f"{about.get('notebook', '')}.ipynb"
        if not released_path.is_file():
            self.log.warning("no released notebook at %s: the submission is not repaired", released_path)
            return nb, resources
        fixed, repairs = repair(nb, nbformat.read(released_path, as_version=4))
        for note in repairs.notes():
            self.log.warning("%s: %s", about.get("student", "?"), note)
        return fixed, resources


class OverwriteCellsQuietly(OverwriteCells):
    """nbgrader's OverwriteCells, without the warning it gives for every test cell as released.

    A test cell's release lacks its hidden tests, so its checksum never matches the source's and stock
    OverwriteCells warns once per test cell of every submission, untouched ones included. That difference
    is the release's own: it is logged at debug level. A locked cell the student did edit is still
    warned about (and still restored from the source).
    """

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any], cell_index: int) -> tuple[NotebookNode, dict[str, Any]]:
        self._as_handed_in = cell.source
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name: str, attr: str, old: Any, new: Any) -> None:
        if attr == "checksum" and self._as_released(name) == self._as_handed_in:
            self.log.debug("cell %s is as released: its hidden tests come back from the source", name)
            return
        super().report_change(name, attr, old, new)

    def _as_released(self, name: str) -> str | None:
        source = self.gradebook.find_source_cell(name, self.notebook_id, self.assignment_id)
        cell = nbformat.v4.new_code_cell(source.source) if source.cell_type == "code" else nbformat.v4.new_markdown_cell(source.source)
        ClearHiddenTests()._remove_hidden_test_region(cell)
        return cell.source
