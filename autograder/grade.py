"""``grade``: autograde a folder of submissions and write grades, per-test scores and feedback.

SUBMISSIONS holds one folder per student with that student's notebooks, named as
released (``01_soft_dictionary_lookup.ipynb``). Everything runs in a scratch nbgrader
course; SUBMISSIONS and the repository are only read. Every (student, assignment)
pair gets a row in ``grades.csv``, with a status that says why when it could not be
graded, and the run goes on.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from course_utils.reference import is_test_cell, nbgrader_meta

from .course import NbgraderError, ScratchCourse, list_assignments, scratch_course, summarize_log
from .settings import SOLUTIONS_DIR

GRADES_CSV = "grades.csv"
TESTS_CSV = "tests.csv"
FEEDBACK_DIR = "feedback"


@dataclass(frozen=True)
class GradeRow:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str


@dataclass(frozen=True)
class TestRow:
    student_id: str
    assignment: str
    test: str
    score: float
    max_score: float


@dataclass
class GradingReport:
    grades: list[GradeRow] = field(default_factory=list)
    tests: list[TestRow] = field(default_factory=list)

    def score_of(self, student_id: str, assignment: str) -> GradeRow:
        return next(r for r in self.grades if r.student_id == student_id and r.assignment == assignment)

    def tests_of(self, student_id: str, assignment: str) -> dict[str, float]:
        return {r.test: r.score for r in self.tests if r.student_id == student_id and r.assignment == assignment}


class SubmissionProblem(Exception):
    """A submission that cannot be graded; the message becomes its status."""


@dataclass(frozen=True)
class AssignmentSpec:
    """What the source notebook says an assignment is worth, test by test."""

    name: str
    tests: dict[str, float]  # grade_id -> points, in notebook order

    @property
    def max_score(self) -> float:
        return float(sum(self.tests.values()))

    @classmethod
    def load(cls, solutions_dir: Path, name: str) -> "AssignmentSpec":
        notebook = json.loads((solutions_dir / name / f"{name}.ipynb").read_text(encoding="utf-8"))
        tests = {nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c).get("points", 0)) for c in notebook["cells"] if is_test_cell(c)}
        return cls(name=name, tests=tests)


def find_students(submissions: Path) -> list[str]:
    """One student per sub-folder of ``submissions`` (hidden folders skipped), sorted."""
    return sorted(p.name for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))


def submitted_assignments(submissions: Path, students: Iterable[str], known: list[str]) -> list[str]:
    """The known assignments that at least one student handed in."""
    handed_in = {p.stem for s in students for p in (submissions / s).glob("*.ipynb")}
    return [a for a in known if a in handed_in]


def read_submission(path: Path, spec: AssignmentSpec) -> None:
    """Raise SubmissionProblem unless ``path`` is a notebook that nbgrader can grade."""
    import nbformat

    if not path.is_file():
        others = sorted(p.name for p in path.parent.glob("*.ipynb"))
        hint = f" (found {', '.join(others)}; rename it to {path.name})" if others else ""
        raise SubmissionProblem(f"missing: no {path.name}{hint}")
    try:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # noqa: BLE001 - any parse failure is the student's file, not us
        raise SubmissionProblem(f"unreadable: not a valid notebook ({type(error).__name__}: {str(error)[:200]})") from None
    if not notebook.cells:
        raise SubmissionProblem("unreadable: the notebook has no cells")
    graded_ids = {nbgrader_meta(c).get("grade_id") for c in notebook.cells}
    if not graded_ids & set(spec.tests):
        raise SubmissionProblem(
            "no grading metadata: none of the notebook's cells carry nbgrader metadata "
            "(was it re-saved by an editor that strips cell metadata?)"
        )


def grade(
    submissions: Path,
    out: Path,
    *,
    assignments: list[str] | None = None,
    solutions_dir: Path = SOLUTIONS_DIR,
    feedback: bool = True,
    progress: bool = True,
) -> GradingReport:
    """Grade every student folder in ``submissions``; write CSVs and feedback under ``out``."""
    submissions, out = submissions.resolve(), out.resolve()
    if not submissions.is_dir():
        raise ValueError(f"submissions folder not found: {submissions}")
    if out == submissions or submissions in out.parents:
        raise ValueError(f"--out must be outside the submissions folder ({submissions}); grading never writes there")
    known = list_assignments(solutions_dir)
    unknown = sorted(set(assignments or []) - set(known))
    if unknown:
        raise ValueError(f"unknown assignment(s) {unknown}; the course has {known}")
    students = find_students(submissions)
    names = assignments or submitted_assignments(submissions, students, known)
    specs = {name: AssignmentSpec.load(solutions_dir, name) for name in names}

    report = GradingReport()
    with scratch_course(solutions_dir) as course:
        api = course.api()
        for name in names:
            course.run(api.generate_assignment(name, force=True, create=True), f"generate_assignment {name}")
        jobs = [(s, n) for s in students for n in names]
        for student, name in _progress(jobs, enabled=progress):
            _grade_one(course, api, submissions, student, specs[name], report)
        if feedback:
            _write_feedback(course, api, report, out / FEEDBACK_DIR)
    write_csvs(report, out)
    return report


def _progress(jobs: list[tuple[str, str]], *, enabled: bool) -> Iterable[tuple[str, str]]:
    if not enabled:
        return jobs
    from tqdm import tqdm

    return tqdm(jobs, desc="grading", unit="notebook", file=sys.stderr, disable=None)


def _grade_one(course: ScratchCourse, api: object, submissions: Path, student: str, spec: AssignmentSpec, report: GradingReport) -> None:
    source = submissions / student / f"{spec.name}.ipynb"
    try:
        read_submission(source, spec)
        target = course.root / "submitted" / student / spec.name / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        result = api.autograde(spec.name, student, force=True, create=True)  # type: ignore[attr-defined]
        if not result.get("success"):
            raise SubmissionProblem(f"autograde failed: {summarize_log((result.get('log') or '') + (result.get('error') or ''))}")
        scores = _scores_from_gradebook(course, student, spec)
    except Exception as problem:  # noqa: BLE001 - one bad submission must not stop the class
        status = str(problem) if isinstance(problem, SubmissionProblem) else f"grading error: {type(problem).__name__}: {problem}"
        report.grades.append(GradeRow(student, spec.name, 0.0, spec.max_score, status))
        report.tests += [TestRow(student, spec.name, test, 0.0, points) for test, points in spec.tests.items()]
        return
    status = _graded_status(spec, scores)
    report.grades.append(GradeRow(student, spec.name, sum(scores.values()), spec.max_score, status))
    report.tests += [TestRow(student, spec.name, test, scores.get(test, 0.0), points) for test, points in spec.tests.items()]


def _graded_status(spec: AssignmentSpec, scores: dict[str, float]) -> str:
    failed = [test for test, points in spec.tests.items() if scores.get(test, 0.0) < points]
    if not failed:
        return "graded"
    if len(failed) == len(spec.tests):
        return "graded (no test passed)"
    return f"graded (lost points on: {', '.join(failed)})"


def _scores_from_gradebook(course: ScratchCourse, student: str, spec: AssignmentSpec) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.db_path}") as gradebook:
        notebook = gradebook.find_submission_notebook(spec.name, spec.name, student)
        return {g.name: float(g.score) for g in notebook.grades if g.name in spec.tests}


def _write_feedback(course: ScratchCourse, api: object, report: GradingReport, feedback_dir: Path) -> None:
    for row in report.grades:
        if not row.status.startswith("graded"):
            continue
        try:
            course.run(api.generate_feedback(row.assignment, row.student_id), "generate_feedback")  # type: ignore[attr-defined]
        except NbgraderError:
            continue  # the grade stands; feedback is a courtesy
        for html in (course.root / "feedback" / row.student_id / row.assignment).glob("*.html"):
            target = feedback_dir / row.student_id / html.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(html, target)


def write_csvs(report: GradingReport, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for filename, rows, row_type in ((GRADES_CSV, report.grades, GradeRow), (TESTS_CSV, report.tests, TestRow)):
        with (out / filename).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(row_type.__dataclass_fields__))
            writer.writeheader()
            writer.writerows(asdict(r) for r in rows)


def format_table(report: GradingReport) -> str:
    """The grades as a fixed-width table for the terminal."""
    header = ("student", "assignment", "score", "status")
    rows = [(r.student_id, r.assignment, f"{r.score:g} / {r.max_score:g}", r.status) for r in report.grades]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    widths[-1] = min(widths[-1], 100)
    lines = ["  ".join(str(x).ljust(w)[: max(w, 0)] if i < 3 else str(x) for i, (x, w) in enumerate(zip(line, widths))) for line in (header, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
