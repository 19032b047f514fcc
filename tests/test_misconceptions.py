"""Naming a misconception: the pieces that decide it, on hand-made inputs (the graded class checks the catalogue)."""

from __future__ import annotations

import nbformat
import torch

from autograder.grading.misconceptions import name_misconceptions, reproduces, results_match, section_of
from autograder.grading.models import MISCONCEPTION_SEPARATOR
from autograder.mistakes import MISTAKES, Variant
from autograder.settings import SOLUTIONS_DIR
from autograder.solutions import solution_module
from course_utils import recording
from course_utils.notebook_cells import solution_cells


def test_results_compare_to_the_tolerance_of_their_dtype() -> None:
    x = torch.linspace(-1, 1, 7)
    assert results_match(x + 1e-7, x) and not results_match(x + 1e-3, x)
    assert not results_match(x.double(), x), "a different dtype is a different result"
    assert not results_match(x[:6], x) and not results_match(x, [x])
    assert results_match((x, 2.0, "a"), (x.clone(), 2.0 + 1e-9, "a")) and not results_match((x, 2.0), (x, 3.0))
    assert results_match(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0])), "NaN where the student had NaN"
    assert results_match(torch.tensor([1, 2]), torch.tensor([1, 2])) and not results_match(torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert not results_match(True, 1) and results_match({"a": x}, {"a": x}) and not results_match({"a": x}, {"b": x})


def test_the_section_to_revisit_is_the_heading_above_the_function() -> None:
    source = nbformat.read(SOLUTIONS_DIR / "01_soft_dictionary_lookup" / "01_soft_dictionary_lookup.ipynb", as_version=4)
    section = section_of(source, "softmax")
    assert section and not section.startswith("#"), section
    assert "softmax" in section.lower() or "soft" in section.lower(), section
    assert section_of(source, "no_such_cell") == ""


def test_no_catalogued_name_holds_the_separator_of_tests_csv() -> None:
    assert not [m.name for mistakes in MISTAKES.values() for m in mistakes if MISCONCEPTION_SEPARATOR in m.name]


def _softmax_call(logits: torch.Tensor, student_result: torch.Tensor) -> recording.Replayed:
    """A recorded call of 01's softmax on ``logits``, as the trusted pass keeps it."""
    return recording.Replayed("name:softmax", None, (logits,), {}, None, (), None, recording.CallOutcome("value", value=student_result))


def test_a_mistake_is_named_only_on_a_call_that_tells_it_from_a_right_answer() -> None:
    assignment = "01_soft_dictionary_lookup"
    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    cell = solution_cells(source)["softmax"]
    global_max = next(m for m in MISTAKES[assignment] if m.name == "softmax subtracts one global max instead of each row's")
    # Rows of modest logits: one global max gives the right weights, so a right answer matches the mistake here.
    small = torch.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], dtype=torch.float64)
    right = torch.softmax(small, dim=-1)
    assert not reproduces(assignment, global_max, cell, [_softmax_call(small, right)]), "named on a call where it is right"
    # Rows a thousand apart: the row far below the global max underflows to 0/0 = NaN under the mistake.
    apart = torch.tensor([[0.5, -1.0, 2.0], [-1000.0, -1001.0, -999.0]], dtype=torch.float64)
    wrong = torch.exp(apart - apart.max())
    wrong = wrong / wrong.sum(dim=-1, keepdim=True)
    assert wrong.isnan().any() and not torch.softmax(apart, dim=-1).isnan().any()
    calls = [_softmax_call(small, right), _softmax_call(apart, wrong)]
    assert reproduces(assignment, global_max, cell, calls), "the distinguishing call is the mistake's result"
    # The right answer on the distinguishing input names nothing.
    assert not reproduces(assignment, global_max, cell, [_softmax_call(small, right), _softmax_call(apart, torch.softmax(apart, -1))])


def test_tensors_on_the_meta_device_compare_by_shape_dtype_and_device() -> None:
    # A test that asks for a mask on the "meta" device gets a tensor with no values: comparing must not copy it.
    meta = torch.ones(3, 5, dtype=torch.bool, device="meta")
    assert results_match(meta, torch.ones(3, 5, dtype=torch.bool, device="meta"))
    assert not results_match(meta, torch.ones(3, 5, dtype=torch.bool)), "a mask left on the CPU is not the one asked for"
    assert not results_match(meta, torch.ones(5, 3, dtype=torch.bool, device="meta"))


def test_a_mistake_on_the_masks_device_is_named_only_where_the_device_tells_it_apart() -> None:
    assignment = "04_masking"
    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    cpu_only = next(m for m in MISTAKES[assignment] if m.name == "causal_mask ignores device (always on the CPU)")
    on_cpu = torch.ones(3, 5, dtype=torch.bool).tril()

    def call(device: str, result: torch.Tensor) -> recording.Replayed:
        outcome = recording.CallOutcome("value", value=result)
        return recording.Replayed("name:causal_mask", None, (3, 5), {"device": device}, None, (), None, outcome)

    cell = solution_cells(source)["causal_mask"]
    assert reproduces(assignment, cpu_only, cell, [call("cpu", on_cpu), call("meta", on_cpu)])
    assert not reproduces(assignment, cpu_only, cell, [call("cpu", on_cpu)]), "on the CPU the mistake is right"
    assert not reproduces(assignment, cpu_only, cell, [call("meta", on_cpu.to("meta"))]), "a right answer names nothing"


