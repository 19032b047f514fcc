"""Checks that test cells call: they compare, and when they fail they say why.

Every check either returns ``True`` or raises ``AssertionError`` with a message a
student can act on (``check_no_builtin`` also lets a crash of the student's code
through): what was called and on which input, the largest error and
where it is, and a hint. Test cells end with ``assert check_...(...)``, so the
last line of a test cell is always an assert (nbgrader would otherwise score a
bare expression by its value).

Student code is called with warnings silenced: nbgrader gives 0 to a test cell
that writes anything to stderr, and a harmless torch warning must not cost points.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.testing

from .recording import Mode, NotWritten, Outcome, invoke, mode

__all__ = [
    "Tolerance",
    "tolerance",
    "describe",
    "call",
    "check_close",
    "check_equal",
    "check_raises",
    "check_shape",
    "forbidden",
    "check_no_builtin",
    "random_tensor",
    "random_shape",
    "check_matches",
    "gradients",
    "exp_rounding",
    "attention_rounding",
    "ANSWER_KINDS",
    "check_answer_format",
    "check_answer",
    "check_builds_for_gpu",
]


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


# Per-dtype tolerances used by every notebook. They are loose enough for a correct
# implementation written differently (loops, einsum, float64 inside, another
# summation order) and tight enough that a real mistake is never within them.
# float32: about 100 ulps of rounding on values of order 1.
# float64: catches a computation done in float32 and cast back (errors ~1e-7).
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float16: Tolerance(rtol=1e-3, atol=1e-3),
    torch.bfloat16: Tolerance(rtol=1.6e-2, atol=1e-2),
    torch.float32: Tolerance(rtol=1e-5, atol=1e-5),
    torch.float64: Tolerance(rtol=1e-10, atol=1e-10),
}


# What the checks compare with, captured when this module is imported: before any notebook cell
# runs (the sealed run imports it first; the trusted pass runs no student code at all). A notebook
# that rebinds torch.testing.assert_close (or torch.equal, ...) to pass every test fails them instead.
_assert_close = torch.testing.assert_close
_equal = torch.equal
_allclose = torch.allclose
_isclose = torch.isclose

_TRUSTED: dict[str, tuple[Callable[[], Any], Any]] = {
    "torch.testing.assert_close": (lambda: torch.testing.assert_close, _assert_close),
    "torch.equal": (lambda: torch.equal, _equal),
    "torch.allclose": (lambda: torch.allclose, _allclose),
    "torch.isclose": (lambda: torch.isclose, _isclose),
}

_TORCH_DIR = os.path.dirname(os.path.realpath(inspect.getfile(torch)))


def _defined_by_torch(fn: Any, name: str) -> bool:
    """``fn`` is torch's own ``name``: a built-in of the torch module, or a Python function whose code
    lives in torch's package. A replacement made before this module was imported is neither."""
    if getattr(fn, "__name__", None) != name:
        return False
    if inspect.isbuiltin(fn):
        return getattr(fn, "__module__", None) == "torch"
    code = getattr(fn, "__code__", None) if inspect.isfunction(fn) else None
    return code is not None and os.path.realpath(code.co_filename).startswith(_TORCH_DIR + os.sep)


# Checked once, here: what was captured must be torch's, whatever ran before the import.
_NOT_TORCHS = [name for name, (_, trusted) in _TRUSTED.items() if not _defined_by_torch(trusted, name.rpartition(".")[2])]


def _refuse_tampering(label: str) -> None:
    replaced = [name for name, (current, trusted) in _TRUSTED.items() if current() is not trusted or name in _NOT_TORCHS]
    if replaced:
        _fail(
            label,
            f"{', '.join(replaced)} was replaced by code in this notebook, so no comparison can be trusted",
            inputs=None,
            hint="delete the line that assigns to it, then restart the kernel and run all cells.",
        )


def tolerance(dtype: torch.dtype) -> Tolerance:
    """The tolerance used to compare tensors of ``dtype`` (exact for other dtypes)."""
    return TOLERANCES.get(dtype, Tolerance(rtol=0.0, atol=0.0))


