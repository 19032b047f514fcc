"""What grading works with and gives back, as data: submissions, options, outcomes, results.

An outcome is a kind, a reason and notes; it becomes text only where a person reads it
(``Outcome.render``: the CSVs, the terminal table, the summary).

One result model, from the sealed run to the class report; each stage reads the one before, none re-derives it:

1. The sealed run and the trusted pass (``nbgrader_ext.sealed_execute``, ``verdicts.decide``) write a ``RunReport``
   (``run_report.py``): how the run ended, the student's outputs, and a ``Verdict`` per test, each with the
   ``Misconception``s the trusted pass named (``misconceptions.py``). It is hostile input: the worker reads it only
   through ``read_run_report``, which accepts exactly its schema (else ``Kind.INVALID_RESULT``).
2. The worker (``worker.grade_one``) builds the pair's ``SubmissionResult`` once: a ``GradeRow`` (score, max,
   ``Outcome``) and a ``TestRow`` per test (score from nbgrader's gradebook, the verdict's misconceptions as they
   came). A submission that cannot be graded gets one too (``worker.ungraded``), zeros and why. ``Graded`` carries it
   back with what travels beside it (feedback, the autograded notebook, timings).
3. ``grade`` (``pipeline.py``) gathers them in a ``GradingResults``: fresh ones, reused ones (``cache.py`` keeps a
   pair's rows), a row for each file placed nowhere; puts them in class order; enters them in the term's record
   (``cache.TermRecord``), which keeps the rows of earlier runs into the same OUT; holds each grade row of the term to
   its due date (``deadlines.apply_deadlines`` sets ``GradeRow.lateness`` and the penalised score, the tests untouched).
4. Every output reads the term's results (``GradingResults.term``): ``reports.py`` writes grades.csv and tests.csv,
   gradebook.csv, lms-import.csv and summary.md/png; ``statistics.py`` computes every number (``NotebookStats``) from
   the results, for summary.md and the class report; ``class_report.py`` writes class-report.html/json
   (``MisconceptionCount`` wraps a ``Misconception`` with its count); ``gradebook_export.py`` writes each result of
   the run into nbgrader's gradebook.

"Report" names one thing each: ``RunReport``, what one sealed run sends back (the wire message, validated);
``ClassReport``, the data of the instructor's page class-report.html; ``reports.py``, the module that writes the
CSVs and the summary. What ``grade`` gives back is ``GradingResults``, never a report.
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from course_utils.notebook_cells import (
    assignment_notebook,
    defined_names,
    is_solution_cell,
    is_test_cell,
    nbgrader_meta,
)

from ..settings import GradingLimits

MISCONCEPTION_SEPARATOR = " | "  # between the names in tests.csv's misconception cell; no catalogued name holds it


class Kind(str, enum.Enum):
    GRADED = "graded"
    SANDBOX_VIOLATION = "sandbox violation"  # graded; the notebook tried something the sandbox stopped
    REVIEW = "review: introspection of the grader"  # graded; a person should read the lines named
    MISSING = "missing"
    UNREADABLE = "unreadable"
    NO_METADATA = "no grading metadata"
    INVALID_STUDENT = "invalid student name"
    UNIDENTIFIED = "unidentified"
    REFUSED = "refused"  # received but not read: over an archive limit, or a symbolic link
    AUTOGRADE_FAILED = "autograde failed"
    GRADING_ERROR = "grading error"
    INVALID_RESULT = "invalid result"  # the run's result broke the protocol or did not validate: nothing of it is used
    HEALTH_CHECK_FAILED = "grader health check failed"


SCORED = frozenset({Kind.GRADED, Kind.SANDBOX_VIOLATION, Kind.REVIEW})
# The note on a row an earlier run gave whose hand-in is gone from its source: kept, and said so, until graded again.
STALE_NOTE = "stale: "


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    reason: str = ""  # graded kinds: which tests lost points; others: why there is no grade
    notes: tuple[str, ...] = ()

    @property
    def scored(self) -> bool:
        """The score comes from the tests (a review flag or a blocked attempt changes no score)."""
        return self.kind in SCORED

    def render(self) -> str:
        if self.kind is Kind.GRADED:
            head = f"graded ({self.reason})" if self.reason else "graded"
        elif self.kind is Kind.REVIEW:
            head = f"{self.kind.value} ({self.reason})"
        else:
            head = f"{self.kind.value}: {self.reason}" if self.reason else self.kind.value
        return "; ".join([head, *self.notes])

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "reason": self.reason, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: dict) -> "Outcome":
        return cls(Kind(data["kind"]), data.get("reason", ""), tuple(data.get("notes", ())))


@dataclass(frozen=True)
class SubmittedAt:
    """When a notebook was handed in (UTC), and where that was read."""

    time: datetime
    source: str  # "timestamp.txt" or "zip entry date"


@dataclass(frozen=True)
class Lateness:
    """When a row was handed in, and how it stands against its due date (``due`` None: none is set);
    ``penalty`` is in points."""

    due: datetime | None
    submitted_at: datetime | None
    source: str = ""
    late_by: timedelta = timedelta(0)
    penalty: float = 0.0
    extended: bool = False


@dataclass(frozen=True)
class GradeRow:
    student_id: str
    assignment: str
    score: float  # after any late penalty (``lateness.penalty`` says how much)
    max_score: float
    outcome: Outcome
    lateness: Lateness | None = None  # set where a hand-in time or a due date is known (autograder.grading.deadlines)
    graded_by_person: bool = False  # score is a person's, from nbgrader's gradebook (gradebook_export.with_gradebook_grades)

    @property
    def status(self) -> str:
        return self.outcome.render()


@dataclass(frozen=True)
class Misconception:
    """A catalogued mistake that gives what a student's code gave on a failed test: named once, in the trusted
    pass (``misconceptions.name_misconceptions``), and carried as it is by the verdict, the test row and the
    class report's count."""

    name: str  # the catalogue's student-facing description
    section: str = ""  # the notebook section to revisit: the heading above the function's cell


