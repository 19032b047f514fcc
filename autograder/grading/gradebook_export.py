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
  graded, with zeros) goes into the automatic comment of one answer cell (the first in the
  notebook), where formgrader shows it;
- a missing notebook writes nothing: formgrader lists it as not submitted;
- each graded notebook, as nbgrader's autograde leaves it, goes into the course folder's
  ``autograded/STUDENT/ASSIGNMENT/`` with the files nbgrader's exchange keeps beside it (the hand-in
  time and the submission's secret, ``EXCHANGE_FILES``), where formgrader opens it and ``nbgrader
  generate_feedback`` and ``release_feedback`` read it: no stock ``autograde`` is needed, and a
  notebook that came from a zip, never through the exchange, gets them too;
- each answer cell whose function a failed test uses gets that test's loss in its automatic comment,
  with the catalogued misconception the student's code reproduced, where one was named;
- a due date, an extension, the hand-in time and a late penalty go where nbgrader keeps them (the
  hand-in time only for a notebook the course collected into ``submitted/``: formgrader compares the two).

Once a person has graded in formgrader, the gradebook is the truth: ``read_gradebook`` reads each
submission back as nbgrader scores it (manual scores over autograded ones, extra credit, the late
penalty, comments), and ``with_gradebook_grades`` gives the grade rows the scores a person left, so the
LMS file says what the student's feedback says.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import warnings
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from course_utils.notebook_cells import assignment_notebook, cells_tested_by, nbgrader_meta

from ..course import list_assignments, scratch_course
from ..settings import SOLUTIONS_DIR, put_environment_on_path
from .deadlines import TIMESTAMP_FILE
from .models import GradebookExport, GradeRow, Kind, SubmissionResult, TestRow

if TYPE_CHECKING:
    from nbgrader.api import Comment, Gradebook


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
    cell_order = {name: _cell_order(solutions_dir, name) for name in names}
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
            collected = course_dir is None or (course_dir / "submitted" / row.student_id / row.assignment).is_dir()
            _write_submission(gradebook, row, scores, f"Autograder: {row.status}", comments, cell_order[row.assignment], collected)
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


def _cell_order(solutions_dir: Path, assignment: str) -> list[str]:
    """The grade ids of the assignment's nbgrader cells, in notebook order (the gradebook keeps no position)."""
    notebook = json.loads(assignment_notebook(solutions_dir, assignment).read_text(encoding="utf-8"))
    return [str(nbgrader_meta(cell)["grade_id"]) for cell in notebook["cells"] if nbgrader_meta(cell).get("grade_id")]


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


# What nbgrader's collect leaves beside a notebook and its later steps read from autograded/ (generate_feedback copies
# them into feedback/, where release_feedback opens both for every student): the hand-in time, and the secret
# release_feedback names the student's feedback by.
SECRET_FILE = "submission_secret.txt"
EXCHANGE_FILES = (TIMESTAMP_FILE, SECRET_FILE)
MAX_EXCHANGE_FILE_BYTES = 4096
# nbgrader's own timestamp format (Exchange.timestamp_format), always in UTC here.
NBGRADER_TIMESTAMP = "%Y-%m-%d %H:%M:%S.%f UTC"


def _place_autograded(course_dir: Path, row: GradeRow, notebook: Path) -> None:
    """The graded notebook where nbgrader's formgrader and generate_feedback look for it, with both of
    ``EXCHANGE_FILES`` beside it for every student, whichever source the notebook came from."""
    folder = course_dir / "autograded" / row.student_id / row.assignment
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(notebook, folder / f"{row.assignment}.ipynb")
    collected = course_dir / "submitted" / row.student_id / row.assignment
    handed_in = row.lateness.submitted_at if row.lateness else None
    # The hand-in time grading read (the exchange's, or a zip entry's), else the exchange's file; with neither (a
    # plain folder), the time it was graded: release_feedback only logs it, and the gradebook keeps no time for it.
    stamp = handed_in.astimezone(timezone.utc).strftime(NBGRADER_TIMESTAMP) if handed_in else _exchange_file(collected, TIMESTAMP_FILE)
    if stamp or not _exchange_file(folder, TIMESTAMP_FILE):
        (folder / TIMESTAMP_FILE).write_text(stamp or datetime.now(timezone.utc).strftime(NBGRADER_TIMESTAMP), encoding="utf-8")
    # The secret nbgrader's submit made, so the student's fetch_feedback finds the page. A notebook that never went
    # through the exchange (an LMS zip) gets one made as submit makes it, kept across exports: release_feedback
    # needs one for every student, and without it stops at the first who lacks it.
    secret = _exchange_file(collected, SECRET_FILE) or _exchange_file(folder, SECRET_FILE) or secrets.token_hex(64)
    (folder / SECRET_FILE).write_text(secret, encoding="utf-8")


