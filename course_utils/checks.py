"""What test cells import: every check, from the modules that hold them.

Each check either returns ``True`` or raises ``AssertionError`` with a message a student can act
on: what was called and on which input, the largest error and where it is, and a hint. Test
cells end with ``assert check_...(...)``, so the last line of a test cell is always an assert
(nbgrader would otherwise score a bare expression by its value).

- ``comparisons``: tolerances and the comparisons (``check_close``, ``check_equal``, ...);
- ``student_calls``: calling student code (``call``, ``check_raises``, ``check_no_builtin``,
  ``gradients``, ...), run, recorded or replayed (``recording``);
- ``tripwires``: the built-ins a graded function must not call (``forbidden``);
- ``questions``: graded questions (``check_answer_format``, ``check_answer``);
- ``gpu_checks``: whether a kernel compiles for a real GPU (``check_builds_for_gpu``);
- ``execution_checks``: what kernels did as they ran (a trace from ``kernel_trace``);
- ``inputs``: the inputs tests build (``random_tensor``, ``random_shape``, ``nan_padded``).
"""

from __future__ import annotations

from .comparisons import (
    _NOT_TORCHS,
    TOLERANCES,
    Tolerance,
    _defined_by_torch,
    attention_rounding,
    check_close,
    check_each_close,
    check_equal,
    check_matches,
    check_shape,
    describe,
    exp_rounding,
    tolerance,
)
from .gpu_checks import check_builds_for_gpu
from .inputs import nan_padded, random_shape, random_tensor
from .questions import ANSWER_KINDS, check_answer, check_answer_format
from .student_calls import call, check_gradcheck, check_no_builtin, check_raises, gradients, output_node, saved_for_backward
from .tripwires import ForbiddenCallError, forbidden

__all__ = [
    "ANSWER_KINDS",
    "TOLERANCES",
    "ForbiddenCallError",
    "Tolerance",
    "_NOT_TORCHS",
    "_defined_by_torch",
    "attention_rounding",
    "call",
    "check_answer",
    "check_answer_format",
    "check_builds_for_gpu",
    "check_close",
    "check_each_close",
    "check_equal",
    "check_gradcheck",
    "check_matches",
    "check_no_builtin",
    "check_raises",
    "check_shape",
    "describe",
    "exp_rounding",
    "forbidden",
    "gradients",
    "output_node",
    "nan_padded",
    "random_shape",
    "random_tensor",
    "saved_for_backward",
    "tolerance",
]