def exp_rounding(logits: torch.Tensor, values: torch.Tensor | None = None) -> Tolerance:
    """What a softmax of ``logits`` (or an average of ``values`` with those weights) may differ by
    between two correct implementations, beyond the dtype's tolerance.

    Rounding a logit s to its dtype moves it by up to eps * |s|, and softmax turns a shift of
    every logit by at most delta into a relative change of each weight of at most 2 * delta: the
    size of the logits is softmax's condition number. ``exp(s - max(s))`` and
    ``exp(s - logsumexp(s))`` round in different places, so at logits near 1e4 in float32 they
    differ by about 1e-4, far beyond 100 ulps. A weighted average of ``values`` moves by up to
    that relative change times max |values|. The widening is twice these bounds, for the
    arithmetic after; masked (infinite) logits carry no rounding.
    """
    logits = logits.detach()
    finite = logits[torch.isfinite(logits)]
    if not logits.is_floating_point() or finite.numel() == 0:
        return Tolerance(rtol=0.0, atol=0.0)
    rtol = 4 * torch.finfo(logits.dtype).eps * float(finite.abs().max())
    spread = float(values.detach().abs().max()) if values is not None and values.numel() else 0.0
    return Tolerance(rtol=rtol, atol=rtol * spread)


def attention_rounding(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor | None = None, scale: float | None = None) -> Tolerance:
    """``exp_rounding`` for scaled dot-product attention, whose logit q.k * scale can carry up to
    eps * scale * sum |q_i k_i| of rounding (a bound on the logits that needs no softmax)."""
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    bound = (Q.detach().abs() @ K.detach().abs().transpose(-2, -1)) * abs(scale)
    return exp_rounding(bound, V)


def describe(value: Any, max_values: int = 16) -> str:
    """A short description of a value for an error message; small tensors in full."""
    if isinstance(value, torch.Tensor):
        shape = list(value.shape)
        dtype = str(value.dtype).replace("torch.", "")
        if value.numel() <= max_values:
            values = str(value.detach().cpu().tolist())
            return f"tensor({values}, shape={shape}, dtype={dtype})"
        return f"tensor of shape {shape}, dtype={dtype}"
    if isinstance(value, (tuple, list)) and len(value) <= 4:
        inner = ", ".join(describe(v, max_values) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(label: str, problem: str, *, inputs: dict[str, Any] | None, hint: str) -> None:
    lines = [f"{label}: {problem}"]
    for name, value in (inputs or {}).items():
        lines.append(f"  input {name} = {describe(value)}")
    if hint:
        lines.append(f"  hint: {hint}")
    raise AssertionError("\n".join(lines))


def _format_call(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    names = [f"<{type(a).__name__}>" if isinstance(a, torch.Tensor) else repr(a) for a in args]
    names += [f"{k}={v!r}" if not isinstance(v, torch.Tensor) else f"{k}=<Tensor>" for k, v in kwargs.items()]
    return f"{getattr(fn, '__name__', 'function')}({', '.join(names)})"


def _run_student(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], label: str, **options: Any) -> Outcome:
    """One invocation of student code (run, recorded or replayed: see ``course_utils.recording``)."""
    outcome = invoke(fn, tuple(args), dict(kwargs), label=label, **options)
    if outcome.kind == "not_written":
        raise NotWritten(f"{label}: not written yet (it raises NotImplementedError).")
    return outcome


def _recording() -> bool:
    """In the sealed run nothing is compared: the trusted replay decides every verdict."""
    return mode() is Mode.RECORD


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


def check_shape(actual: Any, shape: Sequence[int], *, label: str, hint: str = "") -> bool:
    """``actual`` is a tensor of exactly this shape."""
    if _recording():
        return True
    if not isinstance(actual, torch.Tensor):
        _fail(label, f"expected a torch.Tensor, got {describe(actual)}", inputs=None, hint=hint)
    if list(actual.shape) != list(shape):
        _fail(label, f"expected shape {list(shape)}, got {list(actual.shape)}", inputs=None, hint=hint)
    return True


def check_close(
    actual: Any,
    expected: torch.Tensor,
    *,
    label: str,
    inputs: dict[str, Any] | None = None,
    hint: str = "",
    rtol: float | None = None,
    atol: float | None = None,
    check_dtype: bool = True,
    rounding: Tolerance | None = None,
) -> bool:
    """``actual`` matches ``expected`` in shape, dtype and values (per-dtype tolerance).

    ``rounding`` (from ``exp_rounding`` or ``attention_rounding``) widens the tolerance by what
    the inputs' own rounding allows a correct implementation. NaN in ``actual`` fails unless
    ``expected`` has NaN at the same place.
    """
    if _recording():
        return True
    _refuse_tampering(label)
    check_shape(actual, expected.shape, label=label, hint=hint)
    if check_dtype and actual.dtype != expected.dtype:
        _fail(
            label,
            f"returned dtype {actual.dtype} but {expected.dtype} was expected",
            inputs=inputs,
            hint=hint or "keep the input's dtype: avoid creating new tensors with the default dtype.",
        )
    tol = tolerance(expected.dtype)
    rtol = tol.rtol if rtol is None else rtol
    atol = tol.atol if atol is None else atol
    if rounding is not None:
        rtol, atol = rtol + rounding.rtol, atol + rounding.atol
    try:
        _assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_dtype=False)
        return True
    except AssertionError:
        pass
    got = actual.detach().to(torch.float64).cpu()
    want = expected.detach().to(torch.float64).cpu()
    missing_nan = torch.isnan(want) & ~torch.isnan(got)
    if missing_nan.any():
        where = tuple(int(i) for i in missing_nan.nonzero()[0])
        _fail(
            label, f"{int(missing_nan.sum())} entries are numbers where NaN was expected (first at index {where})", inputs=inputs, hint=hint
        )
    bad_nan = torch.isnan(got) & ~torch.isnan(want)
    if bad_nan.any():
        where = tuple(int(i) for i in bad_nan.nonzero()[0])
        _fail(
            label,
            f"{int(bad_nan.sum())} of {got.numel()} entries are NaN where a number was expected "
            f"(first at index {where}, expected {want[where].item():.6g})",
            inputs=inputs,
            hint=hint,
        )
    error = (got - want).abs().nan_to_num(nan=0.0, posinf=float("inf"))
    error = torch.where(got == want, torch.zeros_like(error), error)  # inf == inf is no error
    allowed = atol + rtol * want.abs()
    outside = error > allowed
    flat = int(torch.argmax(torch.where(outside, error, torch.full_like(error, -1.0))))
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)) if got.dim() else ()
    _fail(
        label,
        f"{int(outside.sum())} of {got.numel()} entries differ; largest error {error[where].item():.3g} "
        f"at index {where}: got {got[where].item():.6g}, expected {want[where].item():.6g} "
        f"(rtol={rtol:g}, atol={atol:g})",
        inputs=inputs,
        hint=hint,
    )
    return False  # not reached: _fail raises


