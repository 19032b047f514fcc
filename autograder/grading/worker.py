"""Grading one submission at a time, in a private scratch course: what every worker runs.

A worker gets the solutions and the submissions as bytes and gives back rows and feedback
as bytes, so it needs no file system in common with the instructor's machine: it runs the
same in-process, in a local process pool or on a Dask worker elsewhere.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing.util
import os
import re
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import nbformat
from nbformat.notebooknode import NotebookNode

from course_utils.reference import is_solution_cell, is_test_cell, nbgrader_meta

from ..course import NbgraderError, ScratchCourse, failure_reason, scratch_course
from .intake import defined_names
from .admission import repair
from ..settings import CELL_TIMEOUT_S, MAX_OUTPUT_CHARS, MEMORY_LIMIT_BYTES


@dataclass(frozen=True)
class GradeRow:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str


@dataclass(frozen=True)
class TestRow:
    __test__ = False  # a row of tests.csv, not a pytest class
    student_id: str
    assignment: str
    test: str
    score: float
    max_score: float


@dataclass(frozen=True)
class AssignmentSpec:
    """What the source notebook says an assignment is worth, test by test."""

    name: str
    tests: dict[str, float]  # grade_id -> points, in notebook order
    functions: frozenset[str] = frozenset()  # what its solution cells define

    @property
    def max_score(self) -> float:
        return float(sum(self.tests.values()))

    @classmethod
    def load(cls, solutions_dir: Path, name: str) -> "AssignmentSpec":
        notebook = json.loads((solutions_dir / name / f"{name}.ipynb").read_text(encoding="utf-8"))
        cells = notebook["cells"]
        tests = {nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c).get("points", 0)) for c in cells if is_test_cell(c)}
        functions = set().union(*(defined_names("".join(c["source"])) for c in cells if is_solution_cell(c)))
        return cls(name=name, tests=tests, functions=frozenset(functions))


@dataclass(frozen=True)
class GradingOptions:
    cell_timeout: int = CELL_TIMEOUT_S
    memory_limit: int | None = MEMORY_LIMIT_BYTES  # bytes of data per notebook kernel
    feedback: bool = True


@dataclass(frozen=True)
class Submission:
    """One (student, assignment) pair to grade: the notebook's bytes, or None when nothing was handed in."""

    student: str
    assignment: str
    content: bytes | None
    received_as: str | None = None
    notes: tuple[str, ...] = ()  # how intake placed it (renamed, chosen among copies)


@dataclass
class Graded:
    submission: Submission
    grade: GradeRow
    tests: list[TestRow]
    feedback: dict[str, bytes] = field(default_factory=dict)  # file name -> HTML


class SubmissionProblem(Exception):
    """A submission that cannot be graded; the message becomes its status."""


# nbgrader treats student ids as path globs and strips spaces around them: keep ids plain.
SAFE_STUDENT_ID = re.compile(r"^[A-Za-z0-9@._-]+( [A-Za-z0-9@._-]+)*$")

# Student code that reaches for the instructor's solutions, which the grading kernel can see.
SOLUTION_ACCESS = re.compile(r"load_solution|COURSE_SOLUTIONS_DIR|course_utils\.reference|course_utils import reference")

# Student code that replaces what the tests compare with, so that every comparison passes.
CHECK_NAMES = r"(?:allclose|isclose|equal|assert_close|testing|check_\w+|call)"
TAMPERING = re.compile(
    rf"(?:\b(?:torch|np|numpy|checks|course_utils)(?:\.\w+)*\.{CHECK_NAMES}\s*=(?!=))"
    # defining or rebinding a checker at top level (calling one, as the self-check cell does, is fine)
    rf"|(?:^\s*(?:def|class)\s+(?:check_\w+|assert_close)\s*[(:])"
    rf"|(?:^\s*(?:check_\w+|assert_close)\s*=(?!=))"
    rf"|(?:\bsetattr\s*\(\s*(?:torch|np|numpy|checks|course_utils)\b)",
    re.MULTILINE,
)


def snapshot(solutions_dir: Path, names: list[str]) -> dict[str, bytes]:
    """The source notebooks (and any files beside them) of ``names``, as bytes by relative path."""
    files = {}
    for name in names:
        for path in sorted((solutions_dir / name).rglob("*")):
            if path.is_file() and ".ipynb_checkpoints" not in path.parts and "__pycache__" not in path.parts:
                files[path.relative_to(solutions_dir).as_posix()] = path.read_bytes()
    return files


@contextmanager
def materialized(files: dict[str, bytes]) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="attention-solutions-") as folder:
        for relative, content in files.items():
            target = Path(folder) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        yield Path(folder)


