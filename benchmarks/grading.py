"""How long autograding takes, per notebook and per submission, on the machine at hand.

Grades a class of identical solved submissions for each notebook and reports the wall time
per submission, with and without feedback. An instructor multiplies by the class size;
the figures in the README come from this script.

    .venv/bin/python benchmarks/grading.py [--copies 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from autograder.course import list_assignments
from autograder.grade import grade
from autograder.submissions import solved, write_submission


def measure(assignment: str, copies: int, feedback: bool) -> float:
    """Seconds per submission for ``copies`` solved submissions of ``assignment``."""
    with tempfile.TemporaryDirectory() as tmp:
        submissions = Path(tmp) / "submissions"
        notebook = solved(assignment)
        for i in range(copies):
            write_submission(submissions, f"student-{i:03d}", assignment, notebook)
        started = time.perf_counter()
        report = grade(submissions, Path(tmp) / "out", assignments=[assignment], feedback=feedback, progress=False)
        elapsed = time.perf_counter() - started
    assert all(r.score == r.max_score for r in report.grades), "the solution should score full marks"
    return elapsed / copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=3, help="submissions per notebook (default 3)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__}
    rows = []
    for assignment in list_assignments():
        rows.append({
            "assignment": assignment,
            "seconds_per_submission": round(measure(assignment, args.copies, feedback=False), 2),
            "seconds_per_submission_with_feedback": round(measure(assignment, args.copies, feedback=True), 2),
        })
    print(f"machine: {machine}")
    print(f"{'assignment':<32}{'s/submission':>14}{'with feedback':>15}")
    for row in rows:
        print(f"{row['assignment']:<32}{row['seconds_per_submission']:>14.2f}{row['seconds_per_submission_with_feedback']:>15.2f}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "copies": args.copies, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
