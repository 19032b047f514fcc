"""Bad submissions: each gets its grade row and a clear reason, and the batch goes on."""

from __future__ import annotations

import csv
import re
import subprocess
from html import unescape as html_unescape
from pathlib import Path

import pytest
from bad_submissions import ABSENT, BAD_CASES, FIRST, ODD_NAMES, OFF_ROSTER, BadCase
from helpers import ASSIGNMENTS, GradedClass, leaked_hidden_lines, tree_digest

from autograder.grading.models import AssignmentSpec, Kind
from autograder.grading.redaction import REDACTED
from autograder.mistakes import MISTAKES
from autograder.settings import SOLUTIONS_DIR

pytestmark = pytest.mark.slow
SPEC = AssignmentSpec.load(SOLUTIONS_DIR, FIRST)


def lost(report, student: str) -> set[str]:
    return {test for test, score in report.tests_of(student, FIRST).items() if score < SPEC.tests[test]}


@pytest.mark.parametrize("case", BAD_CASES, ids=[c.student for c in BAD_CASES])
def test_bad_submission_gets_its_grade_and_reason(bad_class: GradedClass, case: BadCase) -> None:
    row = bad_class.report.row_of(case.student, FIRST)
    assert re.search(case.status, row.status), f"{case.student}: status {row.status!r} does not match {case.status!r}"
    assert row.max_score == SPEC.max_score
    if case.score == "zero":
        assert row.score == 0, row
    elif case.score == "full":
        assert row.score == row.max_score, row
    elif case.score == "at least":
        assert lost(bad_class.report, case.student) >= set(case.lost), row
    else:
        assert lost(bad_class.report, case.student) == set(case.lost), row


def test_odd_student_names_get_a_row_and_the_rest_are_graded(bad_class: GradedClass) -> None:
    for student, (_, status) in ODD_NAMES.items():
        row = bad_class.report.row_of(student, FIRST)
        assert re.search(status, row.status) and row.score == 0, row
    assert bad_class.report.row_of("ok student", FIRST).status == "graded"


def test_student_script_never_reaches_the_feedback(bad_class: GradedClass) -> None:
    """Markdown HTML, display(HTML/Javascript/SVG) made while grading: full marks, and no script left."""
    from bad_submissions import XSS_MARKERS

    html = (bad_class.out / "feedback" / "html-injection" / f"{FIRST}.html").read_text(encoding="utf-8")
    assert "My notes" in html and "<b>hover</b>" in html  # the student's formatting stays, without its handler
    for marker in XSS_MARKERS:  # built only when the cells run or render: absent from anything shown as code
        assert marker not in html, marker


