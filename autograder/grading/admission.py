"""Admission: read a submission, repair it, and flag what a person should look at.

Reading turns bytes into a notebook or a clear outcome (missing, unreadable, ...). Flags for
review (``review_flags``) never change a grade: the verdicts are decided where student code
cannot reach, so code that pokes at the grader gains nothing, but an instructor may still
want to read it. What the sandbox stopped (``sandbox_violations``) is read off the sealed run.

Repair a submission before nbgrader grades it, and say what was repaired.

nbgrader finds graded cells by their metadata. Some editors strip cell metadata; a student
may delete or edit a test cell. ``repair`` works on a copy and:

- gives each cell whose nbgrader metadata is missing the metadata of the released cell it
  matches, by content and position (a test cell by its source, a solution cell by the
  function or class it defines);
- names the test cells that were deleted or edited. nbgrader itself puts them back from
  the source notebook (``OverwriteCells.add_missing_cells`` and the locked-cell checksum),
  so the tests that run are always the instructor's.
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from nbformat.notebooknode import NotebookNode

from course_utils.guards import Guards, declared
from course_utils.notebook_cells import defined_names, is_solution_cell, is_test_cell, nbgrader_meta

from .models import Kind, Submission, SubmissionProblem

# nbgrader treats student ids as path globs and strips spaces around them: keep ids plain.
# A name for folders and rows: no separators, and not "." or ".." (which name a folder above, not a student's).
SAFE_STUDENT_ID = re.compile(r"^(?!\.+$)[A-Za-z0-9@._-]+( [A-Za-z0-9@._-]+)*$")

# Lines that reach into the grader, its helpers or the interpreter's frames. Only lines the
# student added (not in the released notebook) are flagged. The ways in that are not the course's
# own (Python's and torch's) are written here; the course's internals are declared by the modules
# that hold them (``GUARDS``, gathered by ``course_utils.guards``) and joined in by ``introspection``.
GENERIC_INTROSPECTION = (
    r"\bimportlib\b|__import__|\binspect\b|sys\._getframe|\bf_back\b|\bf_globals\b|\bf_locals\b|gc\.get_objects|globals\(\)\s*\["
    r"|\bsetattr\s*\(|showtraceback|\blinecache\b|__globals__|__code__|\bbuiltins\b"
    # Ways around the tensor-memory counter (course_utils.memory): code its function mode cannot see.
    r"|\btorch\.jit\b|\bjit\.(?:script|trace)\b|DisableTorchFunction|__torch_function__|_pop_mode|_disable_torch_function"
    # Ways around the built-in check (course_utils.operators): the profiler it reads.
    r"|\bprofiler\b|\brecord_function\b"
    # Ways around the autograd watch on a hand-written gradient (course_utils.tripwires.autograd_refused): hooks of
    # one's own over its saved-tensor hooks, autograd's engine by its private names.
    r"|\bsaved_tensors_hooks\b|_ImperativeEngine|_execution_engine|\brun_backward\b"
    # Rebinding a comparison or a check, in torch or in the course, or defining one of the same name.
    r"|\b(?:torch|np|numpy|checks|course_utils)(?:\.\w+)*\.(?:allclose|isclose|equal|assert_close|testing|check_\w+|call)\s*=(?!=)"
    r"|^\s*(?:def|class)\s+(?:check_\w+|assert_close|call)\s*[(:]|^\s*(?:check_\w+|assert_close)\s*=(?!=)"
)


def guarded_patterns(module: str, guards: Guards) -> list[str]:
    """The alternatives that flag a line touching what ``module`` (its full name) declares in ``guards``."""
    owner = importlib.import_module(module)
    found = [re.escape(name) for name in guards.names]  # inside a longer word too: it is no less suspect there
    # A value as a whole (``course_utils.stand_in``, not the module ``course_utils.stand_ins``).
    found += [rf"{re.escape(getattr(owner, name))}(?!\w)" for name in guards.values]
    if guards.rebinding:
        # Under any name for the module: ``k.run_builds = ...`` or ``vars(k)["run_builds"] = ...``; calling one is not flagged.
        names = "|".join(map(re.escape, guards.rebinding))
        found += [rf"\.\s*(?:{names})\s*=(?!=)", rf"[\"'](?:{names})[\"']\s*\]\s*=(?!=)"]
    if guards.module:
        package, _, leaf = module.rpartition(".")
        found += [rf"{re.escape(module)}\b", rf"{re.escape(package)} import .*\b{re.escape(leaf)}\b"]
    return found


@functools.lru_cache(maxsize=8)
def _compiled(alternatives: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(alternatives), re.MULTILINE)


def introspection() -> re.Pattern[str]:
    """The pattern of a line that introspects or patches the grader, from the declarations as they stand now.

    The owners are imported on first use, not when this module is; a declaration changed since (a test
    renaming a guarded name) gives a pattern of its own.
    """
    alternatives = [GENERIC_INTROSPECTION]
    for module, guards in declared().items():
        alternatives += guarded_patterns(module, guards)
    return _compiled(tuple(alternatives))


def __getattr__(name: str) -> Any:
    if name == "INTROSPECTION":  # the pattern as a module attribute, built on first use like ``introspection()``
        return introspection()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# What a blocked attempt looks like in the outputs of the sealed run.
VIOLATION_SIGNS = (
    ("write outside its scratch", re.compile(r"Read-only file system|\[Errno 30\]|Permission denied: '/(?!tmp)")),
    (
        "network",
        re.compile(r"Network is unreachable|\[Errno 101\]|Temporary failure in name resolution|Name or service not known|\[Errno -[23]\]"),
    ),
    ("spawn", re.compile(r"Resource temporarily unavailable|\[Errno 11\]")),
    ("fill the disk", re.compile(r"No space left on device|\[Errno 28\]|File too large|\[Errno 27\]")),
)


def read_submission(submission: Submission, assignment: str) -> NotebookNode:
    """The submitted notebook, or SubmissionProblem saying why it cannot be graded."""
    import nbformat

    if not SAFE_STUDENT_ID.match(submission.student):
        raise SubmissionProblem(
            Kind.INVALID_STUDENT, f"{submission.student!r}: use letters, digits, '@', '.', '_', '-' and single inner spaces"
        )
    if submission.content is None:
        raise SubmissionProblem(Kind.MISSING, f"no {assignment}.ipynb, nor a file that could be matched to it")
    try:
        # No strict schema validation: nbgrader's own sanitising step copes with stray output keys.
        notebook = nbformat.reads(submission.content.decode("utf-8"), as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is the student's file, not ours
        raise SubmissionProblem(Kind.UNREADABLE, f"not a valid notebook ({type(error).__name__}: {str(error)[:200]})") from None
    if not isinstance(notebook.get("cells"), list):
        raise SubmissionProblem(Kind.UNREADABLE, "valid JSON but not a notebook (no list of cells)")
    if not notebook.cells:
        raise SubmissionProblem(Kind.UNREADABLE, "the notebook has no cells")
    return notebook


def review_flags(notebook: NotebookNode, released: NotebookNode) -> list[str]:
    """'where: line' for each line the student added that introspects or patches the grader."""
    known = {line.strip() for cell in released.cells for line in cell.source.splitlines()}
    pattern = introspection()
    flags = []
    for index, cell in enumerate(notebook.cells):
        if cell.get("cell_type") != "code" or is_test_cell(cell):
            continue  # test cells are the instructor's: nbgrader restores them from the source
        where = nbgrader_meta(cell).get("grade_id") or f"cell {index + 1}"
        for line in cell.source.splitlines():
            if line.strip() not in known and pattern.search(line):
                flags.append(f"{where}: {line.strip()[:100]!r}")
    return flags


def sandbox_violations(outputs: list[dict], leftover_processes: int) -> list[str]:
    """What the notebook tried that the sandbox stopped, as far as its outputs show."""
    text = "\n".join(
        str(o.get("text", "")) + str(o.get("ename", "")) + ": " + str(o.get("evalue", "")) for o in outputs if isinstance(o, dict)
    )
    found = [what for what, sign in VIOLATION_SIGNS if sign.search(text)]
    if leftover_processes:
        found.append(f"leave {leftover_processes} process(es) running (killed)")
    return found


# Below this similarity a cell is not taken for a released cell that lost its metadata.
MIN_SIMILARITY = 0.6


@dataclass
class Repairs:
    restored_metadata: list[str] = field(default_factory=list)  # grade ids given back their metadata
    deleted_tests: list[str] = field(default_factory=list)
    edited_tests: list[str] = field(default_factory=list)
    missing_functions: list[str] = field(default_factory=list)
    foreign_cells: list[str] = field(default_factory=list)  # nbgrader cells the release does not have

    def notes(self) -> list[str]:
        notes = []
        if self.foreign_cells:
            notes.append(f"cell(s) not in the released notebook run as ordinary cells: {', '.join(self.foreign_cells)}")
        if self.restored_metadata:
            notes.append(f"nbgrader metadata restored on {len(self.restored_metadata)} cell(s) by matching them to the released notebook")
        if self.deleted_tests:
            notes.append(f"deleted test cell(s) put back: {', '.join(self.deleted_tests)}")
        if self.edited_tests:
            notes.append(f"edited test cell(s) restored: {', '.join(self.edited_tests)}")
        if self.missing_functions:
            notes.append(f"not defined anywhere (renamed or deleted?): {', '.join(self.missing_functions)}")
        return notes


def _normalized(source: str) -> str:
    return re.sub(r"\s+", " ", source).strip()


TOKEN = re.compile(r"\w+|\S")


def cell_tokens(cell: NotebookNode) -> list[str]:
    """A cell's words and symbols: compared as sequences, they cost far less than characters."""
    return TOKEN.findall(str(cell.get("source", "")))


