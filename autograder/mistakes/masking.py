"""Notebook 04: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

SDPA = "scaled_dot_product_attention"
BOOL_FILL = 'scores.masked_fill(~attn_mask, float("-inf"))'
CAUSAL = "causal_mask(Q.shape[-2], K.shape[-2], device=Q.device)"
EMPTY_SCORES = "    scores = scores.masked_fill(nothing_to_attend, 0.0)  # any finite score: no NaN, forward or backward\n"
FULLY_MASKED = ("test_masked_sdpa_fully_masked_rows", "test_masked_sdpa_fully_masked_rows_gradients")
PACKED = "packed_sequence_mask"
WITHIN = "mask = mask & (position.unsqueeze(-1) >= position.unsqueeze(0))"
PACKED_TESTS = ("test_packed_sequence_mask", "test_packed_sequence_mask_causal")
LEFT = "return [pairs, rows]"  # answer_left_padding_causal_counts, for the student's lengths and T
COUNT = "return T_q * (T_k - T_q) + T_q * (T_q + 1) // 2"  # answer_bottom_right_true_count, for the student's T_q, T_k
LEAK = "return future / (allowed * math.e + future)"  # answer_float_mask_future_weight
KPM = 'question_values("04_masking", "key_padding_mask_unconverted").letter_of("padding_only", options)'
LEFT_TEST = ("test_answer_left_padding_causal_counts",)

# The start of two float64 rewrites (a mistake and a correct variant): the mask as a float bias.
FLOAT64_BIAS = """
def scaled_dot_product_attention(Q, K, V, attn_mask=None, is_causal=False, scale=None):
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask and is_causal are exclusive")
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    q, k, v = Q.double(), K.double(), V.double()
    bias = torch.zeros(Q.shape[-2], K.shape[-2], dtype=torch.float64, device=Q.device)
    if is_causal:
        bias = bias.masked_fill(~torch.ones_like(bias, dtype=torch.bool).tril(), float("-inf"))
    elif attn_mask is not None:
        bias = torch.where(attn_mask, 0.0, float("-inf")).double() if attn_mask.dtype == torch.bool else attn_mask.double()
