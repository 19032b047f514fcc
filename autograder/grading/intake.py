"""Intake: find every notebook an instructor received, and say whose it is and for which assignment.

Accepted as SUBMISSIONS:

- a folder with one sub-folder per student (``smith/03_scaled_dot_product_attention.ipynb``);
- a flat folder of files downloaded from an LMS (``smith_12345_67890_03_….ipynb``) or from Colab
  (``Copy of 03_….ipynb``, ``03_… (1).ipynb``);
- a ``.zip`` of either, and zips inside it (one per student).

Several of these may be given: one class, merged by student and hand-in time (``take_in_all``). A zip at
the top of a folder (an LMS download placed among the exchange's student folders) is a source of its
own, never a student, unless the student pattern reads a student off its name (an LMS's zip per student).

A regular expression with a ``student`` group (``--student-pattern``) reads the student from a
file or folder name. A file is matched to its assignment by its name, else by its number
(``03_…``), else by its content (the graded functions it defines). Nothing here modifies the
originals: zips are read, never extracted next to them.

Everything received is treated as hostile. A zip is extracted entry by entry under ``ARCHIVE_LIMITS``
(bytes per entry, bytes in all, entries), counted as the data inflates, whatever the archive
declares: an entry over a limit is not written and gets its own row (kind ``refused``). A symbolic
link is never followed: it gets a ``refused`` row too, so a link to the solutions grades nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import zipfile
import zlib
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Iterator, Sequence

from course_utils.notebook_cells import defined_names

from ..settings import ARCHIVE_LIMITS, ArchiveLimits
from .deadlines import TIMESTAMP_FILE, read_timestamp
from .models import SubmittedAt

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
    submitted_at: SubmittedAt | None = None  # nbgrader's timestamp.txt beside it, else its zip entry's date
    source: str = ""  # the source it came from (``Received.label``)

    @property
    def released_name(self) -> bool:
        return self.assignment is not None and PurePosixPath(self.received_as).name == f"{self.assignment}.ipynb"


@dataclass
class Intake:
    """What SUBMISSIONS holds: one chosen hand-in per (student, assignment), and the rest with a reason."""

    chosen: dict[tuple[str, str], Handin] = field(default_factory=dict)
    unplaced: list[tuple[Handin, str]] = field(default_factory=list)  # (hand-in, why no student or assignment could be read off it)
    # Files that were received but not read (over an archive limit, a link): why, by (student, assignment)
    # when that could be read off the name; the others in ``unplaced_refused``.
    refused: dict[tuple[str, str], str] = field(default_factory=dict)
    unplaced_refused: list[tuple[Handin, str]] = field(default_factory=list)
    refused_source: dict[tuple[str, str], str] = field(default_factory=dict)  # the source of each pair in ``refused``

    @property
    def students(self) -> list[str]:
        """Whoever a notebook (read or refused) is from: a folder that holds no notebook is no student."""
        placed = {student for student, _ in self.chosen} | {student for student, _ in self.refused}
        placed |= {h.student for h, _ in self.unplaced + self.unplaced_refused if h.student}
        return sorted(placed)

    def source_of(self, pair: tuple[str, str]) -> str:
        """Where the pair's notebook came from ('' when nothing came in for it)."""
        handin = self.chosen.get(pair)
        return handin.source if handin is not None else self.refused_source.get(pair, "")


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


@dataclass
class Extraction:
    """How much of the archives has been written, across nested zips, against the limits."""

    limits: ArchiveLimits
    written: int = 0
    entries: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path as received, why)
    dates: dict[Path, float] = field(default_factory=dict)  # extracted file -> its entry's date (seconds since the epoch)
    extracted: set[Path] = field(default_factory=set)  # every file written out of an archive


