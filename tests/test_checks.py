"""course_utils.checks: checks pass on right answers and fail with messages a student can act on."""

from __future__ import annotations

import contextlib
import json
import math
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.checks import (
    TOLERANCES,
    call,
    check_close,
    check_equal,
    check_matches,
    check_no_builtin,
    check_raises,
    check_shape,
    describe,
    forbidden,
    random_shape,
    random_tensor,
)


def test_check_close_passes_on_a_match_and_returns_true() -> None:
    x = torch.tensor([1.0, 2.0, 3.0])
    assert check_close(x + 1e-7, x, label="x") is True


def test_check_close_reports_the_largest_error_its_index_and_the_hint() -> None:
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1, 2] = 0.5
    actual[0, 0] = 0.1
    with pytest.raises(AssertionError) as failure:
        check_close(actual, expected, label="f(x)", inputs={"x": torch.ones(2)}, hint="look at row 1")
    message = str(failure.value)
    assert "f(x)" in message and "2 of 6 entries differ" in message
    assert "largest error 0.5 at index (1, 2)" in message
    assert "input x = tensor([1.0, 1.0]" in message and "hint: look at row 1" in message


def test_check_close_names_nan_and_shape_and_dtype_problems() -> None:
    with pytest.raises(AssertionError, match=r"1 of 2 entries are NaN .*index \(1,\)"):
        check_close(torch.tensor([0.0, float("nan")]), torch.zeros(2), label="nan")
    with pytest.raises(AssertionError, match=r"expected shape \[3\], got \[1, 3\]"):
        check_close(torch.zeros(1, 3), torch.zeros(3), label="shape")
    with pytest.raises(AssertionError, match="returned dtype torch.float32 but torch.float64 was expected"):
        check_close(torch.zeros(3), torch.zeros(3, dtype=torch.float64), label="dtype")
    with pytest.raises(AssertionError, match="expected a torch.Tensor, got None"):
        check_close(None, torch.zeros(3), label="none")


def test_check_close_accepts_matching_infinities_and_nans() -> None:
    x = torch.tensor([float("-inf"), float("nan"), 1.0])
    assert check_close(x.clone(), x, label="specials")
    with pytest.raises(AssertionError):
        check_close(torch.tensor([float("inf")]), torch.tensor([float("-inf")]), label="opposite infinities")


def test_float64_tolerance_catches_a_float32_computation() -> None:
    # The reason float64 is tested at all: a student who computes in float32 must be caught.
    x = random_tensor(50, dtype=torch.float64, seed=3, scale=4.0)
    exact = torch.softmax(x, dim=-1)
    in_float32 = torch.softmax(x.float(), dim=-1).double()
    with pytest.raises(AssertionError):
        check_close(in_float32, exact, label="float32 inside")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(0, 10_000), st.floats(0.1, 30.0))
def test_float32_tolerance_accepts_different_correct_implementations(n: int, seed: int, scale: float) -> None:
    # Correct answers computed another way (float64 inside, logsumexp) must pass the float32 tolerance.
    x = random_tensor(3, n, seed=seed, scale=scale)
    via_float64 = torch.softmax(x.double(), dim=-1).float()
    via_logsumexp = torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))
    reference = torch.softmax(x, dim=-1)
    assert check_close(via_float64, reference, label="float64 inside")
    assert check_close(via_logsumexp, reference, label="logsumexp")


def test_tolerances_are_the_ones_the_contract_states(repo_root) -> None:
    # autograder/CONTRACT.md promises students these numbers; the code must use the same.
    import re

    table = (repo_root / "autograder" / "CONTRACT.md").read_text()
    stated = {m[0]: (float(m[1]), float(m[2])) for m in re.findall(r"^\| (float\d+|bfloat16) \| ([\d.e-]+) \| ([\d.e-]+) \|", table, re.M)}
    assert stated.keys() == {"float16", "bfloat16", "float32", "float64"}
    for name, (rtol, atol) in stated.items():
        assert (TOLERANCES[getattr(torch, name)].rtol, TOLERANCES[getattr(torch, name)].atol) == (rtol, atol)


def test_check_matches_names_the_reference_that_disagrees() -> None:
    x = torch.ones(2)
    with pytest.raises(AssertionError, match="f vs the solution"):
        check_matches(x, {"torch": torch.ones(2), "the solution": torch.zeros(2)}, label="f")


def test_call_reports_unwritten_functions_and_errors_by_name() -> None:
    def stub(x):
        raise NotImplementedError()

    def broken(x):
        return x @ torch.ones(5)

    with pytest.raises(AssertionError, match="stub\\(<Tensor>\\): not written yet"):
        call(stub, torch.ones(3))
    with pytest.raises(AssertionError, match="broken\\(<Tensor>\\): raised RuntimeError"):
        call(broken, torch.ones(3))
    with pytest.raises(AssertionError, match="should return a tuple of 2 items"):
        call(lambda x: x, torch.ones(3), label="pair", returns=2)
    assert call(lambda x, y=1: (x, y), 2, y=3, returns=2) == (2, 3)


