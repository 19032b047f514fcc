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
- ``flops`` and ``memory``: the measurements a test may take (``count_flops``, ``peak_tensor_bytes``);
- what tests measure with or stand in for the student's code: ``tensor_reads`` (``elements_read``),
  ``kernel_trace`` (``trace_kernels``, ``returned_by_kernels``), ``kernel_steps`` (``where_steps_differ``: which step of a
  kernel or tiled function first goes wrong), with the ladders of isolating inputs in ``attention_steps`` (the forward,
  online softmax) and ``backward_steps`` (the backward, D), ``streams`` (``one_shot_blocks``),
  ``model_stand_ins`` (``model_calls``, ``describe_calls``, ``rope_angles``), ``stand_ins`` and
  ``emulated_kernels`` (the ``*_STAND_IN`` callees), ``autograd_refs`` (gradients by autograd of PyTorch's
  attention, and the tile functions' stand-ins).

Test cells, visible and hidden, import from here alone (hidden ones also ``load_solution`` from
``reference``), as a project's tests call one adapter; so do the setup cells, for the few checks every
test cell uses (``call``, ``check_close``). ``tests/test_public_surface.py`` holds every notebook to it.
``__all__`` lists exactly these; ``GUARDS`` is for the grader, which flags a submission that imports this
module in code of its own (test and setup cells import it; a student has no need to).
"""

from __future__ import annotations

from .attention_steps import attention_output_reference, attention_reference, forward_ladder, if_new_nan, softmax_ladder, softmax_reference
from .autograd_refs import logsumexp_of_scores, sdpa_gradients, tile_function_stand_ins
from .backward_steps import backward_ladder, backward_reference, extreme_scores, if_new_nan_in, preprocess_ladder, preprocess_reference
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
from .emulated_kernels import (
    FLASH_ATTENTION_KERNEL_STAND_IN,
    MARKED_FLASH_ATTENTION_KERNEL_STAND_IN,
    MARKED_SOFTMAX_ROW_KERNEL_STAND_IN,
    SOFTMAX_ROW_KERNEL_STAND_IN,
)
from .execution_checks import check_kernel_outputs, check_products_at_most, check_reads_at_most, check_rows_read
from .flops import count_flops, tiled_attention_flops, visited_tiles
from .gpu_checks import check_builds_for_gpu
from .guards import Guards
from .inputs import nan_padded, random_shape, random_tensor
from .kernel_steps import Step, where_steps_differ
from .kernel_trace import returned_by_kernels, trace_kernels
from .memory import peak_tensor_bytes
from .model_stand_ins import describe_calls, model_calls, rope_angles
from .questions import ANSWER_KINDS, check_answer, check_answer_format
from .stand_ins import (
    FLASH_FORWARD_STAND_IN,
    FLASH_PREPROCESS_STAND_IN,
    FLASH_TRITON_STAND_IN,
    SCORES_STAND_IN,
    SOFTMAX_BACKWARD_STAND_IN,
)
from .streams import one_shot_blocks
from .student_calls import call, check_gradcheck, check_no_builtin, check_raises, gradients, output_node, saved_for_backward
from .tensor_reads import elements_read
from .tripwires import ForbiddenCallError, forbidden

GUARDS = Guards(module=True)

__all__ = [
    "ANSWER_KINDS",
    "FLASH_ATTENTION_KERNEL_STAND_IN",
    "FLASH_FORWARD_STAND_IN",
    "FLASH_PREPROCESS_STAND_IN",
    "FLASH_TRITON_STAND_IN",
    "ForbiddenCallError",
    "MARKED_FLASH_ATTENTION_KERNEL_STAND_IN",
    "MARKED_SOFTMAX_ROW_KERNEL_STAND_IN",
    "SCORES_STAND_IN",
    "SOFTMAX_BACKWARD_STAND_IN",
    "SOFTMAX_ROW_KERNEL_STAND_IN",
    "Step",
    "TOLERANCES",
    "Tolerance",
    "attention_output_reference",
    "attention_reference",
    "attention_rounding",
    "backward_ladder",
    "backward_reference",
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
    "describe_calls",
    "elements_read",
    "exp_rounding",
    "extreme_scores",
    "forbidden",
    "forward_ladder",
    "gradients",
    "if_new_nan",
    "if_new_nan_in",
    "logsumexp_of_scores",
    "model_calls",
    "nan_padded",
    "one_shot_blocks",
    "output_node",
    "peak_tensor_bytes",
    "preprocess_ladder",
    "preprocess_reference",
    "random_shape",
    "random_tensor",
    "returned_by_kernels",
    "rope_angles",
    "saved_for_backward",
    "sdpa_gradients",
    "softmax_ladder",
    "softmax_reference",
    "tile_function_stand_ins",
    "tiled_attention_flops",
    "tolerance",
    "trace_kernels",
    "visited_tiles",
    "where_steps_differ",
]