@dataclass(frozen=True)
class Received:
    """What ``opened`` gives: a folder to read, and the entries extraction refused to write (path as received, why)."""

    root: Path
    refused: tuple[tuple[str, str], ...] = ()
    limits: ArchiveLimits = ARCHIVE_LIMITS  # a folder's files are held to one archive entry's size too
    dates: dict[Path, float] = field(default_factory=dict)  # files extracted from a zip -> the date the LMS gave its entry
    extracted: frozenset[Path] = frozenset()  # every file that came out of an archive
    label: str = ""  # the source, as a stable name: its path (a zip found in a folder: the folder's path and its name)
    nested: tuple["Received", ...] = ()  # zips at the top of a folder that name no student: sources of their own

    @property
    def sources(self) -> list["Received"]:
        """This source and the ones found in it, each to be taken in on its own."""
        return [self, *self.nested]

    def submitted_at(self, notebook: Path) -> SubmittedAt | None:
        """When ``notebook`` was handed in: the LMS's date of its zip entry; else the nearest genuine timestamp.txt at
        or above it (nbgrader's layout): a copy in a sub-folder or a student's own zip keeps its folder's hand-in time.
        A timestamp.txt that came out of an archive is the student's, and never read."""
        if notebook in self.dates:
            return SubmittedAt(datetime.fromtimestamp(self.dates[notebook], timezone.utc), "zip entry date")
        folder = notebook.parent
        while folder == self.root or self.root in folder.parents:
            if (folder / TIMESTAMP_FILE) not in self.extracted and (found := read_timestamp(folder / notebook.name)):
                return found
            folder = folder.parent
        return None

    def dated_directly(self, notebook: Path) -> bool:
        """Whether the hand-in time is this file's own (its LMS entry, or nbgrader's timestamp.txt beside it), not
        one inherited from a folder above: the file that time dates is the one to grade."""
        if notebook in self.dates:
            return True
        return (
            notebook not in self.extracted
            and (notebook.parent / TIMESTAMP_FILE) not in self.extracted
            and (read_timestamp(notebook) is not None)
        )


def student_regex(student_pattern: str) -> re.Pattern[str]:
    """``--student-pattern`` compiled, or a ValueError that says what is wrong with it."""
    try:
        pattern = re.compile(student_pattern)
    except re.error as error:
        raise ValueError(f"--student-pattern {student_pattern!r} is not a regular expression ({error})") from None
    if "student" not in pattern.groupindex:
        raise ValueError(f"--student-pattern {student_pattern!r} needs a named group (?P<student>...)")
    return pattern


