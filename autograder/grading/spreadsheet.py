"""CSV cells that a spreadsheet shows as text, never runs as a formula.

A student id comes from a folder or file name the student chose. Named ``=HYPERLINK(...)``,
``@SUM(1)`` or ``+cmd|...``, it would run as a formula when the instructor opens ``grades.csv``
in Excel, LibreOffice or Google Sheets (CSV injection). As OWASP recommends, a text cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading single quote,
which spreadsheets read as "this is text" and do not show. Numbers are left as they are.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value: Any) -> Any:
    """``value``, with a leading ``'`` when it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _is_number(value):
        return "'" + value
    return value


def write_csv(path: Path, header: list[str], rows: Iterable[Iterable[Any]]) -> Path:
    """A CSV whose every cell is ``safe_cell``: the one way the grader writes a spreadsheet."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([safe_cell(name) for name in header])
        writer.writerows([safe_cell(cell) for cell in row] for row in rows)
    return path
