"""Once a person has graded in formgrader, nbgrader's gradebook is the truth: its scores reach the LMS file.

A real gradebook: ``export_to_gradebook`` writes graded rows of notebook 01 into it, a manual score, extra
credit and a comment are set through nbgrader's API as formgrader's handlers set them, and
``read_gradebook`` reads them back. The expected numbers are nbgrader's own (its SQL ``score`` less the
late penalty, what its feedback shows), never this module's. Also here: where the export puts the row's
status, and how a late penalty is written.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autograder.grading.deadlines import Deadlines, LatePolicy, apply_deadlines
from autograder.grading.gradebook_export import GRADED_BY_PERSON, export_to_gradebook, read_gradebook, with_gradebook_grades
from autograder.grading.models import AssignmentSpec, GradeRow, GradingResults, Kind, Outcome, SubmittedAt, TestRow
from autograder.grading.reports import write_csvs, write_lms_import
from autograder.grading.roster import Roster
from autograder.settings import SOLUTIONS_DIR
from course_utils.notebook_cells import assignment_notebook, is_solution_cell, nbgrader_meta

ASSIGNMENT = "01_soft_dictionary_lookup"
LOST = "test_softmax_stable"  # what bob's softmax (no max subtracted) loses
DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
HANDED_IN = {"alice": DUE - timedelta(hours=3), "bob": DUE + timedelta(hours=34), "carol": DUE - timedelta(hours=1)}
LATE_POLICY = Deadlines({ASSIGNMENT: DUE}, policy=LatePolicy(penalty_per_day=0.1))  # bob: two started days, 20 %


def graded_class() -> GradingResults:
    """alice and carol with full marks, bob without LOST's points and late: the rows grade writes, deadlines applied."""
    spec = AssignmentSpec.load(SOLUTIONS_DIR, ASSIGNMENT)
    grades, tests = [], []
    for student in HANDED_IN:
        lost = [LOST] if student == "bob" else []
        score = spec.max_score - sum(spec.tests[t] for t in lost)
        reason = f"lost points on: {LOST}" if lost else ""
        grades.append(GradeRow(student, ASSIGNMENT, score, spec.max_score, Outcome(Kind.GRADED, reason)))
        tests += [TestRow(student, ASSIGNMENT, t, 0.0 if t in lost else p, p) for t, p in spec.tests.items()]
    times = {(s, ASSIGNMENT): SubmittedAt(t, "timestamp.txt") for s, t in HANDED_IN.items()}
    return GradingResults.from_rows(apply_deadlines(grades, times, LATE_POLICY), tests)


def formgrader_puts(url: str, student: str, cell: str, *, manual_score: float | None = None, extra_credit: float | None = None) -> None:
    """What formgrader's grade handler does when a person types a score or extra credit into a cell's box."""
    from nbgrader.api import Gradebook

    with Gradebook(url) as gradebook:
        grade = gradebook.find_grade(cell, ASSIGNMENT, ASSIGNMENT, student)
        grade.manual_score, grade.extra_credit = manual_score, extra_credit
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        gradebook.db.commit()


def formgrader_comments(url: str, student: str, cell: str, text: str) -> None:
    """What formgrader's comment handler does."""
    from nbgrader.api import Gradebook

    with Gradebook(url) as gradebook:
        gradebook.find_comment(cell, ASSIGNMENT, ASSIGNMENT, student).manual_comment = text
        gradebook.db.commit()


def feedback_scores(url: str) -> dict[str, float]:
    """Each submission's score as nbgrader's feedback shows it (GetGrades: the notebook's score less its penalty)."""
    from nbgrader.api import Gradebook

    with Gradebook(url) as gradebook:
        return {
            s.student.id: s.score - sum(n.late_submission_penalty or 0.0 for n in s.notebooks)
            for s in gradebook.find_assignment(ASSIGNMENT).submissions
        }


