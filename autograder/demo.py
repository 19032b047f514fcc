"""``demo``: a small synthetic class, graded end to end, for a newcomer to watch.

Five students hand in the first notebook, the backward pass (08) and the last (09). One
solved all three, one handed in the untouched releases, and three made typical mistakes from
``autograder/mistakes`` (one per notebook, or none). Notebook 08's class includes a Triton kernel that the
CPU interpreter runs but no GPU compiler builds: the hidden compile check catches it.
The demo grades them exactly as ``grade`` would and prints the table; with ``--out`` it keeps the
CSVs, the feedback and the class report (``class-report.html``) there.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .grading.class_report import CLASS_REPORT_HTML
from .grading.models import GradingResults
from .grading.pipeline import grade
from .grading.reports import format_table
from .mistakes import MISTAKES
from .submissions import released, solved, write_submission

# assignment -> the typical mistakes handed in for it; the n-th one by the n-th student of MISTAKEN
DEMO_MISTAKES: dict[str, tuple[str, ...]] = {
    "01_soft_dictionary_lookup": (
        "softmax without subtracting the max",
        "soft_lookup computes keys @ query (one query only)",
        "attention_entropy gives NaN for zero weights (0 * log 0)",
    ),
    "08_flash_backward": (
        "attention_backward drops the scale in dQ",
        "the dQ kernel leaves its loop with break (the interpreter runs it, no GPU compiler builds it)",
    ),
    "09_language_model": (
        "rope pairs neighbours (x[2i], x[2i + 1]: the interleaved convention) where the notebook states halves",
        "generate feeds each cached step at position 0 (positions not offset)",
    ),
}
DEMO_ASSIGNMENTS = tuple(DEMO_MISTAKES)
# Students who each make one mistake per notebook (or none, once their list runs out).
MISTAKEN = ("ada", "ben", "cleo")


def build_class(folder: Path, assignments: tuple[str, ...] = DEMO_ASSIGNMENTS) -> dict[str, list[str]]:
    """Write the demo submissions under ``folder``; returns student id -> what they handed in."""
    roster: dict[str, list[str]] = {"solved": [], "untouched": [], **{name: [] for name in MISTAKEN}}
    for assignment in assignments:
        number = assignment[:2]
        write_submission(folder, "solved", assignment, solved(assignment))
        roster["solved"].append(f"{number}: the solution")
        write_submission(folder, "untouched", assignment, released(assignment))
        roster["untouched"].append(f"{number}: the release, not filled in")
        by_name = {m.name: m for m in MISTAKES[assignment]}
        mistakes = DEMO_MISTAKES[assignment]
        for student, mistake in zip(MISTAKEN, [*mistakes, *[None] * (len(MISTAKEN) - len(mistakes))]):
            write_submission(folder, student, assignment, solved(assignment, [by_name[mistake]] if mistake else []))
            roster[student].append(f"{number}: {mistake or 'solved'}")
    return roster


def run_demo(out: Path | None = None, assignments: tuple[str, ...] = DEMO_ASSIGNMENTS) -> GradingResults:
    """Build the class for ``assignments`` (by default notebooks 01, 08 and 09), grade it, print the table."""
    with tempfile.TemporaryDirectory(prefix="demo-class-") as tmp:
        submissions = Path(tmp) / "submissions"
        roster = build_class(submissions, assignments)
        out = out or Path(tmp) / "out"
        print(f"Grading a synthetic class of {len(roster)} for {' and '.join(assignments)}:")
        for student, handed_in in roster.items():
            print(f"  {student:<10} {'; '.join(handed_in)}")
        print()
        # Two workers where there are two cores: the class is graded in about half the time.
        report = grade(submissions, out, assignments=list(assignments), jobs=min(2, os.cpu_count() or 1))
        print()
        print(format_table(report))
        if out != Path(tmp) / "out":
            print(f"\ngrades.csv, tests.csv, feedback/ and the class report ({CLASS_REPORT_HTML}, open it in a browser) are in {out}")
            print("(the demo's students all start from the solution, so the report finds their code alike: a real class's would not be)")
    return report
