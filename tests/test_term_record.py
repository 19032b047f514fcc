"""OUT keeps the term: runs over other assignments or other sources add to it, and several sources are one class.

Tiny classes of notebooks 01-03 (the cheapest to grade), built from the released notebooks and the solutions:
each run grades a few notebooks, and what the earlier runs wrote into the same OUT must still be there after it.
"""

from __future__ import annotations

import csv
import json
import shutil
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from autograder.__main__ import main
from autograder.grading.cache import RECORD_FILE, TermRecord
from autograder.grading.models import STALE_NOTE, AssignmentSpec
from autograder.grading.reports import GRADES_CSV, LMS_IMPORT_CSV, TESTS_CSV
from autograder.mistakes import MISTAKES
from autograder.settings import SOLUTIONS_DIR
from autograder.submissions import solved, write_submission

A, B, C = "01_soft_dictionary_lookup", "02_dot_product_attention", "03_scaled_dot_product_attention"
SPECS = {name: AssignmentSpec.load(SOLUTIONS_DIR, name) for name in (A, B, C)}
MISTAKE = next(m for m in MISTAKES[A] if m.name == "softmax without subtracting the max")
WITH_MISTAKE = SPECS[A].max_score - sum(SPECS[A].tests[t] for t in MISTAKE.loses)  # what the catalogue says it loses
ROSTER = ["ann", "bob", "erin"]


def exchange_hand_in(submitted: Path, student: str, assignment: str, notebook, when: str) -> Path:
    """As ``nbgrader collect`` leaves it: submitted/STUDENT/ASSIGNMENT/ASSIGNMENT.ipynb beside the exchange's timestamp.txt."""
    path = write_submission(submitted / student, assignment, assignment, notebook)
    (path.parent / "timestamp.txt").write_text(when)
    return path


def lms_zip(path: Path, files: dict[str, tuple[object, tuple[int, ...]]]) -> Path:
    """A zip as an LMS exports it: each entry dated when it was handed in."""
    with zipfile.ZipFile(path, "w") as zipped:
        for name, (notebook, date) in files.items():
            zipped.writestr(zipfile.ZipInfo(name, date_time=date), nbformat.writes(notebook))
    return path


def grade_cli(*args: str | Path) -> int:
    return main(["grade", *map(str, args)])


def rows_of(out: Path, filename: str = GRADES_CSV) -> list[dict[str, str]]:
    with (out / filename).open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def by_pair(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["student_id"], r["assignment"]): r for r in rows_of(out)}


def files_of(out: Path, student: str, assignment: str) -> list[Path]:
    return [out / "feedback" / student / f"{assignment}.html", out / "autograded" / student / f"{assignment}.ipynb"]


