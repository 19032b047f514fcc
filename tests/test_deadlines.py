"""Due dates, extensions and the late policy: read from course.toml, times from intake, applied to rows."""

from __future__ import annotations

import os
import shutil
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autograder.grading.deadlines import Deadlines, LatePolicy, apply_deadlines, load_deadlines, parse_timestamp, read_timestamp
from autograder.grading.intake import opened, take_in
from autograder.grading.models import GradeRow, Kind, Outcome, SubmittedAt
from course_utils.colab import course_address, parse_address, write_address

A, B = "01_soft_dictionary_lookup", "02_dot_product_attention"
DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
UTC = timezone.utc


def course_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_course_file_gives_due_dates_extensions_and_policy(tmp_path: Path) -> None:
    path = course_file(
        tmp_path,
        'repository = ""\n[due]\n01_soft_dictionary_lookup = 2026-12-02T00:59:00+01:00\n'
        "[late]\npenalty_per_day = 0.1\nzero_after_days = 7\ngrace_minutes = 5\n"
        '[extensions."j.smith"]\n01_soft_dictionary_lookup = 2026-12-03T23:59:00Z\n',
    )
    deadlines = load_deadlines(path, [A, B])
    assert deadlines.due == {A: DUE}  # +01:00 read as the same moment in UTC
    assert deadlines.due_for("j.smith", A) == DUE + timedelta(days=2)
    assert deadlines.due_for("bob", A) == DUE and deadlines.due_for("bob", B) is None
    assert deadlines.policy == LatePolicy(0.1, 7.0, 5.0)
    assert load_deadlines(tmp_path / "absent.toml", [A]) == Deadlines()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[due]\n01_soft_dictionary_lookup = 2026-12-01T23:59:00\n", "time zone"),
        ("[due]\n01_soft_dictionary_lookup = 2026-12-01\n", "time zone"),
        ("[due]\n99_nothing = 2026-12-01T23:59:00Z\n", "no assignment '99_nothing'"),
        ("[late]\npenalty_per_day = 1.5\n", "between 0 and 1"),
        ("[late]\npenalty_per_dya = 0.1\n", "no setting penalty_per_dya"),
        ("[extensions]\nbob = 2026-12-01T23:59:00Z\n", "extensions.bob must be a table"),
        ("[due\n", "course.toml"),
    ],
)
def test_course_file_mistakes_are_named(tmp_path: Path, text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint.replace(".", r"\.").replace("'", ".")):
        load_deadlines(course_file(tmp_path, text), [A])


@pytest.mark.parametrize(
    ("late_by", "share"),
    [
        (timedelta(0), 0.0),
        (timedelta(minutes=4), 0.0),  # within the grace
        (timedelta(minutes=6), 0.1),  # a part of a day counts as a day
        (timedelta(days=1, minutes=5), 0.1),  # the grace comes off first
        (timedelta(days=1, minutes=6), 0.2),
        (timedelta(days=6, hours=23), 0.7),
        (timedelta(days=7, hours=1), 1.0),  # past zero_after_days
    ],
)
def test_late_policy_share(late_by: timedelta, share: float) -> None:
    assert LatePolicy(0.1, 7, 5).share_lost(late_by) == pytest.approx(share)


def row(student: str, score: float = 8.0, kind: Kind = Kind.GRADED) -> GradeRow:
    return GradeRow(student, A, score, 10.0, Outcome(kind))


def test_rows_are_held_to_their_own_due_date() -> None:
    deadlines = Deadlines({A: DUE}, {("ext", A): DUE + timedelta(days=3)}, LatePolicy(penalty_per_day=0.25))
    times = {
        ("early", A): SubmittedAt(DUE - timedelta(hours=1), "timestamp.txt"),
        ("late", A): SubmittedAt(DUE + timedelta(hours=30), "zip entry date"),
        ("ext", A): SubmittedAt(DUE + timedelta(hours=30), "timestamp.txt"),
        ("broken", A): SubmittedAt(DUE + timedelta(days=9), "timestamp.txt"),
    }
    rows = [row("early"), row("late"), row("ext"), row("unknown"), row("broken", 0.0, Kind.UNREADABLE)]
    early, late, ext, unknown, broken = apply_deadlines(rows, times, deadlines)
    assert (early.score, early.lateness.penalty, early.outcome.notes) == (8.0, 0.0, ())
    assert early.lateness.submitted_at == DUE - timedelta(hours=1)
    assert late.score == 4.0 and late.lateness.penalty == 4.0 and late.lateness.late_by == timedelta(hours=30)
    assert late.outcome.notes == (
        "late by 1 day 6 h (handed in 2026-12-03 05:59 UTC by its zip entry date, due date 2026-12-01 23:59 UTC): "
        "50% off, 4 of the 8 points its tests gave",
    )
    assert ext.score == 8.0 and ext.lateness.extended and not ext.outcome.notes
    assert unknown.score == 8.0 and "not held to the due date 2026-12-01 23:59 UTC" in unknown.status
    assert broken == rows[-1]  # nothing graded, nothing to take off
    undated = apply_deadlines(rows, times, Deadlines())  # no due date: no change but the time handed in
    assert [r.score for r in undated] == [r.score for r in rows] and all(not r.outcome.notes for r in undated)
    assert undated[1].lateness is not None and undated[1].lateness.due is None
    assert undated[1].lateness.submitted_at == DUE + timedelta(hours=30) and undated[3].lateness is None


