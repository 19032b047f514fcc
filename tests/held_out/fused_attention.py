"""Notebook 07: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

HELD_OUT: list[HeldOut] = [
    HeldOut(
        Variant(
            "flash_attention_triton's grid rounds the query blocks down (T_q // BLOCK_M)",
            "flash_attention_triton",
            edits=(("(triton.cdiv(T_q, block), B * H),", "(T_q // block, B * H),"),),
            # the ragged last query block is never launched: its rows of O and L are whatever memory held, which
            # the kernel tests' output checks see (check_kernel_outputs), whatever the values happen to be
            loses=("test_flash_attention_triton_launcher", "test_flash_attention_triton", "test_flash_attention_triton_causal"),
        ),
        says=("flash_attention_triton(",),
    ),
    HeldOut(
        Variant(
            "flash_attention_forward's causal loop stops at the first row of the query block",
            "flash_attention_forward",
            edits=(("k_stop_all = min(T_k, q_stop) if is_causal else T_k", "k_stop_all = min(T_k, q_start + 1) if is_causal else T_k"),),
            loses=("test_flash_attention_forward_causal",),
        ),
        says=("flash_attention_forward",),
    ),
    HeldOut(
        Variant(
            "matmul reads B with its two strides swapped",
            "matmul",
            edits=(("ks[:, None] * stride_bk + cols[None, :] * stride_bn", "ks[:, None] * stride_bn + cols[None, :] * stride_bk"),),
            loses=("test_matmul",),
        ),
        says=("matmul",),
    ),
    HeldOut(
        Variant(
            "row_sums steps along a row by the row stride",
            "row_sums",
            edits=(("cols * stride_col, mask=cols < n_cols", "cols * stride_row, mask=cols < n_cols"),),
            loses=("test_row_sums",),
        ),
        says=("row_sums",),
    ),
]
