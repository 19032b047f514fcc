"""The class's statistics (autograder/grading/statistics.py) on rows small enough to work out by hand."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import results_of

from autograder.grading.class_report import CLASS_REPORT_JSON, write_class_report
from autograder.grading.models import AssignmentSpec, GradeRow, Kind, Lateness, Outcome, TestRow
from autograder.grading.reports import SUMMARY_MD, write_summary
from autograder.grading.statistics import BIN_EDGES, BINS, discrimination, histogram, notebook_stats, percent

SPEC = AssignmentSpec("01_a", {"test_x": 2.0, "test_y": 2.0, "test_z": 1.0})  # worth 5 points
SPECS = {"01_a": SPEC, "02_b": AssignmentSpec("02_b", {"test_w": 4.0})}
DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)


def graded(student: str, score: float, lateness: Lateness | None = None, assignment: str = "01_a", max_score: float = 5.0) -> GradeRow:
    return GradeRow(student, assignment, score, max_score, Outcome(Kind.GRADED), lateness)


def late(hours: float, penalty: float) -> Lateness:
    return Lateness(DUE, DUE + timedelta(hours=hours), "timestamp.txt", timedelta(hours=hours), penalty)


def rows(student: str, x: float, y: float, z: float) -> list[TestRow]:
    return [
        TestRow(student, "01_a", "test_x", x, 2.0),
        TestRow(student, "01_a", "test_y", y, 2.0),
        TestRow(student, "01_a", "test_z", z, 1.0),
    ]


def test_the_bins_are_ten_points_wide_and_full_marks_fall_in_the_last() -> None:
    assert BINS == 10 and BIN_EDGES == (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
    # 0 and 9.99 in [0,10); 10 opens the second bin; 99.99 and exactly 100 both in [90,100]
    assert histogram([0.0, 9.99, 10.0, 99.99, 100.0]) == [2, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert histogram([]) == [0] * 10


def test_a_percentage_outside_0_to_100_lands_in_the_nearest_end_bin() -> None:
    # A negative percentage must not wrap around to the last bin (list index -1).
    assert histogram([-5.0, 120.0]) == [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]


def test_percent_of_a_notebook_worth_nothing_is_zero() -> None:
    assert percent(3.0, 4.0) == 75.0 and percent(0.0, 4.0) == 0.0 and percent(2.0, 0.0) == 0.0


def test_scores_mean_median_percentages_and_full_marks() -> None:
    grades = [graded("ann", 5.0), graded("bob", 3.0), graded("cy", 1.0), graded("dee", 4.0), graded("eve", 3.0)]
    [a] = notebook_stats(results_of(grades, []), SPECS)
    assert a.scores == [5.0, 3.0, 1.0, 4.0, 3.0] and a.max_score == 5.0
    assert a.percents == [100.0, 60.0, 20.0, 80.0, 60.0]
    assert a.mean == pytest.approx(16 / 5) and a.median == 3.0  # sorted 1, 3, 3, 4, 5
    assert a.mean_percent == pytest.approx(64.0) and a.median_percent == 60.0
    assert a.full_marks == 1
    assert a.histogram == [0, 0, 1, 0, 0, 0, 2, 0, 1, 1]


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    [a] = notebook_stats(results_of([graded("ann", 1.0), graded("bob", 4.0), graded("cy", 2.0), graded("dee", 5.0)], []), SPECS)
    assert a.median == 3.0 and a.median_percent == 60.0  # (2 + 4) / 2 points, (40 + 80) / 2 %


def test_an_assignment_where_nothing_was_scored_has_no_mean_and_an_empty_histogram() -> None:
    grades = [
        GradeRow("ann", "01_a", 0.0, 5.0, Outcome(Kind.MISSING, "no 01_a.ipynb")),
        GradeRow("bob", "01_a", 0.0, 5.0, Outcome(Kind.UNREADABLE, "no cells")),
        GradeRow("cy", "01_a", 0.0, 5.0, Outcome(Kind.MISSING, "no 01_a.ipynb")),
    ]
    [a] = notebook_stats(results_of(grades, rows("bob", 0.0, 0.0, 0.0)), SPECS)  # bob's rows do not count: he was not scored
    assert a.scores == [] and a.percents == [] and a.not_scored == 3
    assert a.not_scored_kinds.most_common() == [("missing", 2), ("unreadable", 1)]
    assert (a.mean, a.median, a.mean_percent, a.median_percent, a.full_marks) == (None, None, None, None, 0)
    assert a.histogram == [0] * 10 and a.most_failed == [] and (a.late, a.late_points) == (0, 0.0)
    assert [(q.test, q.scored, q.full, q.mean, q.full_marks, q.discrimination) for q in a.questions] == [
        ("test_x", 0, 0, None, None, None),
        ("test_y", 0, 0, None, None, None),
        ("test_z", 0, 0, None, None, None),
    ]


def test_a_notebook_without_rows_is_left_out_and_the_rest_keep_course_order() -> None:
    grades = [graded("ann", 4.0, assignment="02_b", max_score=4.0), graded("ann", 5.0)]
    assert [n.assignment for n in notebook_stats(results_of(grades, []), SPECS)] == ["01_a", "02_b"]
    assert [n.assignment for n in notebook_stats(results_of(grades[:1], []), SPECS)] == ["02_b"]
    assert notebook_stats(results_of([], []), SPECS) == []


def test_late_counts_scored_rows_after_their_due_date_and_sums_their_penalties() -> None:
    on_time = Lateness(DUE, DUE - timedelta(hours=1), "timestamp.txt")
    extended = Lateness(DUE + timedelta(days=2), DUE + timedelta(days=1), "timestamp.txt", extended=True)  # late_by 0
    grades = [
        graded("ann", 4.5, late(5, 0.5)),
        graded("bob", 2.0, late(30, 1.25)),
        graded("cy", 5.0, on_time),
        graded("dee", 5.0, extended),
        graded("eve", 3.0),  # no hand-in time known
        GradeRow("fay", "01_a", 0.0, 5.0, Outcome(Kind.UNREADABLE, "no cells"), late(2, 0.5)),  # late, but not scored
    ]
    [a] = notebook_stats(results_of(grades, []), SPECS)
    assert (a.late, a.late_points) == (2, 1.75)  # ann and bob: 0.5 + 1.25
    assert a.scores == [4.5, 2.0, 5.0, 5.0, 3.0]  # the scores are after the penalty, as grades.csv has them


def test_per_question_mean_full_marks_and_failures() -> None:
    grades = [graded("ann", 5.0), graded("bob", 3.0), graded("cy", 1.0), graded("dee", 4.0)]
    tests = rows("ann", 2, 2, 1) + rows("bob", 2, 0, 1) + rows("cy", 0, 0, 1) + rows("dee", 2, 1, 1)
    [a] = notebook_stats(results_of(grades, tests), SPECS)
    x, y, z = a.questions
    assert (x.test, x.points, x.scored, x.full, x.failed, x.mean, x.full_marks) == ("test_x", 2.0, 4, 3, 1, 1.5, 0.75)
    assert (y.full, y.failed, y.mean, y.full_marks) == (1, 3, 0.75, 0.25)  # dee's 1 of 2 is not full marks
    assert (z.full, z.failed, z.discrimination) == (4, 0, None)  # everyone full marks: no variance
    assert [(f.test, f.failed, f.graded, f.share) for f in a.most_failed] == [("test_y", 3, 4, 0.75), ("test_x", 1, 4, 0.25)]


def test_tied_failures_keep_notebook_order_and_a_missing_row_is_not_a_failure() -> None:
    grades = [graded("ann", 2.0), graded("bob", 3.0), graded("cy", 4.0)]
    tests = rows("ann", 0, 0, 1) + rows("bob", 2, 0, 1)[1:] + [TestRow("cy", "01_a", "test_x", 0.0, 2.0)]  # bob: no test_x row
    [a] = notebook_stats(results_of(grades, tests), SPECS)
    x, y, z = a.questions
    assert (x.scored, x.failed, y.scored, y.failed, z.scored) == (2, 2, 2, 2, 2)
    assert [(f.test, f.failed, f.graded) for f in a.most_failed] == [("test_x", 2, 3), ("test_y", 2, 3)]


def test_discrimination_worked_by_hand() -> None:
    # item 1, 0, 0 and totals 3, 1, 2: means 1/3 and 2; Sxx = 2/3, Syy = 2, Sxy = 1; r = 1 / sqrt(4/3) = sqrt(3)/2
    assert discrimination([1.0, 0.0, 0.0], [3.0, 1.0, 2.0]) == pytest.approx(math.sqrt(3) / 2, abs=1e-12)
    assert discrimination([0.0, 1.0, 2.0], [0.0, 2.0, 4.0]) == pytest.approx(1.0)
    assert discrimination([0.0, 1.0, 2.0], [4.0, 2.0, 0.0]) == pytest.approx(-1.0)
    assert discrimination([1.0, 0.0], [3.0, 1.0]) is None  # fewer than three
    assert discrimination([1.0, 1.0, 1.0], [3.0, 2.0, 1.0]) is None  # no variance
    assert discrimination([1.0, 0.0, 1.0], [2.0]) is None  # lengths differ


def test_summary_and_class_report_show_the_same_numbers(tmp_path: Path) -> None:
    grades = [graded("ann", 5.0, late(3, 0.5)), graded("bob", 2.0), graded("cy", 0.0)]
    grades.append(GradeRow("dee", "01_a", 0.0, 5.0, Outcome(Kind.MISSING, "no 01_a.ipynb")))
    tests = rows("ann", 2, 2, 1) + rows("bob", 2, 0, 0) + rows("cy", 0, 0, 0)
    text = write_summary(results_of(grades, tests), SPECS, tmp_path)
    write_class_report(results_of(grades, tests), SPECS, tmp_path)
    [a] = json.loads((tmp_path / CLASS_REPORT_JSON).read_text())["notebooks"]
    # 100 %, 40 %, 0 %: mean 140/3 = 46.7 % (7/3 points), median 40 % (2 points)
    assert "| 01_a | 3 | 47 | 40 | 0 | 100 | 1 | 1 missing |" in text
    assert (a["scored"], a["not_scored"], a["mean"], a["median"], a["late"], a["late_points"]) == (3, 1, pytest.approx(7 / 3), 2.0, 1, 0.5)
    assert a["histogram"]["counts"] == [1, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert "Scores in bins of 10 %: 1 0 0 0 1 0 0 0 0 1" in text
    assert (tmp_path / SUMMARY_MD).read_text() == text
    # test_y and test_z: 2 of 3 lost points; test_x: 1 of 3
    assert "- `test_y`: 2 of 3 (67 %)\n- `test_z`: 2 of 3 (67 %)\n- `test_x`: 1 of 3 (33 %)" in text
    assert [(q["test"], q["scored"], q["full_marks"]) for q in a["questions"]] == [
        ("test_x", 3, pytest.approx(2 / 3)),
        ("test_y", 3, pytest.approx(1 / 3)),
        ("test_z", 3, pytest.approx(1 / 3)),
    ]
