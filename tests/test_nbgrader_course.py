"""The checkout as a stock nbgrader course: nbgrader's own commands, the exchange, and formgrader's gradebook.

Stock nbgrader commands in a copy of the checkout's course files (nbgrader_config.py and one
assignment's source): generate_assignment writes what ``release`` commits, and stock autograde runs
sealed, with grade's admission and limits. The exchange round trip (release, fetch, submit, collect,
``grade --gradebook``, formgrader's layout, feedback through the exchange) is the instructor's guide
itself, run as written by ``tests/test_docs_commands.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.grading.models import AssignmentSpec
from autograder.mistakes import MISTAKES
from autograder.settings import MEMORY_LIMIT_BYTES, NOTEBOOKS_DIR, REPO_ROOT, SOLUTIONS_DIR
from autograder.submissions import solved

pytestmark = pytest.mark.slow

ASSIGNMENT = "01_soft_dictionary_lookup"
COURSE_ID = "attention"
MISTAKE = next(m for m in MISTAKES[ASSIGNMENT] if m.name == "softmax without subtracting the max")


def nbgrader(*args: str, cwd: Path, exchange: Path) -> str:
    """One stock nbgrader command, as an instructor or a student types it; its log, or the test fails with it."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [sys.executable, "-m", "nbgrader", *args, f"--Exchange.root={exchange}", f"--CourseDirectory.course_id={COURSE_ID}"]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course files of the checkout, copied: nbgrader writes its gradebook and folders beside them."""
    root = tmp_path_factory.mktemp("course")
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    shutil.copytree(SOLUTIONS_DIR / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    return root


def test_stock_generate_assignment_writes_what_release_commits(course: Path, tmp_path: Path) -> None:
    nbgrader("generate_assignment", ASSIGNMENT, cwd=course, exchange=tmp_path)
    generated = course / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert generated.read_bytes() == (NOTEBOOKS_DIR / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes()
    assert (course / "gradebook.db").is_file()  # where nbgrader_config.py puts it: in the course, git-ignored


def test_gradebook_export_adds_a_missing_assignment_and_keeps_manual_grades(tmp_path: Path) -> None:
    """Into an empty gradebook: the assignment is recorded as generate_assignment records it; a regrade keeps the
    instructor's manual score and comment."""
    from nbgrader.api import Gradebook

    from autograder.grading.gradebook_export import export_to_gradebook
    from autograder.grading.models import GradeRow, GradingResults, Kind, Outcome, TestRow

    spec = AssignmentSpec.load(SOLUTIONS_DIR, ASSIGNMENT)
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    first_test, *_ = spec.tests
    grades = [
        GradeRow(
            "carol",
            ASSIGNMENT,
            spec.max_score - spec.tests[first_test],
            spec.max_score,
            Outcome(Kind.GRADED, f"lost points on: {first_test}"),
        ),
        GradeRow("dan", ASSIGNMENT, 0.0, spec.max_score, Outcome(Kind.UNREADABLE, "not a notebook")),
        GradeRow("erin", ASSIGNMENT, 0.0, spec.max_score, Outcome(Kind.MISSING, "no notebook")),
    ]
    tests = [TestRow("carol", ASSIGNMENT, t, 0.0 if t == first_test else p, p) for t, p in spec.tests.items()]
    export = export_to_gradebook(url, GradingResults.from_rows(grades, tests).results)
    assert export.assignments_added == [ASSIGNMENT]
    assert (export.written, export.not_graded, export.missing) == ([("carol", ASSIGNMENT)], [("dan", ASSIGNMENT)], [("erin", ASSIGNMENT)])

    with Gradebook(url) as gradebook:
        cells = {c.name: c.max_score for c in gradebook.find_notebook(ASSIGNMENT, ASSIGNMENT).grade_cells}
        assert cells == spec.tests
        assert gradebook.find_submission(ASSIGNMENT, "carol").score == grades[0].score
        dan = gradebook.find_submission(ASSIGNMENT, "dan")
        assert dan.score == 0
        assert any(
            c.auto_comment == "Autograder: unreadable: not a notebook"
            for c in gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "dan").comments
        )
        with pytest.raises(Exception, match="No such submission"):
            gradebook.find_submission(ASSIGNMENT, "erin")
        grade = gradebook.find_grade(first_test, ASSIGNMENT, ASSIGNMENT, "carol")
        grade.manual_score = 1.0  # the instructor's review in formgrader
        gradebook.db.commit()

    export_to_gradebook(url, GradingResults.from_rows(grades, tests).results)  # grading again
    with Gradebook(url) as gradebook:
        grade = gradebook.find_grade(first_test, ASSIGNMENT, ASSIGNMENT, "carol")
        assert (grade.auto_score, grade.manual_score) == (0.0, 1.0)
        assert gradebook.find_submission(ASSIGNMENT, "carol").score == grades[0].score + 1.0


def test_stock_autograde_admits_a_forged_test_cell_as_grade_does(course: Path, tmp_path: Path) -> None:
    # nbgrader's own OverwriteCells stops on a cell whose grade id the release lacks. The course's first
    # sanitizing step (the admission grade uses) drops that metadata, so the cell runs as an ordinary one.
    from bad_submissions import with_forged_test_cell
    from nbgrader.api import Gradebook

    if not (course / "notebooks" / ASSIGNMENT).is_dir():  # when this test runs alone
        nbgrader("generate_assignment", ASSIGNMENT, cwd=course, exchange=tmp_path)
    target = course / "submitted" / "mallory" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(with_forged_test_cell(solved(ASSIGNMENT)), target)
    log = nbgrader("autograde", ASSIGNMENT, "--student=mallory", cwd=course, exchange=tmp_path)
    assert "not in the released notebook run as ordinary cells: test_bonus" in log
    # The release's own difference (its test cells lack the hidden tests) is no warning: nbgrader gives one per cell.
    assert "Attribute 'checksum'" not in log, log
    spec = AssignmentSpec.load(SOLUTIONS_DIR, ASSIGNMENT)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, "mallory")
        assert submission.score == submission.max_score == spec.max_score  # the made-up 100 points count for nothing