"""

# packed_sequence_mask's body, as the solution writes it: the mistakes below replace it whole
PACKED_BODY = (
    "    segment = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)  # [T]: which sequence\n"
    "    mask = segment.unsqueeze(-1) == segment.unsqueeze(0)  # same sequence\n"
    "    if causal:\n"
    "        position = torch.arange(len(segment), device=lengths.device)\n"
    "        mask = mask & (position.unsqueeze(-1) >= position.unsqueeze(0))  # and not in the future\n"
    "    return mask\n"
)


MISTAKES = [
    Variant(
        "causal_mask is always bottom-right",
        "causal_mask",
        edits=(("offset = T_k - T_q if bottom_right else 0", "offset = T_k - T_q"),),
        loses=("test_causal_mask_top_left", "test_causal_mask_unequal_lengths"),
    ),
    Variant(
        "causal_mask, bottom-right: the offset T_k - T_q clamped at 0 (wrong when there are more queries than keys)",
        "causal_mask",
        edits=(("offset = T_k - T_q if bottom_right else 0", "offset = max(T_k - T_q, 0) if bottom_right else 0"),),
        loses=("test_causal_mask_unequal_lengths",),
    ),
    Variant(
        "causal_mask slices a square T_k x T_k triangle (too few rows when T_q > T_k)",
        "causal_mask",
        edits=(
            (
                (
                    "    offset = T_k - T_q if bottom_right else 0\n"
                    "    i = torch.arange(T_q, device=device).unsqueeze(-1)  # [T_q, 1]\n"
                    "    j = torch.arange(T_k, device=device).unsqueeze(0)  # [1, T_k]\n"
                    "    return j <= i + offset\n"
                ),
                (
                    "    square = torch.ones(T_k, T_k, dtype=torch.bool, device=device).tril()\n"
                    "    return square[-T_q:] if bottom_right else square[:T_q]\n"
                ),
            ),
        ),
        loses=("test_causal_mask_unequal_lengths", "test_causal_mask_top_left"),
    ),
    Variant(
        "causal_mask ignores device (always on the CPU)",
        "causal_mask",
        edits=(("torch.arange(T_q, device=device)", "torch.arange(T_q)"), ("torch.arange(T_k, device=device)", "torch.arange(T_k)")),
        loses=("test_causal_mask_device",),
    ),
    Variant(
        "padding_mask counts the position equal to the length as real (<=)",
        "padding_mask",
        edits=(("positions.unsqueeze(0) < lengths", "positions.unsqueeze(0) <= lengths"),),
        loses=("test_padding_mask",),
    ),
    Variant(
        "sliding_window_mask lets the window reach one key too far (<=)",
        "sliding_window_mask",
        edits=(("(distance < window)", "(distance <= window)"),),
        loses=("test_sliding_window_mask",),
    ),
    Variant(
        "sliding_window_mask looks both ways (not causal)",
        "sliding_window_mask",
        edits=(("(distance >= 0) & (distance < window)", "distance.abs() < window"),),
        loses=("test_sliding_window_mask",),
    ),
    Variant(
        "bool mask inverted (True treated as masked)",
        SDPA,
        edits=((BOOL_FILL, BOOL_FILL.replace("~attn_mask", "attn_mask")),),
        loses=("test_masked_sdpa_bool_mask", "test_masked_sdpa_is_causal", *FULLY_MASKED),
    ),
    Variant(
        "float mask multiplied instead of added",
        SDPA,
        edits=(("scores = scores + attn_mask", "scores = scores * attn_mask"),),
        loses=("test_masked_sdpa_float_mask", *FULLY_MASKED),
    ),
    Variant(
        "masks with -1e9 instead of -inf (fully masked rows become uniform)",
        SDPA,
        edits=((BOOL_FILL, "scores.masked_fill(~attn_mask, -1e9)"),),
        loses=FULLY_MASKED,
    ),
    Variant(
        "leaves NaN in fully masked rows",
        SDPA,
        edits=((".masked_fill(nothing_to_attend, 0.0)", ""),),
        loses=FULLY_MASKED,
    ),
    Variant(
        "softmax, then zero the fully masked rows: the output is right, the gradients NaN (float masks)",
        SDPA,
        edits=((EMPTY_SCORES, ""),),  # the solution at commit c2b2e56: softmax, then masked_fill(rows, 0) alone
        loses=("test_masked_sdpa_fully_masked_rows_gradients",),
    ),
    Variant(
        "float64 inside and nan_to_num after the softmax: the output is right, the gradients NaN",
        SDPA,
        edits=(
            (
                (
                    "    if attn_mask is not None and is_causal:\n"
                    '        raise ValueError("pass either attn_mask or is_causal=True, not both")\n'
                    "    if scale is None:\n"
                    "        scale = 1.0 / math.sqrt(Q.shape[-1])\n"
                    "    scores = (Q @ K.transpose(-2, -1)) * scale  # [..., T_q, T_k]\n"
                ),
                (
                    "    if is_causal and attn_mask is not None:\n"
                    '        raise ValueError("attn_mask and is_causal are exclusive")\n'
                    "    scale = Q.shape[-1] ** -0.5 if scale is None else scale\n"
                    "    q, k, v = Q.double(), K.double(), V.double()\n"
                    "    bias = torch.zeros(Q.shape[-2], K.shape[-2], dtype=torch.float64, device=Q.device)\n"
                ),
            ),
            (
                (
                    "        attn_mask = causal_mask(Q.shape[-2], K.shape[-2], device=Q.device)\n"
                    "    if attn_mask is not None:\n"
                    "        if attn_mask.dtype == torch.bool:\n"
                    '            scores = scores.masked_fill(~attn_mask, float("-inf"))\n'
                    "        else:\n"
                    "            scores = scores + attn_mask\n"
                    "    nothing_to_attend = torch.isneginf(scores).all(dim=-1, keepdim=True)  # fully masked rows\n"
                    "    scores = scores.masked_fill(nothing_to_attend, 0.0)  # any finite score: no NaN, forward or backward\n"
                    "    weights = torch.softmax(scores, dim=-1).masked_fill(nothing_to_attend, 0.0)\n"
                    "    return weights @ V, weights\n"
                ),
                (
                    '        bias = bias.masked_fill(~torch.ones_like(bias, dtype=torch.bool).tril(), float("-inf"))\n'
                    "    elif attn_mask is not None:\n"
                    '        bias = torch.where(attn_mask, 0.0, float("-inf")).double() if attn_mask.dtype == torch.bool else attn_mask.double()\n'
                    '    weights = torch.softmax(torch.einsum("...qd,...kd->...qk", q, k) * scale + bias, dim=-1)\n'
                    "    weights = torch.nan_to_num(weights, nan=0.0)          # rows with every key masked: NaN overwritten, NaN gradients\n"
                    "    return (weights @ v).to(Q.dtype), weights.to(Q.dtype)\n"
                ),
            ),
        ),
        loses=("test_masked_sdpa_fully_masked_rows_gradients",),
    ),
    Variant(
        "is_causal aligned bottom-right",
        SDPA,
        edits=((CAUSAL, CAUSAL.replace("device=", "bottom_right=True, device=")),),
        loses=("test_masked_sdpa_is_causal",),
    ),
    Variant(
        "accepts attn_mask together with is_causal",
        SDPA,
        edits=(('raise ValueError("pass either attn_mask or is_causal=True, not both")', "pass"),),
        loses=("test_masked_sdpa_rejects_mask_and_causal",),
    ),
    Variant(
        "calls F.scaled_dot_product_attention for the output",
        SDPA,
        edits=(
            ("return weights @ V, weights", "return F.scaled_dot_product_attention(Q, K, V, attn_mask=attn_mask, scale=scale), weights"),
        ),
        loses=("test_masked_sdpa_no_builtin",),
    ),
    # packed sequences (block-diagonal masks)
    Variant(
        "packed_sequence_mask forgets causality inside each sequence",
        PACKED,
        edits=((WITHIN, "mask = mask"),),
        loses=("test_packed_sequence_mask_causal",),
    ),
    Variant(
        "packed_sequence_mask is causal even when causal=False",
        PACKED,
        edits=(("    if causal:\n", "    if True:\n"),),
        loses=("test_packed_sequence_mask",),
    ),
    Variant(
        "packed_sequence_mask inverted (True = masked)", PACKED, edits=(("    return mask\n", "    return ~mask\n"),), loses=PACKED_TESTS
    ),
    Variant(
        "packed_sequence_mask returns a float 0/1 mask (SDPA would add it, not mask)",
        PACKED,
        edits=(("    return mask\n", "    return mask.float()\n"),),
        loses=PACKED_TESTS,
    ),
    Variant(
        "packed_sequence_mask, causal: one causal mask over the whole row (sequences see the ones before them)",
        PACKED,
        edits=(
            (
                (
                    "    segment = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)  # [T]: which sequence\n"
                    "    mask = segment.unsqueeze(-1) == segment.unsqueeze(0)  # same sequence\n"
                ),
                "    T = int(lengths.sum())\n",
            ),
            (
                (
                    "        position = torch.arange(len(segment), device=lengths.device)\n"
                    "        mask = mask & (position.unsqueeze(-1) >= position.unsqueeze(0))  # and not in the future\n"
                    "    return mask\n"
                ),
                (
                    "        return torch.ones(T, T, dtype=torch.bool).tril()\n"
                    "    ids = torch.repeat_interleave(torch.arange(len(lengths)), lengths)\n"
                    "    return ids[:, None] == ids[None, :]\n"
                ),
            ),
        ),
        loses=("test_packed_sequence_mask_causal",),
    ),
    Variant(
        "packed_sequence_mask off by one at the boundaries (first token glued to the previous sequence)",
        PACKED,
        edits=(
            (
                PACKED_BODY,
                (
                    "    ends = lengths.cumsum(0)                                   # where each sequence ends (exclusive)\n"
                    "    position = torch.arange(int(lengths.sum()))\n"
                    "    ids = (position[:, None] > ends[None, :]).sum(-1)          # should be >=\n"
                    "    mask = ids[:, None] == ids[None, :]\n"
                    "    return mask & (position[:, None] >= position[None, :]) if causal else mask\n"
                ),
            ),
        ),
        loses=PACKED_TESTS,
    ),
    Variant(
        "packed_sequence_mask takes the lengths as boundaries (forgets the running total, cumsum)",
        PACKED,
        edits=(
            (
                PACKED_BODY,
                (
                    "    position = torch.arange(int(lengths.sum()))\n"
                    "    ids = (position[:, None] >= lengths[None, :]).sum(-1)\n"
                    "    mask = ids[:, None] == ids[None, :]\n"
                    "    return mask & (position[:, None] >= position[None, :]) if causal else mask\n"
                ),
            ),
        ),
        loses=PACKED_TESTS,
    ),
    # graded questions
    Variant(
        "bottom-right count taken top-left",
        "answer_bottom_right_true_count",
        edits=((COUNT, "return T_q * (T_q + 1) // 2"),),
        loses=("test_answer_bottom_right_true_count",),
    ),
    Variant(
        "bottom-right count answered as text",
        "answer_bottom_right_true_count",
        edits=((COUNT, 'return f"{T_q * (T_k - T_q) + T_q * (T_q + 1) // 2} entries"'),),
        loses=("test_answer_bottom_right_true_count",),
    ),
    Variant(
        "key_padding_mask read with SDPA's convention (True = take part)",
        "answer_key_padding_mask_unconverted",
        edits=((KPM, KPM.replace("padding_only", "real_only")),),
        loses=("test_answer_key_padding_mask_unconverted",),
    ),
    Variant(
        "float 0/1 mask believed to mask like a bool mask (weight 0)",
        "answer_float_mask_future_weight",
        edits=((LEAK, "return 0.0"),),
        loses=("test_answer_float_mask_future_weight",),
    ),
    Variant(
        "float 0/1 mask: the weight of the allowed keys instead of the future keys",
        "answer_float_mask_future_weight",
        edits=((LEAK, "return allowed * math.e / (allowed * math.e + future)"),),
        loses=("test_answer_float_mask_future_weight",),
    ),
    # answer_left_padding_causal_counts: the student's two lengths, LEFT-padded to T, padding (keys) & causal
    Variant(
        "left padding & causal: right padding assumed (real tokens first), so no row is empty",
        "answer_left_padding_causal_counts",
        edits=((LEFT, "return [sum(sum(min(i + 1, L) for i in range(T)) for L in lengths), 0]"),),
        loses=LEFT_TEST,
    ),
    Variant(
        "left padding & causal: the padding masks the query rows instead of the keys",
        "answer_left_padding_causal_counts",
        edits=((LEFT, "return [sum(sum(i + 1 for i in range(T - L, T)) for L in lengths), rows]"),),
        loses=LEFT_TEST,
    ),
    Variant(
        "left padding & causal: the causal part forgotten (every query reads every real key)",
        "answer_left_padding_causal_counts",
        edits=((LEFT, "return [sum(T * L for L in lengths), 0]"),),
        loses=LEFT_TEST,
    ),
    Variant(
        "left padding & causal: the padding forgotten (two causal triangles)",
        "answer_left_padding_causal_counts",
        edits=((LEFT, "return [len(lengths) * T * (T + 1) // 2, 0]"),),
        loses=LEFT_TEST,
    ),
    Variant(
        "left padding & causal: a pad query still sees itself, so no row is empty",
        "answer_left_padding_causal_counts",
        edits=((LEFT, "return [pairs + rows, 0]"),),
        loses=LEFT_TEST,
    ),
    Variant(
        "left padding & causal: the right numbers in the wrong order",
        "answer_left_padding_causal_counts",
        edits=((LEFT, "return [rows, pairs]"),),
        loses=LEFT_TEST,
    ),
]

CORRECT_VARIANTS = [
    Variant(
        "causal_mask with tril",
        "causal_mask",
        of="""
