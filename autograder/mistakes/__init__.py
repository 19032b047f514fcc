"""Typical mistakes and correct variants, per assignment, as edits of the solution.

A ``Variant`` rewrites one solution cell: either small text edits of the solution
(a mistake is usually one wrong line) or a whole new cell (a different but correct
implementation). ``loses`` names the tests that must lose points; a correct variant
loses none. The test suite grades each variant and holds the notebook's tests to
this table: every mistake loses points on the test that names it, and every
correct variant gets full marks.
"""

from __future__ import annotations

from . import (
    complexity,
    dot_product_attention,
    flash_backward,
    fused_attention,
    language_model,
    masking,
    multi_head_attention,
    scaled_dot_product_attention,
    soft_dictionary_lookup,
)
from .variant import Variant

__all__ = ["Variant", "MISTAKES", "CORRECT_VARIANTS", "CHARGED_THROUGH"]

# assignment -> (mistakes, correct variants)
MISTAKES: dict[str, list[Variant]] = {
    "01_soft_dictionary_lookup": soft_dictionary_lookup.MISTAKES,
    "02_dot_product_attention": dot_product_attention.MISTAKES,
    "03_scaled_dot_product_attention": scaled_dot_product_attention.MISTAKES,
    "04_masking": masking.MISTAKES,
    "05_multi_head_attention": multi_head_attention.MISTAKES,
    "06_complexity": complexity.MISTAKES,
    "07_fused_attention": fused_attention.MISTAKES,
    "08_flash_backward": flash_backward.MISTAKES,
    "09_language_model": language_model.MISTAKES,
}
CORRECT_VARIANTS: dict[str, list[Variant]] = {
    "01_soft_dictionary_lookup": soft_dictionary_lookup.CORRECT_VARIANTS,
    "02_dot_product_attention": dot_product_attention.CORRECT_VARIANTS,
    "03_scaled_dot_product_attention": scaled_dot_product_attention.CORRECT_VARIANTS,
    "04_masking": masking.CORRECT_VARIANTS,
    "05_multi_head_attention": multi_head_attention.CORRECT_VARIANTS,
    "06_complexity": complexity.CORRECT_VARIANTS,
    "07_fused_attention": fused_attention.CORRECT_VARIANTS,
    "08_flash_backward": flash_backward.CORRECT_VARIANTS,
    "09_language_model": language_model.CORRECT_VARIANTS,
}

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
