"""Notebook 06: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

MULTIPLY_ADDS = "attention_flops counts multiply-adds instead of FLOPs"  # catalogued

HELD_OUT = [
    HeldOut(
        Variant(
            "attention_flops squares T_q (assumes as many keys as queries)",
            "attention_flops",
            edits=(("batch * heads * T_q * T_k * (d_k + d_v)", "batch * heads * T_q * T_q * (d_k + d_v)"),),
            loses=("test_attention_flops_with_d_v", "test_attention_flops"),
        ),
        says=("attention_flops(1, 3, 10, 30, d_k=8, d_v=32): got 24000, expected 72000",),
    ),
    HeldOut(
        Variant(
            "attention_score_bytes counts bits (torch.finfo(dtype).bits), not bytes",
            "attention_score_bytes",
            edits=(("* dtype.itemsize", "* torch.finfo(dtype).bits"),),
            loses=("test_attention_score_bytes",),
        ),
        says=("attention_score_bytes(1, 32, 8192, 8192, torch.float32): got 68719476736",),
    ),
    HeldOut(
        Variant(
            "fit_scaling_exponent takes the slope between the two end points",
            "fit_scaling_exponent",
            edits=(
                (
                    "slope, _intercept = np.polyfit(np.log(x), np.log(y), deg=1)",
                    "slope = (np.log(y[-1]) - np.log(y[0])) / (np.log(x[-1]) - np.log(x[0]))",
                ),
            ),
            loses=("test_fit_scaling_exponent",),
        ),
        says=("fit_scaling_exponent([128, 256, 512, 1024, 2048], [0.011, 0.04, 0.17, 0.63, 2.7]) gave",),
    ),
    HeldOut(
        Variant(
            "chunked_attention slices every mask by the chunk's rows, a single-row mask too",
            "chunked_attention",
            edits=(
                ("rows = attn_mask if attn_mask.shape[-2] == 1 else attn_mask[..., start:stop, :]", "rows = attn_mask[..., start:stop, :]"),
            ),
            loses=("test_chunked_attention_masks",),
        ),
        says=("chunked_attention(..., chunk_size=4, attn_mask=bool [B, 1, 1, T_k]): raised RuntimeError",),
    ),
    HeldOut(
        Variant(
            "attention_flops counts Q K^T only (leaves out P V)",
            "attention_flops",
            edits=(("batch * heads * T_q * T_k * (d_k + d_v)", "batch * heads * T_q * T_k * d_k"),),
            loses=("test_attention_flops", "test_attention_flops_with_d_v"),
        ),
        says=(
            "attention_flops(1, 1, 100, 100, 64, 64): got 1280000, expected 2560000",
            "attention_flops(1, 3, 10, 30, d_k=8, d_v=32): got 14400, expected 72000",
        ),
        named=(
            (
                "test_attention_flops",
                MULTIPLY_ADDS,
                "d_k = d_v in every call of this test, where 2 T_q T_k d_k is T_q T_k (d_k + d_v): the multiply-add count",
            ),
        ),
    ),
    HeldOut(
        Variant(
            "attention_flops leaves out the heads (counts one head per batch element)",
            "attention_flops",
            edits=(("batch * heads * T_q * T_k * (d_k + d_v)", "batch * T_q * T_k * (d_k + d_v)"),),
            loses=("test_attention_flops", "test_attention_flops_with_d_v"),
        ),
        says=("attention_flops(2, 8, 128, 128, 64, 64): got 8388608, expected 67108864",),
    ),
    HeldOut(
        Variant(
            "attention_score_bytes returns GiB (divides by 2**30), not bytes",
            "attention_score_bytes",
            edits=(("* dtype.itemsize", "* dtype.itemsize / 2**30"),),
            loses=("test_attention_score_bytes",),
        ),
        says=("attention_score_bytes(1, 32, 8192, 8192, torch.float32): got 8.0, expected 8589934592",),
    ),
    HeldOut(
        Variant(
            "fit_scaling_exponent regresses log size on log cost (the axes swapped)",
            "fit_scaling_exponent",
            edits=(("np.polyfit(np.log(x), np.log(y), deg=1)", "np.polyfit(np.log(y), np.log(x), deg=1)"),),
            loses=("test_fit_scaling_exponent",),
        ),
        says=("fit_scaling_exponent on cost = 3e-09 * n**2.0 gave 0.", ", expected 2.0."),
    ),
    HeldOut(
        Variant(
            "fit_scaling_exponent unpacks polyfit's coefficients the wrong way round (returns the intercept)",
            "fit_scaling_exponent",
            edits=(("slope, _intercept = np.polyfit", "_intercept, slope = np.polyfit"),),
            loses=("test_fit_scaling_exponent",),
        ),
        says=("fit_scaling_exponent on cost = 3e-09 * n**2.0 gave -19.62",),
    ),
]
