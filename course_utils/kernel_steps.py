"""Which step of a kernel or a tiled function goes wrong: the first of a few inputs, each isolating one step, that fails.

A fused attention kernel's output can be wrong for many reasons (the scores of one tile, the running
statistics carried from one key tile to the next, the mask of a ragged tile, the head dimension's
padding, the scale, the causal mask inside the diagonal tile), and a hint that guesses one of them misleads
every student whose bug is another. So a test that compares a kernel's output first runs the kernel on a
short ladder of inputs, simplest first, each adding one step to what the one before exercised (one key
tile, then two, then a length that is not a multiple of the block, ...). The first rung whose result
differs from the reference's names the step, with the rungs before it that matched: differential evidence,
a place and never a guessed cause.

Every rung runs in both passes, whatever the comparisons say (the trusted pass replays the sealed run's
calls in order, so the calls cannot depend on a result); in the sealed run nothing is compared and the
sentence is "". The rungs are ordinary recorded calls: misconception naming reads them too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .comparisons import CheckFailed, Tolerance, _recording, check_close
from .memory import tensors_in
from .student_calls import _run_student


@dataclass(frozen=True)
class Step:
    """One rung: an input that exercises one more step of the computation than the rung before it."""

    step: str  # the step a failure here points at: "carrying the running max and sum from one key tile to the next"
    inputs: str  # the input, as a student reads it: "T_k = 256 (two or more key tiles of any size up to 128)"
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    rounding: Tolerance | None = None  # what this input's own rounding allows (``exp_rounding`` of large scores)


def where_steps_differ(
    fn: Callable[..., Any],
    reference: Callable[..., Any],
    steps: Sequence[Step],
    *,
    stand_ins: dict[str, Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> str:
    """Run ``fn`` on every rung of ``steps``; name the first whose result differs from ``reference``'s.

    Args:
        fn: the student's function (a kernel's launcher, a tiled function), as tests call it.
        reference: a trusted function of the same arguments (PyTorch's, or the solution's); only called in
            the trusted pass.
        steps: the ladder, simplest first.
        stand_ins, rtol, atol: as the test's own ``call`` and ``check_close`` use them.

    Returns:
        "" in the sealed run, and when every rung agrees; else one sentence: the step, the input, what
        differs (as ``check_close`` says it, or the error raised), and the rungs before it that matched.
    """
    outcomes = [_run_student(fn, step.args, step.kwargs, f"{_name(fn)} on {step.inputs}", stand_ins=stand_ins) for step in steps]
    if _recording():
        return ""
    matched: list[str] = []
    for step, outcome in zip(steps, outcomes):
        if outcome.kind == "raised":
            problem = f"raised {outcome.error_type}: {outcome.message.splitlines()[0] if outcome.message else ''}"
        else:
            problem = _difference(outcome.value, reference(*step.args, **step.kwargs), rtol, atol, step.rounding)
        if problem:
            before = f"; the simpler inputs before it match ({'; '.join(matched)})" if matched else ""
            return f"the first step that goes wrong is {step.step}, on {step.inputs}: {problem}{before}"
        matched.append(step.inputs)
    return ""


def _name(fn: Any) -> str:
    return str(getattr(fn, "__name__", "the function"))


def _difference(got: Any, want: Any, rtol: float | None, atol: float | None, rounding: Tolerance | None) -> str:
    """What first differs between two results (a tensor, or a tuple of them): "" when nothing does.

    A reference that returns a dict names its results ({"dQ": ..., "dK": ..., "dV": ...}): the student's tuple is
    read in the same order, and a difference is told by that name.
    """
    names = [str(key) for key in want] if isinstance(want, dict) else []
    wanted = list(tensors_in(want))
    found = list(tensors_in(got)) if isinstance(got, (torch.Tensor, tuple, list)) else []
    if len(found) != len(wanted):
        return f"returned {len(found)} tensors where {len(wanted)} were expected"
    for index, (mine, theirs) in enumerate(zip(found, wanted)):
        try:
            check_close(mine.cpu(), theirs.cpu(), label="", check_dtype=False, rtol=rtol, atol=atol, rounding=rounding)
        except CheckFailed as failed:
            which = f"{names[index]}: " if len(names) == len(wanted) else f"result {index} (of {len(wanted)}): " if len(wanted) > 1 else ""
            return which + failed.problem
    return ""