def test_no_csv_cell_is_a_spreadsheet_formula(bad_class: GradedClass) -> None:
    """Student ids that read as formulas (=, +, -, @) are quoted in every CSV; numbers stay numbers."""

    from bad_submissions import FORMULA_NAMES

    for student in FORMULA_NAMES:
        assert bad_class.report.row_of(student, FIRST).status == "graded"
    for name in ("grades.csv", "tests.csv", "gradebook.csv"):
        with (bad_class.out / name).open(newline="", encoding="utf-8") as handle:
            cells = [cell for row in csv.reader(handle) for cell in row]
        formulas = [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
        assert formulas == [], f"{name}: {formulas[:5]}"
        assert {"'@SUM", "'-cmd"} <= set(cells), name
        if name == "grades.csv":
            assert "'=1+2" in cells


def test_every_bad_submission_has_exactly_one_row_and_its_test_rows(bad_class: GradedClass) -> None:
    students = sorted([p.name for p in bad_class.submissions.iterdir()] + [ABSENT])  # ABSENT is on the roster only
    assert sorted(r.student_id for r in bad_class.report.grades) == students
    for student in students:
        assert set(bad_class.report.tests_of(student, FIRST)) == set(SPEC.tests)


def test_a_rostered_student_who_handed_in_nothing_gets_a_missing_row(bad_class: GradedClass) -> None:
    row = bad_class.report.row_of(ABSENT, FIRST)
    assert (row.outcome.kind, row.score, row.max_score) == (Kind.MISSING, 0.0, SPEC.max_score)
    assert not (bad_class.out / "feedback" / ABSENT).exists()
    with (bad_class.out / "grades.csv").open(newline="", encoding="utf-8") as handle:
        assert [r for r in csv.DictReader(handle) if r["student_id"] == ABSENT], "the missing row reaches grades.csv"


def test_a_student_off_the_roster_is_graded_and_noted(bad_class: GradedClass) -> None:
    row = bad_class.report.row_of(OFF_ROSTER, FIRST)
    assert row.outcome.kind is Kind.GRADED and row.score == row.max_score
    assert "not on the roster" in row.outcome.notes


def test_grading_bad_submissions_modifies_none_of_them(bad_class: GradedClass) -> None:
    assert tree_digest(bad_class.submissions) == {
        k: v for k, v in bad_class.snapshot_before.items() if k.startswith(str(bad_class.submissions))
    }


def test_feedback_keeps_huge_output_small(bad_class: GradedClass) -> None:
    html = bad_class.out / "feedback" / "huge-output" / f"{FIRST}.html"
    assert html.stat().st_size < 2_000_000, html.stat().st_size
    assert not (bad_class.out / "feedback" / "not-json").exists()  # nothing to show for an unreadable file


def test_calling_the_builtin_kernel_is_a_named_mistake() -> None:
    # The class fixture grades these (test_grading.py); here: they exist for every notebook that forbids it.
    for assignment in ASSIGNMENTS[2:4]:
        names = {m.name: m.loses[0] for m in MISTAKES[assignment]}
        assert any("F.scaled_dot_product_attention" in name and test.endswith("no_builtin") for name, test in names.items()), assignment


@pytest.mark.parametrize(
    ("source", "tampers"),
    [
        ("def check_close(*args, **kwargs):\n    return True", True),
        ("check_close = lambda *args, **kwargs: True", True),
        ("torch.testing.assert_close = lambda *a, **k: None", True),
        ("setattr(torch, 'allclose', lambda *a, **k: True)", True),
        ('with torch.profiler.record_function("course_utils.stand_in"):', True),  # hiding a built-in from its check
        ("course_utils.operators._shields_opened[0] += 1", True),
        ("k.launcher_builds = lambda *a, **kw: [{'compiled': True}]", True),  # a forged GPU build, under any alias
        ("vars(kernels)['run_builds'] = fake", True),
        ("for build in run_builds(jobs):", False),  # the notebook's own compile demo, copied
        ("builds = launcher_builds(transpose, x, kernel, 64, arch='sm_90')", False),
        ("check_close(out, expected, label='mine')", False),  # a student checking their own work
        ('check_my_work("01_soft_dictionary_lookup");', False),  # the notebook's self-check cell
        ("ok = check_close(out, expected, label='mine')", False),
    ],
)
def test_tamper_check_flags_rebinding_a_checker_but_not_calling_one(source: str, tampers: bool) -> None:
    from autograder.grading.admission import INTROSPECTION

    assert bool(INTROSPECTION.search(source)) is tampers


def test_hostile_submissions_leave_nothing_behind_and_leak_nothing(bad_class: GradedClass) -> None:
    from bad_submissions import PROCESS_MARKER

    assert not Path("/usr/attention-course-pwned").exists()
    survivors = subprocess.run(["pgrep", "-f", PROCESS_MARKER], capture_output=True, text=True).stdout.split()
    assert survivors == [], f"processes left behind by a submission: {survivors}"
    for html in (bad_class.out / "feedback").glob(f"*/{FIRST}.html"):
        leaked = leaked_hidden_lines(html, FIRST)
        assert leaked == [], f"{html.parent.name}'s feedback shows hidden-test lines: {leaked[:3]}"
    leaker = (bad_class.out / "feedback" / "prints-hidden-tests" / f"{FIRST}.html").read_text(encoding="utf-8")
    assert REDACTED in html_unescape(leaker)  # it printed them, and they were cut, with a sentence that says so


def test_honest_students_keep_full_marks_beside_hostile_ones(bad_class: GradedClass) -> None:
    for student in ("ok student", "colab-copy", "test-deleted"):
        row = bad_class.report.row_of(student, FIRST)
        assert row.score == row.max_score, row
