"""Notebook 02: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

PAIRS = "projected_q.unsqueeze(-2) + projected_k.unsqueeze(-3)"
WEIGHTS = "weights = torch.softmax(dot_product_scores(Q, K), dim=-1)"
BANDWIDTH = "answer_bandwidth_limit"
NO_TANH = "answer_additive_without_tanh"
SHARED_MAP = "answer_shared_embedding_map"
BANDWIDTH_RIGHT = '.letter_of("nearest", options)'  # the student's letter of the right option, in the solution
NO_TANH_RIGHT = '.letter_of("same_rows", options)'


MISTAKES = [
    Variant(
        "dot_product_scores uses K.T on batched tensors",
        "dot_product_scores",
        edits=(("K.transpose(-2, -1)", "K.T"),),
        loses=("test_dot_product_scores_batched",),
    ),
    Variant("general_scores uses W transposed", "general_scores", edits=(("Q @ W @", "Q @ W.T @"),), loses=("test_general_scores",)),
    Variant(
        "additive_scores without the tanh",
        "additive_scores",
        edits=((f"torch.tanh({PAIRS})", f"({PAIRS})"),),
        loses=("test_additive_scores",),
    ),
    Variant(
        "additive_scores adds queries and keys position by position",
        "additive_scores",
        edits=((PAIRS, "projected_q + projected_k"),),
        loses=("test_additive_scores_shapes", "test_additive_scores"),
    ),
    Variant(
        "cosine_scores normalises only the queries",
        "cosine_scores",
        edits=(("unit_k = K / K.norm(dim=-1, keepdim=True).clamp_min(eps)", "unit_k = K"),),
        loses=("test_cosine_scores", "test_cosine_scores_zero_vector"),  # the eps case compares the whole formula too
    ),
    Variant(
        "cosine_scores ignores its eps argument (a fixed 1e-8)",
        "cosine_scores",
        edits=((".clamp_min(eps)", ".clamp_min(1e-8)"),),
        loses=("test_cosine_scores_zero_vector",),
    ),
    Variant(
        "cosine_scores divides by the norm without eps (0 / 0 = nan)",
        "cosine_scores",
        edits=((".clamp_min(eps)", ""),),
        loses=("test_cosine_scores_zero_vector",),
    ),
    Variant(
        "dot_product_attention takes the softmax over the queries",
        "dot_product_attention",
        edits=((WEIGHTS, WEIGHTS.replace("dim=-1", "dim=-2")),),
        loses=(
            "test_dot_product_attention_softmax_over_keys",
            "test_dot_product_attention_worked_examples",
            "test_dot_product_attention_matches_sdpa",
            "test_dot_product_attention_gradients",
        ),
    ),
    Variant(
        "dot_product_attention divides by sqrt(d_k) (it is the unscaled version)",
        "dot_product_attention",
        edits=((WEIGHTS, "weights = torch.softmax(dot_product_scores(Q, K) / Q.shape[-1] ** 0.5, dim=-1)"),),
        loses=(
            "test_dot_product_attention_worked_examples",
            "test_dot_product_attention_matches_sdpa",
            "test_dot_product_attention_gradients",
        ),
    ),
    Variant(
        "dot_product_attention detaches the weights from the graph",
        "dot_product_attention",
        edits=((WEIGHTS, WEIGHTS + ".detach()"),),
        loses=("test_dot_product_attention_gradients",),
    ),
    # The graded questions: the typical slips, each caught by the question's own test.
    Variant(
        "bandwidth limit: w -> infinity taken for w -> 0 (the mean of all targets)",
        BANDWIDTH,
        edits=((BANDWIDTH_RIGHT, '.letter_of("mean", options)'),),
        loses=("test_answer_bandwidth_limit",),
    ),
    Variant(
        "bandwidth limit: a sharp kernel believed to recover the true f",
        BANDWIDTH,
        edits=((BANDWIDTH_RIGHT, '.letter_of("true", options)'),),
        loses=("test_answer_bandwidth_limit",),
    ),
    Variant(
        "additive without tanh: believed to change nothing",
        NO_TANH,
        edits=((NO_TANH_RIGHT, '.letter_of("unchanged", options)'),),
        loses=("test_answer_additive_without_tanh",),
    ),
    Variant(
        "additive without tanh: believed to make the scores symmetric",
        NO_TANH,
        edits=((NO_TANH_RIGHT, '.letter_of("symmetric", options)'),),
        loses=("test_answer_additive_without_tanh",),
    ),
    Variant(
        "shared-embedding map: only the rows checked (the one-query map, whose two 'the' columns differ)",
        SHARED_MAP,
        edits=(
            (
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("shared", maps)\n',
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("same_query", maps)\n',
            ),
        ),
        loses=("test_answer_shared_embedding_map",),
    ),
    Variant(
        "shared-embedding map: the clean diagonal of Q = K taken (each position its own vector)",
        SHARED_MAP,
        edits=(
            (
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("shared", maps)\n',
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("own", maps)\n',
            ),
        ),
        loses=("test_answer_shared_embedding_map",),
    ),
    Variant(
        "shared-embedding map: the first-token map taken (its rows all look alike)",
        SHARED_MAP,
        edits=(
            (
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("shared", maps)\n',
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("sink", maps)\n',
            ),
        ),
        loses=("test_answer_shared_embedding_map",),
    ),
]

CORRECT_VARIANTS = [
    Variant(
        "dot_product_scores with einsum",
        "dot_product_scores",
        of="""