@dataclass(frozen=True)
class GradingBatch:
    """A picklable grading task: the solutions and the options; called on some submissions.

    With a ``run_id`` (set for pool and cluster tasks), a worker process keeps its scratch
    course between the tasks of one run, so each assignment is generated once per worker
    rather than once per task; without one, the course lives for this call only.
    """

    solutions: dict[str, bytes]
    options: GradingOptions
    run_id: str | None = None

    def __call__(self, submissions: list[Submission], on_graded: Callable[[], None] | None = None) -> list[Graded]:
        """Grade in a private scratch course: nbgrader's SQLite gradebook takes one writer."""
        _one_thread_per_kernel()
        if self.run_id is None:
            with _course_for(self) as prepared:
                return self._grade(prepared, submissions, on_graded)
        return self._grade(_warm_course(self), submissions, on_graded)

    def _grade(self, prepared: "PreparedCourse", submissions: list[Submission], on_graded: Callable[[], None] | None) -> list[Graded]:
        course, api = prepared.course, prepared.api
        for name in dict.fromkeys(s.assignment for s in submissions):
            if name not in prepared.specs:
                course.check(api.generate_assignment(name, force=True, create=True), f"generate_assignment {name}")
                prepared.specs[name] = AssignmentSpec.load(course.solutions_dir, name)
        results = []
        for submission in submissions:
            results.append(grade_one(course, api, submission, prepared.specs[submission.assignment], self.options))
            if on_graded:
                on_graded()
        if self.options.feedback:
            for result in results:
                result.feedback = _feedback(course, api, result.grade)
        return results


@dataclass
class PreparedCourse:
    course: ScratchCourse
    api: Any
    specs: dict[str, AssignmentSpec] = field(default_factory=dict)  # assignments generated in it so far


@contextmanager
def _course_for(batch: GradingBatch) -> Iterator[PreparedCourse]:
    with materialized(batch.solutions) as solutions_dir, scratch_course(
        solutions_dir, cell_timeout=batch.options.cell_timeout, memory_limit=batch.options.memory_limit
    ) as course:
        yield PreparedCourse(course, course.api())


_warm: dict[str, tuple[ExitStack, PreparedCourse]] = {}  # at most one: this worker's course for the current run


def _warm_course(batch: GradingBatch) -> PreparedCourse:
    """This worker's course for ``batch.run_id``; a course from an earlier run is removed first."""
    assert batch.run_id is not None
    if batch.run_id not in _warm:
        close_warm_courses()
        stack = ExitStack()
        _warm[batch.run_id] = (stack, stack.enter_context(_course_for(batch)))
    return _warm[batch.run_id][1]


def close_warm_courses() -> None:
    while _warm:
        _warm.popitem()[1][0].close()


# Pool workers leave through multiprocessing, which skips atexit but runs its own finalizers.
atexit.register(close_warm_courses)
multiprocessing.util.Finalize(None, close_warm_courses, exitpriority=10)


def _one_thread_per_kernel() -> None:
    """Kernels inherit this, so N workers do not start N x cores torch threads each."""
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"


def grade_one(course: ScratchCourse, api: Any, submission: Submission, spec: AssignmentSpec, options: GradingOptions) -> Graded:
    """Grade one submission; any problem becomes a zero row whose status says why."""
    student, name = submission.student, spec.name
    notes = list(submission.notes)
    try:
        released = nbformat.read(course.root / "release" / name / f"{name}.ipynb", as_version=4)
        notebook = read_submission(submission, spec)
        notebook, repairs = repair(notebook, released)
        notes += repairs.notes()
        if not {nbgrader_meta(c).get("grade_id") for c in notebook.cells} & (set(spec.tests) | spec.functions):
            raise SubmissionProblem(
                "no grading metadata: none of the notebook's cells carry nbgrader metadata, and none could be "
                "matched to the released notebook"
            )
        check_integrity(notebook)
        target = course.root / "submitted" / student / name / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, target)
        result = api.autograde(name, student, force=True, create=True)
        if not result.get("success"):
            raise SubmissionProblem(f"autograde failed: {failure_reason(result)}")
        scores = _scores_from_gradebook(course, student, spec)
        notes += diagnose(course.root / "autograded" / student / name / f"{name}.ipynb", options)
    except Exception as problem:  # noqa: BLE001 - one bad submission must not stop the class
        status = str(problem) if isinstance(problem, SubmissionProblem) else f"grading error: {type(problem).__name__}: {problem}"
        return Graded(
            submission,
            GradeRow(student, name, 0.0, spec.max_score, "; ".join([status, *notes])),
            [TestRow(student, name, test, 0.0, points) for test, points in spec.tests.items()],
        )
    status = "; ".join([_graded_status(spec, scores), *notes])
    return Graded(
        submission,
        GradeRow(student, name, sum(scores.values()), spec.max_score, status),
        [TestRow(student, name, test, scores.get(test, 0.0), points) for test, points in spec.tests.items()],
    )


