"""Comparisons and tolerances: a result against the expected one, with a message a student can act on.

Every check returns ``True`` or raises ``AssertionError`` saying what was called on which input,
the largest error and where it is, and a hint. In the sealed grading run nothing is compared
(``_recording``): the trusted replay decides every verdict.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Sequence

import torch
import torch.testing

from .recording import Mode, mode


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


def defined_by_torch(fn: Any, name: str) -> bool:
    """``fn`` is torch's own ``name``: a built-in of the torch module, or a Python function whose code
    lives in torch's package. A replacement made before this module was imported is neither.

    >>> defined_by_torch(torch.equal, "equal"), defined_by_torch(lambda *a: True, "equal")
    (True, False)
    """
    if getattr(fn, "__name__", None) != name:
        return False
    if inspect.isbuiltin(fn):
        return getattr(fn, "__module__", None) == "torch"
    code = getattr(fn, "__code__", None) if inspect.isfunction(fn) else None
    return code is not None and os.path.realpath(code.co_filename).startswith(_TORCH_DIR + os.sep)


# Checked once, here: what was captured must be torch's, whatever ran before the import. Those that
# are not make every comparison refuse to run.
REPLACED_AT_IMPORT: tuple[str, ...] = tuple(
    name for name, (_, trusted) in _TRUSTED.items() if not defined_by_torch(trusted, name.rpartition(".")[2])
)


def _refuse_tampering(label: str) -> None:
    replaced = [name for name, (current, trusted) in _TRUSTED.items() if current() is not trusted or name in REPLACED_AT_IMPORT]
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


class CheckFailed(AssertionError):
    """A check's failure as data: what was checked (``label``), what went wrong (``problem``, with the
    largest error where there is one), the inputs it was given, described, and the ``hint``.

    Its text is the message a student reads; the grader keeps the fields (``verdicts.Verdict``).
    """

    def __init__(self, label: str, problem: str, inputs: tuple[tuple[str, str], ...] = (), hint: str = "") -> None:
        self.label, self.problem, self.inputs, self.hint = label, problem, inputs, hint
        lines = [f"{label}: {problem}", *(f"  input {name} = {value}" for name, value in inputs)]
        super().__init__("\n".join([*lines, f"  hint: {hint}"] if hint else lines))


def _fail(label: str, problem: str, *, inputs: dict[str, Any] | None, hint: str) -> NoReturn:
    raise CheckFailed(label, problem, tuple((name, describe(value)) for name, value in (inputs or {}).items()), hint)


def _recording() -> bool:
    """In the sealed run nothing is compared: the trusted replay decides every verdict."""
    return mode() is Mode.RECORD


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
    rtol, atol = _allowed(expected.dtype, rtol, atol, rounding)
    try:
        _assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_dtype=False)
        return True
    except AssertionError:
        pass
    # Not close: say how, in float64 on the CPU, NaN first (a NaN has no error to measure).
    got = actual.detach().to(torch.float64).cpu()
    want = expected.detach().to(torch.float64).cpu()
    _refuse_misplaced_nan(got, want, label=label, inputs=inputs, hint=hint)
    _fail_at_largest_error(got, want, rtol, atol, label=label, inputs=inputs, hint=hint)


def _allowed(dtype: torch.dtype, rtol: float | None, atol: float | None, rounding: Tolerance | None) -> tuple[float, float]:
    """``(rtol, atol)``: the dtype's own unless given, widened by what the inputs' rounding allows."""
    tol = tolerance(dtype)
    rtol = tol.rtol if rtol is None else rtol
    atol = tol.atol if atol is None else atol
    if rounding is not None:
        rtol, atol = rtol + rounding.rtol, atol + rounding.atol
    return rtol, atol


def _refuse_misplaced_nan(got: torch.Tensor, want: torch.Tensor, *, label: str, inputs: dict[str, Any] | None, hint: str) -> None:
    """Fail if NaN is missing where it was expected, or present where a number was."""
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


def _fail_at_largest_error(
    got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, *, label: str, inputs: dict[str, Any] | None, hint: str
) -> NoReturn:
    """Fail naming how many entries are outside the tolerance, and the worst of them."""
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
