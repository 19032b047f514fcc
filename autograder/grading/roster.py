"""The class list: every student on it gets a row for every assignment graded, handed in or not.

A roster is a CSV file with a header row naming a column ``student`` (or ``id``, ``username``,
``login``, ``email``; the LMS's export as it comes), or plain text with one student per line. Blank
lines and lines starting with ``#`` are skipped. Without a roster, grading knows only the students
whose files came in, and one who handed in nothing has no row at all.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from .admission import SAFE_STUDENT_ID

ID_COLUMNS = ("student", "student_id", "id", "username", "login", "email")
MAX_ROSTER_BYTES = 4 * 2**20
LMS_ROWS_TO_SKIP = ("points possible",)  # Canvas's export has a row of each column's points, not a student


@dataclass(frozen=True)
class Roster:
    """The class list: each student once, in the file's order, with the file's own columns kept for the LMS import."""

    students: list[str]
    header: list[str] = field(default_factory=list)  # the CSV's columns as written; empty for a plain list
    rows: dict[str, list[str]] = field(default_factory=dict)  # student -> the row as it came (CSV only)


def read_roster(path: Path, column: str | None = None) -> Roster:
    """The students of the roster at ``path``, in its order, each once, read from ``column`` (any case) when given.

    Raises:
        ValueError: the file is missing, too large, has no student column (or not ``column``), or names a
            student the grader cannot use as a folder and row name (which characters are allowed is said).
    """
    if not path.is_file():
        raise ValueError(f"the roster {path} is not a file")
    if path.stat().st_size > MAX_ROSTER_BYTES:
        raise ValueError(f"the roster {path} is over {MAX_ROSTER_BYTES // 2**20} MiB: is it the right file?")
    text = path.read_text(encoding="utf-8-sig")  # an LMS export often starts with a byte-order mark
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return Roster([])
    header = [cell.strip() for cell in next(csv.reader([lines[0]]))]
    lowered = [cell.lower() for cell in header]
    if column is not None:
        if column.lower() not in lowered:
            raise ValueError(f"the roster {path} has no column {column!r}; its columns are {header}")
        index: int | None = lowered.index(column.lower())
    else:
        index = next((lowered.index(name) for name in ID_COLUMNS if name in lowered), None)
        if index is None and len(header) > 1:
            raise ValueError(f"the roster {path} has columns {header} but none named {' or '.join(ID_COLUMNS)} (or pass its column)")
    rows = list(csv.reader(io.StringIO("\n".join(lines[1:] if index is not None else lines))))
    roster = Roster([], header if index is not None else [])
    for number, row in enumerate(rows, start=2 if index is not None else 1):
        student = row[index or 0].strip() if len(row) > (index or 0) else ""
        if not student or (row and row[0].strip().lower() in LMS_ROWS_TO_SKIP):
            continue
        if not SAFE_STUDENT_ID.match(student):
            raise ValueError(
                f"the roster {path}, row {number}: {student!r}: use letters, digits, '@', '.', '_', '-' and single inner spaces"
                + ("" if column else "; or name the column that holds such ids")
            )
        if student not in roster.students:
            roster.students.append(student)
            roster.rows[student] = row
    return roster
