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
        assert read_roster(path).students == students


def test_a_roster_without_a_student_column_or_with_an_unsafe_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "roster.csv"
    path.write_text("Name,Score\nAnn,3\n", encoding="utf-8")
    with pytest.raises(ValueError, match="none named student.*or pass its column"):
        read_roster(path)
    path.write_text("student\nann\n../../etc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 3: '\.\./\.\./etc'"):
        read_roster(path)
    path.write_text("student\nann\n..\n", encoding="utf-8")  # the folder above, as a student's folder name
    with pytest.raises(ValueError, match=r"row 3: '\.\.'"):
        read_roster(path)
    with pytest.raises(ValueError, match="is not a file"):
        read_roster(tmp_path / "absent.csv")


CANVAS_EXPORT = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (301)\n"
    "    Points Possible,,,,,10\n"
    '"Smith, Jane",12345,S001,jsmith,Sec A,9\n'
    "=SUM(1),12346,S002,jdoe,Sec A,7\n"
    '"Roe, Rik",12347,S003,rroe,Sec B,\n'
)


def test_an_lms_export_is_read_by_the_column_named_and_written_back_with_points(tmp_path: Path) -> None:
    from autograder.grading.models import AssignmentSpec, GradeRow, Kind, Outcome
    from autograder.grading.reports import write_lms_import

    path = tmp_path / "canvas.csv"
    path.write_text(CANVAS_EXPORT, encoding="utf-8")
    with pytest.raises(ValueError, match="row 3: 'Smith, Jane'.*or name the column"):
        read_roster(path)  # the display name is no id: the message says how to pick another column
    with pytest.raises(ValueError, match="no column 'Login'"):
        read_roster(path, "Login")
    roster = read_roster(path, "sis login id")  # any case
    assert roster.students == ["jsmith", "jdoe", "rroe"]  # Canvas's "Points Possible" row is no student

    a, b = "01_soft_dictionary_lookup", "02_dot_product_attention"
    specs = {a: AssignmentSpec(a, {"t": 10.0}), b: AssignmentSpec(b, {"t": 10.0})}
    grades = [
        GradeRow("jsmith", a, 7.5, 10.0, Outcome(Kind.GRADED)),
        GradeRow("jsmith", b, 0.0, 10.0, Outcome(Kind.GRADING_ERROR, "boom")),  # the grader's fault: left empty
        GradeRow("jdoe", a, 0.0, 10.0, Outcome(Kind.MISSING)),
        GradeRow("mallory", a, 10.0, 10.0, Outcome(Kind.GRADED)),  # not on the roster: the LMS could not take it
    ]
    written = write_lms_import(grades, specs, roster, tmp_path)
    lines = written.read_text(encoding="utf-8").splitlines()
    assert lines == [
        f"Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (301),{a},{b}",
        '"Smith, Jane",12345,S001,jsmith,Sec A,9,7.5,',
        "'=SUM(1),12346,S002,jdoe,Sec A,7,0,",  # a cell a spreadsheet would run is written as text
        '"Roe, Rik",12347,S003,rroe,Sec B,,,',
    ]


EXTENSION_FOR = "[extensions.{student}]\n01_soft_dictionary_lookup = 2026-12-04T23:59:00Z\n"


def test_an_extension_for_a_student_not_on_the_roster_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A misspelt id in course.toml would give the real student no extension: with a roster, grade names it and stops."""
    from autograder.__main__ import main
    from autograder.course import list_assignments
    from autograder.grading.deadlines import load_deadlines
    from course_utils import colab

    known = list_assignments()
    path = tmp_path / "course.toml"
    path.write_text(EXTENSION_FOR.format(student="karol"), encoding="utf-8")
    (tmp_path / "roster.csv").write_text("student\ncarol\nbob\n", encoding="utf-8")
    roster = read_roster(tmp_path / "roster.csv").students
    with pytest.raises(ValueError, match=r"course\.toml: \[extensions\.karol\]: 'karol' is not on the roster"):
        load_deadlines(path, known, roster=roster)
    assert load_deadlines(path, known).extensions  # without a roster, nobody to check it against
    path.write_text(EXTENSION_FOR.format(student="carol"), encoding="utf-8")
    assert load_deadlines(path, known, roster=roster).due_for("carol", known[0]) is not None

    path.write_text(EXTENSION_FOR.format(student="karol"), encoding="utf-8")
    monkeypatch.setattr(colab, "COURSE_FILE", path)
    (tmp_path / "class").mkdir()
    command = ["grade", str(tmp_path / "class"), "--out", str(tmp_path / "graded"), "--roster", str(tmp_path / "roster.csv")]
    assert main(command) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "'karol' is not on the roster" in error, error