def test_call_silences_warnings_raised_by_student_code() -> None:
    def noisy():
        warnings.warn("deprecated", UserWarning)
        return 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert call(noisy) == 1
    assert caught == []


def test_check_raises_wants_exactly_that_exception() -> None:
    def missing(key):
        raise KeyError(key)

    assert check_raises(KeyError, missing, "a")
    with pytest.raises(AssertionError, match="should raise KeyError, but raised IndexError"):
        check_raises(KeyError, lambda: [][1])
    with pytest.raises(AssertionError, match="should raise KeyError, but returned None"):
        check_raises(KeyError, lambda: None, label="quiet")
    with pytest.raises(AssertionError, match="not written yet"):
        check_raises(KeyError, lambda: (_ for _ in ()).throw(NotImplementedError()), label="stub")


def test_check_equal_and_check_shape() -> None:
    assert check_equal(torch.tensor([1, 2]), torch.tensor([1, 2]), label="eq")
    with pytest.raises(AssertionError, match="got tensor\\(\\[1, 3\\]"):
        check_equal(torch.tensor([1, 3]), torch.tensor([1, 2]), label="eq")
    with pytest.raises(AssertionError, match="got 4, expected 5"):
        check_equal(4, 5, label="ints")
    assert check_shape(torch.zeros(2, 3), (2, 3), label="shape")


def test_forbidden_trips_the_builtin_and_restores_it() -> None:
    original = torch.softmax
    with forbidden("torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax") as calls:
        with pytest.raises(RuntimeError):
            torch.softmax(torch.ones(2), dim=0)
        with pytest.raises(RuntimeError):
            torch.ones(2).softmax(0)
    assert calls == ["torch.softmax", "torch.Tensor.softmax"]
    assert torch.softmax is original
    assert torch.allclose(torch.ones(2).softmax(0), torch.tensor([0.5, 0.5]))


def test_check_no_builtin_sees_calls_even_when_swallowed() -> None:
    def sneaky(x):
        try:
            return torch.softmax(x, dim=-1)
        except Exception:
            return torch.exp(x) / torch.exp(x).sum()

    def honest(x):
        return torch.exp(x) / torch.exp(x).sum()

    with pytest.raises(AssertionError, match="calls \\['torch.softmax'\\]"):
        check_no_builtin(sneaky, torch.ones(3), builtins=["torch.softmax"])
    assert check_no_builtin(honest, torch.ones(3), builtins=["torch.softmax"])


def test_random_helpers_are_reproducible() -> None:
    assert torch.equal(random_tensor(3, 4, seed=7), random_tensor(3, 4, seed=7))
    assert not torch.equal(random_tensor(3, 4, seed=7), random_tensor(3, 4, seed=8))
    assert random_tensor(2, dtype=torch.float64).dtype == torch.float64
    shape = random_shape(5, 3, low=2, high=4)
    assert shape == random_shape(5, 3, low=2, high=4) and len(shape) == 3 and all(2 <= n < 4 for n in shape)


def test_describe_shows_small_tensors_in_full_and_large_ones_by_shape() -> None:
    assert describe(torch.tensor([1.0, 2.0])) == "tensor([1.0, 2.0], shape=[2], dtype=float32)"
    assert describe(torch.zeros(10, 10)) == "tensor of shape [10, 10], dtype=float32"


def _double(x):
    return 2 * x


def _uses_double(x):
    return _double(x) + 1


def test_call_stand_ins_replace_a_callee_only_during_the_call() -> None:
    assert call(_uses_double, 1) == 3
    assert call(_uses_double, 1, stand_ins={"_double": lambda x: 10 * x}) == 11
    assert _uses_double(1) == 3  # restored
    assert call(_uses_double, 1, stand_ins={"_not_defined_before": 1}) == 3
    assert "_not_defined_before" not in globals()


from torch import softmax as _aliased_softmax  # noqa: E402 - a student's import, bound before the check runs


def _uses_alias(x):
    return _aliased_softmax(x, dim=-1)


def test_check_no_builtin_catches_a_name_imported_before_the_check() -> None:
    with pytest.raises(AssertionError, match="calls \\['torch.softmax'\\]"):
        check_no_builtin(_uses_alias, torch.ones(3), builtins=["torch.softmax"])
    assert _aliased_softmax is torch.softmax  # restored


def test_check_raises_never_credits_a_stub_even_for_a_parent_exception() -> None:
    def stub():
        raise NotImplementedError()

    for parent in (RuntimeError, Exception):
        with pytest.raises(AssertionError, match="not written yet"):
            check_raises(parent, stub, label="stub")


def test_check_close_reports_numbers_where_nan_was_expected() -> None:
    with pytest.raises(AssertionError, match="1 entries are numbers where NaN was expected"):
        check_close(torch.tensor([0.0, 1.0]), torch.tensor([0.0, float("nan")]), label="nan expected")


