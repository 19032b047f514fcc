"""Repair a submission before nbgrader grades it, and say what was repaired.

nbgrader finds graded cells by their metadata. Some editors strip cell metadata; a student
may delete or edit a test cell. ``repair`` works on a copy and:

- gives each cell whose nbgrader metadata is missing the metadata of the released cell it
  matches, by content and position (a test cell by its source, a solution cell by the
  function or class it defines);
- names the test cells that were deleted or edited. nbgrader itself puts them back from
  the source notebook (``OverwriteCells.add_missing_cells`` and the locked-cell checksum),
  so the tests that run are always the instructor's.
"""

from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass, field

from nbformat.notebooknode import NotebookNode

from course_utils.reference import is_solution_cell, is_test_cell, nbgrader_meta

from .intake import defined_names

# Below this similarity a cell is not taken for a released cell that lost its metadata.
MIN_SIMILARITY = 0.6


@dataclass
class Repairs:
    restored_metadata: list[str] = field(default_factory=list)  # grade ids given back their metadata
    deleted_tests: list[str] = field(default_factory=list)
    edited_tests: list[str] = field(default_factory=list)
    missing_functions: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        notes = []
        if self.restored_metadata:
            notes.append(f"nbgrader metadata restored on {len(self.restored_metadata)} cell(s) by matching them to the released notebook")
        if self.deleted_tests:
            notes.append(f"deleted test cell(s) put back: {', '.join(self.deleted_tests)}")
        if self.edited_tests:
            notes.append(f"edited test cell(s) restored: {', '.join(self.edited_tests)}")
        if self.missing_functions:
            notes.append(f"not defined anywhere (renamed or deleted?): {', '.join(self.missing_functions)}")
        return notes


def _normalized(source: str) -> str:
    return re.sub(r"\s+", " ", source).strip()


def _similarity(released: NotebookNode, candidate: NotebookNode) -> float:
    if released.cell_type != candidate.cell_type:
        return 0.0
    if is_solution_cell(released):
        # The student rewrote the body; what stays is the name it defines.
        wanted = defined_names(released.source)
        return 1.0 if wanted and wanted <= defined_names(candidate.source) else 0.0
    a, b = _normalized(released.source), _normalized(candidate.source)
    return 1.0 if a == b else difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def restore_metadata(submission: NotebookNode, released: NotebookNode) -> list[str]:
    """Give cells without nbgrader metadata the metadata of the released cell they match.

    Matching keeps the released order: each graded cell is looked for after the cell that
    matched the previous one. Returns the grade ids restored. Modifies ``submission``.
    """
    present = {nbgrader_meta(c).get("grade_id") for c in submission.cells} - {None}
    restored: list[str] = []
    position = 0
    for cell in released.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id is None:
            continue
        if grade_id in present:
            position = max(position, 1 + next(i for i, c in enumerate(submission.cells) if nbgrader_meta(c).get("grade_id") == grade_id))
            continue
        candidates = [(i, _similarity(cell, c)) for i, c in enumerate(submission.cells) if i >= position and not nbgrader_meta(c)]
        best = max(candidates, key=lambda pair: (pair[1], -pair[0]), default=None)
        if best is None or best[1] < MIN_SIMILARITY:
            continue  # deleted: nbgrader adds a test cell back; a missing solution shows in the tests
        index = best[0]
        submission.cells[index].metadata["nbgrader"] = copy.deepcopy(nbgrader_meta(cell))
        restored.append(grade_id)
        position = index + 1
    return restored


def repair(submission: NotebookNode, released: NotebookNode) -> tuple[NotebookNode, Repairs]:
    """A repaired copy of ``submission`` and what was done to it (``released``: the student version)."""
    fixed = copy.deepcopy(submission)
    repairs = Repairs(restored_metadata=restore_metadata(fixed, released))
    by_id = {nbgrader_meta(c).get("grade_id"): c for c in fixed.cells if nbgrader_meta(c).get("grade_id")}
    defined = set().union(*(defined_names(c.source) for c in fixed.cells if c.cell_type == "code"))
    for cell in released.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if is_test_cell(cell):
            if grade_id not in by_id:
                repairs.deleted_tests.append(grade_id)
            elif _normalized(by_id[grade_id].source) != _normalized(cell.source):
                repairs.edited_tests.append(grade_id)
        elif is_solution_cell(cell):
            repairs.missing_functions += sorted(defined_names(cell.source) - defined)
    return fixed, repairs