def _exchange_file(folder: Path, name: str) -> str:
    """The text of one of ``EXCHANGE_FILES`` in ``folder``, as written (nbgrader hashes the secret byte for byte);
    '' when it is missing, a link, blank or oversized."""
    path = folder / name
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_EXCHANGE_FILE_BYTES:
        return ""
    text = path.read_text(encoding="utf-8", errors="replace")
    return text if text.strip() else ""


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


def _write_submission(
    gradebook: Gradebook,
    row: GradeRow,
    scores: dict[str, float],
    status: str,
    comments: dict[str, str],
    order: list[str],
    collected: bool = True,
) -> None:
    """One pair's scores, comments, times and penalty; ``collected``: the course holds its ``submitted/`` folder."""
    from nbgrader.api import MissingEntry

    gradebook.update_or_create_student(row.student_id)
    try:
        submission = gradebook.find_submission(row.assignment, row.student_id)
    except MissingEntry:
        submission = gradebook.add_submission(row.assignment, row.student_id)
    if row.lateness is not None:
        # formgrader counts a submission as autograded only where the gradebook's time is that of the course's
        # submitted/ folder (none where there is no folder): a notebook from a zip keeps its hand-in time in
        # grades.csv and in autograded/'s timestamp.txt, or formgrader would list its student as not submitted.
        handed_in = row.lateness.submitted_at if collected else None
        submission.timestamp = handed_in.astimezone(timezone.utc).replace(tzinfo=None) if handed_in else None
        assignment_due = submission.assignment.duedate
        if row.lateness.extended and row.lateness.due is not None and assignment_due is not None:
            submission.extension = row.lateness.due.astimezone(timezone.utc).replace(tzinfo=None) - assignment_due
    for test, score in scores.items():
        grade = gradebook.find_grade(test, row.assignment, row.assignment, row.student_id)
        grade.auto_score = score
        grade.needs_manual_grade = False
    notebook = gradebook.find_submission_notebook(row.assignment, row.assignment, row.student_id)
    notebook.late_submission_penalty = row.lateness.penalty if row.lateness and row.lateness.penalty else None

    # The row's status on the first answer cell of the notebook; what each failed test lost on the cells it uses.
    def place(comment: Comment) -> tuple[int, str]:
        return (order.index(comment.cell.name) if comment.cell.name in order else len(order), comment.cell.name)

    for position, comment in enumerate(sorted(notebook.comments, key=place)):
        own = comments.get(comment.cell.name, "")
        text = "\n\n".join(filter(None, [status if position == 0 else "", own]))
        comment.auto_comment = "\n\n".join(plain_markdown(part) for part in text.split("\n\n")) or None
    gradebook.db.commit()


@dataclass(frozen=True)
class CellGrade:
    """One graded cell of a submission as nbgrader's gradebook holds it."""

    cell: str  # the cell's grade id
    max_score: float
    auto_score: float | None
    manual_score: float | None = None  # a person's score, which nbgrader puts over the autograded one
    extra_credit: float | None = None

    @property
    def score(self) -> float:
        """nbgrader's score of the cell (``Grade.score``): the manual score, else the autograded one, plus extra credit."""
        given = self.manual_score if self.manual_score is not None else self.auto_score
        return (given or 0.0) + (self.extra_credit or 0.0)

    @property
    def by_person(self) -> bool:
        return self.manual_score is not None or bool(self.extra_credit)


@dataclass(frozen=True)
class CellComment:
    """A comment on one answer cell: the autograder's and a person's (nbgrader shows the person's over it)."""

    cell: str
    auto: str | None = None
    manual: str | None = None

    @property
    def shown(self) -> str:
        """What formgrader and the feedback show (``Comment.comment``)."""
        return self.manual if self.manual is not None else self.auto or ""


