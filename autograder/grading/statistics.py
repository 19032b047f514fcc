"""The class's statistics, computed once from the submissions' results (the rows of ``grades.csv`` and ``tests.csv``).

Per notebook (``NotebookStats``): the scores of the scored submissions, as points and as percentages, their
mean, median and 10-bin histogram, how many rows were not scored and why, how many were handed in late and
what that cost; per question (``QuestionStats``): the mean, how many got full marks or lost points, and the
discrimination. Both readers take them from here: ``summary.md`` and ``summary.png`` (``reports``) and the
class report (``class_report``); neither computes a statistic of its own.

Each ``SubmissionResult`` holds its own test rows, so no statistic joins tests to grades again (models.py maps
the flow).
"""

from __future__ import annotations

import math
import statistics  # the standard library's (absolute imports): this module only shares its name
from collections import Counter
from dataclasses import dataclass, field

from .models import AssignmentSpec, GradeRow, SubmissionResult, TestRow

BINS = 10  # score histogram: bins of 10 percentage points, full marks in the last
BIN_WIDTH = 100 / BINS
BIN_EDGES = tuple(i * BIN_WIDTH for i in range(BINS + 1))  # 0, 10, ..., 100: where a plot draws the bins
MIN_FOR_DISCRIMINATION = 3  # fewer scored submissions than this: no correlation worth the name


def percent(score: float, max_score: float) -> float:
    """``score`` as a percentage of ``max_score``; 0 for a notebook worth nothing (no division by zero)."""
    return 100 * score / max_score if max_score else 0.0


def histogram(percents: list[float]) -> list[int]:
    """Counts in bins [0,10), [10,20), ..., [90,100]: full marks land in the last bin, anything outside 0..100 in
    the nearest end bin."""
    counts = [0] * BINS
    for value in percents:
        counts[min(max(int(value // BIN_WIDTH), 0), BINS - 1)] += 1
    return counts


def discrimination(item: list[float], total: list[float]) -> float | None:
    """Pearson correlation of a question's scores with the totals; None when undefined (too few, or no variance)."""
    n = len(item)
    if n != len(total) or n < MIN_FOR_DISCRIMINATION:
        return None
    if len(set(item)) < 2 or len(set(total)) < 2:  # everyone scored the same: no variance, no correlation
        return None
    mean_x, mean_y = math.fsum(item) / n, math.fsum(total) / n
    sxx = math.fsum((x - mean_x) ** 2 for x in item)
    syy = math.fsum((y - mean_y) ** 2 for y in total)
    sxy = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(item, total))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


@dataclass(frozen=True)
class QuestionStats:
    """One test of a notebook, over the scored submissions that have a row for it."""

    test: str
    points: float
    scored: int  # scored submissions with a row for this test
    full: int  # of those, how many got its full points
    mean: float | None  # points; None when nobody has a row for it
    discrimination: float | None  # Pearson correlation with the notebook's total; None: n/a

    @property
    def failed(self) -> int:
        """How many lost points on it."""
        return self.scored - self.full

    @property
    def full_marks(self) -> float | None:
        """The share with full marks, 0..1; None when nobody has a row for it."""
        return self.full / self.scored if self.scored else None


@dataclass(frozen=True)
class TestFailures:
    """A test some scored submissions lost points on, out of all the notebook's scored submissions."""

    __test__ = False  # a statistic, not a pytest class
    test: str
    failed: int
    graded: int

    @property
    def share(self) -> float:
        return self.failed / self.graded if self.graded else 0.0


@dataclass(frozen=True)
class NotebookStats:
    """One notebook with any grade row: its scored submissions' scores and what the rest were."""

    assignment: str
    max_score: float
    scores: list[float]  # points, one per scored submission, in row order
    questions: list[QuestionStats]  # in notebook order
    not_scored_kinds: Counter[str] = field(default_factory=Counter)  # the outcome's kind -> rows that scored nothing
    late: int = 0  # scored rows handed in after their due date
    late_points: float = 0.0  # the points their late penalties took off, in all

    @property
    def not_scored(self) -> int:
        """Rows of this notebook that scored nothing from the tests (not handed in, unreadable, ...)."""
        return sum(self.not_scored_kinds.values())

    @property
    def percents(self) -> list[float]:
        return [percent(s, self.max_score) for s in self.scores]

    @property
    def mean(self) -> float | None:
        """Mean points; None with no scored submission."""
        return statistics.fmean(self.scores) if self.scores else None

    @property
    def median(self) -> float | None:
        return float(statistics.median(self.scores)) if self.scores else None

    @property
    def mean_percent(self) -> float | None:
        return statistics.mean(self.percents) if self.scores else None

    @property
    def median_percent(self) -> float | None:
        return statistics.median(self.percents) if self.scores else None

    @property
    def full_marks(self) -> int:
        """How many scored submissions got every point."""
        return sum(p >= 100 for p in self.percents)

    @property
    def histogram(self) -> list[int]:
        return histogram(self.percents)

    @property
    def most_failed(self) -> list[TestFailures]:
        """The tests someone lost points on, most failed first (ties in notebook order)."""
        ranked = sorted((q for q in self.questions if q.failed), key=lambda q: -q.failed)  # stable: notebook order kept
        return [TestFailures(q.test, q.failed, len(self.scores)) for q in ranked]


def notebook_stats(results: list[SubmissionResult], specs: dict[str, AssignmentSpec]) -> list[NotebookStats]:
    """Per notebook with any grade row, in course order (``specs``'s), from the scored results only."""
    result = []
    for name, spec in specs.items():
        mine = [r for r in results if r.grade.assignment == name]
        if not mine:
            continue
        rows = [r.grade for r in mine]
        scored = [r.grade for r in mine if r.grade.outcome.scored]
        own = [{t.test: t for t in r.tests} for r in mine if r.grade.outcome.scored]  # each scored submission's test rows, by test
        late = [r for r in scored if r.lateness is not None and r.lateness.late_by.total_seconds() > 0]
        result.append(
            NotebookStats(
                assignment=name,
                max_score=spec.max_score,
                scores=[r.score for r in scored],
                questions=[question_stats(test, points, scored, own) for test, points in spec.tests.items()],
                not_scored_kinds=Counter(r.outcome.kind.value for r in rows if not r.outcome.scored),
                late=len(late),
                late_points=sum(r.lateness.penalty for r in late if r.lateness),
            )
        )
    return result


def question_stats(test: str, points: float, scored: list[GradeRow], rows: list[dict[str, TestRow]]) -> QuestionStats:
    """``test``'s statistics over the scored submissions ``scored``, whose test rows by test are ``rows`` (same order)."""
    pairs = [(own[test], grade.score) for grade, own in zip(scored, rows) if test in own]
    item = [t.score for t, _ in pairs]
    return QuestionStats(
        test=test,
        points=points,
        scored=len(pairs),
        full=sum(t.score >= t.max_score for t, _ in pairs),
        mean=statistics.fmean(item) if item else None,
        discrimination=discrimination(item, [total for _, total in pairs]),
    )
