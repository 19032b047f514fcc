"""What the course notebooks import: the package itself, for everything but tests and Triton.

A notebook's cells import from a small, listed set (``tests/test_public_surface.py`` holds every
notebook to it):

- ``course_utils`` (this package): setup (``init``, ``needs``, ``pick_device``), the student's question
  values, plots, worked examples, timing and memory measurements, the stand-ins a demonstration
  runs while a function is still a stub, and the PyTorch versions (``torch_causal_mask``,
  ``torch_flash_forward``, ...) a student imports in place of carried code that does not work yet;
- ``course_utils.kernels``: Triton (``launch``, ``tl``, ``triton``), in its interpreter on a CPU; a module
  of its own, imported by name, because importing it chooses the interpreter before Triton loads;
- ``course_utils.operators``: which PyTorch operators ran, and their time; named, not handed on here,
  because the grader flags a student line that names it (``course_utils.guards``), and a name from it
  here would slip past;
- ``course_utils.checks``: every check and what tests measure with; test cells import from it alone,
  and setup cells import the few checks every test cell uses (``call``, ``check_close``), for them;
- ``autograder.solutions``: ``load_solution``, in hidden tests only: the grader's, never in the students' package.

This is the students' package: ``release --handout`` copies it whole into the students' repository, and
``release --check`` fails when anything in it, as pip installs it, would answer a graded item (what only the
grader adds, the solution loader among it, lives in ``autograder``). Light by design (torch, numpy,
matplotlib), so a Colab notebook can pip-install it. The names
below load on first use: a part that needs no torch (the sealed runs' wire format, which the
sandbox probe reads) imports without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_FROM = {
    "as_heads": "drop_in",
    "ATTENTION_STAND_IN": "stand_ins",
    "bar_weights": "plots",
    "BLOCK_STAND_INS": "model_stand_ins",
    "cat_dog_mat_table": "examples",
    "CAUSAL_MASK_STAND_IN": "stand_ins",
    "causal_tile_map": "plots",
    "causal_tile_status": "plots",
    "check_my_work": "selfcheck",
    "check_student_id": "student_values",
    "EXAMPLE_ID": "student_values",
    "first_differing_position": "composite_steps",
    "greedy_by_recomputation": "model_stand_ins",
    "H100_SXM_BF16": "plots",
    "HEADS_STAND_IN": "stand_ins",
    "heatmap": "plots",
    "init": "runtime",
    "is_grading": "runtime",
    "maps_at_three_scales": "examples",
    "maps_of_five_mechanisms": "examples",
    "median_seconds": "timing",
    "needs": "runtime",
    "peak_tensor_bytes": "memory",
    "pick_device": "runtime",
    "program_map": "plots",
    "question_values": "student_values",
    "ReferenceBlock": "model_stand_ins",
    "ReferenceLM": "model_stand_ins",
    "roofline": "plots",
    "seed_everything": "runtime",
    "show_values": "student_values",
    "single_thread": "runtime",
    "SOFTMAX_STAND_IN": "stand_ins",
    "tiled_attention_flops": "flops",
    "torch_causal_mask": "stand_ins",
    "torch_flash_attention_triton": "stand_ins",
    "torch_flash_forward": "stand_ins",
    "torch_masked_attention": "model_stand_ins",
    "torch_merge_heads": "stand_ins",
    "torch_rope": "model_stand_ins",
    "torch_split_heads": "stand_ins",
    "TRAINING_STAND_INS": "model_stand_ins",
    "visited_tiles": "flops",
    "where_block_differs": "composite_steps",
}

__all__ = sorted(_FROM)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_FROM[name]}", __name__), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_FROM])