@dataclass(frozen=True)
class GradebookGrade:
    """One (student, assignment) submission as nbgrader's gradebook holds it, after any grading by a person."""

    student_id: str
    assignment: str
    cells: tuple[CellGrade, ...]  # in the gradebook's order
    comments: tuple[CellComment, ...] = ()
    late_penalty: float = 0.0  # in points, as grade wrote it (nbgrader keeps it per notebook)

    @property
    def score(self) -> float:
        """What the student's feedback says (nbgrader's GetGrades): the cells' scores less the late penalty."""
        return round(sum(c.score for c in self.cells) - self.late_penalty, 6)

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.cells)

    @property
    def by_person(self) -> bool:
        """A person graded it: a manual score, extra credit or a comment of their own."""
        return any(c.by_person for c in self.cells) or any(c.manual is not None for c in self.comments)


def read_gradebook(url: str) -> dict[tuple[str, str], GradebookGrade]:
    """Every submission in the nbgrader gradebook at ``url`` (an SQLAlchemy URL, as ``--gradebook`` takes it), by
    (student, assignment), with its scores and comments as formgrader left them.

    Raises:
        ValueError: ``url`` is no SQLAlchemy URL, or names an SQLite file that does not exist (nbgrader would
            make an empty gradebook there, and every manual grade would be missed without a word).
    """
    from nbgrader.api import Gradebook
    from sqlalchemy.engine import make_url

    url = check_gradebook_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") and not Path(parsed.database).is_file():
        raise ValueError(f"no nbgrader gradebook at {parsed.database} (from {url!r})")
    put_environment_on_path()
    found: dict[tuple[str, str], GradebookGrade] = {}
    with Gradebook(url) as gradebook:
        for assignment in gradebook.assignments:
            for submission in assignment.submissions:
                cells: list[CellGrade] = []
                comments: list[CellComment] = []
                penalty = 0.0
                for notebook in submission.notebooks:
                    penalty += notebook.late_submission_penalty or 0.0
                    cells += [CellGrade(g.name, g.max_score, g.auto_score, g.manual_score, g.extra_credit) for g in notebook.grades]
                    comments += [CellComment(c.name, c.auto_comment, c.manual_comment) for c in notebook.comments]
                pair = (submission.student.id, assignment.name)
                found[pair] = GradebookGrade(*pair, tuple(cells), tuple(comments), penalty)
    return found


GRADED_BY_PERSON = "graded by a person in nbgrader's gradebook"


def with_gradebook_grades(rows: list[GradeRow], gradebook: dict[tuple[str, str], GradebookGrade]) -> list[GradeRow]:
    """``rows`` with the score of each pair a person graded in ``gradebook`` (``read_gradebook``): what its feedback
    says, after the late penalty. Its notes say what the person changed; a pair no person graded is left as it is."""
    return [_as_graded_by_person(row, gradebook.get((row.student_id, row.assignment))) for row in rows]


def _as_graded_by_person(row: GradeRow, graded: GradebookGrade | None) -> GradeRow:
    if graded is None or not graded.by_person:
        return row
    parts = [_cell_change(c) for c in graded.cells if c.by_person and c.score != (c.auto_score or 0.0)]
    commented = [c.cell for c in graded.comments if c.manual is not None]
    parts += [f"a comment on {', '.join(commented)}"] if commented else []
    after = f" after the late penalty of {graded.late_penalty:g}" if graded.late_penalty else ""
    note = f"{GRADED_BY_PERSON}: {'; '.join(parts) or 'no score changed'}; {graded.score:g} points{after}"
    return replace(row, score=graded.score, outcome=replace(row.outcome, notes=(*row.outcome.notes, note)), graded_by_person=True)


def _cell_change(cell: CellGrade) -> str:
    """``test_x 0.5 of 2 (autograded 0)``, with ``+ 1 extra credit`` where a person gave some."""
    given = cell.manual_score if cell.manual_score is not None else cell.auto_score or 0.0
    extra = f" + {cell.extra_credit:g} extra credit" if cell.extra_credit else ""
    return f"{cell.cell} {given:g} of {cell.max_score:g}{extra} (autograded {cell.auto_score or 0.0:g})"