def _similarity(
    released: NotebookNode, candidate: NotebookNode, at_least: float, tokens: Callable[[NotebookNode], list[str]] = cell_tokens
) -> float:
    """How alike the two cells are, from 0 to 1; 0 for any below ``at_least`` (then not worked out).

    A bound from the lengths comes first: a cell much longer or shorter than the released
    one is dismissed unread, so a submitted cell of megabytes costs no more than a short one.
    """
    if released.cell_type != candidate.cell_type:
        return 0.0
    if is_solution_cell(released):
        # The student rewrote the body; what stays is the name it defines.
        wanted = defined_names(released.source)
        return 1.0 if wanted and wanted <= defined_names(candidate.source) else 0.0
    a, b = tokens(released), tokens(candidate)
    if a == b:
        return 1.0
    if 2 * min(len(a), len(b)) / (len(a) + len(b)) < at_least:  # the most that lengths this far apart allow
        return 0.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.quick_ratio() < at_least:
        return 0.0
    return matcher.ratio()


def restore_metadata(submission: NotebookNode, released: NotebookNode) -> list[str]:
    """Give cells without nbgrader metadata the metadata of the released cell they match.

    Matching keeps the released order: each graded cell is looked for after the cell that
    matched the previous one; the most similar cell wins, the first of equals. Returns the
    grade ids restored. Modifies ``submission``.
    """
    present = {nbgrader_meta(c).get("grade_id") for c in submission.cells} - {None}
    restored: list[str] = []
    position = 0
    known: dict[int, list[str]] = {}  # each cell is read once, however many released cells it is compared with

    def tokens(cell: NotebookNode) -> list[str]:
        if id(cell) not in known:
            known[id(cell)] = cell_tokens(cell)
        return known[id(cell)]

    for cell in released.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id is None:
            continue
        if grade_id in present:
            position = max(position, 1 + next(i for i, c in enumerate(submission.cells) if nbgrader_meta(c).get("grade_id") == grade_id))
            continue
        best, best_score = None, MIN_SIMILARITY
        for index in range(position, len(submission.cells)):
            candidate = submission.cells[index]
            if nbgrader_meta(candidate):
                continue
            score = _similarity(cell, candidate, best_score, tokens)
            if score >= best_score and (best is None or score > best_score):
                best, best_score = index, score
        if best is None:
            continue  # deleted: nbgrader adds a test cell back; a missing solution shows in the tests
        submission.cells[best].metadata["nbgrader"] = copy.deepcopy(nbgrader_meta(cell))
        restored.append(grade_id)
        position = best + 1
    return restored


