"""Redaction hides what quotes a hidden test or a solution, and never a line of the student's own answer cells."""

from __future__ import annotations

import nbformat
import pytest
from helpers import ASSIGNMENTS

from autograder.grading.redaction import REDACTED, Redactor
from autograder.settings import SOLUTIONS_DIR
from autograder.submissions import solved
from course_utils.notebook_cells import cell_source, hidden_part, is_solution_cell, is_test_cell


def _source(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_line_of_a_students_answer_cells_is_redacted(assignment: str) -> None:
    # A solved submission writes the solution's own lines: the case where sparing matters most. Each line comes back
    # as the student wrote it, alone and inside a traceback frame, while a hidden test's line is still removed.
    source, submission = _source(assignment), solved(assignment)
    redactor = Redactor.for_source(source)
    own = [line for cell in submission.cells if is_solution_cell(cell) for line in cell_source(cell).splitlines() if line.strip()]
    hidden = [line for cell in source.cells if is_test_cell(cell) for line in hidden_part(cell_source(cell)).splitlines()]
    secret_own = [line for line in own if redactor.text(line) == REDACTED]
    assert secret_own, f"{assignment}: no answer-cell line is a secret, so this test would show nothing"
    spared = redactor.sparing(submission)
    frames = [f"----> 12 {line}" for line in own]
    assert [line for line in own + frames if spared.text(line) != line] == [], "a line of the student's own answer cell was hidden"
    secret_hidden = [line for line in hidden if spared.text(line) == REDACTED]
    assert secret_hidden, f"{assignment}: a hidden test's line is no longer redacted once the student's lines are spared"


def test_what_is_removed_is_said_in_words() -> None:
    assert "not shown" in REDACTED and "hidden test or the solution" in REDACTED
