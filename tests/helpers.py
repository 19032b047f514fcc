"""What the tests share besides fixtures: the assignments under test, the synthetic classes, digests."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
from held_out import HELD_OUT

from autograder.course import list_assignments
from autograder.grading.models import GradeRow, GradingResults, SubmissionResult, TestRow
from autograder.mistakes import CHARGED_THROUGH, CORRECT_VARIANTS, MISTAKES, Variant
from autograder.settings import SOLUTIONS_DIR
from autograder.submissions import released, solved, write_submission

if TYPE_CHECKING:
    from colab_like import ColabRuntime, NotebookRun


def results_of(grades: list[GradeRow], tests: list[TestRow]) -> list[SubmissionResult]:
    """Hand-made rows, in the CSVs' flat shape, as the per-submission results the writers read."""
    return GradingResults.from_rows(grades, tests).results


# COURSE_TEST_ONLY=03,04 narrows the notebook tests to those assignments while one is being written
# (a developer's shortcut: CI never sets it, and then every assignment is tested).
ONLY = [prefix.strip() for prefix in os.environ.get("COURSE_TEST_ONLY", "").split(",") if prefix.strip()]


ASSIGNMENTS = [name for name in list_assignments(SOLUTIONS_DIR) if not ONLY or name[:2] in ONLY]


@dataclass
class GradedClass:
    submissions: Path
    out: Path
    report: GradingResults
    mistake_students: dict[str, list[Variant]]  # student id -> the mistakes in their submission
    snapshot_before: dict[str, str]
    roster: list[str] | None = None  # the class list it was graded with, if any


def tree_digest(*folders: Path) -> dict[str, str]:
    """sha256 of every file under the folders (caches and tool folders aside): to prove grading wrote nothing there."""

    def ignored(path: Path) -> bool:
        return any(part.startswith(".") or part == "__pycache__" or part.endswith(".egg-info") for part in path.parts)

    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not ignored(path.relative_to(folder))
    }


def leaked_hidden_lines(feedback: Path, assignment: str) -> list[str]:
    """Lines of ``assignment``'s hidden tests that a feedback page shows. Solution lines are left out:
    a solved submission holds them as the student's own code, which its feedback may show."""
    import html

    from autograder.grading.redaction import Redactor

    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    public = {"cells": [c for c in source.cells if "BEGIN HIDDEN TESTS" not in c.source]}
    secrets = Redactor.for_source(source).secrets - Redactor.for_source(public).secrets
    assert len(secrets) > 10, f"{assignment}: too few distinctive hidden-test lines to tell a leak"
    text = " ".join(html.unescape(feedback.read_text(encoding="utf-8")).split())
    return sorted(line for line in secrets if line in text)


def variant_rounds(variants: list[Variant]) -> list[list[Variant]]:
    """Group variants so that no submission rewrites the same cell twice: round i takes each cell's i-th variant."""
    by_cell: dict[str, list[Variant]] = {}
    for variant in variants:
        by_cell.setdefault(variant.cell, []).append(variant)
    rounds = max((len(group) for group in by_cell.values()), default=0)
    return [[group[i] for group in by_cell.values() if i < len(group)] for i in range(rounds)]


def mistake_rounds(mistakes: list[Variant], assignment: str = "") -> list[list[Variant]]:
    """Pack mistakes into as few submissions as possible, never two in one cell, never two
    that may cost points on the same test, and never a kernel's with its launcher's (a kernel's
    tests run through the student's launcher: CHARGED_THROUGH). Tests of one function stand in
    correct versions of the others it calls, so each mistake's lost points can still be told apart."""
    linked = {frozenset((cell, through)) for (a, cell), (through, _) in CHARGED_THROUGH.items() if a == assignment}
    rounds: list[list[Variant]] = []
    for mistake in mistakes:
        for group in rounds:
            if all(
                m.cell != mistake.cell and not set(m.loses) & set(mistake.loses) and frozenset((m.cell, mistake.cell)) not in linked
                for m in group
            ):
                group.append(mistake)
                break
        else:
            rounds.append([mistake])
    return rounds


def build_class(folder: Path) -> dict[str, list[Variant]]:
    """Per assignment: the solution, the untouched release, every mistake, all correct variants
    at once, and submissions that cannot be graded."""
    mistake_students: dict[str, list[Variant]] = {}
    for assignment in ASSIGNMENTS:
        prefix = assignment[:2]
        write_submission(folder, f"{prefix}-solved", assignment, solved(assignment))
        write_submission(folder, f"{prefix}-untouched", assignment, released(assignment))
        for i, variants in enumerate(variant_rounds(CORRECT_VARIANTS.get(assignment, []))):
            write_submission(folder, f"{prefix}-correct-variants-{i}", assignment, solved(assignment, variants))
        # The held-out mistakes ride along where a cell and their tests are free: no more submissions than needed.
        held_out = [h.mistake for h in HELD_OUT.get(assignment, [])]
        for i, mistakes in enumerate(mistake_rounds(MISTAKES.get(assignment, []) + held_out, assignment)):
            student = f"{prefix}-mistakes-{i}"
            write_submission(folder, student, assignment, solved(assignment, mistakes))
            mistake_students[student] = mistakes

    first = "01_soft_dictionary_lookup"
    if first in ASSIGNMENTS:
        # A mistake that fails only a hidden test, alone: its feedback must show no traceback frames.
        builtin = next(m for m in MISTAKES[first] if m.name == "softmax calls torch.softmax")
        write_submission(folder, "zz-hidden-only", first, solved(first, [builtin]))
    return mistake_students


@dataclass
class ColabRuns:
    runtime: "ColabRuntime"
    student: dict[str, "NotebookRun"]
    solution: dict[str, "NotebookRun"]
    triton_before_07: bool  # whether Triton was there before notebook 07's setup cell ran
    handout: Path  # the handout folder the students' runtime installed from
