"""Every notebook runs top to bottom in a Colab-like runtime, as a student or a self-learner runs it.

The students' runtime (tests/colab_like.py) holds only torch, numpy, matplotlib and a kernel; each handout
notebook's setup cell installs the students' package there, from the handout. Handout notebooks must run to
the end, failing only where a function is still a stub. Solutions run there too, with only the grader's
solution loader beside the students' package, and must run cleanly and quickly; their self-check runs the
handout's visible tests (the same cells, checked below) and must find them passing.
"""

from __future__ import annotations

import nbformat
import pytest
from helpers import ASSIGNMENTS, ColabRuns

from autograder.settings import SOLUTIONS_DIR
from course_utils.notebook_cells import is_test_cell, nbgrader_meta, visible_part

pytestmark = pytest.mark.slow

STUB_ERRORS = {"NotImplementedError", "NotWritten"}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_notebook_runs_cleanly_and_fast(colab_runs: ColabRuns, assignment: str) -> None:
    run = colab_runs.solution[assignment]
    stderr = [o.get("text", "")[:200] for o in run.outputs("stream") if o.get("name") == "stderr"]
    assert stderr == [], f"cells wrote to stderr (a test cell doing so would score 0): {stderr}"
    figures = run.figures()
    assert figures >= 3, f"{assignment} should teach with plots; it drew {figures}"
    # How long it took is for benchmarks/notebooks.py to print (the 60 s budget): a busy machine must not fail CI.
    assert "All visible tests pass" in run.text(), "the self-check at the end should find the solutions pass"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_student_notebook_runs_to_the_end_failing_only_at_stubs(colab_runs: ColabRuns, assignment: str) -> None:
    run = colab_runs.student[assignment]
    # Triton's interpreter wraps the stub's NotImplementedError in its own InterpreterError.
    errors = {"NotImplementedError" if "NotImplementedError" in o["evalue"] else o["ename"] for o in run.outputs("error")}
    assert errors, "an untouched student notebook should stop at its stubs"
    # A cell that uses what a failed cell would have made fails with NameError; anything else is a bug.
    unexpected = errors - STUB_ERRORS - {"NameError"}
    assert not unexpected, (
        f"{assignment}: errors other than the stubs: {[(o['ename'], o['evalue'][:120]) for o in run.outputs('error') if o['ename'] in unexpected]}"
    )
    assert errors & STUB_ERRORS, errors
    text = run.text()
    assert "torch 2.13.0" in text and "device: cpu" in text, "the first cell reports the device"
    assert f"Self-check of {assignment}: 0 of " in text and "not written yet" in text


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_solutions_self_check_runs_the_handouts_visible_tests(colab_runs: ColabRuns, assignment: str) -> None:
    # The solution's check_my_work runs the visible part of each test cell: exactly the test cells the handout holds.
    handout = nbformat.read(colab_runs.handout / "notebooks" / assignment / f"{assignment}.ipynb", as_version=4)
    solution = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    tests = {nbgrader_meta(c)["grade_id"]: c.source for c in handout.cells if is_test_cell(c)}
    visible = {nbgrader_meta(c)["grade_id"]: visible_part(c.source) for c in solution.cells if is_test_cell(c)}
    assert tests.keys() == visible.keys()
    assert all(tests[t].strip() == visible[t].strip() for t in tests), [t for t in tests if tests[t].strip() != visible[t].strip()]
