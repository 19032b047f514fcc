"""The backward and D ladders: what each rung's inputs guarantee, and the step each kind of slip is placed at."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.backward_steps import (
    backward_ladder,
    backward_reference,
    extreme_scores,
    if_new_nan_in,
    preprocess_ladder,
    preprocess_reference,
)
from course_utils.kernel_steps import where_steps_differ


def tiled_backward(
    Q,
    K,
    V,
    O,
    dO,
    L,
    is_causal=False,
    scale=None,
    block_q=4,
    block_k=4,
    *,
    log2_L=False,
    minus_D=True,
    scale_dK=True,
    sum_dV=True,
    sum_dQ=True,
    diagonal=False,
):
    """FlashAttention-2's backward in PyTorch tiles (keys outside); the keywords after * plant one slip each."""
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    T_q, T_k = Q.shape[-2], K.shape[-2]
    Q, K, V, O, dO, L = (t.double() for t in (Q, K, V, O, dO, L))
    D = (dO * O).sum(-1) if minus_D else torch.zeros_like(L)  # a slip: dS = P * dP, without D
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for k0 in range(0, T_k, block_k):
        k, v = K[..., k0 : k0 + block_k, :], V[..., k0 : k0 + block_k, :]
        first = k0 - k0 % block_q if is_causal else 0
        for q0 in range(first, T_q, block_q):
            q, do = Q[..., q0 : q0 + block_q, :], dO[..., q0 : q0 + block_q, :]
            s = scale * q @ k.transpose(-2, -1)
            if is_causal:
                rows, cols = torch.arange(q0, q0 + q.shape[-2])[:, None], torch.arange(k0, k0 + k.shape[-2])
                s = s.masked_fill(cols >= rows if diagonal else cols > rows, -math.inf)
            p = torch.exp(s - L[..., q0 : q0 + block_q, None] * (math.log2(math.e) if log2_L else 1.0))
            ds = p * (do @ v.transpose(-2, -1) - D[..., q0 : q0 + block_q, None])
            dv = p.transpose(-2, -1) @ do
            dV[..., k0 : k0 + block_k, :] = dV[..., k0 : k0 + block_k, :] + dv if sum_dV else dv
            piece = scale * ds @ k
            dQ[..., q0 : q0 + block_q, :] = dQ[..., q0 : q0 + block_q, :] + piece if sum_dQ else piece
            dK[..., k0 : k0 + block_k, :] += (scale if scale_dK else 1.0) * ds.transpose(-2, -1) @ q
    return tuple(g.to(t.dtype) for g, t in zip((dQ, dK, dV), (Q, K, V)))


def launcher(block_of_its_own: int | None = None, **slip):
    """A function that takes its tiles as ``block=``, as notebook 08's Triton launcher does (or picks its own)."""

    def run(Q, K, V, O, dO, L, is_causal=False, scale=None, block=None):
        block = block_of_its_own or block or 16
        return tuple(g.to(Q.dtype) for g in tiled_backward(Q, K, V, O, dO, L, is_causal, scale, block, block, **slip))

    return run


def test_a_right_backward_matches_every_rung_of_every_ladder() -> None:
    for causal in (False, True):
        tiles, kernel = backward_ladder(tiled=True, causal=causal), backward_ladder(tiled=False, causal=causal)
        assert len(tiles) <= 8 and len(kernel) <= 9
        assert where_steps_differ(tiled_backward, backward_reference, tiles) == ""
        assert [where_steps_differ(fn, backward_reference, kernel) for fn in (launcher(), launcher(32))] == ["", ""]


def test_the_first_rungs_isolate_dV_then_dS_then_D() -> None:
    first, second, third = backward_ladder(tiled=False)[:3]
    for step in (first, second):  # O and L are the forward's; dO is shaped so that a term of dS vanishes
        Q, K, V, O, dO, L = step.args
        assert torch.equal(torch.isnan(Q), torch.zeros_like(Q, dtype=torch.bool))
        P = torch.softmax(Q.double() @ K.double().transpose(-2, -1) * step.kwargs.get("scale", 1.0), dim=-1)
        torch.testing.assert_close(torch.exp(Q.double() @ K.double().transpose(-2, -1) - L.double()[..., None]), P, rtol=1e-5, atol=1e-6)
        assert float((dO.double() * O.double()).sum(-1).abs().max()) < 1e-6  # D = 0 on both
    _, _, V, _, dO, _ = first.args
    assert float((dO.double() @ V.double().transpose(-2, -1)).abs().max()) == 0.0  # dP = 0: only dV is not 0
    gradients = backward_reference(*first.args, **first.kwargs)
    assert float(gradients["dQ"].abs().max()) < 1e-6 and float(gradients["dK"].abs().max()) < 1e-6
    assert float(gradients["dV"].abs().max()) > 0.1
    _, _, V, _, dO, _ = second.args
    assert float((dO.double() @ V.double().transpose(-2, -1)).abs().max()) > 0.1  # dP is not 0 on the second
    _, _, _, O, dO, _ = third.args
    assert float((dO.double() * O.double()).sum(-1).abs().max()) > 0.1  # nor D on the third


