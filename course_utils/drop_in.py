"""A base for attention's autograd Functions that makes them drop-ins for F.scaled_dot_product_attention's shapes.

Notebook 08's ``FlashAttention`` and ``FlashAttentionTriton`` subclass it. Their ``forward`` and ``backward``
work on 4-D ``[B, H, T, d]``; ``apply`` also takes the ``[B, T, d]`` that a project's own tests usually pass,
running it as one head, so either Function can stand in for the other.
"""

from __future__ import annotations

from typing import Any

import torch


class AttentionFunction(torch.autograd.Function):
    """``apply(Q, K, V, *options)`` on ``[B, H, T, d]`` or ``[B, T, d]`` inputs (one head).

    Returns:
        O with Q's leading dimensions: ``[B, H, T_q, d_v]`` or ``[B, T_q, d_v]``.
    """

    @classmethod
    def apply(cls, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, *options: Any, **named: Any) -> Any:
        if Q.dim() == 3:  # [B, T, d]: add a head dimension, and take it off the output again
            return super().apply(Q.unsqueeze(1), K.unsqueeze(1), V.unsqueeze(1), *options, **named).squeeze(1)
        return super().apply(Q, K, V, *options, **named)
