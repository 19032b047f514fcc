"""Notebook 05: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

MHA = "MultiHeadAttention"
PROJECTIONS = """        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
        q = split_heads(F.linear(query, w_q, b_q), self.num_heads)  # [B, H, L, d]
        k = split_heads(F.linear(key, w_k, b_k), self.num_heads)  # [B, H, S, d]
        v = split_heads(F.linear(value, w_v, b_v), self.num_heads)  # [B, H, S, d]"""
FUSED = """        if query is key and key is value:  # self-attention: one fused projection for Q, K and V
            q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        else:
            w = self.in_proj_weight.view(3, self.embed_dim, self.embed_dim)
            b = self.in_proj_bias.view(3, self.embed_dim) if self.in_proj_bias is not None else torch.zeros(3, self.embed_dim)
            q, k, v = (torch.einsum("bte,fe->btf", x, w[i]) + b[i] for i, x in enumerate((query, key, value)))
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))"""
SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)"
PADDING = 'scores.masked_fill(padding, float("-inf")) if padding.dtype'
ATTN_MASK = 'scores.masked_fill(attn_mask, float("-inf")) if attn_mask.dtype'
REPEAT = "K, V = K.repeat_interleave(group, dim=-3), V.repeat_interleave(group, dim=-3)"
OUTPUTS = ("test_mha_outputs_and_weights", "test_mha_masks")
BUG = "answer_attention_bug"
LOOKBACK = "answer_lookback_distance"
GQA_CACHE = "answer_gqa_cache_bytes"


MISTAKES = [
    Variant(
        "split_heads reshapes to [B, H, T, d] without a transpose",
        "split_heads",
        edits=(("x.view(B, T, num_heads, D // num_heads).transpose(1, 2)", "x.reshape(B, num_heads, T, D // num_heads)"),),
        loses=("test_split_heads",),
    ),
    Variant(
        "merge_heads reshapes without transposing back",
        "merge_heads",
        edits=(("x.transpose(1, 2).reshape(B, T, H * d)", "x.reshape(B, T, H * d)"),),
        loses=("test_merge_heads",),
    ),
    Variant(
        "split_heads does not check that H divides D",
        "split_heads",
        edits=(('raise ValueError(f"{num_heads} heads do not divide the width {D}")', "pass"),),
        loses=("test_split_heads_rejects_bad_heads",),
    ),
    Variant(
        "MultiHeadAttention scales by the model width instead of the head width",
        MHA,
        edits=(("math.sqrt(self.head_dim)", "math.sqrt(self.embed_dim)"),),
        loses=OUTPUTS,
    ),
    Variant(
        "MultiHeadAttention inverts key_padding_mask",
        MHA,
        edits=((PADDING, PADDING.replace("masked_fill(padding", "masked_fill(~padding")),),
        loses=("test_mha_masks",),
    ),
    Variant(
        "MultiHeadAttention reads a bool attn_mask as SDPA does (True = allowed)",
        MHA,
        edits=((ATTN_MASK, ATTN_MASK.replace("masked_fill(attn_mask", "masked_fill(~attn_mask")),),
        loses=("test_mha_masks",),
    ),
    Variant(
        "MultiHeadAttention keeps an in_proj_bias of zeros when bias=False",
        MHA,
        edits=(('self.register_parameter("in_proj_bias", None)', "self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))"),),
        loses=("test_mha_parameters", "test_mha_outputs_and_weights"),
    ),
    Variant(
        "MultiHeadAttention forgets the output projection",
        MHA,
        edits=(("output = self.out_proj(merge_heads(weights @ v))", "output = merge_heads(weights @ v)"),),
        loses=OUTPUTS,
    ),
    Variant(
        "MultiHeadAttention never averages the weights over heads",
        MHA,
        edits=(("weights.mean(dim=1) if average_attn_weights else weights", "weights"),),
        loses=OUTPUTS,
    ),
    Variant(
        "MultiHeadAttention always averages the weights over heads (ignores average_attn_weights)",
        MHA,
        edits=(("weights.mean(dim=1) if average_attn_weights else weights", "weights.mean(dim=1)"),),
        loses=("test_mha_outputs_and_weights",),
    ),
    Variant(
        "grouped_query_attention uses repeat instead of repeat_interleave",
        "grouped_query_attention",
        edits=((REPEAT, "K, V = K.repeat(1, group, 1, 1), V.repeat(1, group, 1, 1)"),),
        loses=("test_gqa_matches_sdpa",),
    ),
    Variant(
        "grouped_query_attention accepts uneven groups",
        "grouped_query_attention",
        edits=(('raise ValueError(f"{H_q} query heads cannot share {H_kv} key/value heads evenly")', "pass"),),
        loses=("test_gqa_rejects_uneven_groups",),
    ),
    Variant(
        "KVCache forgets to append (keeps only the newest keys and values)",
        "KVCache",
        edits=(
            ("self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=-2)", "self.keys = k"),
            ("self.values = v if self.values is None else torch.cat([self.values, v], dim=-2)", "self.values = v"),
        ),
        loses=("test_kv_cache_grows", "test_kv_cache_decoding"),
    ),
    Variant(
        "KVCache.decode uses top-left instead of bottom-right causal alignment",
        "KVCache",
        edits=((".tril(T - T_new)", ".tril()"),),
        loses=("test_kv_cache_decoding",),
    ),
    # Graded questions.
    Variant(
        "the bug taken to be in the fused projection's split (chunking the features is chunking the weight's rows)",
        BUG,
        edits=(
            (
                '    return question_values("05_multi_head_attention", "attention_bug").letter_of("softmax", options)\n',
                '    return question_values("05_multi_head_attention", "attention_bug").letter_of("projection", options)\n',
            ),
        ),
        loses=("test_attention_bug_answer",),
    ),
    Variant(
        "the bug taken to be the split into heads (view(B, T, H, d).transpose(1, 2) is the right split)",
        BUG,
        edits=(
            (
                '    return question_values("05_multi_head_attention", "attention_bug").letter_of("softmax", options)\n',
                '    return question_values("05_multi_head_attention", "attention_bug").letter_of("split", options)\n',
            ),
        ),
        loses=("test_attention_bug_answer",),
    ),
    Variant(
        "the bug taken to be the merge (reshape copies a transposed tensor; it does not scramble it)",
        BUG,
        edits=(
            (
                '    return question_values("05_multi_head_attention", "attention_bug").letter_of("softmax", options)\n',
                '    return question_values("05_multi_head_attention", "attention_bug").letter_of("merge", options)\n',
            ),
        ),
        loses=("test_attention_bug_answer",),
    ),
    Variant(
        "the look-back distance taken as the period",
        LOOKBACK,
        edits=(("return P - 1 ", "return P "),),
        loses=("test_lookback_distance_answer",),
    ),
    Variant(
        "the look-back distance copied from the plot (period 4)",
        LOOKBACK,
        edits=(
            (
                (
                    '    P = question_values("05_multi_head_attention", "lookback_distance").P\n'
                    "    return P - 1  # query t predicts the token at t + 1, a copy of the token at t + 1 - P\n"
                ),
                "    return 3\n",
            ),
        ),
        loses=("test_lookback_distance_answer",),
    ),  # never P = 4
    Variant(
        "the GQA cache counted with the query heads (H_q instead of H_kv)",
        GQA_CACHE,
        edits=(("model.layers, model.H_kv, model.d,", "model.layers, model.H_q, model.d,"),),
        loses=("test_gqa_cache_answer",),
    ),
    Variant(
        "the GQA cache without the factor 2 for keys and values",
        GQA_CACHE,
        edits=(("return 2 * layers * H_kv * d * T * bytes_per ", "return layers * H_kv * d * T * bytes_per "),),
        loses=("test_gqa_cache_answer",),
    ),
    Variant(
        "the GQA cache of one layer only",
        GQA_CACHE,
        edits=(("return 2 * layers * H_kv * d * T * bytes_per ", "return 2 * H_kv * d * T * bytes_per "),),
        loses=("test_gqa_cache_answer",),
    ),
    Variant(
        "the GQA cache in GiB instead of bytes",
        GQA_CACHE,
        edits=(("return 2 * layers * H_kv * d * T * bytes_per ", "return 2 * layers * H_kv * d * T * bytes_per / 2**30 "),),
        loses=("test_gqa_cache_answer",),
    ),
]