def causal_mask(T_q, T_k, bottom_right=False, device=None):
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(diagonal=T_k - T_q if bottom_right else 0)
""",
    ),
    Variant(
        "padding_mask with a loop",
        "padding_mask",
        of="""
def padding_mask(lengths, max_len):
    mask = torch.zeros(len(lengths), max_len, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        mask[b, :n] = True
    return mask
""",
    ),
    Variant(
        "sliding_window_mask as a difference of triangles",
        "sliding_window_mask",
        of="""
def sliding_window_mask(T, window):
    ones = torch.ones(T, T, dtype=torch.bool)
    return ones.tril() & ~ones.tril(-window)
""",
    ),
    Variant(
        "masked attention with a float bias, float64 inside, softmax written out with a guarded denominator",
        SDPA,
        of=FLOAT64_BIAS
        + """    logits = torch.einsum("...qd,...kd->...qk", q, k) * scale + bias
    top = logits.amax(dim=-1, keepdim=True).detach()
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))   # a fully masked row has max -inf
    exps = torch.exp(logits - top)                                        # exactly 0 on masked keys
    total = exps.sum(dim=-1, keepdim=True)                                # 0 only for a fully masked row
    weights = exps / torch.where(total > 0, total, torch.ones_like(total))
    return (weights @ v).to(Q.dtype), weights.to(Q.dtype)
