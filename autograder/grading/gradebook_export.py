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
- a missing notebook writes nothing: formgrader lists it as not submitted.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ..course import scratch_course
from ..settings import SOLUTIONS_DIR, put_environment_on_path
from .models import GradebookExport, GradeRow, Kind, TestRow

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


def export_to_gradebook(url: str, grades: list[GradeRow], tests: list[TestRow], solutions_dir: Path = SOLUTIONS_DIR) -> GradebookExport:
    """Write ``grades`` and ``tests`` into the nbgrader gradebook at ``url`` (an SQLAlchemy URL)."""
    from nbgrader.api import Gradebook

    put_environment_on_path()  # a new gradebook asks the alembic command for its schema version
    export = GradebookExport(url)
    names = list(dict.fromkeys(row.assignment for row in grades))
    with Gradebook(url) as gradebook:
        missing_assignments = [name for name in names if not _has_assignment(gradebook, name)]
    for name in missing_assignments:
        _add_assignment(url, name, solutions_dir)
        export.assignments_added.append(name)
    scores = {(t.student_id, t.assignment, t.test): t.score for t in tests}
    with Gradebook(url) as gradebook, warnings.catch_warnings():
        # nbgrader 0.9's add_submission trips SQLAlchemy 2's autoflush warnings; they are harmless.
        warnings.filterwarnings("ignore", message=r".*not in session.*")
        for row in grades:
            pair = (row.student_id, row.assignment)
            if row.outcome.kind is Kind.MISSING:
                export.missing.append(pair)
                continue
            row_scores = {test: scores.get((*pair, test), 0.0) for test in _tests_of(gradebook, row.assignment)}
            _write_submission(gradebook, row, row_scores, f"Autograder: {row.status}")
            (export.written if row.outcome.scored else export.not_graded).append(pair)
    return export


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


def _write_submission(gradebook: Gradebook, row: GradeRow, scores: dict[str, float], comment: str) -> None:
    from nbgrader.api import MissingEntry

    gradebook.update_or_create_student(row.student_id)
    try:
        gradebook.find_submission(row.assignment, row.student_id)
    except MissingEntry:
        gradebook.add_submission(row.assignment, row.student_id)
    for test, score in scores.items():
        grade = gradebook.find_grade(test, row.assignment, row.assignment, row.student_id)
        grade.auto_score = score
        grade.needs_manual_grade = False
    comments = gradebook.find_submission_notebook(row.assignment, row.assignment, row.student_id).comments
    if comments:
        first = min(comments, key=lambda c: c.cell.name)
        first.auto_comment = comment
    gradebook.db.commit()