def test_check_close_reports_nan_where_a_number_was_expected() -> None:
    with pytest.raises(AssertionError, match=r"1 of 3 entries are NaN where a number was expected \(first at index \(1,\), expected 2\)"):
        check_close(torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([1.0, 2.0, 3.0]), label="nan returned")
    with pytest.raises(AssertionError, match=r"1 of 1 entries differ; largest error inf at index \(\): got inf, expected 1"):
        check_close(torch.tensor(float("inf")), torch.tensor(1.0), label="a scalar")


def test_call_reports_a_students_own_assertion_as_a_failure_of_the_call() -> None:
    def asserts(x):
        assert x > 0, "x must be positive"

    with pytest.raises(AssertionError, match="raised AssertionError: x must be positive"):
        call(asserts, -1, label="asserts(-1)")


class _UsesDouble:
    def __call__(self, x):
        return _double(x) + 1


def test_call_stand_ins_reach_the_namespace_of_a_callable_object() -> None:
    assert call(_UsesDouble(), 1, stand_ins={"_double": lambda x: 10 * x}) == 11
    assert _UsesDouble()(1) == 3


def test_answer_format_accepts_each_kind_and_names_what_a_wrong_form_should_be() -> None:
    from course_utils.checks import check_answer_format

    assert check_answer_format(lambda: 2**33, "integer")
    assert check_answer_format(lambda: 8.0, "integer")  # a whole number written as a float is still one
    assert check_answer_format(lambda: torch.tensor(0.25), "number")
    assert check_answer_format(lambda: [0.1, 0.2, 0.7], "numbers", length=3)
    assert check_answer_format(lambda: " B ", "choice", choices=("a", "b", "c"))
    cases = [
        (lambda: "8 GiB", "integer", {}, "not a finite number"),
        (lambda: 2.5, "integer", {}, "not a whole number"),
        (lambda: True, "number", {}, "not a finite number"),
        (lambda: float("nan"), "number", {}, "not a finite number"),
        (lambda: [0.1, 0.9], "numbers", {"length": 3}, "asks for 3"),
        (lambda: "d", "choice", {"choices": ("a", "b", "c")}, "not one of"),
        (lambda: 2, "choice", {"choices": ("a", "b")}, "not one of"),
    ]
    for answer, kind, options, problem in cases:
        with pytest.raises(AssertionError) as failure:
            check_answer_format(answer, kind, **options)
        assert problem in str(failure.value) and "hint: return" in str(failure.value), (kind, str(failure.value))


def test_answer_format_reports_an_unanswered_question_as_not_written() -> None:
    from course_utils.checks import check_answer_format

    def answer_bytes() -> int:
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="answer_bytes\\(\\): not written yet"):
        check_answer_format(answer_bytes, "integer")


def test_check_answer_grades_within_the_tolerance_and_never_shows_the_answer() -> None:
    from course_utils.checks import check_answer

    assert check_answer(lambda: 101, 100, kind="number", rtol=0.02, hint="h")
    assert check_answer(lambda: [0.5, 0.5], [0.5, 0.5001], kind="numbers", atol=1e-3, hint="h")
    assert check_answer(lambda: "B", "b", kind="choice", choices=("a", "b"), hint="h")
    for answer, expected, kind, options in [
        (lambda: 1234567, 7654321, "integer", {}),
        (lambda: 103, 100, "number", {"rtol": 0.02}),
        (lambda: [0.3, 0.7], [0.25, 0.75], "numbers", {"atol": 1e-3}),
        (lambda: "a", "c", "choice", {"choices": ("a", "b", "c")}),
    ]:
        with pytest.raises(AssertionError) as failure:
            check_answer(answer, expected, kind=kind, hint="think about the row sums", **options)
        message = str(failure.value)
        assert "is not the answer" in message and "think about the row sums" in message
        assert str(expected) not in message and "7654321" not in message and "0.25" not in message, message


def test_needs_turns_a_stub_into_a_note_and_lets_real_errors_through(capsys: pytest.CaptureFixture[str]) -> None:
    from course_utils import needs

    with needs("softmax"):
        raise NotImplementedError()
    assert "uses `softmax`" in capsys.readouterr().out
    with pytest.raises(ZeroDivisionError), needs("softmax"):
        1 / 0


@contextlib.contextmanager
def recorded_into(path: Path, graded: list[str], namespace: dict) -> Iterator[None]:
    """Record as the sealed run does while the block runs, then live again: ``replaying`` puts back the
    mode it found when it ends (the live one here), whatever the block started inside it."""
    from course_utils import recording

    with recording.replaying({}):
        recording.start_recording(str(path), graded, namespace)
        yield
    assert recording.mode() is recording.Mode.LIVE


