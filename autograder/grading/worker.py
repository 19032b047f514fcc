"""Grading one submission at a time, in a private scratch course: what every worker runs.

A worker gets the solutions and the submissions as bytes and gives back rows and feedback
as bytes, so it needs no file system in common with the instructor's machine: it runs the
same in-process, in a local process pool or on a Dask worker elsewhere.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import re
import socket
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import nbformat

from course_utils.notebook_cells import (
    assignment_notebook,
    is_test_cell,
    nbgrader_meta,
)

from ..course import NbgraderError, ScratchCourse, failure_reason, scratch_course
from ..settings import MAX_OUTPUT_CHARS, MAX_OUTPUTS_PER_CELL, MAX_RICH_OUTPUT_BYTES
from .admission import read_submission, repair, review_flags, sandbox_violations
from .models import (
    AssignmentSpec,
    Graded,
    GradeRow,
    GradingOptions,
    HealthCheckFailed,
    Kind,
    Outcome,
    Submission,
    SubmissionProblem,
    SubmissionResult,
    TestRow,
)
from .notebook_size import too_large
from .run_report import ReportInvalid, RunReport, read_run_report
from .sandbox import prewarm_runner
from .verdicts import Status


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
    gradebook: bytes | None = None  # course.empty_gradebook(), made once for every worker

    def __call__(
        self,
        submissions: list[Submission],
        on_graded: Callable[[], None] | None = None,
        end_check: bool = False,
        start_check: bool = True,
    ) -> list[Graded]:
        """Grade in a private scratch course: nbgrader's SQLite gradebook takes one writer.

        With ``start_check``, each assignment's known solution is graded before the first
        submission of it here, so that a broken grader stops the run early; with ``end_check``,
        every known solution is graded again afterwards (``check_health``).
        """
        _one_thread_per_kernel()
        if self.run_id is None:
            with _course_for(self) as prepared:
                results = self._grade(prepared, submissions, on_graded, start_check)
                if end_check:
                    self._check(prepared)
                return results
        return self._grade(_warm_course(self), submissions, on_graded, start_check)

    def check_health(self) -> str:
        """Grade every assignment's known solution in this worker's course; its id, or HealthCheckFailed."""
        _one_thread_per_kernel()
        self._check(_warm_course(self))
        return worker_id()

    def _check(self, prepared: "PreparedCourse") -> None:
        for spec in prepared.specs.values():
            _checked(health_check, prepared, spec, self.options)

    def _grade(
        self, prepared: "PreparedCourse", submissions: list[Submission], on_graded: Callable[[], None] | None, start_check: bool
    ) -> list[Graded]:
        course, api = prepared.course, prepared.api
        clock, setup = Clock(), {"worker start": prepared.start_seconds}
        prepared.start_seconds = 0.0  # counted once, with this worker's first batch
        for name in dict.fromkeys(s.assignment for s in submissions):
            if name not in prepared.specs:
                course.check(api.generate_assignment(name, force=True, create=True), f"generate_assignment {name}")
                prepared.specs[name] = AssignmentSpec.load(course.solutions_dir, name)
                if start_check:
                    _checked(health_check, prepared, prepared.specs[name], self.options)  # before any grade of it
        setup["assignment setup"] = clock.lap()
        results = []
        for submission in submissions:
            graded = grade_one(course, api, submission, prepared.specs[submission.assignment], self.options)
            graded.worker = worker_id()
            results.append(graded)
            if on_graded:
                on_graded()
        clock.lap()  # the submissions' own stages were timed by grade_one
        for result in results:
            if self.options.feedback:
                result.feedback = _feedback(course, api, result.result.grade)
                result.stages["feedback"] = clock.lap()
        if results:
            results[0].stages.update({stage: results[0].stages.get(stage, 0.0) + seconds for stage, seconds in setup.items()})
        return results


@dataclass
class PreparedCourse:
    course: ScratchCourse
    api: Any
    specs: dict[str, AssignmentSpec] = field(default_factory=dict)  # assignments generated in it so far
    start_seconds: float = 0.0  # making the course and warming the runner, not yet counted in a batch's stages


class Clock:
    """Seconds since the last lap."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        return seconds


@contextmanager
def _course_for(batch: GradingBatch) -> Iterator[PreparedCourse]:
    clock = Clock()
    prewarm_runner(batch.options.limits.sealed, batch.options.limits.memory_bytes)  # torch imports while nbgrader sets up
    with (
        materialized(batch.solutions) as solutions_dir,
        scratch_course(
            solutions_dir,
            limits=batch.options.limits,
            gradebook=batch.gradebook,
        ) as course,
    ):
        yield PreparedCourse(course, course.api(), start_seconds=clock.lap())


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


HEALTH_STUDENT = "grader-health-check"


