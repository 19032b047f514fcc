"""Admission for nbgrader's own ``autograde``: the repairs ``grade`` makes, before nbgrader reads the cells.

nbgrader's OverwriteCells stops with a KeyError on a cell whose nbgrader metadata names a grade id
the release lacks (a forged test cell, say). ``repair`` (``autograder/grading/admission.py``) drops
such metadata and restores what a student's editor stripped, so stock ``nbgrader autograde`` grades
what ``python -m autograder grade`` grades. On a notebook ``grade`` has already repaired it changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from ..grading.admission import repair


class AdmitSubmission(NbGraderPreprocessor):  # enabled by default, as nbconvert's own are not
    """The first sanitizing step of autograde: repair the submission against the released notebook."""

    release_dir = Unicode("", help="the course's release folder, which holds ASSIGNMENT/NOTEBOOK.ipynb").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        about = resources.get("nbgrader", {})
        released_path = Path(self.release_dir) / str(about.get("assignment", "")) / f"{about.get('notebook', '')}.ipynb"
        if not released_path.is_file():
            self.log.warning("no released notebook at %s: the submission is not repaired", released_path)
            return nb, resources
        fixed, repairs = repair(nb, nbformat.read(released_path, as_version=4))
        for note in repairs.notes():
            self.log.warning("%s: %s", about.get("student", "?"), note)
        return fixed, resources
