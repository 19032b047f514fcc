"""The forward and online-softmax ladders: what each rung exercises, and the step each kind of slip is placed at."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from course_utils.attention_steps import (
    attention_output_reference,
    attention_reference,
    forward_ladder,
    if_new_nan,
    softmax_ladder,
    softmax_reference,
)
from course_utils.kernel_steps import where_steps_differ


def tiled_forward(
    Q, K, V, is_causal=False, scale=None, block_q=16, block_k=16, *, max_start=-math.inf, rescale=True, ignore_scale=False, diagonal=False
):
    """FlashAttention's forward in PyTorch tiles; the keywords after * plant one slip each."""
    scale = Q.shape[-1] ** -0.5 if scale is None or ignore_scale else scale
    T_q, T_k = Q.shape[-2], K.shape[-2]
    O, L = torch.empty(*Q.shape[:-1], V.shape[-1]), torch.empty(Q.shape[:-1])
    for q0 in range(0, T_q, block_q):
        q = Q[..., q0 : q0 + block_q, :] * scale
        m = torch.full(q.shape[:-1], max_start)
        l, acc = torch.zeros_like(m), torch.zeros(*q.shape[:-1], V.shape[-1])
        for k0 in range(0, min(T_k, q0 + block_q) if is_causal else T_k, block_k):
            s = q @ K[..., k0 : k0 + block_k, :].transpose(-2, -1)
            if is_causal:
                rows, cols = torch.arange(q0, q0 + q.shape[-2])[:, None], torch.arange(k0, k0 + s.shape[-1])
                s = s.masked_fill(cols >= rows if diagonal else cols > rows, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            p, c = torch.exp(s - m_new[..., None]), torch.exp(m - m_new)
            l = l * c + p.sum(-1)
            acc = (acc * c[..., None] if rescale else acc) + p @ V[..., k0 : k0 + block_k, :]
            m = m_new
        O[..., q0 : q0 + block_q, :], L[..., q0 : q0 + block_q] = acc / l[..., None], m + torch.log(l)
    return O, L


def launcher(block: int, **slip):
    """A function that picks its own tiles, as a Triton launcher does."""
    return lambda Q, K, V, is_causal=False, scale=None: tiled_forward(Q, K, V, is_causal, scale, block, block, **slip)


def test_a_right_forward_matches_every_rung_of_every_ladder() -> None:
    for tiled in (True, False):
        for causal in (False, True):
            steps = forward_ladder(tiled=tiled, causal=causal)
            assert len(steps) <= 8
            fns = [tiled_forward] if tiled else [launcher(16), launcher(128)]
            assert [where_steps_differ(fn, attention_reference, steps) for fn in fns] == [""] * len(fns)
    only_O = lambda *args, **kwargs: tiled_forward(*args, **kwargs)[0]  # noqa: E731 - a drop-in returns O alone
    assert where_steps_differ(only_O, attention_output_reference, forward_ladder(tiled=True)) == ""


@pytest.mark.parametrize(
    ("slip", "causal", "step"),
    [
        ({"max_start": 0.0}, False, "the softmax of one tile on rows of extreme scores"),
        ({"rescale": False}, False, "carrying the running max, sum and output from one key tile to the next"),
        ({"ignore_scale": True}, False, "the scale the caller gives, on T_q = T_k = 8, scale = 1.0"),
        ({"diagonal": True}, True, "the causal mask inside the diagonal tile"),
    ],
)
def test_each_slip_is_placed_at_its_own_step(slip: dict, causal: bool, step: str) -> None:
    said = where_steps_differ(partial(tiled_forward, **slip), attention_reference, forward_ladder(tiled=True, causal=causal))
    assert said.startswith(f"the first step that goes wrong is {step}"), said
    assert "the simpler inputs before it match (T_q = T_k = 8, d = 8" in said, said


def test_the_kernel_ladder_gives_one_tile_or_several_for_any_tile_of_16_to_128() -> None:
    def lengths(step):
        return step.args[0].shape[-2], step.args[1].shape[-2]

    one, extreme, several, ragged, *options = forward_ladder(tiled=False)
    assert max(lengths(one)) <= 16 and max(lengths(extreme)) <= 16
    assert lengths(several)[1] > 128 and lengths(several)[1] % 128 == 0  # two or more full key tiles
    assert all(T % 16 for T in lengths(ragged)) and max(lengths(ragged)) > 16  # ragged for every tile of 16 to 128
    heads = options[0].args
    assert heads[0].shape[:2] == (2, 3) and heads[1].stride() != heads[0].stride()
    diagonal, across, fewer, more = forward_ladder(tiled=False, causal=True)[2:]
    assert max(lengths(diagonal)) <= 16 and min(lengths(across)) > 64  # a tile of 128 costs the interpreter too much here
    assert lengths(fewer)[0] < lengths(fewer)[1] and lengths(more)[0] > lengths(more)[1]
    assert all("block_q" not in step.kwargs for step in forward_ladder(tiled=False, causal=True))


def test_rungs_sit_in_nan_padded_buffers_and_the_extreme_rows_are_extreme() -> None:
    state = torch.get_rng_state()
    steps = forward_ladder(tiled=False)
    assert torch.equal(state, torch.get_rng_state()), "a ladder must not draw from the global random state"
    for tensor in steps[0].args:
        storage = torch.as_tensor(tensor.untyped_storage(), dtype=torch.uint8).view(torch.float32)
        assert storage.numel() > tensor.numel() and torch.isnan(storage).sum() == storage.numel() - tensor.numel()
    Q, K, _ = steps[1].args
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    assert (scores[0, 0, 0] < -100).all() and (scores[0, 0, 1] == 0).all() and (scores[0, 0, 2] > 100).all()


def test_the_softmax_ladder_passes_its_block_by_position_or_keyword() -> None:
    def online(x, block, start=-math.inf):
        m, l = torch.full(x.shape[:-1], start), torch.zeros(x.shape[:-1])
        for b in x.split(block, dim=-1):
            m_new = torch.maximum(m, b.amax(-1))
            shift = torch.where(m_new == -math.inf, 0.0, m_new)  # a row all -inf so far: nothing to rescale
            l = l * torch.exp(m - shift) + torch.exp(b - shift[..., None]).sum(-1)
            m = m_new
        return torch.exp(x - m[..., None]) / l[..., None]

    assert where_steps_differ(online, softmax_reference, softmax_ladder()) == ""
    by_keyword = lambda x, block=4: online(x, block)  # noqa: E731
    assert where_steps_differ(by_keyword, softmax_reference, softmax_ladder(block="block", masked=False)) == ""
    said = where_steps_differ(partial(online, start=0.0), softmax_reference, softmax_ladder())
    assert said.startswith("the first step that goes wrong is the softmax of one block on rows of extreme scores"), said


def test_if_new_nan_names_nan_only_where_the_other_result_has_a_number() -> None:
    nan = float("nan")
    assert if_new_nan(torch.tensor([1.0, nan]), torch.tensor([1.0, 2.0]), "said") == "said"
    assert if_new_nan(torch.tensor([1.0, nan]), torch.tensor([1.0, nan]), "said") == ""
    assert if_new_nan(torch.tensor([1.0, nan]), torch.tensor([1.0]), "said") == ""
    assert if_new_nan("not a tensor", torch.tensor([1.0]), "said") == ""
