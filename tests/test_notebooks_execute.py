"""Every solution notebook runs top to bottom, cleanly and quickly, as a self-learner would run it."""

from __future__ import annotations

import time

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.course import list_assignments
from autograder.settings import SOLUTIONS_DIR

pytestmark = pytest.mark.slow

BUDGET_S = 60  # "well under a minute" on a 2-core CPU; the kernel start is included


@pytest.mark.parametrize("assignment", list_assignments())
def test_solution_notebook_runs_cleanly_and_fast(assignment: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)  # the full, interactive version
    folder = SOLUTIONS_DIR / assignment
    notebook = nbformat.read(folder / f"{assignment}.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=BUDGET_S, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    started = time.monotonic()
    client.execute()
    elapsed = time.monotonic() - started
    stderr = [
        (cell.get("id"), output.get("text", "")[:200])
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "stream" and output.name == "stderr"
    ]
    assert stderr == [], f"cells wrote to stderr (a test cell doing so would score 0): {stderr}"
    figures = sum("image/png" in o.get("data", {}) for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert figures >= 3, f"{assignment} should teach with plots; it drew {figures}"
    assert elapsed < BUDGET_S, f"{assignment} took {elapsed:.0f} s"
