"""autograder.grading.roster: the class list, read as an LMS exports it or as a plain list."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grading.roster import read_roster


@pytest.mark.parametrize(
    "text, students",
    [
        ('\ufeffStudent,Full name\nann,Ann A\n"bob",Bob B\n\nann,Ann again\n', ["ann", "bob"]),  # BOM, quotes, a repeat
        ("# the class of 2026\nann\nbob smith\n\n", ["ann", "bob smith"]),  # one per line, a comment
        ("id;name\n", None),  # semicolons: one column named "id;name", no student column... read as a list
        ("Username,Email\nann@uni.edu,a@x\n", ["ann@uni.edu"]),
        ("", []),
    ],
)
def test_a_roster_is_read_in_its_order_each_student_once(tmp_path: Path, text: str, students: list[str] | None) -> None:
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    if students is None:
        with pytest.raises(ValueError, match="row 1"):
            read_roster(path)
    else:
        assert read_roster(path) == students


def test_a_roster_without_a_student_column_or_with_an_unsafe_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "roster.csv"
    path.write_text("Name,Score\nAnn,3\n", encoding="utf-8")
    with pytest.raises(ValueError, match="none named student"):
        read_roster(path)
    path.write_text("student\nann\n../../etc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 3: '\.\./\.\./etc'"):
        read_roster(path)
    with pytest.raises(ValueError, match="is not a file"):
        read_roster(tmp_path / "absent.csv")
