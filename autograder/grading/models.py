"""What grading works with and gives back, as data: submissions, options, outcomes, rows.

An outcome is a kind, a reason and notes; it becomes text only where a person reads it
(``Outcome.render``: the CSVs, the terminal table, the summary).

Four things are called a report: ``GradingReport`` here is what ``grade`` returns for the class (its rows);
``RunReport`` (``run_report.py``) is one submission's sealed run and verdicts; ``ClassReport``
(``class_report.py``) is the instructor's page; ``reports.py`` writes the CSVs and the summary from the rows.
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from course_utils.reference import (
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
    submission: Submission
    grade: GradeRow
    tests: list[TestRow]
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
class GradingReport:
    grades: list[GradeRow] = field(default_factory=list)
    tests: list[TestRow] = field(default_factory=list)
    reused: int = 0  # pairs whose rows came from an earlier run: nothing they depend on changed
    gradebook: GradebookExport | None = None  # what grade(gradebook=URL) wrote into nbgrader's gradebook
    stages: dict[str, float] = field(default_factory=dict)  # seconds per grading stage, summed over the submissions graded now

    def row_of(self, student_id: str, assignment: str) -> GradeRow:
        return next(r for r in self.grades if r.student_id == student_id and r.assignment == assignment)

    def tests_of(self, student_id: str, assignment: str) -> dict[str, float]:
        return {r.test: r.score for r in self.tests if r.student_id == student_id and r.assignment == assignment}
