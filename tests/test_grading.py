"""End to end: a synthetic class through `grade`, and what instructors and students get back."""

from __future__ import annotations

import csv
import functools
import re
import subprocess
import sys
from html import unescape

import nbformat
import pytest
from browser_page import PageWatch, chromium, needs_chromium
from held_out import HELD_OUT
from helpers import ASSIGNMENTS, GradedClass, leaked_hidden_lines, tree_digest, variant_rounds

from autograder.grading.models import MISCONCEPTION_SEPARATOR, AssignmentSpec
from autograder.grading.reports import GRADEBOOK_CSV, GRADES_CSV, SUMMARY_MD, SUMMARY_PNG, TESTS_CSV
from autograder.grading.verdicts import graded_names
from autograder.mistakes import CHARGED_THROUGH, CORRECT_VARIANTS, MISTAKES
from autograder.nbgrader_ext.discussion import WITHHELD_NOTE, is_discussion
from autograder.settings import REPO_ROOT, SOLUTIONS_DIR
from course_utils.notebook_cells import cells_tested_by

pytestmark = pytest.mark.slow

MISTAKE_CASES = [(a, m) for a in ASSIGNMENTS for m in MISTAKES.get(a, [])]


@functools.cache  # parsed once: the tests.csv check looks it up for each of its ~14 000 rows
def spec(assignment: str) -> AssignmentSpec:
    return AssignmentSpec.load(SOLUTIONS_DIR, assignment)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_scores_full_marks(graded_class: GradedClass, assignment: str) -> None:
    row = graded_class.report.row_of(f"{assignment[:2]}-solved", assignment)
    assert (row.score, row.status) == (row.max_score, "graded"), row
    assert row.max_score == spec(assignment).max_score > 0


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_release_scores_zero(graded_class: GradedClass, assignment: str) -> None:
    row = graded_class.report.row_of(f"{assignment[:2]}-untouched", assignment)
    assert row.score == 0 and row.status.startswith("graded (no test passed); unfinished: "), row
    assert "still raise NotImplementedError" in row.status, row
    # The stubs are named, whether a demo cell or only a test met them (demo cells run under course_utils.needs).
    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    unfinished = row.status.split("unfinished: ", 1)[1].split(" still raise")[0].split(", ")
    assert set(unfinished) & set(graded_names(source)), row


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_correct_variants_score_full_marks(graded_class: GradedClass, assignment: str) -> None:
    rows = [
        r
        for r in graded_class.report.grades
        if r.assignment == assignment and r.student_id.startswith(f"{assignment[:2]}-correct-variants-")
    ]
    variants = CORRECT_VARIANTS.get(assignment, [])
    assert variants, f"{assignment} has no correct variant in its catalogue: see docs/contributing.md, 'Adding a notebook'"
    assert len(rows) == len(variant_rounds(variants))
    for row in rows:
        assert row.score == row.max_score, row


def lost_tests(graded_class: GradedClass, student: str, assignment: str) -> set[str]:
    points = spec(assignment).tests
    return {test for test, score in graded_class.report.tests_of(student, assignment).items() if score < points[test]}


def student_with(graded_class: GradedClass, assignment: str, mistake) -> str:
    return next(s for s, ms in graded_class.mistake_students.items() if s.startswith(assignment[:2]) and mistake in ms)


@pytest.mark.parametrize(("assignment", "mistake"), MISTAKE_CASES, ids=[m.name for _, m in MISTAKE_CASES])
def test_mistake_loses_points_on_the_test_that_names_it(graded_class: GradedClass, assignment: str, mistake) -> None:
    assert mistake.loses, "a mistake must name the test it fails"
    assert set(mistake.loses) <= set(spec(assignment).tests), (
        f"not tests of {assignment}: {set(mistake.loses) - set(spec(assignment).tests)}"
    )
    lost = lost_tests(graded_class, student_with(graded_class, assignment, mistake), assignment)
    assert mistake.loses[0] in lost, f"{mistake.name!r} kept full marks on the test that names it, {mistake.loses[0]}"
    assert set(mistake.loses) <= lost, f"{mistake.name!r} kept full marks on {sorted(set(mistake.loses) - lost)}"


