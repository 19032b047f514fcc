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
- ``inputs``: the inputs tests build (``random_tensor``, ``random_shape``, ``nan_padded``);
- ``flops`` and ``memory``: the measurements a test may take (``count_flops``, ``peak_tensor_bytes``).

``__all__`` lists exactly these; ``GUARDS`` is for the grader, which flags a submission that imports
this module in code of its own (a test cell imports it; a student has no need to).
"""

from __future__ import annotations

from .comparisons import (
    TOLERANCES,
    Tolerance,
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
from .execution_checks import check_kernel_outputs, check_products_at_most, check_reads_at_most, check_rows_read
from .flops import count_flops
from .gpu_checks import check_builds_for_gpu
from .guards import Guards
from .inputs import nan_padded, random_shape, random_tensor
from .memory import peak_tensor_bytes
from .questions import ANSWER_KINDS, check_answer, check_answer_format
from .student_calls import call, check_gradcheck, check_no_builtin, check_raises, gradients, output_node, saved_for_backward
from .tripwires import ForbiddenCallError, forbidden

GUARDS = Guards(module=True)

__all__ = [
    "ANSWER_KINDS",
    "TOLERANCES",
    "ForbiddenCallError",
    "Tolerance",
    "attention_rounding",
    "call",
    "check_answer",
    "check_answer_format",
    "check_builds_for_gpu",
    "check_close",
    "check_each_close",
    "check_equal",
    "check_gradcheck",
    "check_kernel_outputs",
    "check_matches",
    "check_no_builtin",
    "check_products_at_most",
    "check_raises",
    "check_reads_at_most",
    "check_rows_read",
    "check_shape",
    "count_flops",
    "describe",
    "exp_rounding",
    "forbidden",
    "gradients",
    "nan_padded",
    "output_node",
    "peak_tensor_bytes",
    "random_shape",
    "random_tensor",
    "saved_for_backward",
    "tolerance",
]
