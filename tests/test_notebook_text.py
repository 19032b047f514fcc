"""What the notebooks say: no graded answer on the student's page, no drafting leftovers."""

from __future__ import annotations

import json
import re

import pytest

from autograder.course import list_assignments
from autograder.nbgrader_ext.discussion import WITHHELD_NOTE, discussion_runs, is_discussion
from autograder.settings import NOTEBOOKS_DIR, SOLUTIONS_DIR
from course_utils.notebook_cells import cell_source

# Wording about texts the reader does not have, or about the notebook's own history. A notebook
# writes about the idea ("a common simplification drops the tanh"), never about where it came from.
DRAFT_WORDING = [
    r"\bthe text'?s?\b(?! (above|below|of (this|the) (cell|question|notebook)))",
    r"\b(popular|step-by-step|course|seed) texts?\b",
    r"\btexts? (this|the) course\b",
    r"\bone (of the \w+ )?sources?\b",
    r"\bone of the \w* ?texts\b",
    r"\bthe walkthrough\b",
    r"\bthe usual account\b",
    r"\b(an )?(earlier|previous|first|old) (version|draft)\b",
    r"\bthis notebook (said|used to|once|first)\b",
    r"\boriginal `?\w+`? design\b",
    r"\bseeds'",
    r"\bdraft\b",
    r"\b(as in|from) the book\b",
    r"\bd2l\b",
    r"\bCONTRACT\.md\b",  # the grader's contract: students do not have it
]
WORDING = re.compile("|".join(f"(?:{p})" for p in DRAFT_WORDING), re.IGNORECASE)
MIN_DISCUSSION_LINE = 40  # shorter lines ("```", "print(weights)") may well appear elsewhere


def _cells(folder, name: str) -> list[dict]:
    return json.loads((folder / name / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]


def _normal(text: str) -> str:
    return " ".join(text.split())


def draft_wording(text: str) -> list[str]:
    """Each phrase of ``text`` that speaks of an unseen text, a draft or an earlier version."""
    return [match.group(0) for match in WORDING.finditer(text)]


@pytest.mark.parametrize(
    "text",
    [
        "The text's simplified additive score",
        "A popular text computes",
        "as an earlier draft of this notebook did",
        "# the seeds' mask",
        "Following the original `SoftDictionary` design",
        "the texts this course grew from",
        "One source says",
        "The walkthrough's scores",
        "the tolerance is widened (see CONTRACT.md)",
    ],
)
def test_the_wording_scan_finds_each_kind_of_leftover(text: str) -> None:
    assert draft_wording(text), text


@pytest.mark.parametrize(
    "text",
    [
        "torch.manual_seed(0)  # the same inputs",
        "which head errs depends on the seed",
        "course_utils.seed_everything(4)",
        "the text below describes it",
        "a common simplification drops the tanh",
        "the source sentence in a translation model",
    ],
)
def test_the_wording_scan_lets_ordinary_words_pass(text: str) -> None:
    assert not draft_wording(text), text


@pytest.mark.parametrize("name", list_assignments())
def test_no_notebook_speaks_of_unseen_texts_or_earlier_drafts(name: str) -> None:
    for folder in (SOLUTIONS_DIR, NOTEBOOKS_DIR):
        found = {cell.get("id"): hits for cell in _cells(folder, name) if (hits := draft_wording(cell_source(cell)))}
        assert not found, f"{folder.name}/{name}: cells that speak of an unseen text or the notebook's history: {found}"


@pytest.mark.parametrize("name", list_assignments())
def test_student_notebooks_hold_no_discussion_of_a_graded_question(name: str) -> None:
    solution, student = _cells(SOLUTIONS_DIR, name), _cells(NOTEBOOKS_DIR, name)
    assert not [c.get("id") for c in student if is_discussion(c)], f"{name}: discussion cells reached the student version"
    student_text = _normal(" ".join(cell_source(c) for c in student))
    discussions = [c for c in solution if is_discussion(c)]
    for cell in discussions:
        lines = [_normal(line) for line in cell_source(cell).splitlines() if len(_normal(line)) >= MIN_DISCUSSION_LINE]
        leaked = [line for line in lines if line in student_text]
        assert not leaked, f"{name}: discussion {cell.get('id')} appears in the student version: {leaked[:2]}"
    notes = [c for c in student if cell_source(c) == WITHHELD_NOTE]
    runs = len(discussion_runs(solution))
    assert len(notes) == runs, f"{name}: one note in the student version for each withheld discussion ({len(notes)} != {runs})"
