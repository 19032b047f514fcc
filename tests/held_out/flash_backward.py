"""Notebook 08: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

HELD_OUT: list[HeldOut] = [
    HeldOut(
        Variant(
            "softmax_backward subtracts one sum over the whole tensor, not each row's",
            "softmax_backward",
            edits=(("(P * dP).sum(dim=-1, keepdim=True)", "(P * dP).sum()"),),
            loses=("test_softmax_backward",),
        ),
        says=("softmax_backward",),
    ),
    HeldOut(
        Variant(
            "flash_backward_preprocess sums over the queries (dim -2), not the feature dimension",
            "flash_backward_preprocess",
            edits=(("(dO.to(acc_dtype) * O.to(acc_dtype)).sum(dim=-1)", "(dO.to(acc_dtype) * O.to(acc_dtype)).sum(dim=-2)"),),
            loses=("test_flash_backward_preprocess",),
        ),
        says=("flash_backward_preprocess",),
    ),
    HeldOut(
        Variant(
            "flash_attention_backward leaves the scale out of dQ",
            "flash_attention_backward",
            edits=(("dQ[..., q_start:q_stop, :] += scale * ds @ k", "dQ[..., q_start:q_stop, :] += ds @ k"),),
            loses=("test_flash_attention_backward", "test_flash_attention_backward_causal"),
        ),
        says=("flash_attention_backward",),
    ),
    HeldOut(
        Variant(
            "FlashAttention.backward always runs the unmasked backward pass",
            "FlashAttention",
            edits=(("is_causal=ctx.is_causal, scale=ctx.scale\n", "is_causal=False, scale=ctx.scale\n"),),
            loses=("test_flash_attention_function", "test_flash_attention_function_gradcheck"),
        ),
        says=("flash_attention",),
    ),
]
