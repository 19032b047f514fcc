"""Typical mistakes and correct variants, per assignment: each a base text and edits of it.

A ``Variant`` rewrites one solution cell in one idiom: a base (the solution cell, or ``of=`` a whole cell
written out in the catalogue module) and ``(old, new)`` edits of it. A mistake is its wrong line(s), so it
always has edits; a correct implementation written differently is a whole cell given as its base with no
edits; a graded question answered another way is an edit of its solution cell. ``loses`` names the tests
that must lose points; a correct variant loses none. The test suite grades each variant and holds the
notebook's tests to this table: every mistake loses points on the test that names it, and every correct
variant gets full marks. docs/contributing.md, "The mistakes catalogue", shows how to add one.
"""

from __future__ import annotations

import importlib

from ..course import list_assignments
from .variant import Variant

__all__ = ["Variant", "MISTAKES", "CORRECT_VARIANTS", "CHARGED_THROUGH", "catalogue_module"]


def catalogue_module(assignment: str) -> str:
    """The module that catalogues ``assignment``'s mistakes: its name without the number (``04_masking`` -> ``masking``)."""
    return assignment.split("_", 1)[1]


def _catalogues() -> dict[str, object]:
    """Each assignment of the course whose catalogue module exists, in course order: a new notebook's module is
    found by its name, with nothing to register (docs/contributing.md, "Adding a notebook")."""
    found = {}
    for assignment in list_assignments():
        try:
            found[assignment] = importlib.import_module(f"{__name__}.{catalogue_module(assignment)}")
        except ModuleNotFoundError as missing:
            if missing.name != f"{__name__}.{catalogue_module(assignment)}":
                raise  # the module exists and imports something that does not
    return found


_MODULES = _catalogues()
# assignment -> its mistakes, and its correct implementations written differently
MISTAKES: dict[str, list[Variant]] = {assignment: module.MISTAKES for assignment, module in _MODULES.items()}  # type: ignore[attr-defined]
CORRECT_VARIANTS: dict[str, list[Variant]] = {assignment: module.CORRECT_VARIANTS for assignment, module in _MODULES.items()}  # type: ignore[attr-defined]

# A mistake loses points only on tests that use its own cell's names (tests/test_contract.py checks the table),
# except here: (assignment, the mistake's cell) -> (the cell whose tests it may also cost, why). autograder/CONTRACT.md
# lists the same exceptions.
CHARGED_THROUGH: dict[tuple[str, str], tuple[str, str]] = {
    ("07_fused_attention", "softmax_row_kernel"): (
        "softmax_rows",
        "a kernel is graded through its launcher: its tests run it with the student's softmax_rows",
    ),
    ("07_fused_attention", "flash_attention_kernel"): (
        "flash_attention_triton",
        "a kernel is graded through its launcher: its tests run it with the student's flash_attention_triton",
    ),
}