@dataclass(frozen=True)
class TestRow:
    __test__ = False  # a row of tests.csv, not a pytest class
    student_id: str
    assignment: str
    test: str
    score: float
    max_score: float
    misconceptions: tuple[Misconception, ...] = ()  # the catalogued mistakes this test's failure matches (its verdict's)

    @property
    def misconception(self) -> str:
        """tests.csv's cell: the names, MISCONCEPTION_SEPARATOR between ('' when none was named)."""
        return MISCONCEPTION_SEPARATOR.join(m.name for m in self.misconceptions)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "TestRow":
        return cls(**{**data, "misconceptions": tuple(Misconception(**m) for m in data.get("misconceptions", ()))})


@dataclass(frozen=True)
class SubmissionResult:
    """One (student, assignment) pair's result, built once (the worker, from the validated ``RunReport`` and the
    gradebook's scores; the cache; a file placed nowhere) and then only read: its grade row, with its outcome and
    lateness, and its test rows in notebook order, each with the misconceptions its verdict named."""

    grade: GradeRow
    tests: tuple[TestRow, ...] = ()  # none for a file placed under no assignment

    @property
    def pair(self) -> tuple[str, str]:
        return (self.grade.student_id, self.grade.assignment)


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
        notebook = json.loads(assignment_notebook(solutions_dir, name).read_text(encoding="utf-8"))
        cells = notebook["cells"]
        tests = {nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c).get("points", 0)) for c in cells if is_test_cell(c)}
        functions = set().union(*(defined_names("".join(c["source"])) for c in cells if is_solution_cell(c)))
        return cls(name=name, tests=tests, functions=frozenset(functions))


@dataclass(frozen=True)
class GradingOptions:
    limits: GradingLimits = GradingLimits()
    feedback: bool = True


@dataclass(frozen=True)
class Submission:
    """One (student, assignment) pair to grade: the notebook's bytes, or None when nothing was handed in."""

    student: str
    assignment: str
    content: bytes | None
    received_as: str | None = None
    notes: tuple[str, ...] = ()  # how intake placed it (renamed, chosen among copies)
    refused: str = ""  # why a file received for it was not read (an archive limit, a link); content is then None