def test_intake_reads_nbgraders_timestamp_and_zip_dates(tmp_path: Path) -> None:
    submitted = tmp_path / "submitted" / "alice" / A
    submitted.mkdir(parents=True)
    (submitted / f"{A}.ipynb").write_text("{}")
    (submitted / "timestamp.txt").write_text("2026-12-02 08:15:00.123456 UTC")
    (tmp_path / "submitted" / "dan" / A).mkdir(parents=True)  # nbgrader's layout holds a folder per student
    (tmp_path / "submitted" / "dan" / A / f"{A}.ipynb").write_text("{}")
    with opened(tmp_path / "submitted") as received:
        intake = take_in(received, [A], {})
    assert intake.chosen[("alice", A)].submitted_at == SubmittedAt(datetime(2026, 12, 2, 8, 15, 0, 123456, UTC), "timestamp.txt")
    assert intake.chosen[("dan", A)].submitted_at is None  # a folder's file dates say nothing of when it was handed in

    (submitted / "timestamp.txt").write_text("not a time")
    assert read_timestamp(submitted / f"{A}.ipynb") is None
    (submitted / "timestamp.txt").write_text("2" * 500)  # too long to be a time: not read
    assert read_timestamp(submitted / f"{A}.ipynb") is None

    archive = tmp_path / "lms.zip"
    inner = tmp_path / "bob.zip"
    with zipfile.ZipFile(inner, "w") as zipped:  # the student's own zip: dated by the student's clock
        zipped.writestr(zipfile.ZipInfo(f"{A}.ipynb", date_time=(1999, 1, 1, 0, 0, 0)), "{}")
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(zipfile.ZipInfo(f"carol/{A}.ipynb", date_time=(2026, 12, 2, 9, 30, 0)), "{}")
        zipped.write(inner, "bob.zip")
    with opened(archive) as received:
        intake = take_in(received, [A], {})
    carol = intake.chosen[("carol", A)].submitted_at
    assert carol is not None and carol.source == "zip entry date"
    assert carol.time == datetime(2026, 12, 2, 9, 30).astimezone(UTC)  # the zip's local time, read in this machine's zone
    bob = intake.chosen[("bob", A)].submitted_at
    assert bob is not None and bob.time.year != 1999  # the outer entry's date, not the inner zip's


def test_setting_the_address_keeps_the_due_dates(tmp_path: Path) -> None:
    path = course_file(tmp_path, '# mine\nrepository = ""\nbranch = "main"\n\n[due]\n01_soft_dictionary_lookup = 2026-12-01T23:59:00Z\n')
    write_address(parse_address("https://github.com/someone/attention", "term2"), path)
    assert course_address(path).repository == "https://github.com/someone/attention"
    assert course_address(path).branch == "term2"
    assert load_deadlines(path, [A]).due == {A: DUE}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-02 08:15:00.123456 UTC", datetime(2026, 12, 2, 8, 15, 0, 123456, UTC)),  # as nbgrader's exchange writes it
        ("2026-12-02T09:15:00+01:00", datetime(2026, 12, 2, 8, 15, tzinfo=UTC)),
        ("2026-12-02 08:15:00", datetime(2026, 12, 2, 8, 15, tzinfo=UTC)),
        ("2026-12-02 08:15:00 /dev/stdin", None),  # a general parser would open this as a time-zone file, and wait
        ("2026-13-02 08:15:00 UTC", None),
        ("yesterday", None),
    ],
)
def test_a_hand_in_time_is_read_strictly(text: str, expected: datetime | None) -> None:
    found = parse_timestamp(text)
    assert (found.time if found else None) == expected