def test_a_kernel_s_inputs_hold_NaN_past_their_ends() -> None:
    for step in backward_ladder(tiled=False) + backward_ladder(tiled=False, causal=True):
        for tensor in step.args:
            buffer = torch.as_strided(tensor, (tensor.untyped_storage().nbytes() // tensor.element_size(),), (1,))
            assert torch.isnan(buffer).any() and not torch.isnan(tensor).any(), step.inputs
        assert step.kwargs["block"] == 16


@pytest.mark.parametrize(
    ("slip", "step", "output"),
    [
        ({"log2_L": True}, "the weights P = exp(scale·Q Kᵀ − L) rebuilt from L, and dV = Pᵀ dO", "dV"),
        ({"minus_D": False}, "D = rowsum(dO ∘ O), subtracted from dP in dS", "dQ"),
        ({"scale_dK": False}, "the scale, in S = scale·Q Kᵀ, dQ and dK", "dK"),
        ({"sum_dQ": False}, "dQ summed over key tiles", "dQ"),
        ({"sum_dV": False}, "dK and dV summed over query tiles", "dV"),
    ],
)
def test_each_slip_is_placed_at_its_own_step_and_output(slip: dict, step: str, output: str) -> None:
    for fn, ladder in (
        (lambda *a, **k: tiled_backward(*a, **k, **slip), backward_ladder(tiled=True)),
        (launcher(**slip), backward_ladder(tiled=False)),
    ):
        said = where_steps_differ(fn, backward_reference, ladder)
        assert said.startswith(f"the first step that goes wrong is {step}, on "), said
        assert f"): {output}: " in said, said


def test_a_mask_off_by_one_is_placed_inside_the_diagonal_tile() -> None:
    for fn, tiled in ((lambda *a, **k: tiled_backward(*a, **k, diagonal=True), True), (launcher(diagonal=True), False)):
        assert where_steps_differ(fn, backward_reference, backward_ladder(tiled=tiled)) == ""  # no mask, no slip
        said = where_steps_differ(fn, backward_reference, backward_ladder(tiled=tiled, causal=True))
        assert said.startswith("the first step that goes wrong is the causal mask inside the diagonal tile, on is_causal=True"), said
        assert "the simpler inputs before it match (one tile, not causal" in said, said


def test_the_D_ladder_places_a_low_precision_sum_and_a_sum_over_the_wrong_dimension() -> None:
    right = lambda O, dO: (dO.double() * O.double()).sum(-1).to(torch.promote_types(O.dtype, torch.float32))  # noqa: E731
    assert where_steps_differ(right, preprocess_reference, preprocess_ladder()) == ""
    in_their_dtype = lambda O, dO: (dO * O).sum(-1).to(torch.promote_types(O.dtype, torch.float32))  # noqa: E731 - rounds in bfloat16
    said = where_steps_differ(in_their_dtype, preprocess_reference, preprocess_ladder())
    assert said.startswith("the first step that goes wrong is the float32 sums of low-precision inputs, on O, dO [2, 6, 64] in bfloat16"), (
        said
    )
    over_queries = lambda O, dO: (dO.double() * O.double()).sum(-2)  # noqa: E731
    said = where_steps_differ(over_queries, preprocess_reference, preprocess_ladder())
    assert said.startswith("the first step that goes wrong is the sum of dO ∘ O over the feature dimension"), said


def test_extreme_scores_are_far_below_zero_equal_and_far_above_on_three_rows() -> None:
    Q, K, _, _ = extreme_scores(5, 7, 8, size=800.0, seed=1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(8)
    assert float(scores[..., 0, :].max()) < -790 and float(scores[..., 2, :].min()) > 790
    assert torch.equal(scores[..., 1, :], torch.zeros_like(scores[..., 1, :]))
    assert torch.isinf(torch.exp(scores)).any()  # what exp(S) / exp(L) would meet


def test_a_NaN_sentence_needs_a_NaN_where_a_number_was_expected() -> None:
    expected = (torch.zeros(2), torch.tensor([float("nan"), 1.0]))
    assert if_new_nan_in((torch.zeros(2), torch.tensor([float("nan"), 1.0])), expected, "NaN") == ""  # NaN where expected
    assert if_new_nan_in((torch.zeros(2), torch.tensor([0.0, float("nan")])), expected, "NaN") == "NaN"
    assert if_new_nan_in(torch.zeros(2), expected, "NaN") == ""  # no tuple of results: nothing to say
