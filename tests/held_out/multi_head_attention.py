"""Notebook 05: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

MHA = "MultiHeadAttention"

HELD_OUT = [
    HeldOut(
        Variant(
            "split_heads deals the features out in turn (head h gets features h, h + H, ...)",
            "split_heads",
            edits=(
                ("x.view(B, T, num_heads, D // num_heads).transpose(1, 2)", "x.view(B, T, D // num_heads, num_heads).permute(0, 3, 1, 2)"),
            ),
            loses=("test_split_heads",),
        ),
        says=("AssertionError: split_heads(x [2, 3, 4], 2) values",),
    ),
    HeldOut(
        Variant(
            "MultiHeadAttention applies key_padding_mask to the queries (rows) instead of the keys",
            "MultiHeadAttention",
            edits=(("padding = key_padding_mask[:, None, None, :]", "padding = key_padding_mask[:, None, :, None]"),),
            loses=("test_mha_masks",),
        ),
        says=("weights with key_padding_mask vs nn.MultiheadAttention: 12 of 32 entries are NaN",),
    ),
    HeldOut(
        Variant(
            "grouped_query_attention reads a bool mask as nn.MultiheadAttention does (True = not allowed)",
            "grouped_query_attention",
            edits=(('scores.masked_fill(~attn_mask, float("-inf"))', 'scores.masked_fill(attn_mask, float("-inf"))'),),
            loses=("test_gqa_matches_sdpa",),
        ),
        says=("AssertionError: multi-query (H_kv=1) with is_causal=True vs SDPA",),
    ),
    HeldOut(
        Variant(
            "KVCache.append concatenates along dim 1 (the heads of [B, H, T, d], not the time)",
            "KVCache",
            edits=(
                ("torch.cat([self.keys, k], dim=-2)", "torch.cat([self.keys, k], dim=1)"),
                ("torch.cat([self.values, v], dim=-2)", "torch.cat([self.values, v], dim=1)"),
            ),
            loses=("test_kv_cache_grows", "test_kv_cache_decoding"),
        ),
        says=("KVCache.append (second call): raised RuntimeError", "KVCache.decode (tokens 1..1): raised RuntimeError"),
    ),
    HeldOut(
        Variant(
            "KVCache.decode projects by the weights alone (x @ W.T): the biases are left out",
            "KVCache",
            edits=(
                ("q = split_heads(F.linear(x_new, w_q, b_q), mha.num_heads)", "q = split_heads(x_new @ w_q.T, mha.num_heads)"),
                (
                    "split_heads(F.linear(x_new, w_k, b_k), mha.num_heads), split_heads(F.linear(x_new, w_v, b_v), mha.num_heads)",
                    "split_heads(x_new @ w_k.T, mha.num_heads), split_heads(x_new @ w_v.T, mha.num_heads)",
                ),
                (
                    "return mha.out_proj(merge_heads(torch.softmax(scores, dim=-1) @ v))",
                    "return merge_heads(torch.softmax(scores, dim=-1) @ v) @ mha.out_proj.weight.T",
                ),
            ),
            loses=("test_kv_cache_decoding",),
        ),
        says=("nn.MultiheadAttention(12, 3, bias=True): a prompt of 4 tokens, then 3 single steps, vs full causal attention: 168 of 168",),
    ),
    HeldOut(
        Variant(
            "KVCache.decode takes the module's biases for granted (in_proj_bias.chunk(3) when bias=False, and it is None)",
            "KVCache",
            edits=(
                (
                    "b_q, b_k, b_v = mha.in_proj_bias.chunk(3) if mha.in_proj_bias is not None else (None, None, None)",
                    "b_q, b_k, b_v = mha.in_proj_bias.chunk(3)",
                ),
            ),
            loses=("test_kv_cache_decoding",),
        ),
        says=("KVCache.decode with nn.MultiheadAttention(12, 3, bias=False), tokens 0..3: raised AttributeError",),
    ),
    HeldOut(
        Variant(
            "MultiHeadAttention projects Q, K and V without in_proj_bias",
            MHA,
            edits=(
                ("q = split_heads(F.linear(query, w_q, b_q), self.num_heads)", "q = split_heads(F.linear(query, w_q), self.num_heads)"),
                ("k = split_heads(F.linear(key, w_k, b_k), self.num_heads)", "k = split_heads(F.linear(key, w_k), self.num_heads)"),
                ("v = split_heads(F.linear(value, w_v, b_v), self.num_heads)", "v = split_heads(F.linear(value, w_v), self.num_heads)"),
            ),
            loses=("test_mha_outputs_and_weights", "test_mha_masks"),
        ),
        says=(
            "self-attention E=12, H=3, bias=True, average_attn_weights=True: output vs nn.MultiheadAttention: 144 of 144 entries differ",
            "cross-attention L=3, S=6 with attn_mask torch.bool: output vs nn.MultiheadAttention",
        ),
    ),
    HeldOut(
        Variant(
            "merge_heads views the transposed heads (view, where the transpose is not contiguous)",
            "merge_heads",
            edits=(("x.transpose(1, 2).reshape(B, T, H * d)", "x.transpose(1, 2).view(B, T, H * d)"),),
            loses=("test_merge_heads",),
        ),
        says=("merge_heads(x [2, 2, 3, 2]): raised RuntimeError: view size is not compatible",),
    ),
    HeldOut(
        Variant(
            "split_heads tests num_heads % D (the operands swapped), so it refuses heads that divide D",
            "split_heads",
            edits=(("if num_heads <= 0 or D % num_heads:", "if num_heads <= 0 or num_heads % D:"),),
            loses=("test_split_heads",),
        ),
        says=("split_heads(x [2, 3, 4], num_heads=2): raised ValueError: 2 heads do not divide the width 4",),
    ),
    HeldOut(
        Variant(
            "grouped_query_attention's softmax by hand, exp(s) / sum exp(s), without subtracting the row's max",
            "grouped_query_attention",
            edits=(
                (
                    "return torch.softmax(scores, dim=-1) @ V",
                    "weights = scores.exp()\n    return weights / weights.sum(dim=-1, keepdim=True) @ V",
                ),
            ),
            loses=("test_gqa_matches_sdpa",),
        ),
        says=(
            "GQA H_q=4, H_kv=2 with scores in the thousands, a row all negative and a row all equal (float64) vs SDPA: "
            "16 of 48 entries are NaN where a number was expected",
        ),
    ),
    HeldOut(
        Variant(
            "grouped_query_attention adds a float mask to the scores before scaling them",
            "grouped_query_attention",
            edits=(
                ("scores = Q @ K.transpose(-2, -1) * scale", "scores = Q @ K.transpose(-2, -1)"),
                ("return torch.softmax(scores, dim=-1) @ V", "return torch.softmax(scores * scale, dim=-1) @ V"),
            ),
            loses=("test_gqa_matches_sdpa",),
        ),
        says=("GQA H_q=8, H_kv=2, ['attn_mask', 'scale'] (torch.float32) vs SDPA: 192 of 192 entries differ",),
    ),
]
