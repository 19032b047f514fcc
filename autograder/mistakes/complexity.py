"""Notebook 06: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant, answered

CHUNKED = "chunked_attention"
CHUNK_LOOP = "for start in range(0, T_q, chunk_size):"
CAUSAL_ROWS = "torch.arange(start, stop, device=Q.device)[:, None]"
FIT = "np.polyfit(np.log(x), np.log(y), deg=1)"
BOUND = "answer_tiled_kernel_bound"


def _bound(option: str) -> str:
    """Source for the student's letter of ``option`` (the options are shuffled per student)."""
    return f'question_values("06_complexity", "tiled_kernel_bound").letter("{option}")'


MISTAKES = [
    Variant(
        "attention_flops counts multiply-adds instead of FLOPs",
        "attention_flops",
        edits=(("return 2 * multiply_adds", "return multiply_adds"),),
        loses=("test_attention_flops", "test_attention_flops_with_d_v"),
    ),
    Variant(
        "attention_flops ignores d_v (uses d_k for both products)",
        "attention_flops",
        edits=(("(d_k + d_v)", "(2 * d_k)"),),
        loses=("test_attention_flops_with_d_v",),
    ),
    Variant(
        "attention_score_bytes ignores the dtype's size (always 4 bytes)",
        "attention_score_bytes",
        edits=(("* dtype.itemsize", "* 4"),),
        loses=("test_attention_score_bytes",),
    ),
    Variant(
        "chunked_attention drops the last partial chunk",
        CHUNKED,
        edits=((CHUNK_LOOP, "for start in range(0, T_q - chunk_size + 1, chunk_size):"),),
        loses=("test_chunked_attention_last_partial_chunk",),
    ),
    Variant(
        "chunked_attention builds the causal mask relative to the chunk",
        CHUNKED,
        edits=((CAUSAL_ROWS, "torch.arange(stop - start, device=Q.device)[:, None]"),),
        loses=("test_chunked_attention_causal", "test_chunked_attention_last_partial_chunk"),
    ),
    Variant(
        "chunked_attention leaves NaN on fully masked rows",
        CHUNKED,
        edits=(("weights = weights.nan_to_num(0.0)", "pass"),),
        loses=("test_chunked_attention_masks", "test_chunked_attention_last_partial_chunk"),
    ),
    Variant(
        "chunked_attention keeps every chunk's weights until the end",
        CHUNKED,
        edits=(
            ("outputs = []", "outputs, kept = [], []"),
            ("outputs.append(weights @ V)", "kept.append(weights)"),
            ("return torch.cat(outputs, dim=-2)", "return torch.cat([w @ V for w in kept], dim=-2)"),
        ),
        loses=("test_chunked_attention_memory",),
    ),
    Variant(
        "chunked_attention materialises the whole score matrix",
        CHUNKED,
        source="""
def chunked_attention(Q, K, V, chunk_size, attn_mask=None, is_causal=False, scale=None):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    if attn_mask is not None and is_causal:
        raise ValueError("attn_mask or is_causal, not both")
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    scores = Q @ K.transpose(-2, -1) * scale                       # all T_q x T_k at once
    if is_causal:
        attn_mask = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ V
""",
        loses=("test_chunked_attention_memory",),
    ),
    Variant(
        "fit_scaling_exponent fits a line on linear axes",
        "fit_scaling_exponent",
        edits=((FIT, "np.polyfit(x, y, deg=1)"),),
        loses=("test_fit_scaling_exponent",),
    ),
    Variant(
        "fit_scaling_exponent does not check its input",
        "fit_scaling_exponent",
        edits=(
            ('raise ValueError(f"need two 1-D sequences of the same length (at least 2), got {x.shape} and {y.shape}")', "pass"),
            ('raise ValueError("sizes and costs must be positive: their logarithms are fitted")', "pass"),
        ),
        loses=("test_fit_scaling_exponent_rejects_bad_input",),
    ),
    # The graded questions: the typical slips, each caught by the question's own test.
    answered(
        "the tiled kernel called compute-bound (the cap read as above the ridge)",
        BOUND,
        _bound("compute"),
        loses=("test_tiled_kernel_bound_answer",),
    ),
    answered("the tiled kernel's intensity thought to grow with T", BOUND, _bound("grows"), loses=("test_tiled_kernel_bound_answer",)),
]

CORRECT_VARIANTS = [
    Variant(
        "attention_flops as a float, counting each product separately",
        "attention_flops",
        source="""
def attention_flops(batch, heads, T_q, T_k, d_k, d_v):
    scores = 2.0 * T_q * T_k * d_k          # QK^T
    output = 2.0 * T_q * T_k * d_v          # PV
    return batch * heads * (scores + output)
""",
    ),
    Variant(
        "attention_score_bytes with element_size",
        "attention_score_bytes",
        source="""
def attention_score_bytes(batch, heads, T_q, T_k, dtype):
    return batch * heads * T_q * T_k * torch.empty((), dtype=dtype).element_size()
""",
    ),
    Variant(
        "chunked_attention with einsum, float64 inside and tril offsets",
        CHUNKED,
        source="""
def chunked_attention(Q, K, V, chunk_size, attn_mask=None, is_causal=False, scale=None):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask or is_causal, not both")
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    q_all, k, v = Q.double(), K.double(), V.double()
    pieces = []
    for start, q in zip(range(0, T_q, chunk_size), q_all.split(chunk_size, dim=-2)):
        s = torch.einsum("...qd,...kd->...qk", q, k) * scale
        if is_causal:
            s = s.masked_fill(~torch.ones(q.shape[-2], T_k, dtype=torch.bool).tril(start), -math.inf)
        if attn_mask is not None:
            m = attn_mask if attn_mask.shape[-2] == 1 else attn_mask[..., start:start + q.shape[-2], :]
            s = s.masked_fill(~m, -math.inf) if m.dtype == torch.bool else s + m.double()
        row_max = s.amax(dim=-1, keepdim=True).clamp(min=-1e300)        # finite even for fully masked rows
        e = torch.exp(s - row_max)
        total = e.sum(dim=-1, keepdim=True)
        pieces.append(torch.einsum("...qk,...kd->...qd", e / torch.where(total > 0, total, 1.0), v))
    return torch.cat(pieces, dim=-2).to(Q.dtype)
""",
    ),
    Variant(
        "fit_scaling_exponent in closed form with torch and log2",
        "fit_scaling_exponent",
        source="""
def fit_scaling_exponent(sizes, costs):
    x = torch.as_tensor(sizes, dtype=torch.float64)
    y = torch.as_tensor(costs, dtype=torch.float64)
    if x.dim() != 1 or x.shape != y.shape or x.numel() < 2:
        raise ValueError("sizes and costs: two 1-D sequences of the same length, at least 2")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("sizes and costs must be positive")
    lx, ly = torch.log2(x), torch.log2(y)
    lx, ly = lx - lx.mean(), ly - ly.mean()
    return ((lx * ly).sum() / (lx * lx).sum()).item()
""",
    ),
    answered("the bound as an upper-case letter with spaces", BOUND, '" " + ' + _bound("memory") + '.upper() + " "'),
]
