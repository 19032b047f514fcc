"""Intake: find every notebook an instructor received, and say whose it is and for which assignment.

Accepted as SUBMISSIONS:

- a folder with one sub-folder per student (``smith/03_scaled_dot_product_attention.ipynb``);
- a flat folder of files downloaded from an LMS (``smith_12345_67890_03_….ipynb``) or from Colab
  (``Copy of 03_….ipynb``, ``03_… (1).ipynb``);
- a ``.zip`` of either, and zips inside it (one per student).

A regular expression with a ``student`` group (``--student-pattern``) reads the student from a
file or folder name. A file is matched to its assignment by its name, else by its number
(``03_…``), else by its content (the graded functions it defines). Nothing here modifies the
originals: zips are read, never extracted next to them.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator

# LMS downloads put the student before numeric ids (3+ digits, so that '03_' stays the assignment's): Canvas "smith_12345_67890_file.ipynb"
# (and "smith_LATE_12345_67890_…"); Moodle folders "Jane Smith_123456_assignsubmission_file_".
DEFAULT_STUDENT_PATTERN = r"^(?P<student>.+?)_(?:LATE_)?(?:\d{3,}_)+"

# What browsers and Colab add to a downloaded file's name.
COPY_PREFIX = re.compile(r"^(?:Copy of )+", re.IGNORECASE)
DOWNLOAD_SUFFIX = re.compile(r"(?:\s*\(\d+\)|-checkpoint)+$")
SKIPPED_PARTS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__"}


@dataclass(frozen=True)
class Handin:
    """One notebook file, placed: whose it is and which assignment it is (``None`` when unknown)."""

    path: Path  # where to read it (inside SUBMISSIONS or a private extraction of a zip)
    received_as: str  # its path as received, relative to SUBMISSIONS, for messages
    student: str | None
    assignment: str | None
    notes: tuple[str, ...] = ()

    @property
    def released_name(self) -> bool:
        return self.assignment is not None and PurePosixPath(self.received_as).name == f"{self.assignment}.ipynb"


@dataclass
class Intake:
    """What SUBMISSIONS holds: one chosen hand-in per (student, assignment), and the rest with a reason."""

    chosen: dict[tuple[str, str], Handin] = field(default_factory=dict)
    unplaced: list[tuple[Handin, str]] = field(default_factory=list)  # (hand-in, why no student or assignment could be read off it)
    folders: set[str] = field(default_factory=set)  # students with a folder, notebooks in it or not

    @property
    def students(self) -> list[str]:
        placed = {student for student, _ in self.chosen} | {h.student for h, _ in self.unplaced if h.student}
        return sorted(placed | self.folders)


def clean_stem(name: str) -> str:
    """A file name without '.ipynb', 'Copy of ' and ' (1)': what the student meant to call it."""
    stem = name[: -len(".ipynb")] if name.lower().endswith(".ipynb") else name
    return DOWNLOAD_SUFFIX.sub("", COPY_PREFIX.sub("", stem.strip())).strip()


def split_student(name: str, pattern: re.Pattern[str]) -> tuple[str | None, str]:
    """(student, rest of the name) when ``pattern`` matches ``name``; else (None, name)."""
    match = pattern.match(name)
    if not match or not match.group("student").strip():
        return None, name
    return match.group("student").strip(), name[match.end() :]


def defined_names(source: str) -> set[str]:
    """Top-level functions and classes a cell defines (by regex when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(re.findall(r"^(?:def|class)\s+([A-Za-z_]\w*)", source, flags=re.MULTILINE))
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def assignment_by_name(stem: str, known: list[str]) -> tuple[str | None, str | None]:
    """(assignment, note) from a cleaned file stem: its full name inside, else its two-digit number."""
    for name in sorted(known, key=len, reverse=True):
        if name.lower() in stem.lower():
            return name, None
    number = re.match(r"^\s*(\d{2})(?:\D|$)", stem)
    if number:
        same = [name for name in known if name.startswith(number.group(1) + "_")]
        if len(same) == 1:
            return same[0], f"matched to {same[0]} by its number"
    return None, None


def assignment_by_content(path: Path, graded_functions: dict[str, set[str]]) -> str | None:
    """The assignment whose graded functions this notebook defines the most of (at least half)."""
    import nbformat

    try:
        notebook = nbformat.read(path, as_version=4)
        names = set().union(*(defined_names(c.source) for c in notebook.cells if c.get("cell_type") == "code"))
    except Exception:  # noqa: BLE001 - an unreadable file is reported when it is graded
        return None
    share = {a: len(names & fns) / len(fns) for a, fns in graded_functions.items() if fns}
    best = max(share, key=lambda a: share[a], default=None)
    return best if best is not None and share[best] >= 0.5 else None


@contextmanager
def opened(submissions: Path) -> Iterator[Path]:
    """A folder to read SUBMISSIONS from: itself, or a private extraction of a zip (nested zips too)."""
    if submissions.is_dir() and not any(submissions.rglob("*.zip")):
        yield submissions
        return
    scratch = Path(tempfile.mkdtemp(prefix="attention-intake-"))
    try:
        root = scratch / "received"
        if submissions.is_dir():
            shutil.copytree(submissions, root)
        else:
            _extract(submissions, root)
        for inner in sorted(root.rglob("*.zip")):  # one zip per student inside an LMS zip
            _extract(inner, inner.with_suffix(""))
            inner.unlink()
        yield root
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _extract(archive: Path, target: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.infolist():
                # ZipFile.extract drops '..' and absolute parts, so nothing lands outside target.
                written = Path(zipped.extract(member, target))
                if not member.is_dir():
                    stamp = _zip_time(member)  # keeps "newest of two copies" meaningful
                    if stamp is not None:
                        os.utime(written, (stamp, stamp))
    except zipfile.BadZipFile as error:
        raise ValueError(f"{archive.name} is not a readable zip file ({error})") from None


def _zip_time(member: zipfile.ZipInfo) -> float | None:
    try:
        return time.mktime((*member.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return None


def unwrap(root: Path, pattern: re.Pattern[str]) -> Path:
    """Descend through a lone wrapping folder ('Assignment 3/…'), as zips often have one.

    A lone folder is a wrapper when it holds folders or LMS-named files; a lone folder of
    plainly named notebooks is one student's folder and stays.
    """
    while True:
        entries = [p for p in root.iterdir() if p.name not in SKIPPED_PARTS and not p.name.startswith(".")]
        if len(entries) != 1 or not entries[0].is_dir():
            return root
        inside = [p for p in entries[0].iterdir() if p.name not in SKIPPED_PARTS and not p.name.startswith(".")]
        if not any(p.is_dir() or split_student(p.name, pattern)[0] for p in inside):
            return root
        root = entries[0]


def notebook_files(root: Path) -> list[Path]:
    """Every .ipynb under ``root``, hidden folders, checkpoints and macOS metadata aside, sorted."""
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and path.suffix.lower() == ".ipynb"
        and not any(part in SKIPPED_PARTS or part.startswith(".") for part in path.relative_to(root).parts)
    )


def place(path: Path, root: Path, known: list[str], pattern: re.Pattern[str], graded_functions: dict[str, set[str]]) -> Handin:
    """Whose file ``path`` is and which assignment, with notes on how that was decided."""
    relative = path.relative_to(root)
    notes: list[str] = []
    if len(relative.parts) > 1:  # in a student's folder
        folder = relative.parts[0]
        student = split_student(folder, pattern)[0] or folder
        rest = split_student(path.name, pattern)[1]  # a folder may still hold LMS-named files
    else:
        student, rest = split_student(path.name, pattern)
    stem = clean_stem(rest)
    assignment, note = assignment_by_name(stem, known)
    if note:
        notes.append(note)
    if assignment is None:
        assignment = assignment_by_content(path, graded_functions)
        if assignment:
            notes.append(f"matched to {assignment} by the functions it defines")
    received = relative.as_posix()
    if assignment and rest != f"{assignment}.ipynb":  # an LMS prefix alone is no rename
        notes.insert(0, f"received as {path.name!r}")
    return Handin(path=path, received_as=received, student=student, assignment=assignment, notes=tuple(notes))


def take_in(root: Path, known: list[str], graded_functions: dict[str, set[str]], student_pattern: str = DEFAULT_STUDENT_PATTERN) -> Intake:
    """Place every notebook under ``root``; keep one per (student, assignment), the rest explained."""
    pattern = re.compile(student_pattern)
    if "student" not in pattern.groupindex:
        raise ValueError(f"--student-pattern {student_pattern!r} needs a named group (?P<student>...)")
    root = unwrap(root, pattern)
    intake = Intake()
    for folder in root.iterdir():  # a student folder without a notebook still gets its rows
        if folder.is_dir() and folder.name not in SKIPPED_PARTS and not folder.name.startswith("."):
            intake.folders.add(split_student(folder.name, pattern)[0] or folder.name)
    by_pair: dict[tuple[str, str], list[Handin]] = {}
    for path in notebook_files(root):
        handin = place(path, root, known, pattern, graded_functions)
        if handin.student is None:
            intake.unplaced.append(
                (
                    handin,
                    f"cannot tell whose file {handin.received_as!r} is (its name does not match the student pattern {student_pattern!r})",
                )
            )
        elif handin.assignment is None:
            intake.unplaced.append((handin, f"{handin.received_as!r} matches no assignment of the course ({', '.join(known)})"))
        else:
            by_pair.setdefault((handin.student, handin.assignment), []).append(handin)
    for pair, handins in by_pair.items():
        # The file under its released name wins; else the newest; the name breaks ties.
        handins.sort(key=lambda h: (not h.released_name, -h.path.stat().st_mtime, h.received_as))
        best, others = handins[0], handins[1:]
        if others:
            skipped = ", ".join(repr(h.received_as) for h in others)
            best = Handin(
                best.path, best.received_as, best.student, best.assignment, best.notes + (f"graded {best.received_as!r}, not {skipped}",)
            )
        intake.chosen[pair] = best
    return intake