def check_each_close(
    actual: Any,
    expected: Sequence[torch.Tensor],
    *,
    names: Sequence[str],
    label: str,
    hint: str = "",
    rtol: float | None = None,
    atol: float | None = None,
) -> bool:
    """``check_close`` on each item of a returned tuple (gradients: dQ, dK, dV), each named in its message."""
    if _recording():
        return True
    if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
        _fail(label, f"expected {len(expected)} results ({', '.join(names)}), got {describe(actual)}", inputs=None, hint=hint)
    for name, got, want in zip(names, actual, expected):
        check_close(got, want, label=f"{name}: {label}", hint=hint, rtol=rtol, atol=atol)
    return True


def check_equal(actual: Any, expected: Any, *, label: str, inputs: dict[str, Any] | None = None, hint: str = "") -> bool:
    """``actual`` equals ``expected`` exactly (tensors: same shape, dtype and values)."""
    if _recording():
        return True
    _refuse_tampering(label)
    if isinstance(expected, torch.Tensor):
        check_shape(actual, expected.shape, label=label, hint=hint)
        if actual.dtype == expected.dtype and _equal(actual, expected):
            return True
        _fail(label, f"got {describe(actual)}, expected {describe(expected)}", inputs=inputs, hint=hint)
    if actual != expected:
        _fail(label, f"got {describe(actual)}, expected {describe(expected)}", inputs=inputs, hint=hint)
    return True


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


class ForbiddenCallError(RuntimeError):
    """Raised by a built-in that a graded function must not call."""


def _resolve(path: str) -> tuple[Any, str]:
    """'torch.nn.functional.softmax' -> (the module torch.nn.functional, 'softmax')."""
    owner_path, _, attribute = path.rpartition(".")
    try:
        owner: Any = importlib.import_module(owner_path)
    except ModuleNotFoundError:  # e.g. torch.Tensor.softmax: a class, not a module
        module_path, _, class_name = owner_path.rpartition(".")
        owner = getattr(importlib.import_module(module_path), class_name)
    return owner, attribute


