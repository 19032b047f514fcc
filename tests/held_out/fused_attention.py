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
    HeldOut(
        Variant(
            "the Triton kernel never rescales its accumulator when the running max grows",
            "flash_attention_kernel",
            edits=(("acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v)", "acc = acc + tl.dot(p.to(v.dtype), v)"),),
            loses=("test_flash_attention_triton", "test_flash_attention_triton_causal"),
        ),
        says=(
            "the first step that goes wrong is carrying the running max, sum and output from one key tile to the next, on T_q = 16, "
            "T_k = 256",
        ),
    ),
    HeldOut(
        Variant(
            "flash_attention_forward starts its running max at 0 instead of -inf",
            "flash_attention_forward",
            edits=(
                (
                    'm = torch.full(q.shape[:-1], float("-inf"), dtype=acc_dtype, device=Q.device)',
                    "m = torch.zeros(q.shape[:-1], dtype=acc_dtype, device=Q.device)",
                ),
            ),
            # exact while a row's scores stay above about -100; a row all below that underflows to 0 / 0 (the hidden rows near -120)
            loses=("test_flash_attention_forward", "test_flash_attention_forward_causal"),
        ),
        says=("the first step that goes wrong is the softmax of one tile on rows of extreme scores, on T_q = T_k = 8",),
    ),
    HeldOut(
        Variant(
            "flash_attention_forward's causal mask hides the diagonal too (keys j < i only)",
            "flash_attention_forward",
            edits=(("torch.arange(k_start, k_stop, device=Q.device) > rows", "torch.arange(k_start, k_stop, device=Q.device) >= rows"),),
            loses=("test_flash_attention_forward_causal",),
        ),
        says=("the first step that goes wrong is the causal mask inside the diagonal tile, on is_causal=True, T_q = 8, T_k = 8",),
    ),
    HeldOut(
        Variant(
            "flash_attention_forward scales the scores by 1/sqrt(d_v), V's head size",
            "flash_attention_forward",
            edits=(
                (
                    "scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale",
                    "scale = 1.0 / math.sqrt(V.shape[-1]) if scale is None else scale",
                ),
            ),
            loses=("test_flash_attention_forward",),  # the causal tests' V has Q's head size
        ),
        says=("the first step that goes wrong is head dimensions that differ and are not powers of two, on T_q = T_k = 8, d = 6",),
    ),
    HeldOut(
        Variant(
            "online_softmax_rows starts its running max at 0 instead of -inf",
            "online_softmax_rows",
            edits=(
                ('m = tl.full([1], float("-inf"), dtype=tl.float32)  # running max', "m = tl.zeros([1], dtype=tl.float32)  # running max"),
            ),
            loses=("test_online_softmax_rows",),  # the hidden row near -200 underflows to 0 / 0
        ),
        says=("the first step that goes wrong is the softmax of one block on rows of extreme scores, on x [3, 16]",),
    ),
    HeldOut(
        Variant(
            "online_softmax_stats adds each block's sum relative to the block's own max, not the running max",
            "online_softmax",
            edits=(("torch.exp(block - shift).sum(dim=-1, keepdim=True)", "torch.exp(block - block_max).sum(dim=-1, keepdim=True)"),),
            loses=("test_online_softmax", "test_online_softmax_is_stable", "test_online_softmax_one_pass"),
        ),
        says=("the first step that goes wrong is carrying the running max and sum past blocks below it, on x [2, 48] = 47, 46, ..., 0",),
    ),
]
