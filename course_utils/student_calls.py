"""Calling student code from a test: each call is an invocation that is run, recorded or replayed.

``call`` returns the result (a crash becomes a named assertion), ``check_raises`` expects an error,
``check_no_builtin`` runs with tripwires on the named built-ins, and ``gradients``,
``saved_for_backward`` and ``check_gradcheck`` look inside a backward pass. Student code is called
with warnings silenced: nbgrader gives 0 to a test cell that writes anything to stderr.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .comparisons import _fail, _recording, describe
from .recording import CallOutcome, NotWritten, invoke, tripped


def _format_call(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    names = [f"<{type(a).__name__}>" if isinstance(a, torch.Tensor) else repr(a) for a in args]
    names += [f"{k}={v!r}" if not isinstance(v, torch.Tensor) else f"{k}=<Tensor>" for k, v in kwargs.items()]
    return f"{getattr(fn, '__name__', 'function')}({', '.join(names)})"


def _run_student(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], label: str, **options: Any) -> CallOutcome:
    """One invocation of student code (run, recorded or replayed: see ``course_utils.recording``)."""
    outcome = invoke(fn, tuple(args), dict(kwargs), label=label, **options)
    found = tripped(outcome)
    if found and not _recording():  # recorded in the sealed run, as a forbidden call is; decided here
        _fail(label, found[0], inputs=None, hint=found[1])
    if outcome.kind == "not_written":
        raise NotWritten(f"{label}: not written yet (it raises NotImplementedError).", getattr(fn, "__name__", ""))
    return outcome


def call(
    fn: Callable[..., Any],
    *args: Any,
    label: str | None = None,
    hint: str = "",
    returns: int | None = None,
    stand_ins: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Call a student's function with warnings silenced and return its result.

    An exception inside it becomes an ``AssertionError`` that names the call.
    With ``returns=n`` the result must be a tuple of ``n`` items.
    ``stand_ins`` replaces other graded functions that ``fn`` may call (by their
    global names) with correct ones for the duration of the call, so that a bug
    in one function costs points only on that function's own tests.
    """
    label = label or _format_call(fn, args, kwargs)
    outcome = _run_student(fn, args, kwargs, label, stand_ins=stand_ins)
    if outcome.kind == "raised":
        _fail(label, f"raised {outcome.error_type}: {outcome.message}", inputs=None, hint=hint)
    result = outcome.value
    if returns is not None and not (isinstance(result, tuple) and len(result) == returns):
        _fail(label, f"should return a tuple of {returns} items, got {describe(result)}", inputs=None, hint=hint)
    return result


def check_raises(
    error: type[BaseException],
    fn: Callable[..., Any],
    *args: Any,
    label: str | None = None,
    hint: str = "",
    **kwargs: Any,
) -> bool:
    """``fn(*args, **kwargs)`` raises ``error`` (and not some other exception)."""
    label = label or _format_call(fn, args, kwargs)
    outcome = _run_student(fn, args, kwargs, label)  # a stub's NotImplementedError never counts as the expected error
    if outcome.raised(error) or _recording():
        return True
    if outcome.kind == "raised":
        _fail(label, f"should raise {error.__name__}, but raised {outcome.error_type}: {outcome.message}", inputs=None, hint=hint)
    _fail(label, f"should raise {error.__name__}, but returned {describe(outcome.value)}", inputs=None, hint=hint)
    return False  # not reached


def check_no_builtin(
    fn: Callable[..., Any],
    *args: Any,
    builtins: Sequence[str],
    label: str | None = None,
    hint: str = "",
    stand_ins: dict[str, Any] | None = None,
    **kwargs: Any,
) -> bool:
    """``fn`` runs to completion without calling any of ``builtins``.

    ``stand_ins`` replaces the graded helpers ``fn`` calls, as in ``call``: a helper's own use
    of a built-in is judged on the helper's tests, not on ``fn``'s.
    """
    label = label or _format_call(fn, args, kwargs)
    calls = _run_student(fn, args, kwargs, label, forbidden_builtins=tuple(builtins), stand_ins=stand_ins).forbidden_calls
    if calls and not _recording():
        _fail(label, f"calls {sorted(set(calls))}, which this exercise asks you to write yourself", inputs=None, hint=hint)
    return True