@contextmanager
def opened(
    submissions: Path, limits: ArchiveLimits = ARCHIVE_LIMITS, student_pattern: str = DEFAULT_STUDENT_PATTERN, known: Sequence[str] = ()
) -> Iterator[Received]:
    """A folder to read SUBMISSIONS from: itself, or a private extraction of a zip (nested zips too).

    A zip at the top of a folder whose name names no student (by ``student_pattern``) is a source of its own, in
    ``Received.nested``: it is opened as a zip given on the command line would be, and never graded as a student.
    ``known`` (the course's assignments) tells nbgrader's layout with one student from a wrapping folder."""
    label = str(submissions)
    if submissions.is_dir() and not any(submissions.rglob("*.zip")):
        yield Received(submissions, limits=limits, label=label)
        return
    scratch = Path(tempfile.mkdtemp(prefix="attention-intake-"))
    try:
        root = scratch / "received"
        extraction = Extraction(limits)
        nested: list[Received] = []
        if submissions.is_dir():
            shutil.copytree(submissions, root, symlinks=True)  # links stay links: take_in refuses them
            for number, archive in enumerate(_source_zips(root, student_regex(student_pattern), known)):
                name = archive.relative_to(root).as_posix()
                nested.append(_opened_zip(archive, scratch / f"source-{number}", extraction, f"{label}/{name}"))
                archive.unlink()
        else:
            _extract(submissions, root, extraction, prefix="")
        _open_inner_zips(root, extraction)
        yield Received(
            root, tuple(extraction.refused), limits, dict(extraction.dates), frozenset(extraction.extracted), label, tuple(nested)
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def opened_sources(
    sources: list[Path], limits: ArchiveLimits = ARCHIVE_LIMITS, student_pattern: str = DEFAULT_STUDENT_PATTERN, known: Sequence[str] = ()
) -> Iterator[list[list[Received]]]:
    """Every source opened (``opened``): for each one given, itself and the sources found in it."""
    with ExitStack() as stack:
        yield [stack.enter_context(opened(source, limits, student_pattern, known)).sources for source in sources]


def _source_zips(root: Path, pattern: re.Pattern[str], known: Sequence[str]) -> list[Path]:
    """The zips at the top of a folder (below a lone wrapping folder) whose names name no student: sources, not hand-ins."""
    top = unwrap(root, pattern, known)
    return sorted(
        path
        for path in top.iterdir()
        if path.suffix.lower() == ".zip"
        and path.is_file()
        and not path.is_symlink()
        and not _skipped(path, top)
        and split_student(path.name, pattern)[0] is None
    )


def _opened_zip(archive: Path, root: Path, parent: Extraction, label: str) -> Received:
    """A zip found in a folder, opened as a source of its own; what it inflates counts against the same limits."""
    extraction = Extraction(parent.limits, written=parent.written, entries=parent.entries)
    _extract(archive, root, extraction, prefix="")
    _open_inner_zips(root, extraction)
    parent.written, parent.entries = extraction.written, extraction.entries
    return Received(root, tuple(extraction.refused), parent.limits, dict(extraction.dates), frozenset(extraction.extracted), label)


def _open_inner_zips(root: Path, extraction: Extraction) -> None:
    """Extract the zips under ``root`` beside themselves: one per student inside an LMS zip, or a student's own."""
    for inner in sorted(p for p in root.rglob("*.zip") if not p.is_symlink()):
        # A zip inside a zip (a student's own): its entries were dated by the student's machine, so they take the
        # date of the outer entry, which the LMS wrote when it was handed in.
        relative = inner.relative_to(root).with_suffix("").as_posix() + "/"
        # One the LMS did not date (a zip in a folder) dates nothing: its dates would be the student's.
        dated = inner in extraction.dates
        _extract(inner, inner.with_suffix(""), extraction, prefix=relative, date=extraction.dates.get(inner), dated=dated)
        inner.unlink()


def _member_path(target: Path, name: str) -> Path | None:
    """Where a zip entry goes under ``target``: '..', absolute and drive parts dropped, as ZipFile.extract does."""
    parts = [part for part in PurePosixPath(name.replace("\\", "/")).parts if part not in ("", ".", "..", "/") and ":" not in part]
    return target.joinpath(*parts) if parts else None


def _extract(archive: Path, target: Path, extraction: Extraction, prefix: str, date: float | None = None, dated: bool = True) -> None:
    """Write the archive's entries under ``target``, counting the bytes as they inflate; each dated by its entry,
    or by ``date`` when given, and its date kept as a hand-in time when ``dated``."""
    limits = extraction.limits
    try:
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.infolist():
                received = prefix + member.filename
                destination = _member_path(target, member.filename)
                if destination is None or member.is_dir():
                    if destination is not None:
                        destination.mkdir(parents=True, exist_ok=True)
                    continue
                extraction.entries += 1
                if extraction.entries > limits.entries:
                    extraction.refused.append((received, f"the archives hold more than {limits.entries:,} files; the rest were not read"))
                    continue
                why = _copy_limited(zipped, member, destination, extraction)
                if why:
                    extraction.refused.append((received, why))
                    continue
                stamp = date if date is not None else _zip_time(member)  # keeps "newest of two copies" meaningful
                extraction.extracted.add(destination)
                if stamp is not None:
                    os.utime(destination, (stamp, stamp))
                    if dated:
                        extraction.dates[destination] = stamp
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as error:  # corrupt, unknown compression, encrypted
        raise ValueError(f"{archive.name} is not a readable zip file ({error})") from None


def _copy_limited(zipped: zipfile.ZipFile, member: zipfile.ZipInfo, destination: Path, extraction: Extraction) -> str:
    """Inflate one entry to ``destination`` unless it passes a limit: '' when written, else why not.

    The declared size is checked first (cheap), and the inflated bytes are counted as they come,
    since an archive can declare anything.
    """
    limits = extraction.limits
    room = min(limits.entry_bytes, limits.total_bytes - extraction.written)
    too_big = (
        f"it inflates to more than {limits.entry_bytes / 2**20:g} MiB, the limit for one file"
        if room == limits.entry_bytes
        else f"the archives inflate to more than {limits.total_bytes / 2**30:g} GiB in all"
    )
    if member.file_size > room:
        return f"not extracted: {too_big}"
    destination.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    try:
        with zipped.open(member) as source, destination.open("wb") as sink:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                if written > room:
                    break
                sink.write(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as error:
        destination.unlink(missing_ok=True)
        return f"not extracted: the entry is damaged ({type(error).__name__})"
    if written > room:
        destination.unlink(missing_ok=True)
        return f"not extracted: {too_big}"
    extraction.written += written
    return ""


def _zip_time(member: zipfile.ZipInfo) -> float | None:
    try:
        return time.mktime((*member.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return None


def unwrap(root: Path, pattern: re.Pattern[str], known: Sequence[str] = ()) -> Path:
    """Descend through a lone wrapping folder ('Assignment 3/…'), as zips often have one.

    A lone folder is a wrapper when it holds folders or LMS-named files; a lone folder of
    plainly named notebooks is one student's folder and stays, and so does one whose folders are
    all named as assignments of the course (``known``): nbgrader's STUDENT/ASSIGNMENT/ with one student.
    """
    while True:
        entries = [p for p in root.iterdir() if p.name not in SKIPPED_PARTS and not p.name.startswith(".")]
        if len(entries) != 1 or not entries[0].is_dir():
            return root
        inside = [p for p in entries[0].iterdir() if p.name not in SKIPPED_PARTS and not p.name.startswith(".")]
        if not any(p.is_dir() or split_student(p.name, pattern)[0] for p in inside):
            return root
        folders = [p for p in inside if p.is_dir()]
        if folders and all(p.name in known for p in folders):
            return root
        root = entries[0]


def _skipped(path: Path, root: Path) -> bool:
    return any(part in SKIPPED_PARTS or part.startswith(".") for part in path.relative_to(root).parts)


def notebook_files(root: Path, limits: ArchiveLimits = ARCHIVE_LIMITS) -> list[Path]:
    """Every .ipynb under ``root`` that is a regular file (never a link) within the size of one archive entry,
    hidden folders, checkpoints and macOS metadata aside."""
    return [path for path in _notebooks(root) if path.stat().st_size <= limits.entry_bytes]


def _notebooks(root: Path) -> list[Path]:
    return sorted(
        path
        for path in root.rglob("*")
        if not path.is_symlink() and path.is_file() and path.suffix.lower() == ".ipynb" and not _skipped(path, root)
    )


def oversized(root: Path, limits: ArchiveLimits = ARCHIVE_LIMITS) -> list[tuple[Path, str]]:
    """Notebooks of a folder submission larger than one archive entry may be: refused as a zip's would be, unread."""
    return [
        (path, f"it is larger than {limits.entry_bytes / 2**20:g} MiB, the limit for one file")
        for path in _notebooks(root)
        if path.stat().st_size > limits.entry_bytes
    ]


def links(root: Path) -> list[Path]:
    """Every symbolic link under ``root`` (never followed: rglob does not enter linked folders)."""
    return sorted(path for path in root.rglob("*") if path.is_symlink() and not _skipped(path, root))


def refused_files(received: Received) -> list[tuple[Path, str]]:
    """(path as received, why) for what intake will not read: links, files over one entry's size, and what extraction refused."""
    found = [(path, "a symbolic link, not a file: links are never followed") for path in links(received.root)]
    return found + oversized(received.root, received.limits) + [(received.root / name, why) for name, why in received.refused]


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


def take_in(
    received: Received | Path, known: list[str], graded_functions: dict[str, set[str]], student_pattern: str = DEFAULT_STUDENT_PATTERN
) -> Intake:
    """Place every notebook under ``root``; keep one per (student, assignment), the rest explained."""
    pattern = student_regex(student_pattern)
    received = received if isinstance(received, Received) else Received(received, label=str(received))
    refused = refused_files(received)  # before unwrapping: named from the top of what was received
    root = unwrap(received.root, pattern, known)
    intake = Intake()
    for path, why in refused:
        handin = place(path, root if root in path.parents else path.parent, known, pattern, {})  # by its name only: its content is not read
        handin = replace(handin, source=received.label)
        if handin.student and handin.assignment:
            pair = (handin.student, handin.assignment)
            intake.refused[pair] = "; ".join(filter(None, (intake.refused.get(pair), f"{handin.received_as!r}: {why}")))
            intake.refused_source[pair] = received.label
        else:
            intake.unplaced_refused.append((handin, f"{handin.received_as!r}: {why}"))
    by_pair: dict[tuple[str, str], list[Handin]] = {}
    dated: set[Path] = set()
    for path in notebook_files(root, received.limits):
        handin = replace(
            place(path, root, known, pattern, graded_functions), submitted_at=received.submitted_at(path), source=received.label
        )
        if received.dated_directly(path):
            dated.add(path)
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
        # The file its hand-in time dates wins (a copy elsewhere in the folder, or in a zip the student made, never
        # does: its dates are the student's); then the released name; else the newest; the name breaks ties.
        handins.sort(key=lambda h: (h.path not in dated, not h.released_name, -h.path.stat().st_mtime, h.received_as))
        best, others = handins[0], handins[1:]
        if others:
            skipped = ", ".join(repr(h.received_as) for h in others)
            best = replace(best, notes=best.notes + (f"graded {best.received_as!r}, not {skipped}",))
        intake.chosen[pair] = best
    return intake


def take_in_all(
    sources: list[list[Received]], known: list[str], graded_functions: dict[str, set[str]], student_pattern: str = DEFAULT_STUDENT_PATTERN
) -> Intake:
    """Several sources as one class (``opened_sources``): each taken in, then merged by student and hand-in time.

    A source given that holds no notebook of any assignment of the course (the sources found in it counted) is an
    error that names it: it is not a class. Where a student handed in the same assignment in two sources, the
    latest hand-in by its date is graded and the other is named on its row; a hand-in with a known time wins over
    one without, and between two without, the source named later wins.
    """
    intakes: list[Intake] = []
    for given in sources:
        taken = [take_in(received, known, graded_functions, student_pattern) for received in given]
        if not any(intake.chosen or intake.refused for intake in taken):
            found = sum(len(intake.unplaced) + len(intake.unplaced_refused) for intake in taken)
            where, assignments = shown_source(given[0].label), ", ".join(known)
            if found:
                raise ValueError(
                    f"no submission found in {where}: none of its {found} file(s) could be placed under a student and an "
                    f"assignment of the course ({assignments})"
                )
            raise ValueError(f"no notebooks found in {where}, so it is no class (the course's assignments: {assignments})")
        intakes += taken
    return intakes[0] if len(intakes) == 1 else merged(intakes)


def merged(intakes: list[Intake]) -> Intake:
    """One intake of several sources, in the order given: per pair, the latest hand-in; the files placed nowhere, each
    with its source named."""
    merged_intake = Intake()
    candidates: dict[tuple[str, str], list[tuple[int, Handin]]] = {}
    for order, intake in enumerate(intakes):
        for pair, handin in intake.chosen.items():
            candidates.setdefault(pair, []).append((order, handin))
        for pair, why in intake.refused.items():
            merged_intake.refused[pair] = "; ".join(filter(None, (merged_intake.refused.get(pair), why)))
            merged_intake.refused_source.setdefault(pair, intake.refused_source[pair])
        merged_intake.unplaced += [(h, f"{why} (in {shown_source(h.source)})") for h, why in intake.unplaced]
        merged_intake.unplaced_refused += [(h, f"{why} (in {shown_source(h.source)})") for h, why in intake.unplaced_refused]
    for pair, found in candidates.items():
        merged_intake.chosen[pair] = latest(found)
    return merged_intake


def latest(found: list[tuple[int, Handin]]) -> Handin:
    """The hand-in of a pair to grade among sources (each with its place in the order given), the others noted on it."""
    if len(found) == 1:
        return found[0][1]
    ranked = sorted(found, key=lambda f: (f[1].submitted_at is not None, f[1].submitted_at.time if f[1].submitted_at else None, f[0]))
    best, others = ranked[-1][1], [h for _, h in reversed(ranked[:-1])]
    rule = "the later hand-in" if all(h.submitted_at is not None for _, h in found) else "a known hand-in time, then the source named last"
    skipped = "; ".join(f"{h.received_as!r} in {shown_source(h.source)} ({handed_in(h.submitted_at)})" for h in others)
    note = f"handed in more than once: graded {best.received_as!r} in {shown_source(best.source)} ({handed_in(best.submitted_at)}), not {skipped} ({rule})"
    return replace(best, notes=best.notes + (note,))


def handed_in(moment: SubmittedAt | None) -> str:
    """When a notebook was handed in, for a note."""
    return f"handed in {moment.time:%Y-%m-%d %H:%M} UTC" if moment else "no hand-in time"


def shown_source(label: str) -> str:
    """A source's path as the instructor would type it: relative to the working folder where it is inside it."""
    try:
        return Path(label).relative_to(Path.cwd()).as_posix() or "."
    except ValueError:
        return label