def test_stock_autograde_seals_with_the_memory_limit_that_grade_uses(course: Path, tmp_path: Path) -> None:
    # nbgrader_config.py gives stock autograde (and formgrader's) the limits grade uses (GradingLimits). A cell that
    # asks for more data than the limit fails there; with no limit this allocation succeeds, since it is never touched.
    from nbgrader.api import Gradebook

    if not (course / "notebooks" / ASSIGNMENT).is_dir():  # when this test runs alone
        nbgrader("generate_assignment", ASSIGNMENT, cwd=course, exchange=tmp_path)
    notebook = solved(ASSIGNMENT)
    [softmax] = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax"]
    softmax.source = f"hog = torch.empty({MEMORY_LIMIT_BYTES + 2**30}, dtype=torch.uint8)\n" + softmax.source
    target = course / "submitted" / "hog" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)
    nbgrader("autograde", ASSIGNMENT, "--student=hog", cwd=course, exchange=tmp_path)
    graded = nbformat.read(course / "autograded" / "hog" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    [softmax] = [c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax"]
    errors = [o for o in softmax.outputs if o.get("output_type") == "error"]
    assert errors and "allocate" in errors[0]["evalue"], softmax.outputs
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, "hog")
        assert submission.score < submission.max_score  # softmax was never defined


def test_stock_autograde_names_an_edited_test_cell(course: Path, tmp_path: Path) -> None:
    """Quiet about test cells as released, but a test cell the student edited is still named, and restored."""
    from nbgrader.api import Gradebook

    if not (course / "notebooks" / ASSIGNMENT).is_dir():  # when this test runs alone
        nbgrader("generate_assignment", ASSIGNMENT, cwd=course, exchange=tmp_path)
    notebook = solved(ASSIGNMENT, [MISTAKE])
    [test] = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == MISTAKE.loses[0]]
    test.source = "assert True  # nothing to see here\n"
    target = course / "submitted" / "edith" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)
    log = nbgrader("autograde", ASSIGNMENT, "--student=edith", cwd=course, exchange=tmp_path)
    assert MISTAKE.loses[0] in log, log  # the edit is named
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        assert gradebook.find_grade(MISTAKE.loses[0], ASSIGNMENT, ASSIGNMENT, "edith").auto_score == 0  # the real test ran


