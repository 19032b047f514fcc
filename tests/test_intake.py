"""Intake and repair without grading: which file is whose, and how a damaged notebook is mended."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import nbformat
import pytest
from helpers import ASSIGNMENTS

from autograder.grading import admission
from autograder.grading.admission import repair
from autograder.grading.intake import (
    DEFAULT_STUDENT_PATTERN,
    clean_stem,
    opened,
    opened_sources,
    split_student,
    take_in,
    take_in_all,
)
from autograder.grading.models import AssignmentSpec
from autograder.settings import SOLUTIONS_DIR
from autograder.submissions import released, solved
from course_utils.notebook_cells import is_solution_cell, is_test_cell

FIRST, THIRD = ASSIGNMENTS[0], ASSIGNMENTS[2]
FUNCTIONS = {a: set(AssignmentSpec.load(SOLUTIONS_DIR, a).functions) for a in ASSIGNMENTS}


def write(path: Path, notebook=None, *, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook if notebook is not None else released(FIRST), path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        (f"Copy of {FIRST}.ipynb", FIRST),
        (f"Copy of Copy of {FIRST}.ipynb", FIRST),
        (f"{FIRST} (1).ipynb", FIRST),
        (f"{FIRST}(2) (3).ipynb", FIRST),
        (f"{FIRST}-checkpoint.ipynb", FIRST),
    ],
)
def test_clean_stem_undoes_what_downloads_add(name: str, stem: str) -> None:
    assert clean_stem(name) == stem


@pytest.mark.parametrize(
    ("name", "student", "rest"),
    [
        (f"smith_12345_67890_{THIRD}.ipynb", "smith", f"{THIRD}.ipynb"),
        (f"smith_LATE_12345_67890_{THIRD}.ipynb", "smith", f"{THIRD}.ipynb"),
        ("Jane Smith_123456_assignsubmission_file_", "Jane Smith", "assignsubmission_file_"),
        (f"{THIRD}.ipynb", None, f"{THIRD}.ipynb"),
    ],
)
def test_default_pattern_reads_lms_names(name: str, student: str | None, rest: str) -> None:
    assert split_student(name, re.compile(DEFAULT_STUDENT_PATTERN)) == (student, rest)


def test_a_flat_lms_download_is_placed_file_by_file(tmp_path: Path) -> None:
    write(tmp_path / f"smith_12345_67890_{FIRST}.ipynb")
    write(tmp_path / f"jones_222_333_Copy of {FIRST} (1).ipynb")
    write(tmp_path / f"lee_444_555_{THIRD[:2]}_my_attention.ipynb", released(THIRD))  # matched by its number
    write(tmp_path / "kim_666_777_homework.ipynb", solved(THIRD))  # matched by what it defines
    write(tmp_path / "homework.ipynb")  # whose?
    intake = take_in(tmp_path, ASSIGNMENTS, FUNCTIONS)
    assert sorted(intake.chosen) == [("jones", FIRST), ("kim", THIRD), ("lee", THIRD), ("smith", FIRST)]
    assert any("received as 'jones_222_333_Copy of" in n for n in intake.chosen[("jones", FIRST)].notes)
    assert any("by its number" in n for n in intake.chosen[("lee", THIRD)].notes)
    assert intake.chosen[("smith", FIRST)].notes == ()  # an LMS prefix alone is not worth a note
    assert any("by the functions it defines" in n for n in intake.chosen[("kim", THIRD)].notes)
    assert [why for _, why in intake.unplaced] == [
        f"cannot tell whose file 'homework.ipynb' is (its name does not match the student pattern {DEFAULT_STUDENT_PATTERN!r})"
    ]


def test_student_folders_take_renamed_files_and_prefer_the_released_name(tmp_path: Path) -> None:
    write(tmp_path / "ana" / f"Copy of {FIRST}.ipynb")
    write(tmp_path / "bo" / f"{FIRST} (1).ipynb", mtime=2_000_000_000)
    write(tmp_path / "bo" / f"{FIRST}.ipynb", mtime=1_000_000_000)  # older, but under the released name
    write(tmp_path / "cy" / f"{FIRST} (1).ipynb", mtime=1_000_000_000)
    write(tmp_path / "cy" / f"{FIRST} (2).ipynb", mtime=2_000_000_000)  # the newest copy wins
    intake = take_in(tmp_path, ASSIGNMENTS, FUNCTIONS)
    assert intake.chosen[("ana", FIRST)].received_as == f"ana/Copy of {FIRST}.ipynb"
    assert intake.chosen[("bo", FIRST)].received_as == f"bo/{FIRST}.ipynb"
    assert intake.chosen[("cy", FIRST)].received_as == f"cy/{FIRST} (2).ipynb"
    assert f"graded 'cy/{FIRST} (2).ipynb', not 'cy/{FIRST} (1).ipynb'" in intake.chosen[("cy", FIRST)].notes


def test_a_custom_pattern_maps_names_to_students(tmp_path: Path) -> None:
    write(tmp_path / f"{FIRST}__s1234567.ipynb")
    intake = take_in(tmp_path, ASSIGNMENTS, FUNCTIONS, student_pattern=r".*__(?P<student>s\d{7})\.ipynb$")
    assert list(intake.chosen) == [("s1234567", FIRST)]
    with pytest.raises(ValueError, match="named group"):
        take_in(tmp_path, ASSIGNMENTS, FUNCTIONS, student_pattern=r"(\w+)_")


def test_a_zip_with_a_wrapping_folder_and_zips_inside(tmp_path: Path) -> None:
    inner = tmp_path / "inner.zip"
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr(f"{FIRST}.ipynb", nbformat.writes(released(FIRST)))
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"Assignment 1/smith_1001_2002_{FIRST}.ipynb", nbformat.writes(released(FIRST)))
        z.write(inner, "Assignment 1/jones_3003_4004_submission.zip")
        z.writestr("Assignment 1/__MACOSX/._junk.ipynb", "junk")
        z.writestr("Assignment 1/../../escape.ipynb", "outside")  # a hostile path stays inside the extraction
    before = sorted(p.name for p in tmp_path.iterdir())
    with opened(archive) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
        assert sorted(intake.chosen) == [("jones", FIRST), ("smith", FIRST)]
        assert [h.received_as for h, _ in intake.unplaced] == ["escape.ipynb"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing extracted beside the original
    assert not (tmp_path.parent / "escape.ipynb").exists()


def test_a_bad_zip_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "class.zip").write_text("not a zip")
    with pytest.raises(ValueError, match="not a readable zip"):
        with opened(tmp_path / "class.zip"):
            pass


def strip_metadata(notebook):
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
    return notebook


def grade_ids(notebook) -> list[str | None]:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_stripped_metadata_is_restored_on_the_right_cells(assignment: str) -> None:
    original = solved(assignment)
    fixed, repairs = repair(strip_metadata(solved(assignment)), released(assignment))
    assert grade_ids(fixed) == grade_ids(original)
    assert len(repairs.restored_metadata) == sum(g is not None for g in grade_ids(original))
    assert not repairs.deleted_tests and not repairs.edited_tests and not repairs.missing_functions


def test_a_cell_of_megabytes_is_not_compared_word_by_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """Matching cells without metadata costs the product of their lengths: a hostile cell of
    megabytes, compared with each released cell, would hold the grader outside any sandbox limit.
    Lengths this far apart cannot reach the threshold, so no comparison may start on it."""
    compared: list[int] = []

    class CountingMatcher(admission.difflib.SequenceMatcher):
        def __init__(self, isjunk, a, b, autojunk=True) -> None:
            compared.append(max(len(a), len(b)))
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(admission.difflib, "SequenceMatcher", CountingMatcher)
    body = "\n".join(c.source for c in released(FIRST).cells if c.cell_type == "code" and not is_solution_cell(c))
    notebook = solved(FIRST)
    for cell in notebook.cells:
        if is_test_cell(cell):
            cell.source += "\n# checked"  # edited a little: each is found by similarity, not equality
    notebook = strip_metadata(notebook)
    huge = [nbformat.v4.new_code_cell(body * 40), nbformat.v4.new_markdown_cell("attention is a soft lookup " * 20_000)]
    notebook.cells[3:3] = huge
    fixed, repairs = repair(notebook, released(FIRST))
    assert grade_ids(fixed) == _with_none_at(solved(FIRST), 3, len(huge))  # every cell still found; the huge ones stay ordinary
    assert not repairs.deleted_tests and not repairs.missing_functions
    longest_released = max(len(admission.cell_tokens(c)) for c in released(FIRST).cells)
    assert compared and max(compared) <= 4 * longest_released, f"a comparison read {max(compared)} tokens"


def _with_none_at(notebook, index: int, count: int) -> list[str | None]:
    ids = grade_ids(notebook)
    return ids[:index] + [None] * count + ids[index:]


def test_repair_names_deleted_and_edited_tests_and_missing_functions() -> None:
    notebook = solved(FIRST)
    tests = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]
    notebook.cells.remove(tests[0])
    tests[1].source = "assert True"
    for cell in notebook.cells:
        cell.source = cell.source.replace("def attention_entropy(", "def entropy(")
    original = nbformat.writes(notebook)
    _, repairs = repair(notebook, released(FIRST))
    assert nbformat.writes(notebook) == original  # the submission itself is not modified
    ids = lambda cell: cell.metadata["nbgrader"]["grade_id"]  # noqa: E731
    assert repairs.deleted_tests == [ids(tests[0])]
    assert repairs.edited_tests == [ids(tests[1])]
    assert repairs.missing_functions == ["attention_entropy"]
    assert "not defined anywhere (renamed or deleted?): attention_entropy" in repairs.notes()


def test_a_notebook_of_other_cells_gets_no_metadata() -> None:
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('hello')"), nbformat.v4.new_markdown_cell("# notes")])
    fixed, repairs = repair(other, released(FIRST))
    assert grade_ids(fixed) == [None, None] and repairs.restored_metadata == []


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def test_a_zip_bomb_is_refused_entry_by_entry_and_the_honest_notebook_is_kept(tmp_path: Path) -> None:
    from autograder.settings import ArchiveLimits

    honest = nbformat.writes(released(FIRST)).encode()
    inner = _zip(tmp_path / "inner.zip", {f"{FIRST}.ipynb": b"\0" * (3 << 20)})  # a nested bomb, 3 MiB of zeros
    archive = _zip(
        tmp_path / "class.zip",
        {
            f"smith/{FIRST}.ipynb": honest,
            f"bomb/{FIRST}.ipynb": b"\0" * (3 << 20),  # inflates past the 1 MiB limit per file set below
            "nested.zip": inner.read_bytes(),
            "stray.bin": b"\0" * (3 << 20),  # no student or assignment can be read off it: an unplaced row
        },
    )
    limits = ArchiveLimits(entry_bytes=1 << 20, total_bytes=64 << 20, entries=100)
    with opened(archive, limits) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
        written = sum(p.stat().st_size for p in received.root.rglob("*") if p.is_file())
    assert sorted(intake.chosen) == [("smith", FIRST)]
    assert intake.refused[("bomb", FIRST)] == f"'bomb/{FIRST}.ipynb': not extracted: it inflates to more than 1 MiB, the limit for one file"
    assert ("nested", FIRST) in intake.refused
    assert [why for _, why in intake.unplaced_refused] == [
        "'stray.bin': not extracted: it inflates to more than 1 MiB, the limit for one file"
    ]
    assert "bomb" in intake.students and written < 2 * len(honest) + 4096  # nothing of the bombs reached the disk


def test_a_lying_zip_is_counted_as_it_inflates(tmp_path: Path) -> None:
    """An entry that declares a small size but inflates to more is cut off at the limit, never written whole."""
    from autograder.settings import ArchiveLimits

    archive = _zip(tmp_path / "class.zip", {f"liar/{FIRST}.ipynb": b"\0" * (3 << 20)})
    data = bytearray(archive.read_bytes())
    declared = (3 << 20).to_bytes(4, "little")
    assert data.count(declared) == 2  # the local header and the central directory
    data[:] = data.replace(declared, (100).to_bytes(4, "little"))  # claim 100 bytes
    archive.write_bytes(bytes(data))
    with opened(archive, ArchiveLimits(entry_bytes=1 << 20, total_bytes=8 << 20, entries=10)) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
        assert not any(p.stat().st_size > 100 for p in received.root.rglob("*.ipynb"))
    assert intake.refused[("liar", FIRST)].startswith(f"'liar/{FIRST}.ipynb': not extracted")
    assert not intake.chosen


def test_too_many_entries_and_too_many_bytes_in_all_are_refused(tmp_path: Path) -> None:
    from autograder.settings import ArchiveLimits

    honest = nbformat.writes(released(FIRST)).encode()
    entries = {f"s{i}/{FIRST}.ipynb": honest for i in range(5)}
    with opened(_zip(tmp_path / "many.zip", entries), ArchiveLimits(entry_bytes=1 << 20, total_bytes=64 << 20, entries=3)) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
    assert sorted(s for s, _ in intake.chosen) == ["s0", "s1", "s2"]
    assert sorted(s for s, _ in intake.refused) == ["s3", "s4"] and "more than 3 files" in intake.refused[("s3", FIRST)]
    with opened(
        _zip(tmp_path / "big.zip", entries), ArchiveLimits(entry_bytes=1 << 20, total_bytes=2 * len(honest) + 1, entries=99)
    ) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
    assert len(intake.chosen) == 2 and len(intake.refused) == 3
    assert "inflate to more than" in next(iter(intake.refused.values()))


def test_links_are_never_followed(tmp_path: Path) -> None:
    submissions = tmp_path / "submissions"
    write(submissions / "honest" / f"{FIRST}.ipynb")
    (submissions / "linker").mkdir()
    (submissions / "linker" / f"{FIRST}.ipynb").symlink_to(SOLUTIONS_DIR / FIRST / f"{FIRST}.ipynb")
    (submissions / "folder-link").symlink_to(SOLUTIONS_DIR / FIRST)  # a whole folder, linked
    with opened(submissions) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
    assert sorted(intake.chosen) == [("honest", FIRST)]
    assert "a symbolic link" in intake.refused[("linker", FIRST)]
    assert [h.received_as for h, _ in intake.unplaced_refused] == ["folder-link"]
    assert "folder-link" not in intake.students  # one row for it (refused), not a 'missing' row per assignment too
    archive = _zip(tmp_path / "with-links.zip", {f"zipped/{FIRST}.ipynb": nbformat.writes(released(FIRST)).encode()})
    shutil_copy = submissions / "class.zip"
    shutil_copy.write_bytes(archive.read_bytes())  # a zip beside the links: the folder is copied, links stay links
    with opened(submissions) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
    assert ("linker", FIRST) in intake.refused and ("linker", FIRST) not in intake.chosen


def test_a_folder_submission_is_held_to_one_archive_entrys_size(tmp_path: Path) -> None:
    # A zip's entry over the limit is refused; the same file handed in as a folder is refused too, and never read.
    from autograder.settings import ArchiveLimits

    honest = nbformat.writes(released(FIRST)).encode()
    for student, data in (("smith", honest), ("huge", honest + b" " * (2 << 20))):
        (tmp_path / "class" / student).mkdir(parents=True)
        (tmp_path / "class" / student / f"{FIRST}.ipynb").write_bytes(data)
    with opened(tmp_path / "class", ArchiveLimits(entry_bytes=1 << 20, total_bytes=64 << 20, entries=100)) as received:
        intake = take_in(received, ASSIGNMENTS, FUNCTIONS)
    assert sorted(intake.chosen) == [("smith", FIRST)]
    assert intake.refused[("huge", FIRST)] == f"'huge/{FIRST}.ipynb': it is larger than 1 MiB, the limit for one file"


def test_a_folder_with_no_notebook_is_no_student_and_one_students_exchange_folder_is_not_unwrapped(tmp_path: Path) -> None:
    write(tmp_path / "class" / "ann" / FIRST / f"{FIRST}.ipynb")  # nbgrader's STUDENT/ASSIGNMENT/ layout, one student
    intake = take_in(tmp_path / "class", ASSIGNMENTS, FUNCTIONS)
    assert sorted(intake.chosen) == [("ann", FIRST)]  # not a student called FIRST below a wrapping folder 'ann'
    (tmp_path / "class" / "images").mkdir()
    (tmp_path / "class" / "images" / "plot.png").write_bytes(b"\x89PNG")
    (tmp_path / "class" / "notes").mkdir()
    assert take_in(tmp_path / "class", ASSIGNMENTS, FUNCTIONS).students == ["ann"]


def _dated_zip(path: Path, entries: dict[str, tuple[int, ...]]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, date in entries.items():
            z.writestr(zipfile.ZipInfo(name, date_time=date), nbformat.writes(released(FIRST)))
    return path


def test_a_zip_among_student_folders_is_a_source_and_never_a_student(tmp_path: Path) -> None:
    write(tmp_path / "submitted" / "ann" / FIRST / f"{FIRST}.ipynb")
    _dated_zip(tmp_path / "submitted" / "submissions.zip", {f"erin_12345_67890_{FIRST}.ipynb": (2026, 12, 2, 9, 0, 0)})
    _dated_zip(tmp_path / "submitted" / "kim_12345_67891_work.zip", {f"{FIRST}.ipynb": (2026, 12, 2, 9, 0, 0)})  # an LMS's, per student
    with opened_sources([tmp_path / "submitted"], known=ASSIGNMENTS) as sources:
        [[folder, lms]] = sources
        assert lms.label == str(tmp_path / "submitted" / "submissions.zip")
        intake = take_in_all(sources, ASSIGNMENTS, FUNCTIONS)
    assert sorted(intake.chosen) == [("ann", FIRST), ("erin", FIRST), ("kim", FIRST)]
    assert "submissions" not in intake.students
    erin = intake.chosen[("erin", FIRST)]
    assert erin.source == lms.label and erin.submitted_at is not None and erin.submitted_at.source == "zip entry date"
    assert intake.chosen[("kim", FIRST)].source == folder.label  # a zip the pattern names a student in is that student's


def test_several_sources_merge_by_the_latest_hand_in(tmp_path: Path) -> None:
    """The later hand-in by its date wins; a known time wins over none; between two without, the source named last."""
    exchange = tmp_path / "exchange"
    for student, stamp in (("ann", "2026-12-02 08:00:00 UTC"), ("bob", "2026-12-05 08:00:00 UTC"), ("cy", "2026-12-02 08:00:00 UTC")):
        path = write(exchange / student / FIRST / f"{FIRST}.ipynb")
        (path.parent / "timestamp.txt").write_text(stamp)
    entries = {f"{s}_12345_67890_{FIRST}.ipynb": (2026, 12, day, 12, 0, 0) for s, day in (("ann", 3), ("bob", 1))}
    lms = _dated_zip(tmp_path / "lms.zip", entries)
    for student in ("cy", "dee"):  # undated: a plain folder of files
        write(tmp_path / "plain" / student / f"{FIRST}.ipynb")
    write(tmp_path / "later" / "dee" / f"{FIRST}.ipynb")
    with opened_sources([exchange, lms, tmp_path / "plain", tmp_path / "later"], known=ASSIGNMENTS) as sources:
        intake = take_in_all(sources, ASSIGNMENTS, FUNCTIONS)
    chosen = {student: h.source for (student, _), h in intake.chosen.items()}
    assert chosen == {"ann": str(lms), "bob": str(exchange), "cy": str(exchange), "dee": str(tmp_path / "later")}
    ann = intake.chosen[("ann", FIRST)].notes[-1]
    assert ann.startswith(f"handed in more than once: graded 'ann_12345_67890_{FIRST}.ipynb' in {lms} (handed in 2026-12-03 ")
    assert ann.endswith(f"not 'ann/{FIRST}/{FIRST}.ipynb' in {exchange} (handed in 2026-12-02 08:00 UTC) (the later hand-in)")
    assert "(no hand-in time)" in intake.chosen[("cy", FIRST)].notes[-1]
    assert intake.chosen[("cy", FIRST)].notes[-1].endswith("(a known hand-in time, then the source named last)")
    assert f"not 'dee/{FIRST}.ipynb' in {tmp_path / 'plain'} (no hand-in time)" in intake.chosen[("dee", FIRST)].notes[-1]


def test_a_source_with_no_notebook_of_the_course_is_refused_by_name(tmp_path: Path) -> None:
    write(tmp_path / "class" / "ann" / f"{FIRST}.ipynb")
    (tmp_path / "docs" / "images").mkdir(parents=True)
    write(tmp_path / "other" / "ann" / "homework.ipynb", nbformat.v4.new_notebook())  # a notebook, but of no assignment
    docs, other = tmp_path / "docs", tmp_path / "other"
    for empty, says in (
        (docs, f"no notebooks found in {re.escape(str(docs))}, so it is no class"),
        (other, f"no submission found in {re.escape(str(other))}: none of its 1 file\\(s\\) could be placed"),
    ):
        with opened_sources([tmp_path / "class", empty]) as sources:
            with pytest.raises(ValueError, match=says):
                take_in_all(sources, ASSIGNMENTS, FUNCTIONS)
