"""``demo``: a small synthetic class, graded end to end, for a newcomer to watch.

Five students hand in notebook 01: one who solved it, one who handed in the
untouched release, and three who each made a typical mistake. The demo grades them
exactly as ``grade`` would and prints the table.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .grading.pipeline import GradingReport, format_table, grade
from .mistakes import MISTAKES
from .submissions import released, slug, solved, write_submission

DEMO_ASSIGNMENT = "01_soft_dictionary_lookup"
DEMO_MISTAKES = (
    "softmax without subtracting the max",
    "soft_lookup computes keys @ query (one query only)",
    "attention_entropy gives NaN for zero weights (0 * log 0)",
)


def build_class(folder: Path, assignment: str = DEMO_ASSIGNMENT) -> dict[str, str]:
    """Write the demo submissions under ``folder``; returns student id -> what they did."""
    roster = {"solved": "the solution", "untouched": "the released notebook, not filled in"}
    write_submission(folder, "solved", assignment, solved(assignment))
    write_submission(folder, "untouched", assignment, released(assignment))
    by_name = {m.name: m for m in MISTAKES[assignment]}
    for name in DEMO_MISTAKES:
        student = slug(name)
        write_submission(folder, student, assignment, solved(assignment, [by_name[name]]))
        roster[student] = f"mistake: {name}"
    return roster


def run_demo(out: Path | None = None) -> GradingReport:
    with tempfile.TemporaryDirectory(prefix="demo-class-") as tmp:
        submissions = Path(tmp) / "submissions"
        roster = build_class(submissions)
        out = out or Path(tmp) / "out"
        print(f"Grading a synthetic class of {len(roster)} for {DEMO_ASSIGNMENT}:")
        for student, what in roster.items():
            print(f"  {student:<58} {what}")
        print()
        # Two workers where there are two cores: the class is graded in about half the time.
        report = grade(submissions, out, assignments=[DEMO_ASSIGNMENT], jobs=min(2, os.cpu_count() or 1))
        print()
        print(format_table(report))
        if out != Path(tmp) / "out":
            print(f"\ngrades.csv, tests.csv and feedback/ are in {out}")
    return report