def test_within_the_grace_is_on_time_and_all_lost_is_zero() -> None:
    deadlines = Deadlines({A: DUE}, {}, LatePolicy(penalty_per_day=1.0, grace_minutes=10))
    times = {
        ("grace", A): SubmittedAt(DUE + timedelta(minutes=9), "timestamp.txt"),
        ("late", A): SubmittedAt(DUE + timedelta(hours=1), "timestamp.txt"),
    }
    grace, late = apply_deadlines([row("grace", 7.3), row("late", 7.3)], times, deadlines)
    assert grace.score == 7.3 and not grace.outcome.notes and grace.lateness.late_by == timedelta(0)
    assert late.score == 0.0 and late.lateness.penalty == 7.3 and "100% off" in late.status


def test_a_timestamp_handed_in_inside_a_zip_is_never_read(tmp_path: Path) -> None:
    """The LMS dates its zip's entries; a timestamp.txt in the student's own zip is the student's text."""
    inner = tmp_path / "smith.zip"
    with zipfile.ZipFile(inner, "w") as zipped:
        zipped.writestr(zipfile.ZipInfo(f"{A}.ipynb", date_time=(2026, 12, 20, 0, 0, 0)), "{}")
        zipped.writestr("timestamp.txt", "2000-01-01 00:00:00.000000 UTC")
    lms = tmp_path / "lms.zip"
    with zipfile.ZipFile(lms, "w") as zipped:
        info = zipfile.ZipInfo("smith_12345_67890_sub.zip", date_time=(2026, 12, 20, 12, 0, 0))
        zipped.writestr(info, inner.read_bytes())
        zipped.writestr(zipfile.ZipInfo("jones_12346_67891_sub.zip", date_time=(2026, 12, 20, 12, 0, 0)), inner.read_bytes())
    with opened(lms) as received:
        intake = take_in(received, [A], {})
    smith = intake.chosen[("smith", A)].submitted_at
    assert smith is not None and smith.source == "zip entry date" and smith.time == datetime(2026, 12, 20, 12, 0).astimezone(UTC)

    folder = tmp_path / "folder"
    (folder / "smith").mkdir(parents=True)
    (folder / "jones").mkdir()
    shutil.copy(inner, folder / "smith" / "work.zip")  # the student's zip in a folder: nobody dated it
    shutil.copy(inner, folder / "jones" / "work.zip")
    with opened(folder) as received:
        intake = take_in(received, [A], {})
    assert intake.chosen[("smith", A)].submitted_at is None


def test_a_copy_in_the_students_own_zip_or_sub_folder_never_sheds_the_folders_hand_in_time(tmp_path: Path) -> None:
    """A late hand-in in nbgrader's layout, with a copy of the notebook dated 2099 in a zip and in a sub-folder beside it:
    the notebook its timestamp.txt dates is graded, late; a copy alone keeps the folder's time."""
    late = "2026-12-09 08:00:00.000000 UTC"
    inner = tmp_path / "copy.zip"
    with zipfile.ZipFile(inner, "w") as zipped:
        zipped.writestr(zipfile.ZipInfo(f"{A}.ipynb", date_time=(2099, 1, 1, 0, 0, 0)), '{"copy": 1}')
        zipped.writestr("timestamp.txt", "2000-01-01 00:00:00.000000 UTC")  # the student's text: never read
    submitted = tmp_path / "submitted"
    for student, keeps_original in (("mia", True), ("ned", False)):
        folder = submitted / student / A
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text(late)
        if keeps_original:
            (folder / f"{A}.ipynb").write_text("{}")
        shutil.copy(inner, folder / "copy.zip")
        (folder / "old").mkdir()
        (folder / "old" / f"{A}.ipynb").write_text('{"old": 1}')
        os.utime(folder / "old" / f"{A}.ipynb", (4_070_908_800, 4_070_908_800))  # dated 2099 too
    with opened(submitted) as received:
        intake = take_in(received, [A], {})
        mia, ned = intake.chosen[("mia", A)], intake.chosen[("ned", A)]
        assert mia.received_as == f"mia/{A}/{A}.ipynb"  # not the zip's copy, nor the sub-folder's, though both are newer
        assert f"not 'mia/{A}/copy/{A}.ipynb', 'mia/{A}/old/{A}.ipynb'" in mia.notes[-1]
        assert ned.received_as in (f"ned/{A}/copy/{A}.ipynb", f"ned/{A}/old/{A}.ipynb")
    moment = datetime(2026, 12, 9, 8, 0, tzinfo=UTC)
    assert mia.submitted_at == SubmittedAt(moment, "timestamp.txt")
    assert ned.submitted_at == SubmittedAt(moment, "timestamp.txt")  # the copy graded still carries the folder's time
