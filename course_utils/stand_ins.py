"""PyTorch's own versions of graded helpers, to stand in for the student's in other tests.

A test of one graded function replaces the graded helpers it calls with these
(``call(..., stand_ins=CAUSAL_MASK_STAND_IN)``), so a bug in a helper costs points only on the
helper's own tests. Built from public torch operations only.
"""

from __future__ import annotations

import torch


def torch_causal_mask(T_q: int, T_k: int, bottom_right: bool = False, device: torch.device | str | None = None) -> torch.Tensor:
    """PyTorch's causal mask: top-left as ``is_causal=True``, bottom-right as ``causal_lower_right``.

    Returns:
        [T_q, T_k] bool, True where query i may see key j: j <= i (top-left) or j <= i + T_k - T_q (bottom-right).
    """
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(diagonal=T_k - T_q if bottom_right else 0)


CAUSAL_MASK_STAND_IN = {"causal_mask": torch_causal_mask}