def test_mistakes_cost_points_only_where_the_table_says(graded_class: GradedClass) -> None:
    # Mistakes share a submission only when they sit in different cells and declare disjoint tests,
    # so a submission must lose exactly the union of what its mistakes declare: no collateral damage.
    for student, mistakes in graded_class.mistake_students.items():
        assignment = next(a for a in ASSIGNMENTS if a.startswith(student[:2]))
        declared = set().union(*(m.loses for m in mistakes))
        assert lost_tests(graded_class, student, assignment) == declared, (student, [m.name for m in mistakes])


def test_every_student_and_assignment_has_one_grade_row(graded_class: GradedClass) -> None:
    students = sorted(p.name for p in graded_class.submissions.iterdir())
    with (graded_class.out / GRADES_CSV).open() as handle:
        rows = list(csv.DictReader(handle))
    columns = ["student_id", "assignment", "score", "max_score", "kind", "status", "submitted_at", "due", "late_penalty"]
    assert list(rows[0]) == columns  # as docs/instructors.md's "What OUT holds" lists them
    assert sorted((r["student_id"], r["assignment"]) for r in rows) == sorted((s, a) for s in students for a in ASSIGNMENTS)
    assert all(r["due"] == "" and float(r["late_penalty"]) == 0 for r in rows)  # the class was graded with no due date


def test_tests_csv_has_one_row_per_graded_test(graded_class: GradedClass) -> None:
    with (graded_class.out / TESTS_CSV).open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["student_id", "assignment", "test", "score", "max_score", "misconception"]
    students = {p.name for p in graded_class.submissions.iterdir()}
    expected = {(s, a, t) for s in students for a in ASSIGNMENTS for t in spec(a).tests}
    assert {(r["student_id"], r["assignment"], r["test"]) for r in rows} == expected
    for row in rows:
        assert 0 <= float(row["score"]) <= float(row["max_score"]) == spec(row["assignment"]).tests[row["test"]]


def test_gradebook_and_summary_agree_with_grades_csv(graded_class: GradedClass) -> None:
    with (graded_class.out / GRADES_CSV).open() as handle:
        points = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(handle)}
    with (graded_class.out / GRADEBOOK_CSV).open() as handle:
        gradebook = list(csv.DictReader(handle))
    assert list(gradebook[0]) == ["student_id", *ASSIGNMENTS, "total"]
    assert {r["student_id"] for r in gradebook} == {s for s, _ in points}
    for row in gradebook:
        for assignment in ASSIGNMENTS:
            assert float(row[assignment]) == points[(row["student_id"], assignment)], (row["student_id"], assignment)
        assert float(row["total"]) == pytest.approx(sum(points[(row["student_id"], a)] for a in ASSIGNMENTS))
    summary = (graded_class.out / SUMMARY_MD).read_text()
    assert all(f"## {a} (max {spec(a).max_score:g} points)" in summary for a in ASSIGNMENTS)
    assert "Most failed tests:" in summary and (graded_class.out / SUMMARY_PNG).stat().st_size > 1000


