"""Notebook 02: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

HELD_OUT = [
    HeldOut(
        Variant(
            "dot_product_scores returns K Q^T, the scores transposed ([T_k, T_q])",
            "dot_product_scores",
            edits=(("return Q @ K.transpose(-2, -1)", "return K @ Q.transpose(-2, -1)"),),
            loses=("test_dot_product_scores_worked", "test_dot_product_scores_batched"),
        ),
        says=("dot_product_scores(q=[[1, 0, 1]], K=[[1, 0, 1], [0, 1, 0]]): expected shape [1, 2], got [2, 1]",),
    ),
    HeldOut(
        Variant(
            "additive_scores pairs keys with queries the wrong way round ([T_k, T_q])",
            "additive_scores",
            edits=(("projected_q.unsqueeze(-2) + projected_k.unsqueeze(-3)", "projected_q.unsqueeze(-3) + projected_k.unsqueeze(-2)"),),
            loses=("test_additive_scores", "test_additive_scores_shapes"),
        ),
        says=("additive_scores(q=[[0.5]], K=[[0.5], [-0.5], [1.0]], W_q=W_k=[[1]], v=[2]): expected shape [1, 3], got [3, 1]",),
    ),
    HeldOut(
        Variant(
            "cosine_scores adds eps to each norm instead of clamping it",
            "cosine_scores",
            edits=(
                ("Q / Q.norm(dim=-1, keepdim=True).clamp_min(eps)", "Q / (Q.norm(dim=-1, keepdim=True) + eps)"),
                ("K / K.norm(dim=-1, keepdim=True).clamp_min(eps)", "K / (K.norm(dim=-1, keepdim=True) + eps)"),
            ),
            loses=("test_cosine_scores", "test_cosine_scores_zero_vector"),
        ),
        says=("cosine_scores vs F.cosine_similarity (torch.float64)", "cosine_scores(Q, K, eps=0.5) with vectors shorter than eps"),
    ),
    HeldOut(
        Variant(
            "dot_product_attention calls F.softmax without dim (dim 0 for 3-D scores)",
            "dot_product_attention",
            edits=(("torch.softmax(dot_product_scores(Q, K), dim=-1)", "F.softmax(dot_product_scores(Q, K))"),),
            loses=("test_dot_product_attention_matches_sdpa", "test_dot_product_attention_gradients"),
        ),
        says=(
            "AssertionError: output for Q [2, 3, 4], K [2, 5, 4], V [2, 5, 6]",
            "gradient with respect to Q vs F.scaled_dot_product_attention",
        ),
    ),
]
