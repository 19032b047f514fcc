"""Notebook 03: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

DEFAULT = "1.0 / math.sqrt(Q.shape[-1])"
SOFTMAX = "weights = torch.softmax(scores, dim=-1)"
CELL = "scaled_dot_product_attention"

MISTAKES = [
    Variant("scales by 1/d_k instead of 1/sqrt(d_k)", CELL, edits=((DEFAULT, "1.0 / Q.shape[-1]"),),
            loses=("test_sdpa_scale_by_sqrt_dk", "test_sdpa_worked_example", "test_sdpa_matches_builtin")),
    Variant("scales by 1/sqrt(d_v) instead of 1/sqrt(d_k)", CELL, edits=(("math.sqrt(Q.shape[-1])", "math.sqrt(V.shape[-1])"),),
            loses=("test_sdpa_scale_by_sqrt_dk", "test_sdpa_matches_builtin")),
    Variant("ignores the scale argument", CELL,
            edits=((f"    if scale is None:\n        scale = {DEFAULT}", f"    scale = {DEFAULT}"),), loses=("test_sdpa_scale_argument",)),
    Variant("treats scale=0 as not given", CELL, edits=(("if scale is None:", "if not scale:"),), loses=("test_sdpa_scale_argument",)),
    Variant("takes the softmax over the queries", CELL, edits=((SOFTMAX, SOFTMAX.replace("dim=-1", "dim=-2")),),
            loses=("test_sdpa_softmax_over_keys", "test_sdpa_worked_example", "test_sdpa_matches_builtin", "test_sdpa_scale_by_sqrt_dk",
                   "test_sdpa_scale_argument", "test_sdpa_batched", "test_sdpa_large_inputs", "test_sdpa_gradients")),
    Variant("uses K.T on batched tensors", CELL, edits=(("K.transpose(-2, -1)", "K.T"),),
            loses=("test_sdpa_batched", "test_sdpa_matches_builtin")),
    Variant("writes its own softmax without subtracting the max", CELL,
            edits=((SOFTMAX, "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)"),), loses=("test_sdpa_large_inputs",)),
    Variant("calls F.scaled_dot_product_attention for the output", CELL,
            edits=(("return weights @ V, weights", "return F.scaled_dot_product_attention(Q, K, V, scale=scale), weights"),),
            loses=("test_sdpa_no_builtin",)),
    Variant("detaches the weights from the graph", CELL, edits=((SOFTMAX, SOFTMAX + ".detach()"),), loses=("test_sdpa_gradients",)),
]

CORRECT_VARIANTS = [
    Variant("scaled_dot_product_attention with einsum", CELL, source='''
def scaled_dot_product_attention(Q, K, V, scale=None):
    s = Q.shape[-1] ** -0.5 if scale is None else scale
    weights = torch.softmax(torch.einsum("...qd,...kd->...qk", Q, K) * s, dim=-1)
    return torch.einsum("...qk,...kv->...qv", weights, V), weights
'''),
    Variant("scaled_dot_product_attention with weights exp(s - logsumexp(s)), in float32", CELL, source='''
def scaled_dot_product_attention(Q, K, V, scale=None):
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    s = Q @ K.transpose(-2, -1) * scale
    weights = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    return weights @ V, weights
'''),
    Variant("scaled_dot_product_attention query by query, in float64 inside", CELL, source='''
def scaled_dot_product_attention(Q, K, V, scale=None):
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    q, k, v = Q.double(), K.double(), V.double()
    outputs, weights = [], []
    for i in range(q.shape[-2]):
        s = (k @ q[..., i, :].unsqueeze(-1)).squeeze(-1) * scale        # [..., T_k]
        w = torch.exp(s - s.amax(dim=-1, keepdim=True))
        w = w / w.sum(dim=-1, keepdim=True)
        weights.append(w)
        outputs.append((w.unsqueeze(-2) @ v).squeeze(-2))               # [..., d_v]
    return torch.stack(outputs, dim=-2).to(Q.dtype), torch.stack(weights, dim=-2).to(Q.dtype)
'''),
]
