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
import multiprocessing
import os
import re
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from course_utils.reference import is_test_cell, nbgrader_meta

from .course import NbgraderError, ScratchCourse, failure_reason, list_assignments, scratch_course
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

    def row_of(self, student_id: str, assignment: str) -> GradeRow:
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


# nbgrader treats student ids as path globs and strips spaces around them: keep ids plain.
SAFE_STUDENT_ID = re.compile(r"^[A-Za-z0-9@._-]+( [A-Za-z0-9@._-]+)*$")

# Student code that reaches for the instructor's solutions, which the grading kernel can see.
SOLUTION_ACCESS = re.compile(r"load_solution|COURSE_SOLUTIONS_DIR|course_utils\.reference|course_utils import reference")


def find_students(submissions: Path) -> list[str]:
    """One student per sub-folder of ``submissions`` (hidden folders skipped), sorted."""
    students = sorted(p.name for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise ValueError(f"no student folders in {submissions}: it must hold one sub-folder per student")
    return students


def submitted_assignments(submissions: Path, students: Iterable[str], known: list[str]) -> list[str]:
    """The known assignments that some student handed in, also under a mangled name ('Copy of …')."""
    stems = [p.stem for s in students for p in (submissions / s).glob("*.ipynb")]
    return [a for a in known if any(a in stem for stem in stems)]


def read_submission(path: Path, spec: AssignmentSpec) -> None:
    """Raise SubmissionProblem unless ``path`` is a notebook that nbgrader can grade."""
    import nbformat

    if not path.is_file():
        near = sorted(p.name for p in path.parent.glob("*.ipynb") if spec.name in p.stem)
        hint = f" (found {', '.join(near)}; rename it to {path.name})" if near else ""
        raise SubmissionProblem(f"missing: no {path.name}{hint}")
    try:
        # No strict schema validation: nbgrader's own sanitising step copes with stray output keys.
        notebook = nbformat.read(path, as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is the student's file, not us
        raise SubmissionProblem(f"unreadable: not a valid notebook ({type(error).__name__}: {str(error)[:200]})") from None
    if not notebook.get("cells"):
        raise SubmissionProblem("unreadable: the notebook has no cells")
    graded_ids = {nbgrader_meta(c).get("grade_id") for c in notebook.cells}
    if not graded_ids & set(spec.tests):
        raise SubmissionProblem(
            "no grading metadata: none of the notebook's cells carry nbgrader metadata "
            "(was it re-saved by an editor that strips cell metadata?)"
        )
    for cell in notebook.cells:
        if cell.get("cell_type") == "code" and not nbgrader_meta(cell).get("grade") and SOLUTION_ACCESS.search(cell.get("source", "")):
            raise SubmissionProblem(
                "rejected: the notebook's own code reaches for the instructor's solutions "
                "(load_solution / COURSE_SOLUTIONS_DIR); review it by hand"
            )


def grade(
    submissions: Path,
    out: Path,
    *,
    assignments: list[str] | None = None,
    solutions_dir: Path = SOLUTIONS_DIR,
    feedback: bool = True,
    progress: bool = True,
    jobs: int = 1,
) -> GradingReport:
    """Grade every student folder in ``submissions``; write CSVs and feedback under ``out``.

    ``jobs`` > 1 grades in that many processes, each with its own scratch course; the
    scores and the order of the rows are the same as with one. The workers are spawned, so
    a script that calls this with ``jobs`` > 1 needs the ``if __name__ == "__main__":`` guard.
    """
    submissions, out = submissions.resolve(), out.resolve()
    if not submissions.is_dir():
        raise ValueError(f"submissions folder not found: {submissions}")
    if out == submissions or submissions in out.parents or out in submissions.parents:
        raise ValueError(f"--out ({out}) and the submissions folder ({submissions}) must not contain each other")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    if not solutions_dir.is_dir():
        raise ValueError(f"no solutions folder at {solutions_dir}: run the autograder from a checkout of the course repository")
    known = list_assignments(solutions_dir)
    unknown = sorted(set(assignments or []) - set(known))
    if unknown:
        raise ValueError(f"unknown assignment(s) {unknown}; the course has {known}")
    students = find_students(submissions)
    names = assignments or submitted_assignments(submissions, students, known) or known
    specs = {name: AssignmentSpec.load(solutions_dir, name) for name in names}
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / FEEDBACK_DIR, ignore_errors=True)  # feedback from an earlier run would go stale

    pairs = [(s, n) for s in students for n in names]
    batch = GradingBatch(solutions_dir, submissions, specs, out / FEEDBACK_DIR if feedback else None)
    report = GradingReport()
    for part in _run_batches(batch, pairs, jobs=jobs, progress=progress):
        report.grades += part.grades
        report.tests += part.tests
    # The same order whatever the number of workers: students, then assignments in course order.
    order = {pair: i for i, pair in enumerate(pairs)}
    report.grades.sort(key=lambda r: order[(r.student_id, r.assignment)])
    report.tests.sort(key=lambda r: (order[(r.student_id, r.assignment)], list(specs[r.assignment].tests).index(r.test)))
    write_csvs(report, out)
    return report


@dataclass(frozen=True)
class GradingBatch:
    """What a worker needs to grade some (student, assignment) pairs on its own."""

    solutions_dir: Path
    submissions: Path
    specs: dict[str, AssignmentSpec]
    feedback_dir: Path | None

    def __call__(self, pairs: list[tuple[str, str]], on_graded: Callable[[], None] | None = None) -> GradingReport:
        """Grade ``pairs`` in a private scratch course: nbgrader's SQLite gradebook takes one writer."""
        report = GradingReport()
        with scratch_course(self.solutions_dir) as course:
            api = course.api()
            for name in dict.fromkeys(n for _, n in pairs):
                course.check(api.generate_assignment(name, force=True, create=True), f"generate_assignment {name}")
            for student, name in pairs:
                _grade_one(course, api, self.submissions, student, self.specs[name], report)
                if on_graded:
                    on_graded()
            if self.feedback_dir is not None:
                _write_feedback(course, api, report, self.feedback_dir)  # catches its own failures: grades stand
        return report


def _run_batches(batch: GradingBatch, pairs: list[tuple[str, str]], *, jobs: int, progress: bool) -> Iterator[GradingReport]:
    """Grade in one process, or in ``jobs`` worker processes with a few pairs per task."""
    from tqdm import tqdm

    with tqdm(total=len(pairs), desc="grading", unit="notebook", file=sys.stderr, disable=None if progress else True) as bar:
        if jobs <= 1:
            yield batch(pairs, on_graded=lambda: bar.update(1))
            return
        size = max(1, len(pairs) // (jobs * 4))  # small tasks keep the bar moving and the workers busy
        tasks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(jobs, mp_context=context, initializer=_one_thread_per_kernel) as pool:
            futures = {pool.submit(batch, task): len(task) for task in tasks}
            for future in as_completed(futures):
                bar.update(futures[future])
                yield future.result()


def _one_thread_per_kernel() -> None:
    """In a worker: kernels inherit this, so N workers do not start N x cores torch threads."""
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"


def _grade_one(course: ScratchCourse, api: Any, submissions: Path, student: str, spec: AssignmentSpec, report: GradingReport) -> None:
    source = submissions / student / f"{spec.name}.ipynb"
    try:
        if not SAFE_STUDENT_ID.match(student):
            raise SubmissionProblem(
                f"invalid student folder name {student!r}: use letters, digits, '@', '.', '_', '-' and single inner spaces"
            )
        read_submission(source, spec)
        target = course.root / "submitted" / student / spec.name / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        result = api.autograde(spec.name, student, force=True, create=True)
        if not result.get("success"):
            raise SubmissionProblem(f"autograde failed: {failure_reason(result)}")
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


def _write_feedback(course: ScratchCourse, api: Any, report: GradingReport, feedback_dir: Path) -> None:
    for row in report.grades:
        if not row.status.startswith("graded"):
            continue
        try:
            course.check(api.generate_feedback(row.assignment, row.student_id), "generate_feedback")
            for html in (course.root / "feedback" / row.student_id / row.assignment).glob("*.html"):
                target = feedback_dir / row.student_id / html.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(html, target)
        except (NbgraderError, OSError):
            continue  # the grade stands; feedback is a courtesy


def write_csvs(report: GradingReport, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for filename, rows, row_type in ((GRADES_CSV, report.grades, GradeRow), (TESTS_CSV, report.tests, TestRow)):
        with (out / filename).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(row_type.__dataclass_fields__))
            writer.writeheader()
            writer.writerows(asdict(r) for r in rows)


def format_table(report: GradingReport, status_width: int = 100) -> str:
    """The grades as a fixed-width table for the terminal (long statuses cut at ``status_width``)."""
    header = ("student", "assignment", "score", "status")
    rows = [(r.student_id, r.assignment, f"{r.score:g} / {r.max_score:g}", r.status) for r in report.grades]
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(3)]

    def render(line: tuple[str, ...]) -> str:
        status = line[3] if len(line[3]) <= status_width else line[3][: status_width - 3] + "..."
        return "  ".join([*(cell.ljust(w) for cell, w in zip(line[:3], widths)), status])

    lines = [render(header), "  ".join("-" * w for w in (*widths, min(status_width, max(len(r[3]) for r in (header, *rows)))))]
    return "\n".join(lines + [render(row) for row in rows])