def gradients(
    fn: Callable[..., Any],
    *inputs: torch.Tensor,
    upstream: torch.Tensor,
    output: int | None = None,
    label: str | None = None,
    hint: str = "",
    stand_ins: dict[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, ...]:
    """The gradients of ``sum(fn(*inputs)[output] * upstream)`` with respect to each input.

    The student's function runs with autograd on: an input it does not reach through
    differentiable operations (``.detach()``, ``.item()``, numpy) fails here, naming it.
    """
    label = label or _format_call(fn, inputs, kwargs)

    def backward_through(student: Callable[..., Any]) -> Callable[..., Any]:
        def run(*tensors: torch.Tensor, **options: Any) -> tuple[torch.Tensor | None, ...]:
            leaves = tuple(t.detach().clone().requires_grad_() for t in tensors)
            with torch.enable_grad():
                result = student(*leaves, **options)
                result = result if output is None else result[output]
                found = torch.autograd.grad((result * upstream).sum(), leaves, allow_unused=True)
            return tuple(None if g is None else g.detach() for g in found)

        return run

    outcome = _run_student(fn, inputs, kwargs, label, stand_ins=stand_ins, through=("gradients", backward_through))
    if outcome.kind == "raised":
        _fail(
            label,
            f"could not be differentiated: {outcome.error_type}: {outcome.message}",
            inputs=None,
            hint=hint or "build it from differentiable torch operations: no .detach(), .item(), numpy or in-place tricks",
        )
    grads = outcome.value
    if not _recording():
        if not (isinstance(grads, tuple) and len(grads) == len(inputs)):
            _fail(label, "gradients could not be computed", inputs=None, hint=hint)
        missing = [i for i, g in enumerate(grads) if g is None]
        if missing:
            _fail(
                label,
                f"the output does not depend on input(s) {missing} through autograd",
                inputs=None,
                hint=hint or "build it from differentiable torch operations: no .detach(), .item(), numpy or in-place tricks",
            )
    return grads


def saved_for_backward(
    fn: Callable[..., Any],
    *inputs: torch.Tensor,
    label: str | None = None,
    hint: str = "",
    stand_ins: dict[str, Any] | None = None,
    **kwargs: Any,
) -> list[list[int]]:
    """The shapes of the tensors autograd saves for the backward pass of ``fn(*inputs, **kwargs)``.

    Seen through ``torch.autograd.graph.saved_tensors_hooks``, which also sees what a custom
    ``autograd.Function`` passes to ``ctx.save_for_backward``. The inputs are differentiated (they
    get ``requires_grad``), so autograd saves what a training step would.
    """
    label = label or _format_call(fn, inputs, kwargs)

    def shapes_saved_by(student: Callable[..., Any]) -> Callable[..., Any]:
        def run(*tensors: torch.Tensor, **options: Any) -> list[list[int]]:
            shapes: list[list[int]] = []

            def pack(tensor: torch.Tensor) -> torch.Tensor:
                shapes.append([int(n) for n in tensor.shape])
                return tensor

            leaves = tuple(t.detach().clone().requires_grad_() for t in tensors)
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
                student(*leaves, **options)
            return shapes

        return run

    outcome = _run_student(fn, inputs, kwargs, label, stand_ins=stand_ins, through=("saved_for_backward", shapes_saved_by))
    if outcome.kind == "raised":
        _fail(label, f"raised {outcome.error_type}: {outcome.message}", inputs=None, hint=hint)
    return outcome.value


def output_node(
    fn: Callable[..., Any],
    *inputs: torch.Tensor,
    label: str | None = None,
    hint: str = "",
    stand_ins: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """What a project's test reads from the autograd node of ``fn(*inputs)``'s output.

    Returns ``{"node": the node's class name, "saved": [shape, ...]}``, the shapes of the node's
    ``saved_tensors``; ``saved`` is None where the node has none to read that way: a reshape's node,
    say, when a Function's output was reshaped around ``apply`` instead of inside ``forward``.
    """
    label = label or _format_call(fn, inputs, kwargs)

    def node_of(student: Callable[..., Any]) -> Callable[..., Any]:
        def run(*tensors: torch.Tensor, **options: Any) -> dict[str, Any]:
            leaves = tuple(t.detach().clone().requires_grad_() for t in tensors)
            with torch.enable_grad():
                out = student(*leaves, **options)
            node = getattr(out, "grad_fn", None)
            saved = getattr(node, "saved_tensors", None)
            shapes = None if saved is None else [[int(n) for n in t.shape] for t in saved if isinstance(t, torch.Tensor)]
            return {"node": type(node).__name__, "saved": shapes}

        return run

    outcome = _run_student(fn, inputs, kwargs, label, stand_ins=stand_ins, through=("output_node", node_of))
    if outcome.kind == "raised":
        _fail(label, f"raised {outcome.error_type}: {outcome.message}", inputs=None, hint=hint)
    return outcome.value


def check_gradcheck(
    fn: Callable[..., Any],
    *inputs: torch.Tensor,
    label: str | None = None,
    hint: str = "",
    stand_ins: dict[str, Any] | None = None,
    **kwargs: Any,
) -> bool:
    """``torch.autograd.gradcheck`` of ``fn(*inputs, **kwargs)``: its backward against finite differences.

    The inputs should be float64 (finite differences in float32 are too coarse).
    """
    label = label or f"torch.autograd.gradcheck({_format_call(fn, inputs, kwargs)})"

    def gradcheck_of(student: Callable[..., Any]) -> Callable[..., Any]:
        def run(*tensors: torch.Tensor, **options: Any) -> bool:
            leaves = tuple(t.detach().clone().requires_grad_() for t in tensors)
            with torch.enable_grad():
                return bool(torch.autograd.gradcheck(lambda *x: student(*x, **options), leaves))

        return run

    outcome = _run_student(fn, inputs, kwargs, label, stand_ins=stand_ins, through=("gradcheck", gradcheck_of))
    if outcome.kind == "raised":
        message = outcome.message if len(outcome.message) <= 1200 else outcome.message[:1200] + " ..."
        _fail(label, f"failed: {outcome.error_type}: {message}", inputs=None, hint=hint)
    return True
