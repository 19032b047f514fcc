"""``grade --gradebook URL``: the scores, written into an nbgrader gradebook for formgrader.

An instructor who reviews in formgrader wants every submission there with its autograded
score, ready for manual grades and comments. After grading, the one process that owns OUT
(the SQLite gradebook takes one writer) writes each graded pair into the gradebook at URL
through nbgrader's ``Gradebook`` API:

- an assignment the gradebook lacks is added by nbgrader's own generate_assignment, run
  in a scratch course, so its cells are recorded exactly as ``nbgrader generate_assignment``
  records them;
- each test cell's autograded score is its ``auto_score``; manual scores and comments
  already there are kept, so a second run updates only what grading decides;
- the grade row's status (what lost points, or why a notebook handed in could not be
  graded, with zeros) goes into the automatic comment of one answer cell (the first by grade
  id), where formgrader shows it;
- a missing notebook writes nothing: formgrader lists it as not submitted;
- each graded notebook, as nbgrader's autograde leaves it, goes into the course folder's
  ``autograded/STUDENT/ASSIGNMENT/`` (with the hand-in time), where formgrader opens it and
  ``nbgrader generate_feedback`` reads it: no stock ``autograde`` is needed;
- each answer cell whose function a failed test uses gets that test's loss in its automatic comment,
  with the catalogued misconception the student's code reproduced, where one was named;
- a due date, an extension, the hand-in time and a late penalty go where nbgrader keeps them.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from course_utils.notebook_cells import assignment_notebook, cells_tested_by

from ..course import list_assignments, scratch_course
from ..settings import SOLUTIONS_DIR, put_environment_on_path
from .deadlines import TIMESTAMP_FILE
from .models import GradebookExport, GradeRow, Kind, SubmissionResult, TestRow

if TYPE_CHECKING:
    from nbgrader.api import Gradebook


def check_gradebook_url(url: str) -> str:
    """The URL to write to, checked before grading starts, not after the class was graded.

    A relative SQLite path (``sqlite:///gradebook.db``) is made absolute here, against the folder ``grade``
    was started in: grading works in scratch folders, where the same relative path would name another file.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise ValueError(f"--gradebook {url!r} is not an SQLAlchemy URL (e.g. sqlite:////srv/course/gradebook.db): {error}") from None
    if (
        parsed.get_backend_name() == "sqlite"
        and parsed.database
        and parsed.database != ":memory:"
        and not Path(parsed.database).is_absolute()
    ):
        return parsed.set(database=str(Path(parsed.database).resolve())).render_as_string(hide_password=False)
    return url


def export_to_gradebook(
    url: str,
    results: list[SubmissionResult],
    solutions_dir: Path = SOLUTIONS_DIR,
    *,
    autograded: dict[tuple[str, str], Path] | None = None,
    course_dir: Path | None = None,
) -> GradebookExport:
    """Write each result's grade row and test rows into the nbgrader gradebook at ``url`` (an SQLAlchemy URL).

    ``autograded`` maps a (student, assignment) pair to its graded notebook; with ``course_dir`` each is
    copied into the course's ``autograded/`` folder, nbgrader's layout.
    """
    from nbgrader.api import Gradebook

    put_environment_on_path()  # a new gradebook asks the alembic command for its schema version
    export = GradebookExport(url)
    known = set(list_assignments(solutions_dir))
    results = [r for r in results if r.grade.assignment in known]  # a file placed under no assignment has none to go to
    grades = [r.grade for r in results]
    names = list(dict.fromkeys(row.assignment for row in grades))
    with Gradebook(url) as gradebook:
        missing_assignments = [name for name in names if not _has_assignment(gradebook, name)]
    for name in missing_assignments:
        _add_assignment(url, name, solutions_dir)
        export.assignments_added.append(name)
    tested_cells = {name: _cells_tested(solutions_dir, name) for name in names}
    with Gradebook(url) as gradebook, warnings.catch_warnings():
        # nbgrader 0.9's add_submission trips SQLAlchemy 2's autoflush warnings; they are harmless.
        warnings.filterwarnings("ignore", message=r".*not in session.*")
        for name in names:
            due = next((r.lateness.due for r in grades if r.assignment == name and r.lateness and not r.lateness.extended), None)
            _record_due_date(gradebook, name, due)
        for result in results:
            row, pair, own = result.grade, result.pair, {t.test: t for t in result.tests}
            if row.outcome.kind is Kind.MISSING:
                export.missing.append(pair)
                continue
            tests_here = _tests_of(gradebook, row.assignment)
            found = [own[test] for test in tests_here if test in own]
            comments = _cell_comments(found, tested_cells[row.assignment]) if row.outcome.scored else {}
            scores = {test: own[test].score if test in own else 0.0 for test in tests_here}
            _write_submission(gradebook, row, scores, f"Autograder: {row.status}", comments)
            (export.written if row.outcome.scored else export.not_graded).append(pair)
            if course_dir is not None and autograded and pair in autograded and row.outcome.scored:
                _place_autograded(course_dir, row, autograded[pair])
                export.autograded.append(pair)
    return export


# nbgrader's feedback renders a comment as markdown: these characters could make a tag, a link, an image, an
# entity or emphasis of a student's text (an id, an exception message, a quoted line of code), so each is escaped.
MARKDOWN_ANYWHERE = re.compile(r"([\\`*_\[\]<>&!|~])")
# At the start of a line: a heading, a list, a quote, a setext underline, an ordered list's "1." or "1)".
MARKDOWN_LINE_START = re.compile(r"^(\d*)([#+\-=>.)])")
# A bare address, which the renderer turns into a link by itself: "http://" or "www.", escaped at its ":" or ".".
BARE_ADDRESS = re.compile(r"(?<=[A-Za-z])(:)(?=//)|(?<=\bwww)(\.)", re.IGNORECASE)


def plain_markdown(text: str) -> str:
    """``text`` written so that markdown shows it as it is, line by line (a quoted code line keeps its indent)."""
    lines = []
    for line in text.splitlines():  # every line break markdown knows (\r too) ends a line here
        body = line.lstrip(" \t")
        indent = "&nbsp;" * (len(line) - len(body))  # leading spaces would make a code block, and vanish
        lines.append(indent + MARKDOWN_LINE_START.sub(r"\1\\\2", BARE_ADDRESS.sub(r"\\\1\2", MARKDOWN_ANYWHERE.sub(r"\\\1", body))))
    return "  \n".join(lines)  # a hard break: each line stays a line


def _cells_tested(solutions_dir: Path, assignment: str) -> dict[str, set[str]]:
    """test -> the answer cells (grade ids) whose functions it uses."""
    notebook = json.loads(assignment_notebook(solutions_dir, assignment).read_text(encoding="utf-8"))
    return cells_tested_by(notebook)


def _cell_comments(tests: list[TestRow], tested: dict[str, set[str]]) -> dict[str, str]:
    """answer cell -> what the failed tests that use it lost, with the misconception each named."""
    lines: dict[str, list[str]] = {}
    for test in tests:
        if test.score >= test.max_score:
            continue
        line = f"{test.test}: {test.score:g} of {test.max_score:g} points"
        if test.misconception:
            line += f"; the code gives what a known mistake gives: {test.misconception}"
        for cell in sorted(tested.get(test.test, ())):
            lines.setdefault(cell, []).append(line)
    return {cell: "Autograder, failed tests that use this cell:\n" + "\n".join(found) for cell, found in lines.items()}


def _record_due_date(gradebook: Gradebook, assignment: str, due: datetime | None) -> None:
    """nbgrader keeps the due date on the assignment, in UTC without a zone."""
    if due is not None:
        gradebook.update_or_create_assignment(assignment, duedate=due.astimezone(timezone.utc).replace(tzinfo=None))


# What nbgrader's collect leaves beside a notebook and its later steps read from autograded/: the hand-in time,
# and the secret release_feedback names the student's feedback by.
EXCHANGE_FILES = (TIMESTAMP_FILE, "submission_secret.txt")
MAX_EXCHANGE_FILE_BYTES = 4096


def _place_autograded(course_dir: Path, row: GradeRow, notebook: Path) -> None:
    """The graded notebook where nbgrader's formgrader and generate_feedback look for it, with the exchange's
    files from ``submitted/`` as nbgrader's autograde copies them (else the hand-in time grading read)."""
    folder = course_dir / "autograded" / row.student_id / row.assignment
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(notebook, folder / f"{row.assignment}.ipynb")
    collected = course_dir / "submitted" / row.student_id / row.assignment
    for name in EXCHANGE_FILES:
        source = collected / name
        if not source.is_symlink() and source.is_file() and source.stat().st_size <= MAX_EXCHANGE_FILE_BYTES:
            shutil.copyfile(source, folder / name)
    if not (folder / TIMESTAMP_FILE).exists() and row.lateness and row.lateness.submitted_at:
        (folder / TIMESTAMP_FILE).write_text(row.lateness.submitted_at.strftime("%Y-%m-%d %H:%M:%S.%f UTC"), encoding="utf-8")


def _has_assignment(gradebook: Gradebook, name: str) -> bool:
    from nbgrader.api import MissingEntry

    try:
        notebook = gradebook.find_notebook(name, name)
    except MissingEntry:
        return False
    return bool(notebook.grade_cells)


def _add_assignment(url: str, name: str, solutions_dir: Path) -> None:
    """Record the assignment's cells in the gradebook the way ``nbgrader generate_assignment`` does."""
    with scratch_course(solutions_dir) as course:
        course.db_url = url
        api = course.api(release_dir=course.root / "release")
        course.check(api.generate_assignment(name, force=True, create=True), f"generate_assignment {name} into {url}")


def _tests_of(gradebook: Gradebook, assignment: str) -> list[str]:
    return [cell.name for cell in gradebook.find_notebook(assignment, assignment).grade_cells]


def _write_submission(gradebook: Gradebook, row: GradeRow, scores: dict[str, float], status: str, comments: dict[str, str]) -> None:
    from nbgrader.api import MissingEntry

    gradebook.update_or_create_student(row.student_id)
    try:
        submission = gradebook.find_submission(row.assignment, row.student_id)
    except MissingEntry:
        submission = gradebook.add_submission(row.assignment, row.student_id)
    if row.lateness is not None:
        if row.lateness.submitted_at is not None:
            submission.timestamp = row.lateness.submitted_at.astimezone(timezone.utc).replace(tzinfo=None)
        assignment_due = submission.assignment.duedate
        if row.lateness.extended and row.lateness.due is not None and assignment_due is not None:
            submission.extension = row.lateness.due.astimezone(timezone.utc).replace(tzinfo=None) - assignment_due
    for test, score in scores.items():
        grade = gradebook.find_grade(test, row.assignment, row.assignment, row.student_id)
        grade.auto_score = score
        grade.needs_manual_grade = False
    notebook = gradebook.find_submission_notebook(row.assignment, row.assignment, row.student_id)
    notebook.late_submission_penalty = row.lateness.penalty if row.lateness and row.lateness.penalty else None
    # The row's status on the first answer cell; what each failed test lost on the cells it uses.
    for position, comment in enumerate(sorted(notebook.comments, key=lambda c: c.cell.name)):
        own = comments.get(comment.cell.name, "")
        text = "\n\n".join(filter(None, [status if position == 0 else "", own]))
        comment.auto_comment = "\n\n".join(plain_markdown(part) for part in text.split("\n\n")) or None
    gradebook.db.commit()
