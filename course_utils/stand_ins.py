"""PyTorch's own versions of graded helpers, to stand in for the student's in other tests.

A test of one graded function replaces the graded helpers it calls with these
(``call(..., stand_ins=CAUSAL_MASK_STAND_IN)``), so a bug in a helper costs points only on the
helper's own tests. Built from public torch operations only.
"""

from __future__ import annotations

import torch

# Bound once, here: a test that trips the Python name ``torch.softmax`` (``check_no_builtin``) must not
# trip over the stand-in; its kernels run in a stand-in range, which the dispatcher check leaves out.
_softmax = torch.softmax


def torch_softmax(scores: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """Notebook 01's ``softmax`` by PyTorch: ``torch.softmax(scores / temperature, dim)``, same shape as scores."""
    return _softmax(scores / temperature, dim=dim)


def torch_dot_product_scores(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Notebook 02's ``dot_product_scores``: [..., T_q, T_k] from Q [..., T_q, d] and K [..., T_k, d]."""
    return Q @ K.transpose(-2, -1)


def torch_dot_product_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 02's unscaled ``dot_product_attention`` from matrix products and ``torch.softmax``.

    Returns:
        (output [..., T_q, d_v], weights [..., T_q, T_k]). Not ``F.scaled_dot_product_attention``,
        so that a "do not call the built-in" test of the caller cannot trip over the stand-in.
    """
    weights = _softmax(torch_dot_product_scores(Q, K), dim=-1)
    return weights @ V, weights


def torch_causal_mask(T_q: int, T_k: int, bottom_right: bool = False, device: torch.device | str | None = None) -> torch.Tensor:
    """PyTorch's causal mask: top-left as ``is_causal=True``, bottom-right as ``causal_lower_right``.

    Returns:
        [T_q, T_k] bool, True where query i may see key j: j <= i (top-left) or j <= i + T_k - T_q (bottom-right).
    """
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(diagonal=T_k - T_q if bottom_right else 0)


def torch_split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Notebook 05's ``split_heads`` by another route: chunk the features and stack the chunks as heads.

    Returns:
        [..., H, T, D / H] from x [..., T, D].
    """
    return torch.stack(x.chunk(num_heads, dim=-1), dim=-3)


def torch_merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Notebook 05's ``merge_heads`` by another route: the heads' features side by side.

    Returns:
        [..., T, H * d] from x [..., H, T, d].
    """
    return torch.cat(x.unbind(dim=-3), dim=-1)


SOFTMAX_STAND_IN = {"softmax": torch_softmax}
SCORES_STAND_IN = {"dot_product_scores": torch_dot_product_scores}
ATTENTION_STAND_IN = {"dot_product_attention": torch_dot_product_attention}
CAUSAL_MASK_STAND_IN = {"causal_mask": torch_causal_mask}
HEADS_STAND_IN = {"split_heads": torch_split_heads, "merge_heads": torch_merge_heads}