@pytest.mark.slow
def test_three_assignments_in_three_runs_build_one_term(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, roster = tmp_path / "graded", tmp_path / "roster.csv"
    roster.write_text("Name,Username\n" + "".join(f"{s.title()},{s}\n" for s in ROSTER), encoding="utf-8")
    submitted = tmp_path / "submitted"  # the exchange's: 01 from ann (right) and bob (a catalogued mistake)
    exchange_hand_in(submitted, "ann", A, solved(A), "2026-12-01 20:00:00.000000 UTC")
    exchange_hand_in(submitted, "bob", A, solved(A, [MISTAKE]), "2026-12-01 21:00:00.000000 UTC")
    second = tmp_path / "second"  # 02 from ann, a plain folder
    write_submission(second, "ann", B, solved(B))
    zipped = lms_zip(tmp_path / "lms.zip", {f"erin_12345_67890_{C}.ipynb": (solved(C), (2026, 12, 8, 9, 0, 0))})  # 03 from erin

    for source in (submitted, second, zipped):
        assert grade_cli(source, "--out", out, "--roster", roster) == 0
    first = by_pair(out)
    graded = {("ann", A), ("bob", A), ("ann", B), ("erin", C)}
    assert set(first) == {(s, n) for s in ROSTER for n in (A, B, C)}  # every run's rows, the roster's missing ones too
    assert {pair for pair, row in first.items() if row["kind"] == "graded"} == graded
    assert float(first[("ann", A)]["score"]) == SPECS[A].max_score and float(first[("bob", A)]["score"]) == WITH_MISTAKE
    assert float(first[("ann", B)]["score"]) == SPECS[B].max_score and float(first[("erin", C)]["score"]) == SPECS[C].max_score
    assert all(path.is_file() for pair in graded for path in files_of(out, *pair))
    assert {(r["student_id"], r["assignment"]) for r in rows_of(out, TESTS_CSV)} == set(first)

    # The second run again, unchanged: nothing graded, and every pair keeps its row and files.
    capsys.readouterr()
    assert grade_cli(second, "--out", out, "--roster", roster) == 0
    assert "3 unchanged since the last run, not graded again" in capsys.readouterr().out
    assert by_pair(out) == first
    assert all(path.is_file() for pair in graded for path in files_of(out, *pair))
    lms = rows_of(out, LMS_IMPORT_CSV)
    assert list(lms[0]) == ["Name", "Username", A, B, C]  # every assignment OUT holds, whichever run gave it
    assert [(r["Username"], r[A], r[B], r[C]) for r in lms] == [
        ("ann", f"{SPECS[A].max_score:g}", f"{SPECS[B].max_score:g}", "0"),
        ("bob", f"{WITH_MISTAKE:g}", "0", "0"),
        ("erin", "0", "0", f"{SPECS[C].max_score:g}"),
    ]
    summary = json.loads((out / "class-report.json").read_text(encoding="utf-8"))
    assert [n["assignment"] for n in summary["notebooks"]] == [A, B, C]

    # bob's notebook is gone from the exchange's folder, and ann's feedback page from OUT: the exchange graded again keeps
    # bob's row and files, marked stale, and grades ann's again, since OUT no longer holds all that her row came with.
    shutil.rmtree(submitted / "bob")
    (out / "feedback" / "ann" / f"{A}.html").unlink()
    assert grade_cli(submitted, "--out", out, "--roster", roster) == 0
    after = by_pair(out)
    assert after[("bob", A)]["score"] == first[("bob", A)]["score"] and after[("bob", A)]["kind"] == "graded"
    assert f"{STALE_NOTE}graded " in after[("bob", A)]["status"] and "which is no longer there" in after[("bob", A)]["status"]
    assert all(path.is_file() for path in files_of(out, "bob", A))
    assert (out / "feedback" / "ann" / f"{A}.html").is_file() and after[("ann", A)] == first[("ann", A)]
    assert {pair: row for pair, row in after.items() if pair != ("bob", A)} == {p: r for p, r in first.items() if p != ("bob", A)}


@pytest.mark.slow
def test_several_sources_are_one_class_and_the_latest_hand_in_is_graded(tmp_path: Path) -> None:
    submitted = tmp_path / "submitted"
    exchange_hand_in(submitted, "ann", A, solved(A, [MISTAKE]), "2026-12-02 08:00:00.000000 UTC")  # her first try
    exchange_hand_in(submitted, "bob", A, solved(A), "2026-12-05 08:00:00.000000 UTC")
    # The LMS's zip, placed among the exchange's folders: a source of its own, never a student called 'submissions'.
    lms_zip(
        submitted / "submissions.zip",
        {
            f"ann_12345_67890_{A}.ipynb": (solved(A), (2026, 12, 3, 8, 0, 0)),  # later than her exchange hand-in: graded
            f"bob_12346_67891_{A}.ipynb": (solved(A, [MISTAKE]), (2026, 12, 1, 8, 0, 0)),  # earlier than his: not graded
        },
    )
    extra = tmp_path / "extra"  # a plain folder named on the command line too
    write_submission(extra, "cy", A, solved(A, [MISTAKE]))
    out = tmp_path / "out"
    assert grade_cli(submitted, extra, "--out", out) == 0
    rows = by_pair(out)
    assert set(rows) == {("ann", A), ("bob", A), ("cy", A)}
    assert float(rows[("ann", A)]["score"]) == SPECS[A].max_score and float(rows[("bob", A)]["score"]) == SPECS[A].max_score
    assert float(rows[("cy", A)]["score"]) == WITH_MISTAKE
    ann, bob = rows[("ann", A)]["status"], rows[("bob", A)]["status"]
    assert f"graded 'ann_12345_67890_{A}.ipynb' in " in ann and f"not 'ann/{A}/{A}.ipynb' in " in ann and "(the later hand-in)" in ann
    assert f"graded 'bob/{A}/{A}.ipynb' in " in bob and f"not 'bob_12346_67891_{A}.ipynb' in " in bob
    zip_time = datetime(2026, 12, 3, 8, 0).astimezone(timezone.utc)  # a zip's local time, read in this machine's zone
    assert rows[("ann", A)]["submitted_at"] == zip_time.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rows[("bob", A)]["submitted_at"] == "2026-12-05T08:00:00Z"

    # The same rule across runs: an earlier hand-in from another source is not graded over ann's later one, a later one is.
    exchange_hand_in(tmp_path / "older", "ann", A, solved(A, [MISTAKE]), "2026-12-02 12:00:00.000000 UTC")
    assert grade_cli(tmp_path / "older", "--out", out) == 0
    kept = by_pair(out)[("ann", A)]
    assert {k: v for k, v in kept.items() if k != "status"} == {k: v for k, v in rows[("ann", A)].items() if k != "status"}
    assert kept["status"].startswith(rows[("ann", A)]["status"])
    assert f"also handed in as 'ann/{A}/{A}.ipynb' in {tmp_path / 'older'} (handed in 2026-12-02 12:00 UTC), not graded" in kept["status"]
    exchange_hand_in(tmp_path / "newest", "ann", A, solved(A, [MISTAKE]), "2026-12-09 12:00:00.000000 UTC")
    assert grade_cli(tmp_path / "newest", "--out", out) == 0
    replaced = by_pair(out)[("ann", A)]
    assert float(replaced["score"]) == WITH_MISTAKE and replaced["submitted_at"] == "2026-12-09T12:00:00Z"
    assert "also handed in" not in replaced["status"]  # graded again: the earlier row and its remark are gone
    assert {p: r for p, r in by_pair(out).items() if p[0] != "ann"} == {p: r for p, r in rows.items() if p[0] != "ann"}


def test_a_folder_that_is_not_a_class_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "images").mkdir(parents=True)
    (docs / "images" / "plot.png").write_bytes(b"\x89PNG")
    (docs / "guide.md").write_text("# A guide\n")
    (tmp_path / "roster.csv").write_text("student\nann\nbob\n")
    (tmp_path / "class" / "ann").mkdir(parents=True)
    write_submission(tmp_path / "class", "ann", A, solved(A))
    for sources in ([docs], [tmp_path / "class", docs]):  # alone, or beside a class: either way it is no source
        assert grade_cli(*sources, "--out", tmp_path / "out", "--roster", tmp_path / "roster.csv") == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and error.startswith(f"error: no notebooks found in {docs}, so it is no class")
    assert not (tmp_path / "out").exists()  # nothing written: no rows marked missing, no student 'images', no LMS file


