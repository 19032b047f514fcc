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
    HeldOut(
        Variant(
            "padding_mask compares the positions with the lengths without lining them up (no unsqueeze)",
            "padding_mask",
            edits=(("positions.unsqueeze(0) < lengths.unsqueeze(-1)", "positions < lengths"),),
            loses=("test_padding_mask",),
        ),
        says=("padding_mask(<Tensor>, 4): raised RuntimeError: The size of tensor a (4) must match the size of tensor b (3)",),
    ),
    HeldOut(
        Variant(
            "padding_mask pads to the longest length instead of max_len",
            "padding_mask",
            edits=(
                (
                    "positions = torch.arange(max_len, device=lengths.device)",
                    "positions = torch.arange(int(lengths.max()), device=lengths.device)",
                ),
            ),
            loses=("test_padding_mask",),
        ),
        says=("padding_mask([5, 3, 3, 4, 0], 6) vs the solution: expected shape [5, 6], got [5, 5]",),
    ),
    HeldOut(
        Variant(
            "sliding_window_mask keeps one key too few (i - j < window - 1)",
            "sliding_window_mask",
            edits=(("(distance < window)", "(distance < window - 1)"),),
            loses=("test_sliding_window_mask",),
        ),
        says=("sliding_window_mask(4, window=2): got tensor([[True, False, False, False], [False, True, False, False]",),
    ),
    HeldOut(
        Variant(
            "masked attention divides exp(scores) by their sum, without subtracting the row max",
            "scaled_dot_product_attention",
            edits=(
                (
                    "weights = torch.softmax(scores, dim=-1).masked_fill(nothing_to_attend, 0.0)",
                    "weights = (scores.exp() / scores.exp().sum(dim=-1, keepdim=True)).masked_fill(nothing_to_attend, 0.0)",
                ),
            ),
            loses=("test_masked_sdpa_bool_mask",),
        ),
        says=(
            "bool mask, scores near -4500, equal along each row (float32): output vs the built-in: 30 of 30 entries are NaN where a number was expected",
        ),
    ),
    HeldOut(
        Variant(
            "bottom-right count with the offset's sign flipped (T_q - T_k)",
            "answer_bottom_right_true_count",
            edits=(
                (
                    "return T_q * (T_k - T_q) + T_q * (T_q + 1) // 2",
                    "return sum(min(max(i + 1 + T_q - T_k, 0), T_k) for i in range(T_q))",
                ),
            ),
            loses=("test_answer_bottom_right_true_count",),
        ),
        says=(
            "AssertionError: answer_bottom_right_true_count(): ",
            " is not the answer",
        ),
    ),
    HeldOut(
        Variant(
            "float 0/1 mask: the weight of one future key instead of all of them together",
            "answer_float_mask_future_weight",
            edits=(("return future / (allowed * math.e + future)", "return 1 / (allowed * math.e + future)"),),
            loses=("test_answer_float_mask_future_weight",),
        ),
        says=(
            "AssertionError: answer_float_mask_future_weight(): ",
            " is not the answer (numbers are accepted within 1%)",
        ),
    ),
]
