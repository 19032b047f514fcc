"""Mistakes kept out of the catalogue (``autograder/mistakes/``), so the grader has never seen them.

A student's bug is rarely one the catalogue lists. These are graded with the class (``tests/helpers.py`` packs
them with the catalogued ones), and tests/test_grading.py holds each to what an uncatalogued bug deserves: it
loses points only on the tests of its own function (``loses``, checked like the catalogue's), no catalogued
misconception is named for it unless ``named`` says why that mistake's result is its result on that very test,
and its feedback still says where it is (``says``: the function's call, and for a composite, a kernel or a tiled
function the step that first differs).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from autograder.course import list_assignments
from autograder.mistakes import Variant, catalogue_module


@dataclass(frozen=True)
class HeldOut:
    mistake: Variant  # its loses: exactly the tests it must lose, the one that names its function first
    says: tuple[str, ...]  # phrases its feedback page must show (HTML-unescaped, whitespace collapsed)
    # (test, catalogued mistake, why): a catalogued mistake that gives this one's very results on that test's inputs
    # (a Q K^T-only FLOP count is "multiply-adds instead of FLOPs" when d_k = d_v), so naming it there is right.
    named: tuple[tuple[str, str, str], ...] = ()


def _held_out() -> dict[str, list[HeldOut]]:
    """Per assignment, its module's ``HELD_OUT``: found by the assignment's name without its number, as the catalogue's."""
    found = {}
    for assignment in list_assignments():
        try:
            module = importlib.import_module(f"{__name__}.{catalogue_module(assignment)}")
        except ModuleNotFoundError as missing:
            if missing.name != f"{__name__}.{catalogue_module(assignment)}":
                raise
            continue
        found[assignment] = module.HELD_OUT
    return found


HELD_OUT: dict[str, list[HeldOut]] = _held_out()
