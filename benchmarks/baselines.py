"""The two yardsticks every attention benchmark here compares against.

Imported by the scripts in this folder (Python puts a script's own folder on sys.path).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with the whole [..., T_q, T_k] score matrix in memory (top-left causal)."""
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    del scores  # free the scores before the output is made: the peak is scores + weights, 2 T^2
    return weights @ v


def sdpa_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """PyTorch's FlashAttention backend (the fused CPU kernel on a CPU); fails rather than fall back."""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