def test_manual_grades_and_extra_credit_reach_the_lms_file_and_survive_a_regrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    graded = graded_class()
    export_to_gradebook(url, graded.results)
    spec = AssignmentSpec.load(SOLUTIONS_DIR, ASSIGNMENT)
    autograded = {r.student_id: r.score for r in graded.grades}
    bob = graded.row_of("bob", ASSIGNMENT)
    assert bob.lateness and bob.lateness.penalty > 0  # the late penalty is in the gradebook too

    formgrader_puts(url, "bob", LOST, manual_score=0.5)  # half a point back on the test bob lost
    formgrader_comments(url, "bob", "softmax", "Subtract each row's max before exp: see section 2.")
    formgrader_puts(url, "alice", "test_softmax_matches_torch", manual_score=spec.tests["test_softmax_matches_torch"], extra_credit=1.0)
    shown = feedback_scores(url)
    assert shown["bob"] == pytest.approx(autograded["bob"] + 0.5)  # nbgrader's own sum: the half point, after the penalty
    assert shown["alice"] == pytest.approx(spec.max_score + 1.0)

    truth = read_gradebook(url)
    assert set(truth) == {(s, ASSIGNMENT) for s in HANDED_IN}
    assert {s: truth[(s, ASSIGNMENT)].score for s in HANDED_IN} == pytest.approx(shown)
    assert truth[("bob", ASSIGNMENT)].late_penalty == pytest.approx(bob.lateness.penalty)
    [softmax] = [c for c in truth[("bob", ASSIGNMENT)].comments if c.cell == "softmax"]
    assert softmax.manual == softmax.shown == "Subtract each row's max before exp: see section 2."
    assert "Autograder" in (softmax.auto or "")  # the export's own comment is still there, under the person's
    assert not truth[("carol", ASSIGNMENT)].by_person and truth[("bob", ASSIGNMENT)].by_person

    rows = with_gradebook_grades(graded.grades, truth)
    by_student = {r.student_id: r for r in rows}
    assert by_student["carol"] is graded.row_of("carol", ASSIGNMENT)  # no person graded it: left as grade wrote it
    assert by_student["bob"].score == pytest.approx(shown["bob"])
    assert f"{GRADED_BY_PERSON}: {LOST} 0.5 of {spec.tests[LOST]:g} (autograded 0)" in by_student["bob"].status
    assert "a comment on softmax" in by_student["bob"].status
    assert by_student["alice"].score == pytest.approx(shown["alice"])
    points = spec.tests["test_softmax_matches_torch"]
    assert f"test_softmax_matches_torch {points:g} of {points:g} + 1 extra credit (autograded {points:g})" in by_student["alice"].status

    roster = Roster(["alice", "bob", "carol", "dan"])
    lms = write_lms_import(rows, {ASSIGNMENT: spec}, roster, tmp_path)
    with lms.open() as handle:
        cells = {r["student"]: r[ASSIGNMENT] for r in csv.DictReader(handle)}
    assert {s: float(v) for s, v in cells.items() if v} == pytest.approx({**shown, "carol": spec.max_score})
    assert cells["dan"] == ""

    export_to_gradebook(url, graded.results)  # grade runs again (nothing changed, or a regrade)
    again = with_gradebook_grades(graded.grades, read_gradebook(url))
    assert [r.score for r in again] == [r.score for r in rows]


def test_reading_a_gradebook_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no nbgrader gradebook at .*absent.db"):
        read_gradebook(f"sqlite:///{tmp_path / 'absent.db'}")
    assert not (tmp_path / "absent.db").exists()  # nbgrader would have made an empty one


def test_the_status_comment_is_on_the_first_answer_cell_of_the_notebook(tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    export_to_gradebook(url, graded_class().results)
    notebook = json.loads(assignment_notebook(SOLUTIONS_DIR, ASSIGNMENT).read_text(encoding="utf-8"))
    answers = [nbgrader_meta(c)["grade_id"] for c in notebook["cells"] if is_solution_cell(c)]
    assert answers[0] != min(answers)  # the alphabetically first is another cell: the test tells them apart
    with Gradebook(url) as gradebook:
        comments = {c.cell.name: c.auto_comment or "" for c in gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "bob").comments}
    assert [cell for cell, text in comments.items() if text.startswith("Autograder: graded")] == [answers[0]]


def test_a_late_penalty_is_written_as_the_points_it_costs_rounded_as_the_score(tmp_path: Path) -> None:
    # 11 points at 20 % off: 11 - 8.8 is 2.1999999999999993 in floating point.
    row = GradeRow("bob", ASSIGNMENT, 11.0, 20.0, Outcome(Kind.GRADED))
    times = {("bob", ASSIGNMENT): SubmittedAt(HANDED_IN["bob"], "timestamp.txt")}
    [late] = apply_deadlines([row], times, LATE_POLICY)
    assert late.lateness is not None
    assert (late.score, late.lateness.penalty) == (8.8, 2.2)
    write_csvs(GradingResults([replace(r, grade=late) for r in GradingResults.from_rows([row], []).results]), tmp_path)
    with (tmp_path / "grades.csv").open() as handle:
        [written] = list(csv.DictReader(handle))
    assert (written["score"], written["late_penalty"]) == ("8.8", "2.2")


def test_a_submission_the_grader_could_not_finish_reaches_the_lms_once_a_person_grades_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    graded = graded_class()
    failed = replace(graded.row_of("carol", ASSIGNMENT), score=0.0, outcome=Outcome(Kind.GRADING_ERROR, "the grader crashed"))
    rows = [failed if r.student_id == "carol" else r for r in graded.grades]
    export_to_gradebook(url, [replace(r, grade=failed, tests=()) if r.grade.student_id == "carol" else r for r in graded.results])
    spec = AssignmentSpec.load(SOLUTIONS_DIR, ASSIGNMENT)
    roster = Roster(["alice", "bob", "carol"])

    def lms_cells(rows: list[GradeRow]) -> dict[str, str]:
        with write_lms_import(rows, {ASSIGNMENT: spec}, roster, tmp_path).open() as handle:
            return {r["student"]: r[ASSIGNMENT] for r in csv.DictReader(handle)}

    assert lms_cells(with_gradebook_grades(rows, read_gradebook(url)))["carol"] == ""  # no 0 for the grader's fault
    formgrader_puts(url, "carol", "test_softmax_matches_torch", manual_score=spec.tests["test_softmax_matches_torch"])
    carol = next(r for r in with_gradebook_grades(rows, read_gradebook(url)) if r.student_id == "carol")
    assert carol.graded_by_person and carol.score == pytest.approx(spec.tests["test_softmax_matches_torch"])
    assert carol.score == pytest.approx(feedback_scores(url)["carol"])  # what nbgrader's feedback shows her
    assert float(lms_cells(with_gradebook_grades(rows, read_gradebook(url)))["carol"]) == pytest.approx(carol.score)