""",
    ),
    Variant(
        "masked attention that replaces the fully masked rows with torch.where",
        SDPA,
        of="""
def scaled_dot_product_attention(Q, K, V, attn_mask=None, is_causal=False, scale=None):
    if attn_mask is not None and is_causal:
        raise ValueError("attn_mask or is_causal, not both")
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    scores = Q @ K.transpose(-2, -1) * scale
    if is_causal:
        attn_mask = causal_mask(Q.shape[-2], K.shape[-2], device=Q.device)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=scores.dtype).masked_fill(~attn_mask, float("-inf"))
    if attn_mask is not None:
        scores = scores + attn_mask
    empty = (scores == float("-inf")).all(dim=-1, keepdim=True)
    weights = torch.softmax(torch.where(empty, torch.zeros_like(scores), scores), dim=-1)
    weights = torch.where(empty, torch.zeros_like(weights), weights)
    return weights @ V, weights
""",
    ),
    Variant(
        "packed_sequence_mask with a loop over the blocks",
        PACKED,
        of="""
def packed_sequence_mask(lengths, causal=False):
    T = int(lengths.sum())
    mask = torch.zeros(T, T, dtype=torch.bool, device=lengths.device)
    start = 0
    for n in lengths.tolist():
        block = torch.ones(n, n, dtype=torch.bool)
        mask[start:start + n, start:start + n] = block.tril() if causal else block
        start += n
    return mask
