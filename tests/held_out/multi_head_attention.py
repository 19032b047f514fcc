"""Notebook 05: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

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
]
