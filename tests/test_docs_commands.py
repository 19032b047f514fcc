"""The guides' commands run as written: every command block of docs/instructors.md and docs/students.md.

A copy of the course (the packages, nbgrader_config.py, course.toml and notebook 01, under ~/.cache) stands in
for an instructor's checkout, with the test environment's venv as its ``.venv``, on a machine with no hub: the
Jupyter config folder starts empty, so the guide itself must set nbgrader's course id and exchange. What the
guides say the instructor already has is made here: the LMS's roster (five students, one of whom hands in
nothing), an LMS zip holding one student's notebook, and, after the assignment is released, three students who
fetch and submit through nbgrader's exchange, one of them late and one with an extension. The blocks then run in
the order of the page, each with bash, in the course folder, so relative paths mean what they mean to the
instructor. A block that cannot run in a test (one that starts servers) says why on the line above it, and only
that is skipped. Afterwards the outcome the guide promises is checked: the roster's rows, the late penalty,
formgrader's view of every submission, the manual grade the guide gives, feedback through the exchange for
every student graded (the one from the zip too) and the LMS import, with the manual grade in it.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import nbformat
import pytest
from local_server import jupyter_server

from autograder.grading.models import AssignmentSpec
from autograder.handout import OWNED
from autograder.mistakes import MISTAKES
from autograder.nbgrader_ext.feedback import REDACTED_NOTE
from autograder.settings import REPO_ROOT, SOLUTIONS_DIR
from autograder.submissions import solved

GUIDES = ("docs/instructors.md", "docs/students.md")
SKIP = re.compile(r"^<!-- docs-test: skip: (?P<why>\S.*?) -->$")
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")
SHELLS = {"bash", "sh", "shell", "console"}

ASSIGNMENT = "01_soft_dictionary_lookup"
COURSE_ID = "attention"
MISTAKE = next(m for m in MISTAKES[ASSIGNMENT] if m.name == "softmax without subtracting the max")
# When each student's submission reached the exchange: the guide's due date is 2026-12-01 23:59 UTC, carol's 12-04.
HANDED_IN = {
    "alice": "2026-12-01 20:00:00.000000 UTC",  # on time
    "bob": "2026-12-03 10:00:00.000000 UTC",  # 1 day 10 h late: two started days at 10 % each
    "carol": "2026-12-03 10:00:00.000000 UTC",  # within her extension
}
ZIPPED = ("erin", (2026, 12, 1, 12, 0, 0))  # hands in through the LMS, on time (the entry's date, read in TZ=UTC)
ROSTER = ["alice", "bob", "carol", "dan", ZIPPED[0]]  # dan hands in nothing
MANUAL = 0.5  # the points the guide's step 5 gives bob back by hand, on a test his mistake failed


@dataclass(frozen=True)
class Block:
    guide: str
    line: int
    code: str
    skipped: str = ""  # why it is not run ('' when it is)


def command_blocks(guide: str) -> list[Block]:
    """The shell blocks of ``guide``, in page order, each with the reason it is skipped, if it says one."""
    lines = (REPO_ROOT / guide).read_text(encoding="utf-8").splitlines()
    blocks, number = [], 0
    while number < len(lines):
        opened = FENCE.match(lines[number])
        if opened is None:
            number += 1
            continue
        end = next(i for i in range(number + 1, len(lines)) if lines[i].startswith("```"))
        if opened.group("lang") in SHELLS:
            above = SKIP.match(lines[number - 1]) if number else None
            blocks.append(Block(guide, number + 1, "\n".join(lines[number + 1 : end]), above.group("why") if above else ""))
        number = end + 1
    return blocks


def test_the_blocks_are_found_and_every_skip_says_why() -> None:
    blocks = [block for guide in GUIDES for block in command_blocks(guide)]
    run = [b for b in blocks if not b.skipped]
    assert len(run) >= 6, [(b.guide, b.line) for b in blocks]  # the instructor's term: toml, release, grade, feedback, LMS
    assert all(".venv/bin/" in b.code or "course.toml" in b.code or "graded/" in b.code for b in run)
    skipped = [b for b in blocks if b.skipped]
    assert all(len(b.skipped) > 20 for b in skipped), "a skipped block says what keeps it from running here"
    # Only what a test cannot do: start servers (Dask over TLS), push to GitHub, download a new venv's PyTorch.
    assert len(skipped) <= 3, [(b.guide, b.line, b.skipped) for b in skipped]


# Outside the checkout (another test checks that grading writes nothing into it) and outside /tmp (the sandbox
# mounts its own /tmp over it).
COURSES = Path.home() / ".cache" / "attention-course-tests"


@pytest.fixture
def course() -> Iterator[Path]:
    """A copy of the course, removed afterwards."""
    root = COURSES / f"docs-course-{uuid.uuid4().hex[:8]}"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for package in ("autograder", "course_utils"):
        shutil.copytree(REPO_ROOT / package, root / package, ignore=ignore)
    for folder in ("solutions", "notebooks"):
        shutil.copytree(REPO_ROOT / folder / ASSIGNMENT, root / folder / ASSIGNMENT, ignore=ignore)
    for name in ("nbgrader_config.py", "pyproject.toml", "LICENSE"):  # the handout's package is built from the last two
        shutil.copy(REPO_ROOT / name, root)
    (root / "course.toml").write_text('repository = ""\nbranch = "main"\n', encoding="utf-8")
    (root / ".venv").symlink_to(Path(sys.prefix))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def environment(course: Path) -> dict[str, str]:
    """The instructor's and students' shell on one machine without a hub: a Jupyter config folder of their own,
    empty (the user's ~/.jupyter is never read or written), where the guide puts nbgrader's course id and exchange."""
    config = course / ".jupyter-config"
    config.mkdir(exist_ok=True)
    return {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "TZ": "UTC"}


def run(command: str, cwd: Path, env: dict[str, str], what: str) -> str:
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{what} failed ({result.returncode}):\n{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def students_submit(course: Path, env: dict[str, str]) -> None:
    """Three students fetch the assignment, do it (bob with a typical mistake) and submit through the exchange."""
    for student, when in HANDED_IN.items():
        home = course / "homes" / student
        home.mkdir(parents=True)
        nbgrader = f"{sys.executable} -m nbgrader"
        run(f"{nbgrader} fetch_assignment {ASSIGNMENT}", home, env, f"{student}'s fetch")
        notebook = solved(ASSIGNMENT, [MISTAKE]) if student == "bob" else solved(ASSIGNMENT)
        nbformat.write(notebook, home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
        run(f"{nbgrader} submit {ASSIGNMENT} --student={student}", home, env, f"{student}'s submit")
        [inbound] = (course / "exchange" / COURSE_ID / "inbound").glob(f"{student}+{ASSIGNMENT}+*")
        (inbound / "timestamp.txt").write_text(when)  # when the exchange received it, as if in December


def lms_inputs(course: Path) -> None:
    """The roster and a zip as the LMS exports them."""
    (course / "roster.csv").write_text("Name,Username,Section\n" + "".join(f"{s.title()} Doe,{s},A{i % 2}\n" for i, s in enumerate(ROSTER)))
    student, when = ZIPPED
    with zipfile.ZipFile(course / "submissions.zip", "w") as zipped:
        zipped.writestr(zipfile.ZipInfo(f"{student}_12345_67890_{ASSIGNMENT}.ipynb", when), nbformat.writes(solved(ASSIGNMENT)))


@pytest.mark.slow
def test_the_instructors_term_runs_as_written(course: Path) -> None:
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    env = environment(course)
    lms_inputs(course)
    submitted = False
    graded_runs: list[Path] = []  # OUT after each of the term's grade runs: later examples grade into it too
    for block in [b for guide in GUIDES for b in command_blocks(guide) if not b.skipped]:
        if "nbgrader collect" in block.code and not submitted:
            students_submit(course, env)
            submitted = True
        run(block.code, course, env, f"{block.guide}, the block at line {block.line}")
        if "grade submitted" in block.code:
            graded_runs.append(shutil.copytree(course / "graded", course / f"graded-{len(graded_runs)}"))
    assert submitted, "the guide collects submissions somewhere"
    assert len(graded_runs) == 2, "the term grades, then grades again after grading by hand for the LMS file"
    autograded_term, final_term = graded_runs
    # The handout the guide released: the students' package and notebooks, pointing at the handout's address.
    handout = course / "handout"
    assert sorted(p.name for p in handout.iterdir()) == sorted(OWNED)
    badge = nbformat.read(handout / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4).cells[1].source
    assert f"github/example-school/attention-handout/blob/main/notebooks/{ASSIGNMENT}/{ASSIGNMENT}.ipynb" in badge
    with (course / "graded" / "grades.csv").open() as handle:  # the zip the LMS exported, by "Grading a class"
        assert any(r["student_id"] == ZIPPED[0] and r["kind"] == "graded" for r in csv.DictReader(handle))

    spec = AssignmentSpec.load(SOLUTIONS_DIR, ASSIGNMENT)
    with (autograded_term / "grades.csv").open() as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle) if r["assignment"] == ASSIGNMENT}
    assert set(ROSTER) <= set(rows), rows
    assert rows["dan"]["kind"] == "missing"
    assert float(rows["alice"]["score"]) == float(rows["carol"]["score"]) == float(rows[ZIPPED[0]]["score"]) == spec.max_score
    assert float(rows["alice"]["late_penalty"]) == float(rows["carol"]["late_penalty"]) == 0.0
    tests_score = spec.max_score - sum(spec.tests[t] for t in MISTAKE.loses)
    assert float(rows["bob"]["late_penalty"]) == pytest.approx(0.2 * tests_score)
    assert float(rows["bob"]["score"]) == pytest.approx(0.8 * tests_score)
    assert "late by 1 day 10 h" in rows["bob"]["status"] and "20% off" in rows["bob"]["status"]
    assert rows["bob"]["submitted_at"] == "2026-12-03T10:00:00Z" and rows["bob"]["due"] == "2026-12-01T23:59:00Z"

    # Formgrader: every graded submission counts as autograded and opens from nbgrader's own layout.
    config = Config()
    config.Exchange.root = str(course / "exchange")
    config.CourseDirectory.course_id = COURSE_ID
    api = NbGraderAPI(coursedir=CourseDirectory(root=str(course), config=config), config=config)
    for student in [*HANDED_IN, ZIPPED[0]]:  # the one from the zip too
        assert api.get_submission(ASSIGNMENT, student)["autograded"], student
        assert (course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "bob")
        assert notebook.late_submission_penalty == pytest.approx(0.2 * tests_score)
        comments = {c.cell.name: c.auto_comment or "" for c in notebook.comments}
        lost = [name for name, text in comments.items() if MISTAKE.name in text]
        assert lost == ["softmax"], comments  # on the cell the failed tests use, with the misconception named
        assert gradebook.find_assignment(ASSIGNMENT).duedate.isoformat() == "2026-12-01T23:59:00"
        assert gradebook.find_submission(ASSIGNMENT, "carol").extension is not None
        [by_hand] = [g for g in notebook.grades if g.manual_score is not None]  # the guide's step 5
        assert (by_hand.name, by_hand.manual_score, by_hand.auto_score) == (MISTAKE.loses[0], MANUAL, 0.0)
        submission_id = notebook.id
    with jupyter_server(course, env) as (base, token):  # formgrader, as the guide's Formgrader tab serves it
        with urllib.request.urlopen(f"{base}/formgrader/submissions/{submission_id}/?token={token}", timeout=60) as page:
            html = page.read().decode("utf-8")
    assert page.status == 200 and '<span class="nf">softmax</span>' in html  # bob's graded notebook, opened (a 404 if missing)

    # Feedback through the exchange for every student graded, the one from the zip too, with the manual grade in
    # bob's (nbgrader's own score: the cells' scores less the penalty); the LMS import says the same after the penalty.
    bob_by_hand = 0.8 * tests_score + MANUAL
    for student in [*HANDED_IN, ZIPPED[0]]:
        page = (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
        assert REDACTED_NOTE.removeprefix("# ") in page and "BEGIN HIDDEN TESTS" not in page  # hidden tests stay hidden
        if student == "bob":
            assert f"(Score: {round(bob_by_hand, 2)} / {float(spec.max_score)})" in page
    assert len(list((course / "exchange" / COURSE_ID / "feedback").glob("*.html"))) == len(HANDED_IN) + 1
    with (final_term / "lms-import.csv").open() as handle:
        lms = list(csv.DictReader(handle))
    assert [r["Username"] for r in lms] == ROSTER and list(lms[0]) == ["Name", "Username", "Section", ASSIGNMENT]
    expected = [spec.max_score, bob_by_hand, spec.max_score, 0.0, spec.max_score]
    assert [float(r[ASSIGNMENT]) for r in lms] == pytest.approx(expected)