def drop_foreign_metadata(submission: NotebookNode, released: NotebookNode) -> list[str]:
    """Strip the nbgrader metadata of cells whose grade id the released notebook does not have.

    nbgrader's autograde fails on such a cell (OverwriteCells drops its grade id, then looks it up),
    and it must not count anyway: a made-up test cell would award its own points. Examples: the
    solution's showcase cells (withheld from the release), or a cell a student wrote metadata for.
    Returns the grade ids stripped. Modifies ``submission``.
    """
    known = {nbgrader_meta(c).get("grade_id") for c in released.cells} - {None}
    stripped: list[str] = []
    for cell in submission.cells:
        raw = cell.metadata.get("nbgrader") if isinstance(cell.get("metadata"), dict) else None
        if not raw:
            continue
        grade_id = raw.get("grade_id") if isinstance(raw, dict) else None
        if not isinstance(grade_id, str) or grade_id not in known:  # mangled metadata counts as foreign
            stripped.append(str(grade_id) if grade_id is not None else "(no grade id)")
            del cell.metadata["nbgrader"]
    return stripped


def repair(submission: NotebookNode, released: NotebookNode) -> tuple[NotebookNode, Repairs]:
    """A repaired copy of ``submission`` and what was done to it (``released``: the student version)."""
    fixed = copy.deepcopy(submission)
    repairs = Repairs(foreign_cells=drop_foreign_metadata(fixed, released))
    repairs.restored_metadata = restore_metadata(fixed, released)
    by_id = {nbgrader_meta(c).get("grade_id"): c for c in fixed.cells if nbgrader_meta(c).get("grade_id")}
    defined = set().union(*(defined_names(c.source) for c in fixed.cells if c.cell_type == "code"))
    for cell in released.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if is_test_cell(cell):
            if grade_id not in by_id:
                repairs.deleted_tests.append(grade_id)
            elif _normalized(by_id[grade_id].source) != _normalized(cell.source):
                repairs.edited_tests.append(grade_id)
        elif is_solution_cell(cell):
            repairs.missing_functions += sorted(defined_names(cell.source) - defined)
    return fixed, repairs
