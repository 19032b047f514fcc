"""The class list: every student on it gets a row for every assignment graded, handed in or not.

A roster is a CSV file with a header row naming a column ``student`` (or ``id``, ``username``,
``login``, ``email``; the LMS's export as it comes), or plain text with one student per line. Blank
lines and lines starting with ``#`` are skipped. Without a roster, grading knows only the students
whose files came in, and one who handed in nothing has no row at all.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from .admission import SAFE_STUDENT_ID

ID_COLUMNS = ("student", "student_id", "id", "username", "login", "email")
MAX_ROSTER_BYTES = 4 * 2**20


def read_roster(path: Path) -> list[str]:
    """The students of the roster at ``path``, in its order, each once.

    Raises:
        ValueError: the file is missing, too large, has no student column, or names a student the
            grader cannot use as a folder and row name (which characters are allowed is said).
    """
    if not path.is_file():
        raise ValueError(f"the roster {path} is not a file")
    if path.stat().st_size > MAX_ROSTER_BYTES:
        raise ValueError(f"the roster {path} is over {MAX_ROSTER_BYTES // 2**20} MiB: is it the right file?")
    text = path.read_text(encoding="utf-8-sig")  # an LMS export often starts with a byte-order mark
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return []
    header = [cell.strip().lower() for cell in next(csv.reader([lines[0]]))]
    column = next((header.index(name) for name in ID_COLUMNS if name in header), None)
    if column is None and len(header) > 1:
        raise ValueError(f"the roster {path} has columns {header} but none named {' or '.join(ID_COLUMNS)}")
    rows = list(csv.reader(io.StringIO("\n".join(lines[1:] if column is not None else lines))))
    students: list[str] = []
    for number, row in enumerate(rows, start=2 if column is not None else 1):
        student = row[column or 0].strip() if len(row) > (column or 0) else ""
        if not student:
            continue
        if not SAFE_STUDENT_ID.match(student):
            raise ValueError(
                f"the roster {path}, row {number}: {student!r}: use letters, digits, '@', '.', '_', '-' and single inner spaces"
            )
        if student not in students:
            students.append(student)
    return students
