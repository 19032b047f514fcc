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
    HeldOut(
        Variant(
            "flash_backward_preprocess returns dO * O without the row sum (one number per feature)",
            "flash_backward_preprocess",
            edits=(("return (dO.to(acc_dtype) * O.to(acc_dtype)).sum(dim=-1)", "return dO.to(acc_dtype) * O.to(acc_dtype)"),),
            loses=("test_flash_backward_preprocess",),
        ),
        says=(
            "flash_backward_preprocess(O [2,3,5,4], dO [2,3,5,4])",
            "the first step that goes wrong is the sum of dO ∘ O over the feature dimension, on O, dO [1, 5] (one query row), float64",
        ),
    ),
    HeldOut(
        Variant(
            "flash_backward_preprocess keeps the feature dimension (D [..., T_q, 1])",
            "flash_backward_preprocess",
            edits=(("(dO.to(acc_dtype) * O.to(acc_dtype)).sum(dim=-1)", "(dO.to(acc_dtype) * O.to(acc_dtype)).sum(dim=-1, keepdim=True)"),),
            loses=("test_flash_backward_preprocess",),
        ),
        says=("the first step that goes wrong is the sum of dO ∘ O over the feature dimension", "expected shape [1], got [1, 1]"),
    ),
    HeldOut(
        Variant(
            "flash_attention_backward keeps dV of the last query tile only (dv = instead of dv +=)",
            "flash_attention_backward",
            edits=(("dv += p.transpose(-2, -1) @ do", "dv = p.transpose(-2, -1) @ do"),),
            loses=("test_flash_attention_backward", "test_flash_attention_backward_causal"),
        ),
        says=(
            "the first step that goes wrong is dK and dV summed over query tiles, on two query tiles, one key tile",
            "(T_q = 8, T_k = 4, d = 4, tiles of 4 queries by 4 keys): dV: ",
        ),
    ),
    HeldOut(
        Variant(
            "the dK/dV kernel keeps dV of the last query tile only (dv = instead of dv +=)",
            "flash_attention_backward_triton",
            edits=(("dv += tl.dot(pT.to(do.dtype), do)", "dv = tl.dot(pT.to(do.dtype), do)"),),
            loses=(
                "test_flash_attention_backward_triton",
                "test_flash_attention_backward_triton_causal",
                "test_flash_attention_backward_triton_skips_masked_blocks",
            ),
        ),
        says=(
            "the first step that goes wrong is dK and dV summed over query tiles, on two query tiles, one key tile",
            "(T_q = 32, T_k = 16, d = 16, block=16): dV: ",
        ),
    ),
    HeldOut(
        Variant(
            "the dK/dV kernel's causal mask leaves out the diagonal (keys < rows: each query's own key masked)",
            "flash_attention_backward_triton",
            edits=(("allowed = allowed & (keys[:, None] <= rows[None, :])", "allowed = allowed & (keys[:, None] < rows[None, :])"),),
            loses=("test_flash_attention_backward_triton_causal", "test_flash_attention_backward_triton_skips_masked_blocks"),
        ),
        says=(
            "the first step that goes wrong is the causal mask inside the diagonal tile, on is_causal=True, the diagonal tile alone",
            "the simpler inputs before it match (one tile, not causal",
        ),
    ),
    HeldOut(
        Variant(
            "the dK/dV kernel subtracts L in natural-log units from base-2 scores",
            "flash_attention_backward_triton",
            edits=(("pT = tl.exp2(sT - lse[None, :] * 1.4426950408889634)", "pT = tl.exp2(sT - lse[None, :])"),),
            loses=(
                "test_flash_attention_backward_triton",
                "test_flash_attention_backward_triton_causal",
                "test_flash_attention_backward_triton_skips_masked_blocks",
            ),
        ),
        says=(
            "the first step that goes wrong is the weights P = exp(scale·Q Kᵀ − L) rebuilt from L, and dV = Pᵀ dO, on one tile, scale = 1.0",
            "(T_q = 16, T_k = 16, d = 16, block=16): dV: ",
        ),
    ),
]
