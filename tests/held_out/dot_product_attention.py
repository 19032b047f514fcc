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
    HeldOut(
        Variant(
            "dot_product_scores multiplies Q and K entry by entry and sums ((Q * K).sum(-1)), one score per position",
            "dot_product_scores",
            edits=(("return Q @ K.transpose(-2, -1)", "return (Q * K).sum(dim=-1)"),),
            loses=("test_dot_product_scores_worked", "test_dot_product_scores_batched"),
        ),
        says=(
            "dot_product_scores(q=[[1, 0, 1]], K=[[1, 0, 1], [0, 1, 0]]): expected shape [1, 2], got [2]",
            "dot_product_scores(<Tensor>, <Tensor>): raised RuntimeError: The size of tensor a (4) must match the size of tensor b (6)",
        ),
    ),
    HeldOut(
        Variant(
            "dot_product_scores swaps dims 0 and 1 of K (right for 2-D keys only)",
            "dot_product_scores",
            edits=(("K.transpose(-2, -1)", "K.transpose(0, 1)"),),
            loses=("test_dot_product_scores_batched",),
        ),
        says=("dot_product_scores(<Tensor>, <Tensor>): raised RuntimeError: The size of tensor a (3) must match the size of tensor b (2)",),
    ),
    HeldOut(
        Variant(
            "general_scores forgets to transpose K (Q W K)",
            "general_scores",
            edits=(("return Q @ W @ K.transpose(-2, -1)", "return Q @ W @ K"),),
            loses=("test_general_scores",),
        ),
        says=(
            "general_scores(<Tensor>, <Tensor>, <Tensor>): raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x4 and 5x4)",
        ),
    ),
    HeldOut(
        Variant(
            "general_scores uses K.T, which reverses every dim of batched keys",
            "general_scores",
            edits=(("return Q @ W @ K.transpose(-2, -1)", "return Q @ W @ K.T"),),
            loses=("test_general_scores",),
        ),
        says=(
            "general_scores(<Tensor>, <Tensor>, <Tensor>): raised RuntimeError: The size of tensor a (2) must match the size of tensor b (5)",
        ),
    ),
    HeldOut(
        Variant(
            "additive_scores projects with W_q and W_k untransposed (Q @ W_q)",
            "additive_scores",
            edits=(("projected_q = Q @ W_q.T", "projected_q = Q @ W_q"), ("projected_k = K @ W_k.T", "projected_k = K @ W_k")),
            loses=("test_additive_scores", "test_additive_scores_shapes"),
        ),
        says=(
            "additive_scores(<Tensor>, <Tensor>, <Tensor>, <Tensor>, <Tensor>): raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x4 and 6x4)",
            "mat1 and mat2 shapes cannot be multiplied (6x4 and 6x4)",
        ),
    ),
    HeldOut(
        Variant(
            "dot_product_attention divides exp(scores) by their sum, without subtracting the row max",
            "dot_product_attention",
            edits=(
                (
                    "weights = torch.softmax(dot_product_scores(Q, K), dim=-1)",
                    "scores = dot_product_scores(Q, K)\n    weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)",
                ),
            ),
            loses=("test_dot_product_attention_matches_sdpa",),
        ),
        says=(
            "dot_product_attention with scores near -1600 (float32): output vs F.scaled_dot_product_attention: 18 of 18 entries are NaN where a number was expected",
        ),
    ),
]