""",
    ),
    Variant(
        "packed_sequence_mask from segment ids found with bucketize over the cumsum",
        PACKED,
        of="""
def packed_sequence_mask(lengths, causal=False):
    position = torch.arange(int(lengths.sum()), device=lengths.device)
    ids = torch.bucketize(position, lengths.cumsum(0), right=True)   # sequence number of each position
    mask = ids[:, None] == ids[None, :]
    if causal:
        mask &= torch.ones_like(mask).tril()
    return mask
""",
    ),
    Variant(
        "bottom-right count computed with tril",
        "answer_bottom_right_true_count",
        edits=((COUNT, "return int(torch.ones(T_q, T_k).tril(diagonal=T_k - T_q).sum())"),),
    ),
    Variant("choice in upper case with spaces", "answer_key_padding_mask_unconverted", edits=((KPM, '" " + ' + KPM + '.upper() + " "'),)),
    Variant(
        "future weight rounded to three digits",
        "answer_float_mask_future_weight",
        edits=((LEAK, "return round(future / (allowed * math.e + future), 3)"),),
    ),
    Variant("left padding counts as floats", "answer_left_padding_causal_counts", edits=((LEFT, "return [pairs * 1.0, rows * 1.0]"),)),
    Variant(
        "left padding counts computed with torch, as a tensor",
        "answer_left_padding_causal_counts",
        edits=(
            (
                (
                    "    lengths, T = batch.lengths, batch.T\n"
                    "    pairs = sum(L * (L + 1) // 2 for L in lengths)  # each real token sees the real tokens up to itself\n"
                    "    rows = sum(T - L for L in lengths)  # each pad query, in front of the real tokens, has no real key at or before it\n"
                    "    return [pairs, rows]\n"
                ),
                (
                    "    real = torch.arange(batch.T) >= batch.T - torch.tensor(batch.lengths)[:, None]\n"
                    "    mask = real[:, None, :] & torch.ones(batch.T, batch.T, dtype=torch.bool).tril()\n"
                    "    return torch.stack([mask.sum(), (~mask.any(dim=-1)).sum()])\n"
                ),
            ),
        ),
    ),
    Variant(
        "left padding counts as a tuple of floats",
        "answer_left_padding_causal_counts",
        edits=((LEFT, "return (float(pairs), float(rows))"),),
    ),
]