def read_submission(submission: Submission, spec: AssignmentSpec) -> NotebookNode:
    """The submitted notebook, or SubmissionProblem saying why it cannot be graded."""
    if not SAFE_STUDENT_ID.match(submission.student):
        raise SubmissionProblem(
            f"invalid student name {submission.student!r}: use letters, digits, '@', '.', '_', '-' and single inner spaces"
        )
    if submission.content is None:
        raise SubmissionProblem(f"missing: no {spec.name}.ipynb, nor a file that could be matched to it")
    try:
        # No strict schema validation: nbgrader's own sanitising step copes with stray output keys.
        notebook = nbformat.reads(submission.content.decode("utf-8"), as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is the student's file, not ours
        raise SubmissionProblem(f"unreadable: not a valid notebook ({type(error).__name__}: {str(error)[:200]})") from None
    if not isinstance(notebook.get("cells"), list):
        raise SubmissionProblem("unreadable: valid JSON but not a notebook (no list of cells)")
    if not notebook.cells:
        raise SubmissionProblem("unreadable: the notebook has no cells")
    return notebook


def check_integrity(notebook: NotebookNode) -> None:
    """Refuse code that reads the solutions or replaces the checks: tests could not be trusted."""
    for index, cell in enumerate(notebook.cells):
        if cell.get("cell_type") != "code" or is_test_cell(cell):
            continue  # test cells are the instructor's: nbgrader restores them from the source
        where = nbgrader_meta(cell).get("grade_id") or f"cell {index + 1}"
        if SOLUTION_ACCESS.search(cell.source):
            raise SubmissionProblem(
                f"rejected: the notebook's own code reaches for the instructor's solutions ({where}: "
                "load_solution / COURSE_SOLUTIONS_DIR); review it by hand"
            )
        tampering = TAMPERING.search(cell.source)
        if tampering:
            raise SubmissionProblem(
                f"rejected: the notebook replaces a function the tests compare with ({where}: "
                f"{tampering.group(0).strip()!r}), so no test could be trusted; review it by hand"
            )


# What a failing cell's error says about why, for the status.
OUT_OF_MEMORY = re.compile(r"MemoryError|can't allocate memory|not enough memory|std::bad_alloc")


def diagnose(autograded: Path, options: GradingOptions) -> list[str]:
    """Notes on the student's own cells after grading: errors, time-outs, memory, cut output."""
    try:
        notebook = nbformat.read(autograded, as_version=4)
    except Exception:  # noqa: BLE001 - notes are a courtesy; the scores stand
        return []
    errors, unfinished, truncated = [], [], False
    for index, cell in enumerate(notebook.cells):
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            truncated |= output.get("output_type") == "stream" and "Output truncated" in output.get("text", "")
            if output.get("output_type") != "error" or is_test_cell(cell):
                continue
            where = nbgrader_meta(cell).get("grade_id") or f"cell {index + 1}"
            message = f"{output.get('ename')}: {output.get('evalue', '')}"
            if "NotImplementedError" in message:  # a stub left as released, not a bug in the student's code
                unfinished.append(where)
            elif output.get("ename") in {"KeyboardInterrupt", "CellTimeoutError"}:
                errors.append(f"{where} ran past the {options.cell_timeout} s limit and was stopped")
            elif OUT_OF_MEMORY.search(message) and options.memory_limit:
                errors.append(f"{where} ran out of memory (limit {options.memory_limit / 2**30:g} GiB)")
            else:
                errors.append(f"{where} raised {message[:160]}")
    notes = [f"unfinished: {', '.join(unfinished)} stopped at a function that still raises NotImplementedError"] if unfinished else []
    if errors:
        notes.append(f"errors in your code: {'; '.join(errors)}")
    if truncated:
        notes.append(f"printed output was cut (at most {MAX_OUTPUT_CHARS} characters per cell are kept)")
    return notes


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


def _feedback(course: ScratchCourse, api: Any, row: GradeRow) -> dict[str, bytes]:
    if not row.status.startswith("graded"):
        return {}
    try:
        course.check(api.generate_feedback(row.assignment, row.student_id), "generate_feedback")
        return {html.name: html.read_bytes() for html in (course.root / "feedback" / row.student_id / row.assignment).glob("*.html")}
    except (NbgraderError, OSError):
        return {}  # the grade stands; feedback is a courtesy
