"""How long each solution notebook takes to run top to bottom, against the course's budget.

Every notebook must run in well under a minute on a 2-core CPU, interactively and while
nbgrader grades it (``NBGRADER_EXECUTION`` set: heavy cells shrink). This script runs each
solution notebook both ways in a fresh kernel and prints the seconds beside the 60 s budget.
It prints and records; it never fails on a time, because a busy machine is slow, not wrong.

    .venv/bin/python benchmarks/notebooks.py [--quick] [--only 03,05] [--json results.json]

``--quick`` runs one notebook in grading mode only: the check that the script still works.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import nbclient
import nbformat

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # run from a checkout without installing

from autograder.course import list_assignments  # noqa: E402
from course_utils.runtime import GRADING_ENV_VAR  # noqa: E402

BUDGET_S = 60.0  # "well under a minute" on a 2-core CPU, the kernel's start included
QUICK_NOTEBOOK = "04_masking"  # one of the quickest


def run_notebook(name: str, grading: bool) -> dict:
    """Execute ``solutions/NAME/NAME.ipynb`` in a fresh kernel; seconds, and whether any cell failed."""
    folder = REPO_ROOT / "solutions" / name
    notebook = nbformat.read(folder / f"{name}.ipynb", as_version=4)
    saved = os.environ.get(GRADING_ENV_VAR)
    if grading:
        os.environ[GRADING_ENV_VAR] = "autograde"  # the kernel inherits it
    else:
        os.environ.pop(GRADING_ENV_VAR, None)
    started = time.perf_counter()
    try:
        nbclient.NotebookClient(
            notebook, timeout=600, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(folder)}}
        ).execute()
    finally:
        os.environ.pop(GRADING_ENV_VAR, None)
        if saved is not None:
            os.environ[GRADING_ENV_VAR] = saved
    seconds = time.perf_counter() - started
    errors = [cell.get("id") for cell in notebook.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    return {"notebook": name, "mode": "grading" if grading else "interactive", "seconds": seconds, "errors": errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK_NOTEBOOK}, in grading mode")
    parser.add_argument("--only", default="", help="comma-separated notebook numbers, e.g. 03,05")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    only = [n.strip() for n in args.only.split(",") if n.strip()]
    names = [QUICK_NOTEBOOK] if args.quick else [n for n in list_assignments() if not only or n[:2] in only]
    modes = (True,) if args.quick else (False, True)
    rows = []
    print(f"{'notebook':<34}{'mode':<13}{'seconds':>8}   budget {BUDGET_S:.0f} s")
    for name in names:
        for grading in modes:
            row = run_notebook(name, grading)
            rows.append(row)
            flag = "errors in " + ", ".join(row["errors"]) if row["errors"] else ("over budget" if row["seconds"] >= BUDGET_S else "")
            print(f"{name:<34}{row['mode']:<13}{row['seconds']:>8.1f}   {flag}")
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "budget_s": BUDGET_S, "rows": rows}, indent=2))
    return 1 if any(row["errors"] for row in rows) else 0  # a cell that fails is a bug; a slow run is not


if __name__ == "__main__":
    raise SystemExit(main())