def dot_product_scores(Q, K):
    return torch.einsum("...qd,...kd->...qk", Q, K)
""",
    ),
    Variant(
        "general_scores with einsum",
        "general_scores",
        of="""
def general_scores(Q, K, W):
    return torch.einsum("...qi,ij,...kj->...qk", Q, W, K)
""",
    ),
    Variant(
        "additive_scores with a loop over the keys",
        "additive_scores",
        of="""
def additive_scores(Q, K, W_q, W_k, v):
    columns = []
    for j in range(K.shape[-2]):
        hidden = torch.tanh(Q @ W_q.T + (K[..., j, :] @ W_k.T).unsqueeze(-2))   # [..., T_q, d_a]
        columns.append(hidden @ v)                                               # [..., T_q]
    return torch.stack(columns, dim=-1)
""",
    ),
    Variant(
        "cosine_scores in float64 inside, with vector_norm",
        "cosine_scores",
        of="""
def cosine_scores(Q, K, eps=1e-8):
    q, k = Q.double(), K.double()
    q = q / torch.linalg.vector_norm(q, dim=-1, keepdim=True).clamp_min(eps)
    k = k / torch.linalg.vector_norm(k, dim=-1, keepdim=True).clamp_min(eps)
    return (q @ k.mT).to(Q.dtype)
""",
    ),
    Variant(
        "dot_product_attention with einsum and its own stable softmax",
        "dot_product_attention",
        of="""
def dot_product_attention(Q, K, V):
    scores = torch.einsum("...qd,...kd->...qk", Q, K)
    exponentials = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    weights = exponentials / exponentials.sum(dim=-1, keepdim=True)
    return torch.einsum("...qk,...kv->...qv", weights, V), weights
""",
    ),
    Variant(
        "bandwidth limit as an upper-case letter with spaces",
        BANDWIDTH,
        edits=(
            (
                '    return question_values("02_dot_product_attention", "bandwidth_limit").letter_of("nearest", options)\n',
                '    return " " + question_values("02_dot_product_attention", "bandwidth_limit").letter_of("nearest", options).upper() + " "\n',
            ),
        ),
    ),
    Variant(
        "additive without tanh as an upper-case letter",
        NO_TANH,
        edits=(
            (
                '    return question_values("02_dot_product_attention", "additive_without_tanh").letter_of("same_rows", options)\n',
                '    return question_values("02_dot_product_attention", "additive_without_tanh").letter_of("same_rows", options).upper()\n',
            ),
        ),
    ),
    Variant(
        "shared-embedding map as an upper-case letter",
        SHARED_MAP,
        edits=(
            (
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("shared", maps)\n',
                '    return question_values("02_dot_product_attention", "shared_embedding_map").letter_of("shared", maps).upper()\n',
            ),
        ),
    ),
]