def test_a_question_is_recorded_in_the_sealed_run_and_graded_in_the_replay(tmp_path) -> None:
    from course_utils import recording
    from course_utils.checks import check_answer, check_answer_format

    def answer_score_bytes() -> int:
        return 2**33

    def answer_which_key() -> str:
        return "c"

    record = tmp_path / "record"
    test = "check_answer_format(answer_score_bytes, 'integer')\ncheck_answer(answer_score_bytes, 2**32, kind='integer', hint='count the bytes')\n"
    test += "check_answer(answer_which_key, 'b', kind='choice', choices='abc', hint='look at T')\n"
    namespace = {
        "answer_score_bytes": answer_score_bytes,
        "answer_which_key": answer_which_key,
        "check_answer": check_answer,
        "check_answer_format": check_answer_format,
    }
    with recorded_into(record, ["answer_score_bytes", "answer_which_key"], namespace):
        recording.begin_cell("test_q")
        exec(test, namespace)  # the sealed run compares nothing: a wrong answer passes here
    events = recording.read_record(record.read_bytes())
    assert [e["op"] for e in events["test_q"]] == ["call:answer"] * 3  # an answer crosses as plain data (a NumPy array becomes a tensor)
    replay = {name: recording.Placeholder(name) for name in ("answer_score_bytes", "answer_which_key")}
    replay |= {"check_answer": check_answer, "check_answer_format": check_answer_format}
    with recording.replaying(events):
        recording.begin_cell("test_q")
        exec(test.splitlines()[0], replay)  # the form is right
        with pytest.raises(AssertionError, match="8589934592 is not the answer") as failure:
            exec(test.splitlines()[1], replay)  # the value is not, and the message keeps the answer to itself
        assert "4294967296" not in str(failure.value)


def test_a_numbers_question_records_against_a_withheld_solution(tmp_path) -> None:
    # In the sealed run the expected value is the solution, withheld: the check must not need its length.
    from course_utils import recording
    from course_utils.checks import check_answer

    def answer_weights() -> list[float]:
        return [0.125, 0.25, 0.625]

    namespace = {"answer_weights": answer_weights}
    with recorded_into(tmp_path / "record", ["answer_weights"], namespace):
        recording.begin_cell("test_q")
        assert check_answer(answer_weights, recording.Withheld().answer_weights(), kind="numbers", hint="h")
    events = recording.read_record((tmp_path / "record").read_bytes())
    with recording.replaying(events):
        recording.begin_cell("test_q")
        assert check_answer(recording.Placeholder("answer_weights"), [0.125, 0.25, 0.625], kind="numbers", atol=1e-3, hint="h")


def test_single_thread_restores_the_thread_count_even_when_the_block_fails() -> None:
    from course_utils import single_thread

    before = torch.get_num_threads()
    with pytest.raises(ZeroDivisionError), single_thread():
        assert torch.get_num_threads() == 1
        1 / 0
    assert torch.get_num_threads() == before


