"""Notebook 06: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

CHUNKED = "chunked_attention"
CHUNK_LOOP = "for start in range(0, T_q, chunk_size):"
CAUSAL_ROWS = "torch.arange(start, stop, device=Q.device)[:, None]"
FIT = "np.polyfit(np.log(x), np.log(y), deg=1)"
BOUND = "answer_tiled_kernel_bound"
BOUND_LETTER = 'kernel.letter_of("memory" if cap < ridge else "compute", options)'  # the student's letter of the bound


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
        edits=(
            (
                '        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")\n',
                '        raise ValueError("chunk_size must be at least 1")\n',
            ),
            (
                (
                    '        raise ValueError("pass either attn_mask or is_causal, not both")\n'
                    "    T_q, T_k = Q.shape[-2], K.shape[-2]\n"
                    "    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale\n"
                    "    keys_t = K.transpose(-2, -1)  # [..., d_k, T_k], a view\n"
                    "    outputs = []\n"
                    "    for start in range(0, T_q, chunk_size):  # the last chunk may be shorter\n"
                    "        stop = min(start + chunk_size, T_q)\n"
                    "        scores = Q[..., start:stop, :] @ keys_t * scale  # [..., c, T_k]\n"
                    "        if is_causal:\n"
                    "            query_pos = torch.arange(start, stop, device=Q.device)[:, None]  # positions in the whole sequence\n"
                    "            allowed = query_pos >= torch.arange(T_k, device=Q.device)\n"
                    '            scores = scores.masked_fill(~allowed, float("-inf"))\n'
                    "        elif attn_mask is not None:\n"
                    "            rows = attn_mask if attn_mask.shape[-2] == 1 else attn_mask[..., start:stop, :]\n"
                    '            scores = scores.masked_fill(~rows, float("-inf")) if rows.dtype == torch.bool else scores + rows\n'
                    "        weights = torch.softmax(scores, dim=-1)\n"
                    "        del scores\n"
                    "        weights = weights.nan_to_num(0.0)  # fully masked rows: 0/0 -> zeros\n"
                    "        outputs.append(weights @ V)\n"
                    "    return torch.cat(outputs, dim=-2)\n"
                ),
                (
                    '        raise ValueError("attn_mask or is_causal, not both")\n'
                    "    scale = Q.shape[-1] ** -0.5 if scale is None else scale\n"
                    "    scores = Q @ K.transpose(-2, -1) * scale                       # all T_q x T_k at once\n"
                    "    if is_causal:\n"
                    "        attn_mask = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril()\n"
                    "    if attn_mask is not None:\n"
                    '        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask\n'
                    "    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ V\n"
                ),
            ),
        ),
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
    Variant(
        "the tiled kernel called compute-bound (the cap read as above the ridge)",
        BOUND,
        edits=(
            (
                BOUND_LETTER,
                'kernel.letter_of("compute", options)',
            ),
        ),
        loses=("test_tiled_kernel_bound_answer",),
    ),
    Variant(
        "the tiled kernel's intensity thought to grow with T",
        BOUND,
        edits=(
            (
                BOUND_LETTER,
                'kernel.letter_of("grows", options)',
            ),
        ),
        loses=("test_tiled_kernel_bound_answer",),
    ),
]

CORRECT_VARIANTS = [
    Variant(
        "attention_flops as a float, counting each product separately",
        "attention_flops",
        of="""
def attention_flops(batch, heads, T_q, T_k, d_k, d_v):
    scores = 2.0 * T_q * T_k * d_k          # QK^T
    output = 2.0 * T_q * T_k * d_v          # PV
    return batch * heads * (scores + output)
""",
    ),
    Variant(
        "attention_score_bytes with element_size",
        "attention_score_bytes",
        of="""
def attention_score_bytes(batch, heads, T_q, T_k, dtype):
    return batch * heads * T_q * T_k * torch.empty((), dtype=dtype).element_size()
""",
    ),
    Variant(
        "chunked_attention with einsum, float64 inside and tril offsets",
        CHUNKED,
        of="""
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
        of="""
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
    Variant(
        "the bound as an upper-case letter with spaces",
        BOUND,
        edits=(
            (
                BOUND_LETTER,
                '" " + kernel.letter_of("memory", options).upper() + " "',
            ),
        ),
    ),
]
