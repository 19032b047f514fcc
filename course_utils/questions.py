"""Graded questions: an answer function's form (visible test) and value (hidden test).

A question is answered by a function that returns the answer (``def answer_score_bytes(): return
...``), so it is graded like any other function: recorded in the sealed run, compared in the
trusted pass. The visible test checks only the form of the answer; the hidden test checks its
value and, when wrong, says what to reconsider, never what the answer is.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .comparisons import _fail, _recording, describe
from .selfcheck import checked_only_a_format
from .student_calls import _run_student

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
    ``choices``, any case). It says nothing about whether the answer is right, and tells the self-check so.
    """
    checked_only_a_format(f"{getattr(fn, '__name__', 'answer')}()")
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