CORRECT_VARIANTS = [
    Variant("MultiHeadAttention with a fused QKV projection and einsum", MHA, edits=((PROJECTIONS, FUSED),)),
    Variant(
        "MultiHeadAttention scores with einsum",
        MHA,
        edits=((SCORES, 'scores = torch.einsum("bhld,bhsd->bhls", q, k) / self.head_dim ** 0.5'),),
    ),
    Variant(
        "grouped_query_attention by grouping the queries, without repeating K and V",
        "grouped_query_attention",
        of="""
def grouped_query_attention(Q, K, V, attn_mask=None, is_causal=False, scale=None):
    B, H_q, T, d = Q.shape
    H_kv, S = K.shape[-3], K.shape[-2]
    if H_q % H_kv:
        raise ValueError("query heads must split evenly over key/value heads")
    q = Q.view(B, H_kv, H_q // H_kv, T, d)                    # each K/V head with its group of query heads
    scores = torch.einsum("bkgtd,bksd->bkgts", q, K) * (d ** -0.5 if scale is None else scale)
    if is_causal:
        attn_mask = torch.ones(T, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.einsum("bkgts,bksd->bkgtd", torch.softmax(scores, dim=-1), V).reshape(B, H_q, T, d)
""",
    ),
    Variant(
        "the look-back distance as a float",
        LOOKBACK,
        edits=(
            (
                (
                    '    P = question_values("05_multi_head_attention", "lookback_distance").P\n'
                    "    return P - 1  # query t predicts the token at t + 1, a copy of the token at t + 1 - P\n"
                ),
                '    return float(question_values("05_multi_head_attention", "lookback_distance").P - 1)\n',
            ),
        ),
    ),
    Variant(
        "the spot-the-bug letter in capitals, with spaces",
        BUG,
        edits=(
            (
                '    return question_values("05_multi_head_attention", "attention_bug").letter_of("softmax", options)\n',
                '    return " " + question_values("05_multi_head_attention", "attention_bug").letter_of("softmax", options).upper() + " "\n',
            ),
        ),
    ),
    Variant(
        "the GQA cache rounded to three significant digits",
        GQA_CACHE,
        edits=(("return 2 * layers * H_kv * d * T * bytes_per ", "return float(f'{2 * layers * H_kv * d * T * bytes_per:.3g}') "),),
    ),  # within 1%
    Variant(
        "the GQA cache as MHA's divided by the group size",
        GQA_CACHE,
        edits=(
            (
                (
                    "    layers, H_kv, d, T, bytes_per = model.layers, model.H_kv, model.d, model.T, 2\n"
                    "    return 2 * layers * H_kv * d * T * bytes_per  # only the K/V heads are cached, not the query heads\n"
                ),
                ("    mha = 2 * model.layers * model.H_q * model.d * model.T * 2\n    return mha // (model.H_q // model.H_kv)\n"),
            ),
        ),
    ),
]
