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
    HeldOut(
        Variant(
            "softmax_jacobian subtracts the inner product a . a from every entry instead of the outer product a a^T",
            "softmax_jacobian",
            edits=(("weights.unsqueeze(-1) * weights.unsqueeze(-2)", "weights @ weights"),),
            loses=("test_softmax_jacobian_matches_autograd", "test_softmax_jacobian_batched", "test_softmax_jacobian_saturated"),
        ),
        says=(
            "Jacobian vs torch.autograd.functional.jacobian: 16 of 16 entries differ; largest error 0.539 at index (1, 1): got -0.504478, expected 0.0341039",
            "softmax_jacobian(weights [2, 3, 5]): raised RuntimeError",
            "Jacobian of uniform weights: 16 of 16 entries differ",
        ),
    ),
    HeldOut(
        Variant(
            "softmax_jacobian unsqueezes the same axis twice, so row i holds a_i^2 where a_i a_j belongs",
            "softmax_jacobian",
            edits=(("weights.unsqueeze(-1) * weights.unsqueeze(-2)", "weights.unsqueeze(-1) * weights.unsqueeze(-1)"),),
            loses=("test_softmax_jacobian_matches_autograd", "test_softmax_jacobian_batched", "test_softmax_jacobian_saturated"),
        ),
        says=(
            "Jacobian vs torch.autograd.functional.jacobian: 12 of 16 entries differ",
            "batched Jacobians vs autograd row by row: 120 of 150 entries differ",
            "Jacobian of a saturated row: 3 of 16 entries differ; largest error 1 at index (0, 1): got -1, expected 0",
        ),
    ),
    HeldOut(
        Variant(
            "softmax_jacobian asks autograd for the Jacobian of the whole batch at once (every row against every row)",
            "softmax_jacobian",
            edits=(
                (
                    "    outer = weights.unsqueeze(-1) * weights.unsqueeze(-2)  # [..., n, n]: alpha_i alpha_j\n"
                    "    return torch.diag_embed(weights) - outer  # alpha_i delta_ij - alpha_i alpha_j\n",
                    "    return torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), torch.log(weights))\n",
                ),
            ),
            loses=("test_softmax_jacobian_batched",),
        ),
        says=("Jacobians of weights [2, 3, 5]: expected shape [2, 3, 5, 5], got [2, 3, 5, 2, 3, 5]",),
    ),
    HeldOut(
        Variant(
            "train_matching_attention seeds its generator with 0, whatever seed it is given",
            "train_matching_attention",
            edits=(("generator = torch.Generator().manual_seed(seed)", "generator = torch.Generator().manual_seed(0)"),),
            loses=("test_matching_init_variance",),
        ),
        says=(
            "train_matching_attention(d_model=16, d_k=4, steps=0): seeds 1 and 2 give initial matrices that differ by at most 0 (W_Q) and 0 (W_K)",
        ),
    ),
    HeldOut(
        Variant(
            "Question 2: thinks the largest |J| falls slowly from x = 0 on (neither the peak nor the exponential decay)",
            "answer_saturated_jacobian",
            edits=(('.letter_of("peaks_fast", options)', '.letter_of("falls_slowly", options)'),),
            loses=("test_answer_saturated_jacobian",),
        ),
        says=(
            "AssertionError: answer_saturated_jacobian(): '",
            "' is not the answer",
        ),
    ),
]
