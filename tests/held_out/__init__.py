"""Mistakes kept out of the catalogue (``autograder/mistakes/``), so the grader has never seen them.

A student's bug is rarely one the catalogue lists. These are graded with the class (``tests/helpers.py`` packs
them with the catalogued ones), and tests/test_grading.py holds each to what an uncatalogued bug deserves: it
loses points only on the tests of its own function (``loses``, checked like the catalogue's), no catalogued
misconception is named for it, and its feedback still says where it is (``says``: the function's call, and for
a composite the step that first differs).
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder.mistakes import Variant


@dataclass(frozen=True)
class HeldOut:
    mistake: Variant  # its loses: exactly the tests it must lose, the one that names its function first
    says: tuple[str, ...]  # phrases its feedback page must show (HTML-unescaped, whitespace collapsed)


from . import (  # noqa: E402 - the data modules use HeldOut
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

HELD_OUT: dict[str, list[HeldOut]] = {
    "01_soft_dictionary_lookup": soft_dictionary_lookup.HELD_OUT,
    "02_dot_product_attention": dot_product_attention.HELD_OUT,
    "03_scaled_dot_product_attention": scaled_dot_product_attention.HELD_OUT,
    "04_masking": masking.HELD_OUT,
    "05_multi_head_attention": multi_head_attention.HELD_OUT,
    "06_complexity": complexity.HELD_OUT,
    "07_fused_attention": fused_attention.HELD_OUT,
    "08_flash_backward": flash_backward.HELD_OUT,
    "09_language_model": language_model.HELD_OUT,
}