@pytest.mark.skipif(
    "01_soft_dictionary_lookup" not in ASSIGNMENTS, reason="COURSE_TEST_ONLY leaves out notebook 01, whose hidden-only mistake this grades"
)
def test_feedback_hides_hidden_tests_but_explains_failures(graded_class: GradedClass) -> None:
    first = "01_soft_dictionary_lookup"
    # A mistake that fails only a hidden test: its traceback would quote hidden code line by line.
    assert lost_tests(graded_class, "zz-hidden-only", first) == {"test_softmax_no_builtin"}
    html = (graded_class.out / "feedback" / "zz-hidden-only" / f"{first}.html").read_text()
    assert "BEGIN HIDDEN TESTS" not in html and "load_solution" not in html and "check_no_builtin" not in html
    assert re.search(r"\bref\.[a-z_]+\(", html) is None  # no call into the solution is quoted
    assert "hidden tests ran here" in html
    assert "calls ['torch.softmax']" in unescape(html)  # the message survives (however its quotes are escaped)
    assert "---->" not in unescape(html) and "Cell In[" not in html  # but no traceback frames


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_graded_notebook_gets_feedback_that_quotes_no_hidden_test(graded_class: GradedClass, assignment: str) -> None:
    pages = sorted((graded_class.out / "feedback").glob(f"*/{assignment}.html"))
    handed_in = {path.parent.name for path in graded_class.submissions.glob(f"*/{assignment}.ipynb")}
    assert {page.parent.name for page in pages} == handed_in, "every graded submission gets a feedback page"
    discussed = discussion_phrases(assignment)
    for page in pages:
        leaked = leaked_hidden_lines(page, assignment)
        assert leaked == [], f"{page.parent.name}'s feedback on {assignment} shows hidden-test lines: {leaked[:3]}"
        # After grading, the student reads each graded question's discussion, which their notebook lacked.
        text = page_text(page)
        missing = [phrase for phrase in discussed if phrase not in text]
        assert not missing, f"{page.parent.name}'s feedback on {assignment} lacks the discussions: {missing[:2]}"
        assert WITHHELD_NOTE[:60] not in text, "the note that stood in for a discussion is gone once it is back"
        assert offsite_resources(page.read_text()) == [], f"{page.parent.name}'s feedback on {assignment} loads from the network"
    solved = (graded_class.out / "feedback" / f"{assignment[:2]}-solved" / f"{assignment}.html").read_text()
    assert "<math" in solved and "$$" not in page_text_of(solved), "the math is MathML, drawn without a script"


OFFSITE = re.compile(r"<(?:script|img|link|iframe|audio|video|source)\b[^>]*?\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.IGNORECASE)


@pytest.mark.slow
@needs_chromium
def test_a_feedback_page_reads_offline_in_a_browser(graded_class: GradedClass) -> None:
    # The network is refused: the page must draw its math (MathML) and ask for nothing off this machine.
    page = graded_class.out / "feedback" / f"{ASSIGNMENTS[0][:2]}-solved" / f"{ASSIGNMENTS[0]}.html"
    with chromium() as browser:
        watch = PageWatch(browser)
        watch.page.goto(page.as_uri())
        watch.page.wait_for_load_state("load")
        assert watch.page.locator("math").count() > 10, "the math is MathML"
        assert watch.page.locator("script[src]").count() == 0
        assert watch.errors == [], watch.errors


def offsite_resources(html: str) -> list[str]:
    """The tags of a page that would fetch something from another machine (a CDN's script, a badge image)."""
    return [match.group(0)[:120] for match in OFFSITE.finditer(html)]


def page_text_of(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def discussion_phrases(assignment: str) -> list[str]:
    """A run of plain words from each discussion cell of the solution, to find in rendered feedback."""
    cells = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4).cells
    phrases = []
    for cell in filter(is_discussion, cells):
        runs = re.findall(r"[A-Za-z][A-Za-z ,]{24,}[A-Za-z]", cell.source)
        if runs:
            phrases.append(" ".join(max(runs, key=len).split()))
    return phrases


def page_text(page) -> str:
    """The page's words with tags removed; syntax highlighting splits code into tokens, so no space before punctuation."""
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))).split())
    return re.sub(r" ([,.;:])", r"\1", text)


def test_grading_writes_nothing_into_submissions_or_the_repository(graded_class: GradedClass) -> None:
    after = tree_digest(graded_class.submissions, REPO_ROOT)
    assert after == graded_class.snapshot_before