def test_a_record_that_is_not_one_is_refused_and_never_reaches_outside_out(tmp_path: Path) -> None:
    path = tmp_path / RECORD_FILE
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not a grading record this autograder can read"):
        TermRecord(path, [A])
    entry = {
        "grade": {"student_id": "ann", "assignment": A, "score": 1.0, "max_score": 2.0, "outcome": {"kind": "graded"}},
        "tests": [],
        "key": "k",
        "source": "/somewhere",
        "received_as": f"ann/{A}.ipynb",
        "submitted_at": None,
        "files": [f"feedback/ann/{A}.html"],
        "graded_on": "2026-12-01 10:00 UTC",
        "remark": "",
    }
    record = {"schema": "attention-course/grading-record", "version": 1, "entries": [entry], "unplaced": {}}
    path.write_text(json.dumps(record))
    assert TermRecord(path, [A]).entries[("ann", A)].files == (f"feedback/ann/{A}.html",)
    for field, value, complaint in (
        ("files", ["feedback/../../etc/passwd"], "outside its own feedback/ and autograded/"),
        ("files", [f"feedback/bob/{A}.html"], "outside its own"),
        ("grade", {**entry["grade"], "score": 3.0}, "a score of 3.0 out of 2.0"),
        ("grade", {**entry["grade"], "assignment": "99_gone"}, "the course has no assignment '99_gone'"),
        ("submitted_at", {"time": "2026-12-01T10:00:00", "source": "timestamp.txt"}, "without its time zone"),
    ):
        path.write_text(json.dumps({**record, "entries": [{**entry, field: value}]}))
        with pytest.raises(ValueError, match=complaint.replace("(", r"\(").replace(".", r"\.")):
            TermRecord(path, [A])