@contextlib.contextmanager
def forbidden(*paths: str, namespaces: Sequence[dict[str, Any]] = ()) -> Iterator[list[str]]:
    """Make the named built-ins raise while the block runs; yields the calls made.

    Besides the attributes themselves (``torch.softmax``), any name in ``namespaces``
    bound to one of them (``from torch import softmax as sm``) is tripped too. The
    list is filled even if student code swallows the ``ForbiddenCallError``.
    """
    calls: list[str] = []
    saved: list[tuple[Any, str, Any]] = []
    saved_names: list[tuple[dict[str, Any], str, Any]] = []

    def tripwire(path: str) -> Callable[..., Any]:
        def refuse(*_args: Any, **_kwargs: Any) -> Any:
            calls.append(path)
            raise ForbiddenCallError(f"{path} is not allowed here")

        return refuse

    try:
        for path in paths:
            owner, attribute = _resolve(path)
            original = getattr(owner, attribute)
            saved.append((owner, attribute, original))
            wire = tripwire(path)
            setattr(owner, attribute, wire)
            for namespace in namespaces:
                for name, value in list(namespace.items()):
                    if value is original:
                        saved_names.append((namespace, name, value))
                        namespace[name] = wire
        yield calls
    finally:
        for namespace, name, value in reversed(saved_names):
            namespace[name] = value
        for owner, attribute, original in reversed(saved):
            setattr(owner, attribute, original)


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


def random_tensor(
    *shape: int,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    scale: float = 1.0,
) -> torch.Tensor:
    """A reproducible normal tensor: the same seed always gives the same values."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def nan_padded(tensor: torch.Tensor, *pad: int) -> torch.Tensor:
    """``tensor`` as a view into a larger buffer whose extra elements are NaN.

    ``pad`` gives the extra size of the last ``len(pad)`` dimensions: ``nan_padded(Q, 16, 8)`` of a
    ``[B, H, T, d]`` tensor lives in a ``[B, H, T + 16, d + 8]`` buffer. A kernel that loads past the
    view's end (a missing load mask) reads NaN, and NaN reaches its output: zero-filled memory
    there would hide the missing mask.
    """
    shape = list(tensor.shape)
    for offset, extra in enumerate(pad, start=len(shape) - len(pad)):
        shape[offset] += extra
    buffer = torch.full(shape, float("nan"), dtype=tensor.dtype, device=tensor.device)
    view = buffer[tuple(slice(0, size) for size in tensor.shape)]
    view.copy_(tensor)
    return view


def random_shape(seed: int, ndim: int, low: int = 1, high: int = 7) -> tuple[int, ...]:
    """A reproducible random shape with ``ndim`` sizes in ``[low, high)``."""
    generator = torch.Generator().manual_seed(10_000 + seed)
    return tuple(int(n) for n in torch.randint(low, high, (ndim,), generator=generator))


def check_matches(
    actual: Any,
    references: dict[str, torch.Tensor],
    *,
    label: str,
    inputs: dict[str, Any] | None = None,
    hint: str = "",
    rtol: float | None = None,
    atol: float | None = None,
    rounding: Tolerance | None = None,
) -> bool:
    """``check_close`` against several references at once, e.g. torch's kernel and the solution."""
    return all(
        check_close(actual, expected, label=f"{label} vs {name}", inputs=inputs, hint=hint, rtol=rtol, atol=atol, rounding=rounding)
        for name, expected in references.items()
    )


# --- graded questions -------------------------------------------------------------------------------
#
# A question is answered by a function that returns the answer (``def answer_score_bytes(): return
# ...``), so it is graded like any other function: recorded in the sealed run, compared in the
# trusted pass. The visible test checks only the form of the answer; the hidden test checks its
# value and, when wrong, says what to reconsider, never what the answer is.

ANSWER_KINDS = {
    "integer": "a whole number, e.g. `return 1024`",
    "number": "a number, e.g. `return 0.25`",
    "numbers": "a list of numbers, e.g. `return [0.1, 0.2, 0.7]`",
    "choice": 'one of the letters offered, as a string, e.g. `return "b"`',
}


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None  # True is an int to Python, never a number to a reader
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype.is_complex:
        value = value.item()
    if isinstance(value, (int, float)) or type(value).__name__ in ("float64", "float32", "int64", "int32"):  # numpy scalars
        number = float(value)
        return number if number == number and abs(number) != float("inf") else None
    return None