def test_parallel_grading_gives_the_same_rows_as_one_worker(graded_class: GradedClass, tmp_path) -> None:
    # A small class through the command line with --jobs 1, compared row for row with the
    # two-worker grading of the same submissions in the session fixture.
    first = ASSIGNMENTS[0]
    small = tmp_path / "small"
    students = [f"{first[:2]}-solved", f"{first[:2]}-untouched", f"{first[:2]}-mistakes-0"]
    for student in students:
        (small / student).mkdir(parents=True)
        for notebook in (graded_class.submissions / student).glob("*.ipynb"):
            (small / student / notebook.name).write_bytes(notebook.read_bytes())
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            str(small),
            "--out",
            str(tmp_path / "out"),
            "--assignment",
            first,
            "--no-feedback",
            "--jobs",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    with (tmp_path / "out" / TESTS_CSV).open() as handle:
        one_worker = [(r["student_id"], r["test"], float(r["score"])) for r in csv.DictReader(handle)]
    two_workers = [(r.student_id, r.test, r.score) for r in graded_class.report.tests if r.student_id in students and r.assignment == first]
    assert one_worker == two_workers


def test_grade_refuses_bad_arguments_with_a_clear_message(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from autograder.__main__ import main

    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("not a zip")
    cases = [
        (["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")], "submissions folder not found"),
        (["grade", str(tmp_path / "class"), "--out", str(tmp_path / "class" / "out")], "must not contain each other"),
        (["grade", str(tmp_path / "class"), "--out", str(tmp_path / "o"), "--assignment", "99_nope"], "unknown assignment"),
        (["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "o")], "no notebooks found"),
        (["grade", str(tmp_path / "notes.txt"), "--out", str(tmp_path / "o")], "is a file but not a .zip"),
        (["grade", str(tmp_path / "class"), "--out", str(tmp_path / "o"), "--student-pattern", "(\\w+)_"], "named group"),
    ]
    for args, message in cases:
        assert main(args) == 2, args
        assert message in capsys.readouterr().err, args


# Mistakes no feedback can name from results: which entries come out wrong depends on what memory held.
UNNAMEABLE = {
    "matmul does not mask the ragged last step along K": "it reads past K, and what lies there decides which entries are wrong",
    # Its results are right; what it gets wrong is memory past the output, which the record holds only as the input of the
    # test's next call, where a right answer passes it through unchanged: no recorded result tells it from a right answer.
    "vector_add stores without a mask (writes past the end of the output)": "only the memory past its output shows it",
    # It reads x's storage in the wrong order, partly past its end: every entry is wrong, so where the entries are wrong
    # tells it from no other bug (misconceptions._same_entries_wrong asks for some entries right).
    "online_softmax_rows hands the kernel a transposed x as it is (its columns are not contiguous)": "every entry is wrong",
}


@pytest.mark.parametrize(("assignment", "mistake"), MISTAKE_CASES, ids=[m.name for _, m in MISTAKE_CASES])
def test_feedback_names_the_mistake(graded_class: GradedClass, assignment: str, mistake) -> None:
    # The catalogued mistake, run on the inputs the tests gave the student's code, gives what it gave: named.
    if mistake.name in UNNAMEABLE:
        assert mistake.undefined_values, "only a mistake whose values are undefined may go unnamed"
        pytest.skip(UNNAMEABLE[mistake.name])
    student = student_with(graded_class, assignment, mistake)
    named = {
        r.test: r.misconception.split(MISCONCEPTION_SEPARATOR)
        for r in graded_class.report.tests
        if r.student_id == student and r.assignment == assignment and r.misconception
    }
    assert any(mistake.name in names for names in named.values()), f"{mistake.name!r} was not named; named: {named}"


def test_a_correct_submission_is_told_of_no_mistake(graded_class: GradedClass) -> None:
    for row in graded_class.report.tests:
        if "-correct-variants-" in row.student_id or row.student_id.endswith("-solved"):
            assert not row.misconception, row


HELD_OUT_CASES = [(a, h) for a in ASSIGNMENTS for h in HELD_OUT.get(a, [])]


def test_every_notebook_has_nine_held_out_mistakes() -> None:
    assert {a: len(HELD_OUT.get(a, [])) >= 9 for a in ASSIGNMENTS} == dict.fromkeys(ASSIGNMENTS, True)
    catalogued = {m.name for mistakes in MISTAKES.values() for m in mistakes}
    assert not [h.mistake.name for _, h in HELD_OUT_CASES if h.mistake.name in catalogued], "held out means not in the catalogue"


@pytest.mark.parametrize(("assignment", "held"), HELD_OUT_CASES, ids=[h.mistake.name for _, h in HELD_OUT_CASES])
def test_an_uncatalogued_mistake_costs_its_own_tests_and_is_told_where_it_is(graded_class: GradedClass, assignment: str, held) -> None:
    mistake = held.mistake
    tested = cells_tested_by(nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4))
    allowed = {mistake.cell, CHARGED_THROUGH.get((assignment, mistake.cell), ("",))[0]}
    assert mistake.loses and all(tested[test] & allowed for test in mistake.loses), "a held-out mistake may cost only its function's tests"
    student = student_with(graded_class, assignment, mistake)
    assert set(mistake.loses) <= lost_tests(
        graded_class, student, assignment
    )  # exactly: test_mistakes_cost_points_only_where_the_table_says
    named = {
        (r.test, name)
        for r in graded_class.report.tests
        if (r.student_id, r.assignment) == (student, assignment) and r.test in mistake.loses and r.misconception
        for name in r.misconception.split(MISCONCEPTION_SEPARATOR)
    }
    same_results = {(test, name) for test, name, _why in held.named}
    assert named - same_results == set(), "a catalogued misconception named on a test where its result is not this bug's"
    page = " ".join(unescape((graded_class.out / "feedback" / student / f"{assignment}.html").read_text()).split())
    assert [phrase for phrase in held.says if phrase not in page] == [], "the feedback does not say where the bug is"


# Catalogued mistakes that give the same results on a test's inputs: the evidence names both, rightly.
SAME_EVIDENCE = {
    frozenset({"scales the keys as well as the queries (the scale counted twice)", "scales by 1/d_k instead of 1/sqrt(d_k)"}): (
        "the same function: (Q s)(K s)^T = Q K^T s^2, and s^2 = 1/d_k"
    ),
    frozenset(
        {
            "packed_sequence_mask off by one at the boundaries (first token glued to the previous sequence)",
            "packed_sequence_mask, causal: one causal mask over the whole row (sequences see the ones before them)",
        }
    ): "on lengths [2, 1], the causal test's first call (where it stops), both give one causal triangle over all three tokens",
    frozenset(
        {
            "flash_attention_forward tiles only the queries (full rows of scores)",
            "flash_attention_forward computes the tiles past the diagonal and masks them",
        }
    ): "the skipping test measures FLOPs: both compute every tile of a causal row",
    frozenset(
        {
            "flash_attention_backward keeps the whole P (the plain backward inside)",
            "flash_attention_backward masks tiles instead of skipping them",
        }
    ): "the skipping test measures FLOPs: both compute every tile",
}


def test_no_submission_is_told_of_a_mistake_it_did_not_make(graded_class: GradedClass) -> None:
    # Naming needs distinguishing evidence: a submission with catalogued (and held-out) mistakes is told only of its own,
    # or of one that gives the same results on that test's inputs (SAME_EVIDENCE, each with the reason).
    # Per test: a name appears only on a test its own mistake (or one with the same evidence) loses, the tests whose
    # calls the named mistake changes; a match on one test never carries the name to another.
    held = {h.mistake.name: {(t, n) for t, n, _why in h.named} for hs in HELD_OUT.values() for h in hs}
    wrong = []
    for student, mistakes in graded_class.mistake_students.items():
        loses = {m.name: set(m.loses) for m in mistakes}
        allowed = {(t, n) for m in mistakes for t, n in held.get(m.name, ())}
        for row in graded_class.report.tests:
            if row.student_id != student or not row.misconception:
                continue
            for name in row.misconception.split(MISCONCEPTION_SEPARATOR):
                own = [m for m in loses if row.test in loses[m] and (m == name or frozenset({name, m}) in SAME_EVIDENCE)]
                if not own and (row.test, name) not in allowed:
                    wrong.append((student, row.test, name))
    assert not wrong, "\n".join(map(str, wrong))
