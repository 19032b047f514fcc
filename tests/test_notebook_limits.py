"""What a handed-in notebook and its graded run may hold: past the limits, a clear row, and pages of bounded size."""

from __future__ import annotations

import nbformat
import pytest
from helpers import ASSIGNMENTS
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.grading.models import AssignmentSpec, GradingOptions, Kind, Submission
from autograder.grading.notebook_size import too_large
from autograder.grading.worker import grade_one
from autograder.nbgrader_ext.admission import AdmitSubmission
from autograder.nbgrader_ext.limits import TRUNCATED, LimitOutputSize
from autograder.settings import NOTEBOOK_LIMITS, NOTEBOOKS_DIR, SOLUTIONS_DIR
from autograder.submissions import released, solved
from course_utils.notebook_cells import assignment_notebook

FIRST = ASSIGNMENTS[0]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_notebook_of_the_course_is_well_within_the_limits(assignment: str) -> None:
    for folder in (SOLUTIONS_DIR, NOTEBOOKS_DIR):
        notebook = nbformat.read(assignment_notebook(folder, assignment), as_version=4)
        assert too_large(notebook) is None
        assert len(notebook.cells) * 5 < NOTEBOOK_LIMITS.cells  # room for a student's own cells
        assert sum(len(c.source) for c in notebook.cells) * 5 < NOTEBOOK_LIMITS.source_chars


def test_six_thousand_cells_or_megabytes_of_text_get_a_row_that_says_why() -> None:
    crowded = released(FIRST)
    crowded.cells += [new_markdown_cell(f"note {i}: *$x_{i}$*") for i in range(6_000)]
    assert too_large(crowded) == f"it has {len(crowded.cells):,} cells; a notebook may have at most {NOTEBOOK_LIMITS.cells:,}"
    wordy = released(FIRST)
    wordy.cells.append(new_markdown_cell("word " * 500_000))
    assert "characters; a notebook may hold at most 2,000,000" in too_large(wordy)

    spec = AssignmentSpec.load(SOLUTIONS_DIR, FIRST)
    submission = Submission("crowded", FIRST, nbformat.writes(crowded).encode())
    # Refused before the course is touched: nothing renders, repairs or runs it.
    graded = grade_one(None, None, submission, spec, GradingOptions())  # type: ignore[arg-type]
    row = graded.result.grade
    assert row.outcome.kind is Kind.REFUSED and row.score == 0.0
    assert row.outcome.reason == f"not graded: it has {len(crowded.cells):,} cells; a notebook may have at most 1,000"
    # Stock nbgrader autograde refuses it at admission, by the same rule.
    with pytest.raises(ValueError, match=f"crowded: not graded: it has {len(crowded.cells):,} cells"):
        AdmitSubmission(release_dir="").preprocess(crowded, {"nbgrader": {"student": "crowded"}})
    assert AdmitSubmission(release_dir="/nowhere").preprocess(solved(FIRST), {"nbgrader": {}})[0] is not None


def _run_cell(outputs: list) -> nbformat.NotebookNode:
    cell = new_code_cell("show()")
    cell.outputs = outputs
    notebook = new_notebook(cells=[cell])
    limiter = LimitOutputSize(max_chars=100, max_outputs=5, max_rich_bytes=2_000)
    notebook, _ = limiter.preprocess(notebook, {})
    return notebook.cells[0]


def test_what_a_run_displays_is_bounded_per_cell_and_errors_are_always_kept() -> None:
    plot = {"image/png": "A" * 500}
    cell = _run_cell(
        [new_output("display_data", data=plot) for _ in range(8)]
        + [new_output("stream", name="stdout", text="x" * 300)]
        + [new_output("error", ename="ValueError", evalue="bad", traceback=["ValueError: bad"])]
    )
    kinds = [o.output_type for o in cell.outputs]
    # 2,000 bytes of rich output hold three of these plots; the print is cut to 100 characters; the error stays.
    assert kinds == ["display_data"] * 3 + ["stream", "error", "stream"]
    assert cell.outputs[3].text == "x" * 100 + TRUNCATED
    assert cell.outputs[-1].text == f"{TRUNCATED} (5 more output(s) not kept)"

    many = _run_cell([new_output("stream", name="stdout", text="y") for _ in range(9)])
    assert len(many.outputs) == 6 and many.outputs[-1].text.endswith("(4 more output(s) not kept)")
    small = _run_cell([new_output("execute_result", data={"text/plain": "1"}, execution_count=1)])
    assert [o.output_type for o in small.outputs] == ["execute_result"]  # within every limit: untouched
