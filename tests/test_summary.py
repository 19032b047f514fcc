"""The gradebook and class summary, on a small hand-made class whose numbers are checked by hand."""

from __future__ import annotations

import csv
from pathlib import Path

from helpers import results_of

from autograder.grading.models import AssignmentSpec, GradeRow, Kind, Outcome, TestRow
from autograder.grading.reports import GRADEBOOK_CSV, SUMMARY_MD, SUMMARY_PNG, write_summary
from autograder.grading.statistics import notebook_stats

A = AssignmentSpec("01_a", {"test_x": 2.0, "test_y": 2.0})
B = AssignmentSpec("02_b", {"test_z": 5.0})
SPECS = {"01_a": A, "02_b": B}

GRADES = [
    GradeRow("ann", "01_a", 4.0, 4.0, Outcome(Kind.GRADED)),
    GradeRow("ann", "02_b", 0.0, 5.0, Outcome(Kind.GRADED, "no test passed")),
    GradeRow("bob", "01_a", 2.0, 4.0, Outcome(Kind.GRADED, "lost points on: test_y")),
    GradeRow("bob", "02_b", 0.0, 5.0, Outcome(Kind.MISSING, "no 02_b.ipynb")),
    GradeRow("cy", "01_a", 0.0, 4.0, Outcome(Kind.UNREADABLE, "the notebook has no cells")),
    GradeRow("cy", "02_b", 5.0, 5.0, Outcome(Kind.GRADED)),
    GradeRow("notes.txt", "?", 0.0, 0.0, Outcome(Kind.UNIDENTIFIED, "not a notebook")),
]
TESTS = [
    TestRow("ann", "01_a", "test_x", 2.0, 2.0),
    TestRow("ann", "01_a", "test_y", 2.0, 2.0),
    TestRow("ann", "02_b", "test_z", 0.0, 5.0),
    TestRow("bob", "01_a", "test_x", 2.0, 2.0),
    TestRow("bob", "01_a", "test_y", 0.0, 2.0),
    TestRow("cy", "01_a", "test_x", 0.0, 2.0),
    TestRow("cy", "01_a", "test_y", 0.0, 2.0),  # unreadable: not counted
    TestRow("cy", "02_b", "test_z", 5.0, 5.0),
]


def test_summary_counts_graded_pairs_and_names_why_the_rest_were_not() -> None:
    a, b = notebook_stats(results_of(GRADES, TESTS), SPECS)
    assert (a.assignment, a.percents, a.max_score) == ("01_a", [100.0, 50.0], 4.0)
    assert a.histogram == [0, 0, 0, 0, 0, 1, 0, 0, 0, 1]  # 50 % in [50,60), full marks in the last bin
    assert dict(a.not_scored_kinds) == {"unreadable": 1}
    assert [(f.test, f.failed, f.graded) for f in a.most_failed] == [("test_y", 1, 2)]  # cy's unreadable rows do not count
    assert b.percents == [0.0, 100.0] and dict(b.not_scored_kinds) == {"missing": 1}
    assert [(f.test, f.failed) for f in b.most_failed] == [("test_z", 1)]


def test_write_summary_writes_an_importable_gradebook_markdown_and_a_plot(tmp_path: Path) -> None:
    text = write_summary(results_of(GRADES, TESTS), SPECS, tmp_path)
    with (tmp_path / GRADEBOOK_CSV).open() as handle:
        rows = list(csv.reader(handle))
    assert rows == [
        ["student_id", "01_a", "02_b", "total"],
        ["ann", "4", "0", "4"],
        ["bob", "2", "0", "2"],
        ["cy", "0", "5", "5"],
    ]  # the unplaced file has no column of its own
    assert (tmp_path / SUMMARY_MD).read_text() == text
    assert "| 01_a | 2 | 75 | 75 | 50 | 100 | 1 | 1 unreadable |" in text
    assert "| 02_b | 2 | 50 | 50 | 0 | 100 | 1 | 1 missing |" in text
    assert "- `test_y`: 1 of 2 (50 %)" in text
    assert "1 file(s) could not be matched" in text
    assert (tmp_path / SUMMARY_PNG).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