def grade_one(course: ScratchCourse, api: Any, submission: Submission, spec: AssignmentSpec, options: GradingOptions) -> Graded:
    """Grade one submission; any problem becomes a zero row whose outcome says why."""
    student, name = submission.student, spec.name
    notes = list(submission.notes)
    clock, stages = Clock(), {}
    try:
        notebook = read_submission(submission, name)
        if (why := too_large(notebook)) is not None:  # before anything renders or repairs it
            raise SubmissionProblem(Kind.REFUSED, f"not graded: {why}")
        released = nbformat.read(assignment_notebook(course.root / "release", name), as_version=4)
        notebook, repairs = repair(notebook, released)
        notes += repairs.notes()
        if not {nbgrader_meta(c).get("grade_id") for c in notebook.cells} & (set(spec.tests) | spec.functions):
            raise SubmissionProblem(
                Kind.NO_METADATA,
                "none of the notebook's cells carry nbgrader metadata, and none could be matched to the released notebook",
            )
        flags = review_flags(notebook, released)
        target = assignment_notebook(course.root / "submitted" / student, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, target)
        stages["admission"] = clock.lap()
        result = api.autograde(name, student, force=True, create=True)
        autograde_seconds = clock.lap()
        if not result.get("success"):
            raise SubmissionProblem(Kind.AUTOGRADE_FAILED, failure_reason(result))
        scores = _scores_from_gradebook(course, student, spec)
        report = checked_run_report(course, student, name)
        stages["sealed run"], stages["verdicts"] = report.seconds, report.verdict_seconds
        stages["nbgrader"] = max(0.0, autograde_seconds - report.seconds - report.verdict_seconds)
        autograded = assignment_notebook(course.root / "autograded" / student, name)
        notes += diagnose(autograded, report, options)
        notes += _run_notes(report, options)
        stages["results"] = clock.lap()
    except Exception as problem:  # noqa: BLE001 - one bad submission must not stop the class
        if isinstance(problem, SubmissionProblem):
            return ungraded(submission, spec, Outcome(problem.kind, problem.reason, tuple(notes)))
        return ungraded(submission, spec, Outcome(Kind.GRADING_ERROR, f"{type(problem).__name__}: {problem}", tuple(notes)))
    violations = sandbox_violations(_all_outputs(report), report.leftover_processes)
    named = {v.test: v.misconceptions for v in report.verdicts}
    flags += [f"{v.test}: {line} (runtime evidence)" for v in report.verdicts for line in v.evidence]  # whatever the text says
    outcome = _graded_outcome(spec, scores, notes, flags, violations)
    tests = (TestRow(student, name, test, scores.get(test, 0.0), points, named.get(test, ())) for test, points in spec.tests.items())
    return Graded(
        submission,
        SubmissionResult(GradeRow(student, name, sum(scores.values()), spec.max_score, outcome), tuple(tests)),
        stages=stages,
        autograded=autograded.read_bytes(),
    )


def ungraded(submission: Submission, spec: AssignmentSpec, outcome: Outcome) -> Graded:
    """The row of a submission that could not be graded: zero on every test, and why."""
    student, name = submission.student, spec.name
    tests = (TestRow(student, name, test, 0.0, points) for test, points in spec.tests.items())
    return Graded(submission, SubmissionResult(GradeRow(student, name, 0.0, spec.max_score, outcome), tuple(tests)))


def not_handed_in(submission: Submission, spec: AssignmentSpec) -> Graded:
    """The row of a pair with no notebook: no course, worker or health check needed to write it."""
    try:
        read_submission(submission, spec.name)
    except SubmissionProblem as problem:
        return ungraded(submission, spec, Outcome(problem.kind, problem.reason, tuple(submission.notes)))
    raise ValueError(f"{submission.student}/{spec.name} was handed in: grade it")


def checked_run_report(course: ScratchCourse, student: str, name: str) -> RunReport:
    """The run's report, validated; one that does not validate, or a run that broke the protocol, grades nothing."""
    try:
        report = read_run_report(course.root / "sealed-reports" / student / f"{name}.json")
    except ReportInvalid as problem:
        raise SubmissionProblem(Kind.INVALID_RESULT, f"the grading run's report did not validate ({problem})") from None
    if report.invalid:
        raise SubmissionProblem(
            Kind.INVALID_RESULT, f"its sealed run sent {report.invalid[:200]}, outside the grading protocol, so nothing it returned is used"
        )
    return report


def _all_outputs(report: RunReport) -> list[dict]:
    return [o for cell in report.outputs.values() for o in cell]


def _run_notes(report: RunReport, options: GradingOptions) -> list[str]:
    notes = []
    if report.ended and report.ended != "completed":
        notes.append(f"the notebook did not run to the end: {report.ended}")
    if not options.limits.sealed:
        notes.append("unsealed: graded with --no-sandbox, so its code ran with the grader's rights")
    if report.process_limit_note:
        notes.append(report.process_limit_note[:300])
    if report.student_id_note:
        notes.append(report.student_id_note[:300])
    return notes


