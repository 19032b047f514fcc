"""Notebook 04: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

HELD_OUT = [
    HeldOut(
        Variant(
            "causal_mask, bottom-right: the offset with its sign flipped (T_q - T_k)",
            "causal_mask",
            edits=(("offset = T_k - T_q if bottom_right else 0", "offset = T_q - T_k if bottom_right else 0"),),
            loses=("test_causal_mask_bottom_right", "test_causal_mask_unequal_lengths"),
        ),
        says=("causal_mask(2, 4, bottom_right=True): got tensor([[False, False, False, False]",),
    ),
    HeldOut(
        Variant(
            "padding_mask marks the padding True (nn.MultiheadAttention's convention)",
            "padding_mask",
            edits=(("positions.unsqueeze(0) < lengths", "positions.unsqueeze(0) >= lengths"),),
            loses=("test_padding_mask",),
        ),
        says=("padding_mask(lengths=[3, 1, 4], max_len=4): got tensor([[False, False, False, True]",),
    ),
    HeldOut(
        Variant(
            "sliding_window_mask measures j - i, so each query sees the keys after it",
            "sliding_window_mask",
            edits=(
                (
                    "torch.arange(T).unsqueeze(-1) - torch.arange(T).unsqueeze(0)",
                    "torch.arange(T).unsqueeze(0) - torch.arange(T).unsqueeze(-1)",
                ),
            ),
            loses=("test_sliding_window_mask",),
        ),
        says=("sliding_window_mask(4, window=2): got tensor([[True, True, False, False]",),
    ),
    HeldOut(
        Variant(
            "scaled_dot_product_attention scales after adding the mask (a float mask is scaled too)",
            "scaled_dot_product_attention",
            edits=(
                ("scores = (Q @ K.transpose(-2, -1)) * scale", "scores = Q @ K.transpose(-2, -1)"),
                ("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores * scale, dim=-1)"),
            ),
            loses=("test_masked_sdpa_float_mask",),
        ),
        says=("AssertionError: output with a float mask vs the built-in",),
    ),
]