def test_a_mistake_in_an_object_is_followed_through_the_handles_the_record_gives_it() -> None:
    # The record of 05's test_kv_cache_grows: KVCache() is handle 1, each cache.append read is a handle, each call of it a value.
    assignment = "05_multi_head_attention"
    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    forgets = next(m for m in MISTAKES[assignment] if m.name == "KVCache forgets to append (keeps only the newest keys and values)")
    k1, v1, k2, v2 = (torch.randn(2, 3, t, 4, generator=torch.Generator().manual_seed(t + 10 * i)) for i, t in enumerate((1, 1, 2, 2)))

    def record(second_result: tuple[torch.Tensor, torch.Tensor]) -> list[recording.Replayed]:
        def step(target: str, attribute: str | None, args: tuple, outcome: recording.CallOutcome) -> recording.Replayed:
            return recording.Replayed(target, attribute, args, {}, None, (), None, outcome)

        def handle(number: int) -> recording.CallOutcome:
            return recording.CallOutcome("handle", value=recording.Handle(number))

        return [
            step("name:KVCache", None, (), handle(1)),
            step("handle:1", "append", (), handle(2)),
            step("handle:2", None, (k1, v1), recording.CallOutcome("value", value=(k1, v1))),
            step("handle:1", "append", (), handle(3)),
            step("handle:3", None, (k2, v2), recording.CallOutcome("value", value=second_result)),
        ]

    cell = solution_cells(source)["KVCache"]
    assert reproduces(assignment, forgets, cell, record((k2, v2))), "only the newest keys and values: the mistake's result"
    right = (torch.cat([k1, k2], dim=-2), torch.cat([v1, v2], dim=-2))
    assert not reproduces(assignment, forgets, cell, record(right)), "a cache that appends names nothing"
    assert recording.mode() is recording.Mode.LIVE, "the mode the comparison began in is restored"


def _flops_call(args: tuple[int, ...], result: int) -> recording.Replayed:
    return recording.Replayed("name:attention_flops", None, args, {}, None, (), None, recording.CallOutcome("value", value=result))


def test_a_name_is_given_per_test_on_that_tests_own_evidence() -> None:
    # A FLOP count of Q K^T alone equals "multiply-adds instead of FLOPs" when d_k = d_v, and not when they differ: the
    # name belongs on the first test only, where that mistake's result is the student's.
    assignment = "06_complexity"
    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)

    def scores_only(b: int, h: int, t_q: int, t_k: int, d_k: int, d_v: int) -> int:
        return 2 * b * h * t_q * t_k * d_k

    equal_widths, other_widths = (1, 1, 100, 100, 64, 64), (1, 2, 10, 20, 8, 32)
    replayed = {
        "test_attention_flops": [_flops_call(equal_widths, scores_only(*equal_widths))],
        "test_attention_flops_with_d_v": [_flops_call(other_widths, scores_only(*other_widths))],
    }
    named = name_misconceptions(assignment, source, set(replayed), replayed)
    multiply_adds = "attention_flops counts multiply-adds instead of FLOPs"
    assert [m.name for m in named.get("test_attention_flops", ())] == [multiply_adds], named
    assert multiply_adds not in [m.name for m in named.get("test_attention_flops_with_d_v", ())], (
        "named where its result (16000) is not 6400"
    )


def test_an_error_two_mistakes_share_is_no_evidence_for_either() -> None:
    assignment = "01_soft_dictionary_lookup"
    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    cell = solution_cells(source)["softmax"]
    line = "shifted = scaled - scaled.amax(dim=dim, keepdim=True)"
    no_keepdim = Variant("softmax's max without keepdim", "softmax", edits=((line, "shifted = scaled - scaled.amax(dim=dim)"),))
    mean_no_keepdim = Variant(
        "softmax subtracts the mean, without keepdim", "softmax", edits=((line, "shifted = scaled - scaled.mean(dim=dim)"),)
    )
    logits = torch.randn(2, 3, dtype=torch.float64)  # [2, 3] minus a [2] vector: the same shape error for both
    outcome = recording.run_call(
        solution_module(assignment, {"softmax": no_keepdim.apply(cell)}, name="shared error probe").softmax, None, (logits,), {}, None, ()
    )
    assert outcome.kind == "raised" and outcome.error_type == "RuntimeError", outcome
    call = recording.Replayed("name:softmax", None, (logits,), {}, None, (), None, outcome)
    assert reproduces(assignment, no_keepdim, cell, [call]), "the error alone tells it from the solution"
    assert not reproduces(assignment, no_keepdim, cell, [call], rivals=[mean_no_keepdim]), "another mistake raises the same error"


def test_each_of_04s_masks_sends_the_student_to_its_own_section() -> None:
    # Each mask is written right after the section that explains it, so a named mistake points there (one markdown cell
    # used to hold sections 2 to 4, and every mask's mistakes sent students to "4. Sliding windows").
    source = nbformat.read(SOLUTIONS_DIR / "04_masking" / "04_masking.ipynb", as_version=4)
    sections = {cell: section_of(source, cell).split(".")[0] for cell in ("padding_mask", "causal_mask", "sliding_window_mask")}
    assert sections == {"padding_mask": "2", "causal_mask": "3", "sliding_window_mask": "4"}