def _answer_problem(value: Any, kind: str, choices: Sequence[str], length: int | None) -> str:
    """Why ``value`` is not an answer of this kind ('' when it is)."""
    if kind in ("integer", "number"):
        number = _as_number(value)
        if number is None:
            return f"returned {describe(value)}, which is not a finite number"
        if kind == "integer" and not number.is_integer():
            return f"returned {describe(value)}, which is not a whole number"
        return ""
    if kind == "numbers":
        items = value.flatten().tolist() if isinstance(value, torch.Tensor) else value
        if not isinstance(items, (list, tuple)) or any(_as_number(v) is None for v in items):
            return f"returned {describe(value)}, which is not a list of finite numbers"
        if length is not None and len(items) != length:
            return f"returned {len(items)} numbers, but the question asks for {length}"
        return ""
    if kind == "choice":
        if not isinstance(value, str) or value.strip().lower() not in choices:
            return f"returned {describe(value)}, which is not one of {sorted(choices)}"
        return ""
    raise ValueError(f"unknown answer kind {kind!r}: one of {sorted(ANSWER_KINDS)}")


def _normalised(value: Any, kind: str) -> Any:
    if kind == "choice":
        return value.strip().lower()
    if kind == "numbers":
        items = value.flatten().tolist() if isinstance(value, torch.Tensor) else value
        return torch.tensor([_as_number(v) for v in items], dtype=torch.float64)
    number = _as_number(value)
    return int(number) if kind == "integer" and number is not None else number


def _plain_answer(value: Any) -> Any:
    """An answer as plain data: a NumPy array or any array-like becomes a tensor, a NumPy scalar a number.

    Runs where the student's code runs, so that what crosses to the grader is data it can read.
    """
    if isinstance(value, (str, bytes, bool, int, float, torch.Tensor)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_plain_answer(v) for v in value)
    if hasattr(value, "__array__") or hasattr(value, "item"):
        try:
            tensor = torch.as_tensor(value.__array__() if hasattr(value, "__array__") else value.item())
        except (TypeError, ValueError, RuntimeError):
            return value  # an object array, say: reported as not a number
        return tensor.item() if tensor.dim() == 0 else tensor
    return value


def _answer(fn: Callable[..., Any], kind: str, choices: Sequence[str], length: int | None, label: str) -> Any:
    outcome = _run_student(fn, (), {}, label, through=("answer", lambda student: lambda: _plain_answer(student())))
    if outcome.kind == "raised":
        _fail(label, f"raised {outcome.error_type}: {outcome.message}", inputs=None, hint="")
    answer = outcome.value
    if _recording():
        return answer
    problem = _answer_problem(answer, kind, tuple(c.lower() for c in choices), length)
    if problem:
        _fail(label, problem, inputs=None, hint=f"return {ANSWER_KINDS[kind]}")
    return _normalised(answer, kind)


def check_answer_format(fn: Callable[..., Any], kind: str, *, choices: Sequence[str] = (), length: int | None = None) -> bool:
    """The visible check of a graded question: ``fn()`` returns an answer of this ``kind``.

    Kinds: ``integer``, ``number``, ``numbers`` (of ``length`` items) and ``choice`` (one of
    ``choices``, any case). It says nothing about whether the answer is right.
    """
    _answer(fn, kind, choices, length, f"{getattr(fn, '__name__', 'answer')}()")
    return True


def check_answer(
    fn: Callable[..., Any],
    expected: Any,
    *,
    kind: str,
    choices: Sequence[str] = (),
    rtol: float = 0.0,
    atol: float = 0.0,
    hint: str,
) -> bool:
    """The hidden check of a graded question: ``fn()`` is right, within ``rtol``/``atol`` for numbers.

    A wrong answer fails with ``hint`` (what to reconsider); the message never shows ``expected``.
    """
    label = f"{getattr(fn, '__name__', 'answer')}()"
    # In the sealed run ``expected`` is withheld (it comes from the solution): nothing is compared there.
    length = len(expected) if kind == "numbers" and not _recording() else None
    answer = _answer(fn, kind, choices, length, label)
    if _recording():
        return True
    if kind == "choice":
        right = answer == str(expected).strip().lower()
    else:
        want = torch.as_tensor(expected, dtype=torch.float64)
        right = bool(torch.all((torch.as_tensor(answer, dtype=torch.float64) - want).abs() <= atol + rtol * want.abs()))
    if not right:
        shown = describe(answer.tolist() if isinstance(answer, torch.Tensor) else answer)
        within = f" (numbers are accepted within {rtol * 100:g}%)" if rtol else ""
        _fail(label, f"{shown} is not the answer{within}", inputs=None, hint=hint)
    return True