# The stages of grading one submission, in order, for the per-stage timing (benchmarks/grading.py).
STAGES = (
    "worker start",  # the scratch course and the warm sealed runner, once per worker
    "assignment setup",  # generate_assignment and the health check, once per worker and assignment
    "admission",  # reading, repairing and flagging the notebook
    "sealed run",  # the notebook in the sandbox
    "verdicts",  # the trusted replay of the test cells (and naming misconceptions)
    "nbgrader",  # the rest of nbgrader's autograde: its preprocessors and the gradebook
    "results",  # scores from the gradebook, the run report, the notes
    "feedback",  # the HTML feedback
)


@dataclass
class Graded:
    """What a worker sends back for one submission: its result, and what travels beside it (feedback, timing)."""

    submission: Submission
    result: SubmissionResult
    feedback: dict[str, bytes] = field(default_factory=dict)  # file name -> HTML
    worker: str = ""  # which worker graded it: its end-of-run health check vouches for the row
    stages: dict[str, float] = field(default_factory=dict)  # seconds per grading stage (see STAGES)
    autograded: bytes = b""  # the graded notebook with its outputs, as nbgrader's autograde leaves it (for formgrader)


class SubmissionProblem(Exception):
    """A submission that cannot be graded: its outcome says why."""

    def __init__(self, kind: Kind, reason: str) -> None:
        super().__init__(f"{kind.value}: {reason}")
        self.kind, self.reason = kind, reason


class HealthCheckFailed(RuntimeError):
    """The known solution no longer grades to full marks: no grade from this grader can be trusted."""

    worker: str = ""  # the worker that failed it, when known


@dataclass
class GradebookExport:
    """What one export wrote."""

    url: str
    assignments_added: list[str] = field(default_factory=list)
    written: list[tuple[str, str]] = field(default_factory=list)  # (student, assignment) graded
    not_graded: list[tuple[str, str]] = field(default_factory=list)  # handed in, not gradable: zeros and the reason
    missing: list[tuple[str, str]] = field(default_factory=list)  # nothing handed in: nothing written
    autograded: list[tuple[str, str]] = field(default_factory=list)  # graded notebooks placed in the course for formgrader


@dataclass
class GradingResults:
    """What ``grade`` gives back for the class: every pair's ``SubmissionResult``, in class order."""

    results: list[SubmissionResult] = field(default_factory=list)
    reused: int = 0  # pairs whose rows came from an earlier run: nothing they depend on changed
    gradebook: GradebookExport | None = None  # what grade(gradebook=URL) wrote into nbgrader's gradebook
    stages: dict[str, float] = field(default_factory=dict)  # seconds per grading stage, summed over the submissions graded now
    # Every row OUT holds after the run, in class order: these results and the rows earlier runs gave that this one
    # kept (other assignments, other sources, stale ones); grades.csv and the reports are written from it.
    term: list[SubmissionResult] = field(default_factory=list)

    @property
    def grades(self) -> list[GradeRow]:
        """grades.csv's rows."""
        return [r.grade for r in self.results]

    @property
    def tests(self) -> list[TestRow]:
        """tests.csv's rows."""
        return [t for r in self.results for t in r.tests]

    def row_of(self, student_id: str, assignment: str) -> GradeRow:
        return self.result_of(student_id, assignment).grade

    def result_of(self, student_id: str, assignment: str) -> SubmissionResult:
        return next(r for r in self.results if r.pair == (student_id, assignment))

    def tests_of(self, student_id: str, assignment: str) -> dict[str, float]:
        return {t.test: t.score for t in self.result_of(student_id, assignment).tests}

    @classmethod
    def from_rows(cls, grades: list[GradeRow], tests: list[TestRow]) -> "GradingResults":
        """Rows in the CSVs' flat shape (a test row names its pair), as one result per grade row."""
        by_pair: dict[tuple[str, str], list[TestRow]] = {}
        for t in tests:
            by_pair.setdefault((t.student_id, t.assignment), []).append(t)
        return cls([SubmissionResult(g, tuple(by_pair.get((g.student_id, g.assignment), ()))) for g in grades])
