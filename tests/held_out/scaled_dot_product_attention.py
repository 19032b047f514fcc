"""Notebook 03: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

HELD_OUT = [
    HeldOut(
        Variant(
            "scaled_dot_product_attention takes d_k from the wrong axis of Q (the number of queries)",
            "scaled_dot_product_attention",
            edits=(("1.0 / math.sqrt(Q.shape[-1])", "1.0 / math.sqrt(Q.shape[-2])"),),
            loses=("test_sdpa_scale_by_sqrt_dk", "test_sdpa_matches_builtin"),
        ),
        says=("AssertionError: weights for scores [2, 0] with d_k = 4", "AssertionError: output vs F.scaled_dot_product_attention"),
    ),
    HeldOut(
        Variant(
            "softmax_jacobian takes a softmax of the weights again",
            "softmax_jacobian",
            edits=(
                ("    outer = weights.unsqueeze(-1)", "    weights = torch.softmax(weights, dim=-1)\n    outer = weights.unsqueeze(-1)"),
            ),
            loses=("test_softmax_jacobian_matches_autograd", "test_softmax_jacobian_batched", "test_softmax_jacobian_saturated"),
        ),
        says=("Jacobian vs torch.autograd.functional.jacobian: 16 of 16 entries differ", "AssertionError: Jacobian of a saturated row"),
    ),
    HeldOut(
        Variant(
            "train_matching_attention projects the keys with W_Q too",
            "train_matching_attention",
            edits=(("(keys @ W_K).transpose(-2, -1) / math.sqrt(d_k)", "(keys @ W_Q).transpose(-2, -1) / math.sqrt(d_k)"),),
            loses=("test_matching_loss_is_cross_entropy", "test_matching_attention_learns"),
        ),
        says=("AssertionError: losses[0] vs F.cross_entropy of the initial scores", "after training, held-out queries put"),
    ),
    HeldOut(
        Variant(
            "train_matching_attention scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_k)",
            "train_matching_attention",
            edits=(("(keys @ W_K).transpose(-2, -1) / math.sqrt(d_k)", "(keys @ W_K).transpose(-2, -1) / math.sqrt(d_model)"),),
            loses=("test_matching_loss_is_cross_entropy",),
        ),
        says=("AssertionError: losses[0] vs F.cross_entropy of the initial scores",),
    ),
]