def _graded_outcome(spec: AssignmentSpec, scores: dict[str, float], notes: list[str], flags: list[str], violations: list[str]) -> Outcome:
    failed = [test for test, points in spec.tests.items() if scores.get(test, 0.0) < points]
    summary = "" if not failed else "no test passed" if len(failed) == len(spec.tests) else f"lost points on: {', '.join(failed)}"
    graded = Outcome(Kind.GRADED, summary).render()
    if violations:
        extra = [f"review: introspection of the grader ({'; '.join(flags)})"] if flags else []
        return Outcome(Kind.SANDBOX_VIOLATION, f"tried to {', '.join(violations)}", (graded, *extra, *notes))
    if flags:
        return Outcome(Kind.REVIEW, "; ".join(flags), (graded, *notes))
    return Outcome(Kind.GRADED, summary, tuple(notes))


# A student cell's error that says it ran out of memory (the error's own name and message).
OUT_OF_MEMORY = re.compile(r"MemoryError|can't allocate memory|not enough memory|std::bad_alloc")


def diagnose(autograded: Path, report: RunReport, options: GradingOptions) -> list[str]:
    """Notes after grading: the functions still unwritten (from the verdicts), and the student's own
    cells' errors, time-outs, memory and cut output."""
    try:
        notebook = nbformat.read(autograded, as_version=4)
    except Exception:  # noqa: BLE001 - notes are a courtesy; the scores stand
        return []
    errors, truncated = [], False
    unfinished = list(dict.fromkeys(v.function for v in report.verdicts if v.status is Status.NOT_WRITTEN and v.function))
    for index, cell in enumerate(notebook.cells):
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            truncated |= output.get("output_type") == "stream" and "Output truncated" in output.get("text", "")
            if output.get("output_type") != "error":
                continue
            message = f"{output.get('ename')}: {output.get('evalue', '')}"
            if is_test_cell(cell):
                continue  # a test's verdict is in the report
            where = nbgrader_meta(cell).get("grade_id") or f"cell {index + 1}"
            if "NotImplementedError" in message:  # a stub left as released, not a bug in the student's code
                if where not in unfinished:
                    unfinished.append(where)
            elif output.get("ename") in {"KeyboardInterrupt", "CellTimeoutError"}:
                errors.append(f"{where} ran past the {options.limits.cell_timeout} s limit and was stopped")
            elif OUT_OF_MEMORY.search(message) and options.limits.memory_bytes:
                errors.append(f"{where} ran out of memory (limit {options.limits.memory_bytes / 2**30:g} GiB)")
            else:
                errors.append(f"{where} raised {message[:160]}")
    notes = [f"unfinished: {', '.join(unfinished)} still raise NotImplementedError"] if unfinished else []
    if errors:
        notes.append(f"errors in your code: {'; '.join(errors)}")
    if truncated:
        notes.append(
            f"printed output was cut (per cell, at most {MAX_OUTPUT_CHARS:,} characters, {MAX_OUTPUTS_PER_CELL} outputs"
            f" and {MAX_RICH_OUTPUT_BYTES / 2**20:g} MiB of plots and other displays are kept)"
        )
    return notes


def _scores_from_gradebook(course: ScratchCourse, student: str, spec: AssignmentSpec) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.db_path}") as gradebook:
        notebook = gradebook.find_submission_notebook(spec.name, spec.name, student)
        return {g.name: float(g.score) for g in notebook.grades if g.name in spec.tests}


def _feedback(course: ScratchCourse, api: Any, row: GradeRow) -> dict[str, bytes]:
    if not row.outcome.scored:
        return {}
    try:
        course.check(api.generate_feedback(row.assignment, row.student_id), "generate_feedback")
        return {html.name: html.read_bytes() for html in (course.root / "feedback" / row.student_id / row.assignment).glob("*.html")}
    except (NbgraderError, OSError):
        return {}  # the grade stands; feedback is a courtesy


def _checked(check: Callable[..., None], prepared: "PreparedCourse", spec: AssignmentSpec, options: GradingOptions) -> None:
    try:
        check(prepared.course, prepared.api, spec, options)
    except HealthCheckFailed as failure:
        failure.worker = worker_id()  # the pipeline discards this worker's rows
        raise


def health_check(course: ScratchCourse, api: Any, spec: AssignmentSpec, options: GradingOptions) -> None:
    """The known solution must grade to full marks here, or no grade from this grader is written."""
    from course_utils.student_values import with_student_id

    solution = nbformat.read(assignment_notebook(course.solutions_dir, spec.name), as_version=4)
    # The solution answers each question for the student it is graded as: its STUDENT_ID is that student's.
    source = nbformat.writes(with_student_id(solution, HEALTH_STUDENT)).encode("utf-8")
    probe = Submission(HEALTH_STUDENT, spec.name, source)
    result = grade_one(course, api, probe, spec, replace(options, feedback=False)).result
    if result.grade.score != spec.max_score or not result.grade.outcome.scored:
        raise HealthCheckFailed(
            f"{Kind.HEALTH_CHECK_FAILED.value} on {worker_id()} for {spec.name}: the known solution scored "
            f"{result.grade.score:g} / {spec.max_score:g} ({result.grade.status[:300]})"
        )


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
