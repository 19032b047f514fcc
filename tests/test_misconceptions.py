"""Naming a misconception: the pieces that decide it, on hand-made inputs (the graded class checks the catalogue)."""

from __future__ import annotations

import nbformat
import torch

from autograder.grading.misconceptions import _close, section_of
from autograder.grading.models import MISCONCEPTION_SEPARATOR
from autograder.mistakes import MISTAKES
from autograder.settings import SOLUTIONS_DIR


def test_results_compare_to_the_tolerance_of_their_dtype() -> None:
    x = torch.linspace(-1, 1, 7)
    assert _close(x + 1e-7, x) and not _close(x + 1e-3, x)
    assert not _close(x.double(), x), "a different dtype is a different result"
    assert not _close(x[:6], x) and not _close(x, [x])
    assert _close((x, 2.0, "a"), (x.clone(), 2.0 + 1e-9, "a")) and not _close((x, 2.0), (x, 3.0))
    assert _close(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0])), "NaN where the student had NaN"
    assert _close(torch.tensor([1, 2]), torch.tensor([1, 2])) and not _close(torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert not _close(True, 1) and _close({"a": x}, {"a": x}) and not _close({"a": x}, {"b": x})


def test_the_section_to_revisit_is_the_heading_above_the_function() -> None:
    source = nbformat.read(SOLUTIONS_DIR / "01_soft_dictionary_lookup" / "01_soft_dictionary_lookup.ipynb", as_version=4)
    section = section_of(source, "softmax")
    assert section and not section.startswith("#"), section
    assert "softmax" in section.lower() or "soft" in section.lower(), section
    assert section_of(source, "no_such_cell") == ""


def test_no_catalogued_name_holds_the_separator_of_tests_csv() -> None:
    assert not [m.name for mistakes in MISTAKES.values() for m in mistakes if MISCONCEPTION_SEPARATOR in m.name]