def test_release_feedback_reaches_every_student_grade_wrote_whichever_source(tmp_path: Path) -> None:
    """bob came through the exchange (collect left his hand-in time and secret in submitted/), erin from an LMS zip,
    frank from a plain folder (no hand-in time at all): after ``grade --gradebook``'s export, nbgrader's own
    generate_feedback and release_feedback run for all three, and bob's page is where his fetch_feedback looks."""
    from datetime import datetime, timezone

    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import notebook_hash
    from traitlets.config import Config

    from autograder.grading.gradebook_export import SECRET_FILE, export_to_gradebook
    from autograder.grading.models import GradeRow, GradingResults, Kind, Lateness, Outcome, TestRow

    course = tmp_path / "course"
    shutil.copytree(SOLUTIONS_DIR / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", course)
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    spec = AssignmentSpec.load(SOLUTIONS_DIR, ASSIGNMENT)
    handed_in = {
        "bob": Lateness(None, datetime(2026, 12, 1, 20, 0, tzinfo=timezone.utc), "timestamp.txt"),
        "erin": Lateness(None, datetime(2026, 12, 1, 21, 30, tzinfo=timezone.utc), "zip entry date"),
        "frank": None,
    }
    collected = course / "submitted" / "bob" / ASSIGNMENT  # what nbgrader collect leaves
    collected.mkdir(parents=True)
    (collected / "timestamp.txt").write_text("2026-12-01 20:00:00.000000 UTC")
    (collected / SECRET_FILE).write_text("b0b" * 40)
    graded = tmp_path / "graded.ipynb"
    nbformat.write(solved(ASSIGNMENT), graded)
    grades = [GradeRow(s, ASSIGNMENT, spec.max_score, spec.max_score, Outcome(Kind.GRADED), t) for s, t in handed_in.items()]
    tests = [TestRow(s, ASSIGNMENT, t, p, p) for s in handed_in for t, p in spec.tests.items()]
    results = GradingResults.from_rows(grades, tests).results
    url = f"sqlite:///{course / 'gradebook.db'}"  # where the course's nbgrader_config.py keeps it
    autograded = {(s, ASSIGNMENT): graded for s in handed_in}
    export_to_gradebook(url, results, autograded=autograded, course_dir=course)
    erin_secret = (course / "autograded" / "erin" / ASSIGNMENT / SECRET_FILE).read_text()
    export_to_gradebook(url, results, autograded=autograded, course_dir=course)  # grade again: the same secret
    assert (course / "autograded" / "erin" / ASSIGNMENT / SECRET_FILE).read_text() == erin_secret
    config = Config()
    config.CourseDirectory.course_id, config.Exchange.root = COURSE_ID, str(exchange)
    api = NbGraderAPI(coursedir=CourseDirectory(root=str(course), config=config), config=config)
    for student in handed_in:  # formgrader lists each as autograded, not as "needs autograding" or not submitted
        assert api.get_submission(ASSIGNMENT, student)["autograded"], student

    nbgrader("generate_feedback", ASSIGNMENT, cwd=course, exchange=exchange)
    log = nbgrader("release_feedback", ASSIGNMENT, cwd=course, exchange=exchange)
    for student in handed_in:
        assert f"Releasing feedback for student '{student}'" in log, log
    released = {p.name for p in (exchange / COURSE_ID / "feedback").glob("*.html")}
    assert len(released) == len(handed_in)
    assert f"{notebook_hash(secret='b0b' * 40, notebook_id=ASSIGNMENT)}.html" in released  # bob's fetch_feedback finds it
    assert f"{notebook_hash(secret=erin_secret, notebook_id=ASSIGNMENT)}.html" in released