def _gpu_builds(
    launcher: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], arch: str, label: str, hint: str
) -> list[dict[str, Any]] | None:
    """Every kernel ``launcher(*args, **kwargs)`` starts, compiled for ``arch``, as plain data; each one built.

    None in the sealed run, where nothing is compared (the trusted replay sees the builds).
    """
    from .kernels import ARCHES, STUB_LINE, launcher_builds

    gpu = {"sm_80": "an A100", "sm_89": "an L4", "sm_90": "an H100"}.get(arch, arch)

    def compile_instead(student: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *a, **k: launcher_builds(student, *a, arch=arch, **k)

    outcome = _run_student(launcher, args, kwargs, label, through=(f"gpu_build:{arch}", compile_instead))
    if outcome.kind == "raised":
        _fail(label, f"raised {outcome.error_type} before any kernel was compiled: {outcome.message}", inputs=None, hint=hint)
    if _recording():
        return None
    builds = outcome.value
    if arch not in ARCHES or not isinstance(builds, list) or not builds:
        _fail(
            label,
            "started no kernel through course_utils.kernels.launch",
            inputs=None,
            hint=hint or "keep the given launcher: it starts your kernel with launch(kernel, grid, ...)",
        )
    for build in builds:
        if not isinstance(build, dict) or build.get("compiled") is True:
            continue
        error = str(build.get("error", ""))
        if STUB_LINE in error:
            raise NotWritten(f"{label}: not written yet (the kernel {build.get('kernel')} still raises NotImplementedError).")
        _fail(
            label,
            f"runs in the interpreter, but {build.get('kernel')} does not compile for {arch} ({gpu}):\n    {error}",
            inputs=None,
            hint=hint
            or "GPU kernels have no break, continue, raise or return inside loops, and call only "
            "tl.* functions and other @triton.jit functions; write loop exits as masks or loop bounds",
        )
    return [build for build in builds if isinstance(build, dict)]


def check_builds_for_gpu(
    launcher: Callable[..., Any],
    *args: Any,
    arch: str = "sm_90",
    label: str | None = None,
    hint: str = "",
    **kwargs: Any,
) -> bool:
    """Every kernel ``launcher(*args, **kwargs)`` starts compiles for a real GPU (``sm_90``: an H100).

    Nothing runs: the launches are captured and compiled ahead of time (``course_utils.kernels``).
    The interpreter that grades the kernels accepts code no GPU compiler does (``break``,
    ``continue``, ``raise``, a Python call), so this is the only check that sees it.
    """
    _gpu_builds(launcher, args, kwargs, arch, label or _format_call(launcher, args, kwargs), hint)
    return True


KERNEL_OPS = {"loads": "reads a block of memory (tl.load)", "dots": "multiplies two blocks (tl.dot)"}


def check_kernel_ops(
    launcher: Callable[..., Any],
    *args: Any,
    most: dict[str, dict[str, int]],
    label: str | None = None,
    hint: str = "",
    **kwargs: Any,
) -> bool:
    """The kernels ``launcher`` starts read memory and multiply blocks in no more places than the idea needs.

    ``most`` maps a kernel's name to the most ``loads`` and ``dots`` its code may hold, counted in
    Triton's IR after compiling for an H100 (loops are not unrolled there, so a loop body counts
    once however often it runs). A softmax that walks a row three times holds three loads of it
    where the online softmax holds two; a forward pass that walks the keys twice holds three
    products where one pass holds two. A kernel this launcher does not start fails the check.
    """
    label = label or _format_call(launcher, args, kwargs)
    builds = _gpu_builds(launcher, args, kwargs, "sm_90", label, hint)
    if builds is None:
        return True
    for kernel, limits in most.items():
        found = [build for build in builds if build.get("kernel") == kernel]
        if not found:
            _fail(label, f"did not start the kernel {kernel}", inputs=None, hint="keep the given launcher and the kernel's name")
        for build in found:
            for op, limit in limits.items():
                count = build.get(op)
                if not isinstance(count, int) or count > limit:
                    _fail(
                        label,
                        f"{kernel} {KERNEL_OPS[op]} in {count} places in its code; the idea needs at most {limit}",
                        inputs=None,
                        hint=hint,
                    )
    return True