def test_saved_for_backward_sees_what_autograd_and_a_function_save() -> None:
    from course_utils.checks import saved_for_backward

    class Doubling(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 2 * x

        @staticmethod
        def backward(ctx, grad):
            return 2 * grad

    q, k = torch.randn(5, 3), torch.randn(7, 3)
    assert [5, 7] in saved_for_backward(lambda q, k: torch.softmax(q @ k.T, dim=-1), q, k)  # softmax keeps its output
    assert saved_for_backward(Doubling.apply, q) == [[5, 3]]


def test_check_gradcheck_passes_a_right_backward_and_names_a_wrong_one() -> None:
    from course_utils.checks import check_gradcheck

    class WrongSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x  # should be 2 x

    x = torch.randn(4, dtype=torch.float64)
    assert check_gradcheck(lambda t: t * t, x)
    with pytest.raises(AssertionError, match="Jacobian mismatch"):
        check_gradcheck(WrongSquare.apply, x, label="gradcheck(WrongSquare)")


@pytest.mark.parametrize(
    ("owner", "name"),
    [(torch.testing, "assert_close"), (torch, "equal"), (torch, "allclose"), (torch, "isclose")],
)
def test_a_comparison_rebound_after_the_import_fails_every_check(monkeypatch: pytest.MonkeyPatch, owner, name: str) -> None:
    x = torch.tensor([1.0, 2.0])
    monkeypatch.setattr(owner, name, lambda *args, **kwargs: True)
    replaced = rf"{owner.__name__}\.{name} was replaced by code in this notebook"
    with pytest.raises(AssertionError, match=replaced):
        check_close(x + 1, x, label="close")
    with pytest.raises(AssertionError, match=replaced):
        check_equal(x, x, label="equal")
    monkeypatch.undo()
    assert check_close(x, x, label="close") and check_equal(x, x, label="equal")


def test_a_comparison_rebound_before_the_import_fails_every_check(repo_root) -> None:
    import subprocess
    import sys

    script = """
import torch
import torch.testing
torch.equal = lambda *args: True
torch.testing.assert_close = lambda *args, **kwargs: None
from course_utils.checks import check_close, check_equal
for check in (check_close, check_equal):
    try:
        check(torch.ones(2), torch.zeros(2), label="rebound first")
    except AssertionError as error:
        print(error)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("torch.testing.assert_close, torch.equal was replaced by code in this notebook") == 2, done.stdout


def test_checks_exports_every_check_and_no_private_name() -> None:
    # Test cells import from course_utils.checks: its __all__ is the promise of what they find there.
    import inspect

    from course_utils import checks, comparisons, execution_checks, gpu_checks, questions, student_calls

    assert [name for name in checks.__all__ if name.startswith("_") or not hasattr(checks, name)] == []
    for module in (comparisons, student_calls, questions, gpu_checks, execution_checks):
        defined_here = {name for name, value in vars(module).items() if inspect.isfunction(value) and value.__module__ == module.__name__}
        assert {name for name in defined_here if name.startswith("check_")} <= set(checks.__all__), module.__name__
    assert {"call", "count_flops", "peak_tensor_bytes", "random_tensor", "TOLERANCES"} <= set(checks.__all__)


def test_the_trusted_comparisons_are_torchs_own() -> None:
    from course_utils.comparisons import REPLACED_AT_IMPORT, defined_by_torch

    assert REPLACED_AT_IMPORT == ()
    assert defined_by_torch(torch.equal, "equal") and defined_by_torch(torch.testing.assert_close, "assert_close")
    assert not defined_by_torch(torch.allclose, "equal"), "torch's, but another function"
    assert not defined_by_torch(lambda *args: True, "<lambda>")

    def assert_close(*args, **kwargs):
        return None

    assert not defined_by_torch(assert_close, "assert_close")


def _private_torch_uses(source: str) -> list[str]:
    """Dotted names under torch with a private part (``torch._C``, ``torch.testing._comparison``), however imported."""
    import ast

    def private(path: str) -> bool:
        parts = path.split(".")
        return parts[0] == "torch" and any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:])

    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> the torch path it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    aliases[alias.asname or "torch"] = alias.name if alias.asname else "torch"
                    found += [alias.name] if private(alias.name) else []
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch" and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found += [f"{node.module}.{alias.name}"] if private(f"{node.module}.{alias.name}") else []
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [word for word in (w.strip("'\",:;()") for w in node.value.replace("(", " ").split()) if private(word)]
    inside: set[int] = set()  # attributes that are part of a longer chain, seen with it
    for node in ast.walk(tree):  # breadth first: a chain's outermost attribute comes first
        if isinstance(node, ast.Attribute) and id(node) not in inside:
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                inside.add(id(inner))
                chain.insert(0, inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in aliases and private(".".join([aliases[inner.id], *chain])):
                found.append(".".join([aliases[inner.id], *chain]))
    return found


def test_the_scan_for_private_torch_finds_every_spelling() -> None:
    assert _private_torch_uses("import torch\nx = torch.__version__, torch.testing.assert_close, torch.equal") == []
    assert _private_torch_uses("import torch\ntorch._C._VariableFunctions.equal") == ["torch._C._VariableFunctions.equal"]
    assert _private_torch_uses("from torch.testing._comparison import assert_close") == ["torch.testing._comparison.assert_close"]
    assert _private_torch_uses("import torch.testing as tt\ntt._comparison") == ["torch.testing._comparison"]
    assert _private_torch_uses("import torch._dynamo") == ["torch._dynamo"]
    assert _private_torch_uses("import importlib\nimportlib.import_module('torch._C')") == ["torch._C"]


# Private paths with no public alias, each used for what no public API does.
ALLOWED_PRIVATE_TORCH = {
    # The dispatch-mode base class that "Extending PyTorch" documents under this path: only a dispatch mode sees the
    # operations a student runs under DisableTorchFunction (course_utils.tensor_reads counts reads there).
    "torch.utils._python_dispatch.TorchDispatchMode",
}


def test_course_code_uses_only_public_torch(repo_root) -> None:
    found = {}
    for package in ("course_utils", "autograder", "benchmarks"):
        for path in sorted((repo_root / package).rglob("*.py")):
            name = path.relative_to(repo_root).as_posix()
            if name.startswith("autograder/mistakes/"):
                continue  # catalogued student code, the hostile routes to a built-in (torch._C, torch.ops.aten) included
            uses = [use for use in _private_torch_uses(path.read_text()) if use not in ALLOWED_PRIVATE_TORCH]
            if uses:
                found[name] = uses
    assert found == {}, "private torch modules or attributes; use torch's public API instead"


def _private_attributes(source: str) -> list[str]:
    """``obj._name`` on anything but ``self``: a private member, whatever type ``obj`` has (``bias._materialize()``)."""
    import ast

    return [
        f"{ast.unparse(node.value)}.{node.attr}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not (node.attr.startswith("__") and node.attr.endswith("__"))
        and ast.unparse(node.value) != "self"
    ]


def test_the_scan_for_private_attributes_sees_them_on_any_object() -> None:
    assert _private_attributes("bias = causal_lower_right(2, 3)\nbias._materialize()") == ["bias._materialize"]
    assert _private_attributes("torch.ones(2)._version") == ["torch.ones(2)._version"]
    assert _private_attributes("self._cache = x.__class__\nx.shape") == []


def test_notebooks_use_only_public_apis(repo_root) -> None:
    # What students read and copy: no private torch module, and no private member of any object.
    from course_utils.notebook_cells import cell_source

    found = {}
    for path in sorted((repo_root / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                code = "\n".join(line for line in cell_source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
                uses = _private_torch_uses(code) + _private_attributes(code)
                if uses:
                    found[f"{path.parent.name} {cell.get('id')}"] = uses
    assert found == {}, "private APIs in notebook code; use public ones"


@pytest.mark.parametrize(("t_q", "t_k"), [(3, 3), (2, 5), (5, 2), (1, 4)])
def test_the_causal_mask_stand_in_is_pytorchs_alignment(t_q: int, t_k: int) -> None:
    # Notebook 04's tests stand it in for the student's causal_mask: it must agree with SDPA both ways.
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    from course_utils.stand_ins import torch_causal_mask

    q, k, v = torch.randn(t_q, 4), torch.randn(t_k, 4), torch.randn(t_k, 3)
    top_left = torch_causal_mask(t_q, t_k)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=top_left), F.scaled_dot_product_attention(q, k, v, is_causal=True)
    )
    with warnings.catch_warnings():  # causal_lower_right warns when T_q > T_k (its first rows see nothing)
        warnings.simplefilter("ignore")
        torch.testing.assert_close(
            F.scaled_dot_product_attention(q, k, v, attn_mask=torch_causal_mask(t_q, t_k, bottom_right=True)),
            F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(t_q, t_k)),
        )
    assert torch_causal_mask(2, 3, device="meta").device.type == "meta"


@pytest.mark.parametrize("shape", [(2, 5, 12), (5, 12), (2, 3, 4, 12)])
def test_the_heads_stand_ins_split_and_merge_as_reshape_and_transpose_do(shape: tuple[int, ...]) -> None:
    # Notebook 05's tests stand them in for the student's split_heads and merge_heads.
    from course_utils.stand_ins import torch_merge_heads, torch_split_heads

    x, heads = torch.randn(*shape), 3
    split = torch_split_heads(x, heads)
    by_reshape = x.reshape(*shape[:-1], heads, shape[-1] // heads).transpose(-3, -2)
    assert torch.equal(split, by_reshape) and split.shape == (*shape[:-2], heads, shape[-2], shape[-1] // heads)
    assert torch.equal(torch_merge_heads(split), x)


def _helper_that_uses_the_builtin(x):
    return torch.softmax(x, dim=-1)


def _uses_helper(x):
    return 2 * _helper_that_uses_the_builtin(x)


def test_check_no_builtin_judges_the_function_with_its_helpers_stood_in() -> None:
    # A helper's own use of a built-in costs points on the helper's tests, not on its caller's.
    with pytest.raises(AssertionError, match="calls \\['torch.softmax'\\]"):
        check_no_builtin(_uses_helper, torch.ones(3), builtins=["torch.softmax"])
    honest = {"_helper_that_uses_the_builtin": lambda x: x.exp() / x.exp().sum()}
    assert check_no_builtin(_uses_helper, torch.ones(3), builtins=["torch.softmax"], stand_ins=honest)
    assert _helper_that_uses_the_builtin is globals()["_helper_that_uses_the_builtin"]


@pytest.mark.parametrize(("shape_q", "shape_k", "d_v"), [((3, 4), (5, 4), 2), ((2, 3, 4), (2, 6, 4), 5)])
def test_the_attention_stand_ins_are_sdpa_with_scale_one(shape_q: tuple[int, ...], shape_k: tuple[int, ...], d_v: int) -> None:
    # Notebooks 01-03 stand these in for the student's softmax, scores and unscaled attention.
    import torch.nn.functional as F

    from course_utils.stand_ins import torch_dot_product_attention, torch_dot_product_scores, torch_softmax

    q, k = torch.randn(shape_q, dtype=torch.float64), torch.randn(shape_k, dtype=torch.float64)
    v = torch.randn(*shape_k[:-1], d_v, dtype=torch.float64)
    output, weights = torch_dot_product_attention(q, k, v)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, scale=1.0))
    torch.testing.assert_close(weights.sum(-1), torch.ones(shape_q[:-1], dtype=torch.float64))
    torch.testing.assert_close(torch_dot_product_scores(q, k), torch.einsum("...qd,...kd->...qk", q, k))
    scores = torch.tensor([0.0, 2 * math.log(2), 2 * math.log(5)])  # temperature 2 gives weights 1:2:5
    torch.testing.assert_close(torch_softmax(scores, temperature=2.0), torch.tensor([1.0, 2.0, 5.0]) / 8)


def test_the_toy_table_is_fresh_at_every_call() -> None:
    from course_utils.examples import cat_dog_mat_table

    keys, values = cat_dog_mat_table()
    keys += 1  # a test that changes its copy changes no other test's
    assert torch.equal(cat_dog_mat_table()[0], torch.eye(3)) and values.shape == (3, 3)


def test_nan_padded_is_a_view_with_nan_past_its_end():
    from course_utils.checks import nan_padded

    x = torch.randn(2, 3, 5, 4)
    view = nan_padded(x, 3, 2)
    torch.testing.assert_close(view, x)
    assert view.stride() == (3 * 8 * 6, 8 * 6, 6, 1)  # rows of 6, 8 rows per head: the buffer's strides
    buffer = torch.as_strided(view, (2, 3, 8, 6), view.stride())
    assert buffer[..., 5:, :].isnan().all() and buffer[..., :5, 4:].isnan().all()


def test_one_shot_blocks_refill_one_buffer():
    from course_utils.streams import one_shot_blocks

    x = torch.arange(10.0).view(1, 10)
    assert [b.tolist() for b in one_shot_blocks(x, 4)] == [[[0.0, 1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0, 7.0]], [[8.0, 9.0]]]
    kept = list(one_shot_blocks(x, 4))  # a two-pass reader that keeps the blocks sees the last one everywhere
    assert kept[0].tolist() == [[8.0, 9.0, 6.0, 7.0]] and kept[1].data_ptr() == kept[0].data_ptr()
    stream = one_shot_blocks(x, 4)
    list(stream)
    assert list(stream) == []  # read once
    with pytest.raises(ValueError, match="at least 1"):
        next(one_shot_blocks(x, 0))
    import copy

    stream = one_shot_blocks(x, 4)
    next(stream)
    twin = copy.deepcopy(stream)  # the grader hands the same stream to a catalogued mistake: its own copy, from here
    assert [b.tolist() for b in twin] == [[[4.0, 5.0, 6.0, 7.0]], [[8.0, 9.0]]]
    assert next(stream).tolist() == [[4.0, 5.0, 6.0, 7.0]], "the copy's reads leave the original where it was"


def test_visited_tiles_count_the_causal_triangle():
    from course_utils.flops import tiled_attention_flops, visited_tiles

    assert len(visited_tiles(128, 128, 32, 32)) == 16
    assert len(visited_tiles(128, 128, 32, 32, is_causal=True)) == 10  # 4 + 3 + 2 + 1: on or below the diagonal
    assert visited_tiles(16, 256, 16, 16, is_causal=True) == [(16, 16)]  # a short query block needs one key tile
    assert visited_tiles(40, 24, 16, 16, is_causal=True) == [(16, 16), (16, 16), (16, 8), (8, 16), (8, 8)]  # rows 0-15 need keys 0-15 only
    assert sum(r * c for r, c in visited_tiles(37, 53, 8, 16)) == 37 * 53  # ragged tiles cover the matrix once
    assert tiled_attention_flops(6, visited_tiles(40, 40, 16, 16), 16) == 4 * 6 * 40 * 40 * 16
    assert tiled_attention_flops(6, visited_tiles(40, 40, 16, 16), 16, backward=True) == 10 * 6 * 40 * 40 * 16


def test_answers_in_any_array_like_container_are_accepted():
    import numpy as np

    from course_utils.checks import check_answer

    def answering(value):
        return lambda: value

    for value in ([9, 5], (9.0, 5.0), np.array([9, 5]), np.array([[9], [5]]), [np.int64(9), np.float32(5)], torch.tensor([9, 5])):
        assert check_answer(answering(value), [9, 5], kind="numbers", hint="h"), value
    for value in (np.float64(0.525), np.float32(0.525), np.array(0.525), torch.tensor(0.525)):
        assert check_answer(answering(value), 0.525, kind="number", rtol=1e-6, hint="h"), value
    assert check_answer(answering(np.int64(3)), 3, kind="integer", hint="h")
    for value, problem in (
        ("9, 5", "not a list of finite numbers"),
        (np.array([9.0, np.nan]), "not a list of finite numbers"),
        (np.array([9, 5, 1]), "returned 3 numbers, but the question asks for 2"),
        (np.array(["9", "5"]), "not a list of finite numbers"),
    ):
        with pytest.raises(AssertionError, match=problem):
            check_answer(answering(value), [9, 5], kind="numbers", hint="h")


SOFTMAX_BUILTINS = ["torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "torch.log_softmax"]


def _hidden_softmax_routes():
    """Ways to reach the built-in softmax that no Python-name tripwire sees."""
    bound_early = torch.softmax  # a default argument or a global bound before the test patches the name

    def default_argument(x, dim=-1, _sm=bound_early):
        return _sm(x, dim)

    def closure():
        kernel = bound_early
        return lambda x, dim=-1: kernel(x, dim)

    return {
        "a default argument": default_argument,
        "a closure": closure(),
        "torch.ops.aten": lambda x, dim=-1: torch.ops.aten._softmax(x, dim, False),
        "nn.Softmax": lambda x, dim=-1: torch.nn.Softmax(dim)(x),
        "softmin": lambda x, dim=-1: torch.nn.functional.softmin(-x, dim),
        "log_softmax().exp()": lambda x, dim=-1: torch.ops.aten._log_softmax(x, dim, False).exp(),
    }


@pytest.mark.parametrize("route", sorted(_hidden_softmax_routes()))
def test_no_builtin_sees_the_kernel_whatever_name_reached_it(route):
    from course_utils.checks import check_no_builtin

    fn = _hidden_softmax_routes()[route]
    with pytest.raises(AssertionError, match=r"torch\.\w+ \(as aten::_?(log_)?softmax\)|which this exercise asks"):
        check_no_builtin(fn, torch.randn(3, 4), builtins=SOFTMAX_BUILTINS)


def test_no_builtin_has_no_false_alarm_for_honest_code_or_the_tests_stand_ins():
    from course_utils.checks import check_no_builtin
    from course_utils.stand_ins import SOFTMAX_STAND_IN

    def honest(x, dim=-1):
        e = torch.exp(x - x.amax(dim, keepdim=True))
        return e / e.sum(dim, keepdim=True)

    def with_logsumexp(x, dim=-1):
        return torch.exp(x - torch.logsumexp(x.double(), dim, keepdim=True)).float()

    for fn in (honest, with_logsumexp):
        assert check_no_builtin(fn, torch.randn(3, 4), builtins=SOFTMAX_BUILTINS)

    def uses_a_helper(x):  # calls the notebook's softmax, which the test replaces by PyTorch's
        return softmax(x) * 2  # noqa: F821 - defined by the stand-in while the check runs

    assert check_no_builtin(uses_a_helper, torch.randn(3, 4), builtins=SOFTMAX_BUILTINS, stand_ins=SOFTMAX_STAND_IN)


def test_no_builtin_sees_through_a_forged_stand_in_range():
    from torch.profiler import record_function

    from course_utils.checks import check_no_builtin
    from course_utils.operators import STAND_IN_RANGE

    bound_early = torch.softmax

    def hidden(x, dim=-1, _sm=bound_early):
        with record_function(STAND_IN_RANGE):  # claims to be the course's stand-in
            return _sm(x, dim)

    with pytest.raises(AssertionError, match=r"as aten::_?softmax"):
        check_no_builtin(hidden, torch.randn(3, 4), builtins=SOFTMAX_BUILTINS)


def test_no_builtin_sees_sdpa_through_torch_c():
    from course_utils.checks import check_no_builtin

    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(AssertionError, match=r"as aten::scaled_dot_product_attention"):
        check_no_builtin(
            lambda Q, K, V: torch._C._nn.scaled_dot_product_attention(Q, K, V),
            q,
            q,
            q,
            builtins=["torch.nn.functional.scaled_dot_product_attention"],
        )


def test_time_by_operator_names_where_the_time_goes_and_prints_nothing(capfd):
    from course_utils.operators import time_by_operator

    a = torch.randn(192, 192)
    rows = time_by_operator(lambda: [torch.softmax(a @ a @ a, dim=-1) for _ in range(3)], top=3)
    # Which operator takes the most time depends on how busy the machine is: the products are among the top three,
    # counted right (two a call, three calls), and the rows come in order of time.
    assert [r.calls for r in rows if r.name == "aten::mm"] == [6]
    assert len(rows) == 3 and all(r.self_ms >= s.self_ms for r, s in zip(rows, rows[1:]))
    assert capfd.readouterr().err == ""  # the profiler's own notices never reach a notebook's stderr


def test_model_calls_sees_calls_through_forward_too() -> None:
    from course_utils.model_stand_ins import ReferenceLM, model_calls

    model = ReferenceLM(7, 8, 1, num_layers=1).eval()
    tokens = torch.randint(0, 7, (1, 3))

    def both(model, tokens):  # the module called, and its forward called directly (which no hook sees)
        with torch.no_grad():
            model(tokens)
            model.forward(tokens[:, :1], start_pos=3, use_cache=True)

    assert model_calls(model, both, model, tokens) == [
        {"tokens": [1, 3], "start_pos": 0, "use_cache": False},
        {"tokens": [1, 1], "start_pos": 3, "use_cache": True},
    ]
    assert "forward" not in vars(model), "the model is left as it was"


def test_a_block_given_sdpa_decodes_over_its_cache_as_its_own_masked_attention(repo_root) -> None:
    # SDPA's is_causal is top-left: over a cache one new query must see every cached key, not key 0 alone.
    import torch.nn.functional as F

    from autograder.solutions import load_solution
    from course_utils.model_stand_ins import ReferenceBlock

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_SOLUTIONS_DIR", str(repo_root / "solutions"))
        solution = load_solution("09_language_model")
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for block in (ReferenceBlock, solution.DecoderBlock):
        torch.manual_seed(1)
        own = block(16, 2).double()
        given = block(16, 2, attention=F.scaled_dot_product_attention).double()
        given.load_state_dict(own.state_dict())
        expected = own(x)
        given(x[:, :3], use_cache=True)  # prefill: T = T_k, top-left is bottom-right
        decoded = [given(x[:, t : t + 1], start_pos=t, use_cache=True) for t in (3, 4)]
        torch.testing.assert_close(torch.cat(decoded, dim=1), expected[:, 3:], msg=lambda m, b=block: f"{b.__name__}: {m}")
        with pytest.raises(ValueError, match="top-left"):
            given(x[:, :2], start_pos=5, use_cache=True)  # two new queries over seven keys: no is_causal fits
