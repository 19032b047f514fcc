"""Due dates, extensions and the late policy: read from course.toml, applied to the grade rows.

``course.toml`` may hold::

    [due]                                   # when each assignment is due, with its time zone
    01_soft_dictionary_lookup = 2026-12-01T23:59:00Z

    [late]
    penalty_per_day = 0.1                   # the share of the score lost per day late, or part of one
    zero_after_days = 7                     # later than this, the score is 0 (leave out: never)
    grace_minutes = 5                       # a hand-in this soon after the due time is on time

    [extensions.jsmith]                     # one student's own due dates
    01_soft_dictionary_lookup = 2026-12-03T23:59:00Z

When a notebook was handed in comes from intake (``SubmittedAt``): nbgrader's ``timestamp.txt`` next
to it (what ``nbgrader collect`` copies from the exchange) or the date of its entry in a zip (an LMS
download). A row handed in late keeps the score its tests gave in its notes and loses the policy's
share; a row with a due date but no known time says so and loses nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import tomllib

from .models import GradeRow, Lateness, SubmittedAt

TIMESTAMP_FILE = "timestamp.txt"  # nbgrader's exchange writes the hand-in time here
MAX_TIMESTAMP_BYTES = 200


@dataclass(frozen=True)
class LatePolicy:
    penalty_per_day: float = 0.0
    zero_after_days: float | None = None
    grace_minutes: float = 0.0

    def share_lost(self, late_by: timedelta) -> float:
        """The share of the score lost for handing in ``late_by`` after the due time (0 when on time)."""
        late_by -= timedelta(minutes=self.grace_minutes)
        if late_by <= timedelta(0):
            return 0.0
        days = late_by / timedelta(days=1)
        if self.zero_after_days is not None and days > self.zero_after_days:
            return 1.0
        return min(1.0, math.ceil(days) * self.penalty_per_day)


@dataclass(frozen=True)
class Deadlines:
    due: dict[str, datetime] = field(default_factory=dict)  # assignment -> due time (UTC)
    extensions: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (student, assignment) -> due time
    policy: LatePolicy = LatePolicy()

    def due_for(self, student: str, assignment: str) -> datetime | None:
        return self.extensions.get((student, assignment), self.due.get(assignment))


def read_course_file(path: Path) -> dict[str, Any]:
    """``course.toml`` as a table ({} when there is none): the one reading of it that every command shares.

    Raises:
        ValueError: the file is no valid TOML (a table declared twice, a missing quote); the message names the
            file, the line and the column.
    """
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path.name}: {error}") from None


def load_deadlines(path: Path, known: list[str], roster: list[str] | None = None) -> Deadlines:
    """The due dates, extensions and late policy of the course file at ``path`` (none when it has none).

    With ``roster`` (the class list's students), an extension must name a student on it.

    Raises:
        ValueError: a table or value the file should not hold: an unknown assignment, a time without its
            time zone, a penalty outside [0, 1], an extension for a student the roster lacks. The message names the key.
    """
    data = read_course_file(path)
    due = {name: _due_time(path, f"due.{name}", value, known, name) for name, value in data.get("due", {}).items()}
    extensions = {}
    for student, table in data.get("extensions", {}).items():
        if not isinstance(table, dict):
            raise ValueError(f"{path.name}: extensions.{student} must be a table of assignment = due time")
        if roster is not None and student not in roster:
            raise ValueError(
                f"{path.name}: [extensions.{student}]: {student!r} is not on the roster (a misspelt id gives the student "
                "no extension): write the id as the roster names the student, or remove the table"
            )
        for name, value in table.items():
            extensions[(student, name)] = _due_time(path, f"extensions.{student}.{name}", value, known, name)
    late = data.get("late", {})
    unknown = sorted(set(late) - {"penalty_per_day", "zero_after_days", "grace_minutes"})
    if unknown:
        raise ValueError(f"{path.name}: [late] has no setting {', '.join(unknown)} (penalty_per_day, zero_after_days, grace_minutes)")
    policy = LatePolicy(
        penalty_per_day=_number(path, "late.penalty_per_day", late.get("penalty_per_day", 0.0), 0.0, 1.0),
        zero_after_days=_number(path, "late.zero_after_days", late["zero_after_days"], 0.0, None) if "zero_after_days" in late else None,
        grace_minutes=_number(path, "late.grace_minutes", late.get("grace_minutes", 0.0), 0.0, None),
    )
    return Deadlines(due, extensions, policy)


def _due_time(path: Path, key: str, value: object, known: list[str], assignment: str) -> datetime:
    if assignment not in known:
        raise ValueError(f"{path.name}: {key}: the course has no assignment {assignment!r}")
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError(
            f"{path.name}: {key} must be a date and time with its time zone, e.g. 2026-12-01T23:59:00Z or 2026-12-01T23:59:00+01:00"
        )
    return value.astimezone(timezone.utc)


def _number(path: Path, key: str, value: object, low: float, high: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise ValueError(f"{path.name}: {key} must be a number {bound}, not {value!r}")
    return float(value)


# What nbgrader's exchange writes (its default timestamp_format, "%Y-%m-%d %H:%M:%S.%f %Z", in UTC), or an ISO time.
# Read strictly: the file is the student's, and a general parser would look a zone name up as a file path.
TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?) ?(UTC|Z|[+-]\d{2}:?\d{2})?")


def read_timestamp(notebook: Path) -> SubmittedAt | None:
    """The hand-in time nbgrader's exchange recorded beside ``notebook`` (``timestamp.txt``), if readable."""
    stamp = notebook.parent / TIMESTAMP_FILE
    if stamp.is_symlink() or not stamp.is_file() or stamp.stat().st_size > MAX_TIMESTAMP_BYTES:
        return None
    return parse_timestamp(stamp.read_text(encoding="utf-8", errors="replace"))


def parse_timestamp(text: str) -> SubmittedAt | None:
    """A hand-in time as nbgrader writes it (UTC when no zone is given); None for anything else."""
    found = TIMESTAMP.fullmatch(text.strip())
    if found is None:
        return None
    zone = found.group(2) or "UTC"
    offset = "+00:00" if zone in ("UTC", "Z") else zone
    try:
        moment = datetime.fromisoformat(found.group(1).replace(" ", "T") + offset)
    except ValueError:  # a month 13, an hour 25
        return None
    return SubmittedAt(moment.astimezone(timezone.utc), TIMESTAMP_FILE)


def apply_deadlines(rows: list[GradeRow], times: dict[tuple[str, str], SubmittedAt], deadlines: Deadlines) -> list[GradeRow]:
    """``rows`` with each graded row held to its due date: late ones lose the policy's share, and say so.
    Every graded row whose hand-in time is known carries it, due date or not (nbgrader's gradebook keeps it)."""
    return [_held_to(row, times.get((row.student_id, row.assignment)), deadlines) for row in rows]


def _held_to(row: GradeRow, handed_in: SubmittedAt | None, deadlines: Deadlines) -> GradeRow:
    due = deadlines.due_for(row.student_id, row.assignment)
    if not row.outcome.scored:
        return row
    if due is None:
        return replace(row, lateness=Lateness(None, handed_in.time, handed_in.source)) if handed_in else row
    extended = (row.student_id, row.assignment) in deadlines.extensions
    if handed_in is None:
        lateness = Lateness(due, None, extended=extended)
        note = f"no hand-in time came with it (nbgrader's {TIMESTAMP_FILE} or a zip's date): not held to the due date {_shown(due)}"
        return replace(row, outcome=replace(row.outcome, notes=(*row.outcome.notes, note)), lateness=lateness)
    late_by = handed_in.time - due
    if late_by <= timedelta(minutes=deadlines.policy.grace_minutes):  # on time, or within the grace
        return replace(row, lateness=Lateness(due, handed_in.time, handed_in.source, extended=extended))
    share = deadlines.policy.share_lost(late_by)
    score = round(row.score * (1 - share), 6)  # exactly 0 when all is lost
    # In the CSVs and the gradebook: rounded as the score is, so 11 points at 20% off lose 2.2, not 2.1999999999999993.
    lateness = Lateness(due, handed_in.time, handed_in.source, late_by, round(row.score - score, 6), extended)
    which = "extended due date" if extended else "due date"
    note = (
        f"late by {_duration(late_by)} (handed in {_shown(handed_in.time)} by its {handed_in.source}, {which} {_shown(due)}): "
        f"{share:.0%} off, {lateness.penalty:g} of the {row.score:g} points its tests gave"
    )
    return replace(row, score=score, outcome=replace(row.outcome, notes=(*row.outcome.notes, note)), lateness=lateness)


def _shown(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _duration(span: timedelta) -> str:
    minutes = math.ceil(span / timedelta(minutes=1))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} day{'s' * (days != 1)}"] if days else []
    parts += [f"{hours} h"] if hours else []
    parts += [f"{minutes} min"] if minutes and not days else []
    return " ".join(parts) or "under a minute"
