"""PyTorch's own answers for attention's backward pass, for tests to compare against.

Both are built from PyTorch built-ins, never from a solution, so visible tests may use them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .stand_ins import scores_logsumexp, torch_flash_attention_triton, torch_flash_forward
from .tripwires import answers


@answers(
    "08_flash_backward",
    "attention_backward",
    "flash_attention_backward",
    "flash_attention_backward_triton",
    "flash_attention",
    "flash_attention_fused",
)
def sdpa_gradients(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, dO: torch.Tensor, **options: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) of ``sum(F.scaled_dot_product_attention(Q, K, V, **options) * dO)``, by autograd.

    Returns:
        (dQ like Q, dK like K, dV like V), in the inputs' dtype.
    """
    leaves = [t.detach().clone().requires_grad_() for t in (Q, K, V)]
    with torch.enable_grad():
        out = F.scaled_dot_product_attention(*leaves, **options)
        return tuple(torch.autograd.grad(out, leaves, dO))  # type: ignore[return-value]


@answers("07_fused_attention", "flash_attention_forward", "flash_attention_triton")
def logsumexp_of_scores(Q: torch.Tensor, K: torch.Tensor, scale: float | None = None, is_causal: bool = False) -> torch.Tensor:
    """The forward's L: the natural-log logsumexp of each row of scaled scores, top-left causal mask.

    Computed in float64 and returned in Q's dtype, or float32 for float16 and bfloat16 inputs (as the
    kernels keep L).

    Returns:
        L [..., T_q].
    """
    return scores_logsumexp(Q, K, is_causal, scale).to(torch.promote_types(Q.dtype, torch.float32))


def tile_function_stand_ins() -> dict[str, Any]:
    """PyTorch in place of notebook 08's forward and backward functions, for tests of what is built on them.

    A test of an autograd.Function runs with these, so that a slip in the tiles (``flash_attention_forward``,
    ``flash_attention_backward``) or the kernels (``flash_attention_triton``, ``flash_attention_backward_triton``)
    costs points on their own tests only.

    Returns:
        {name: (Q, K, V, ...) -> (O, L) for the forwards, (Q, K, V, O, dO, L, ...) -> (dQ, dK, dV) for the backwards}.
    """

    def backward(Q, K, V, O, dO, L, is_causal=False, scale=None, **_):
        return sdpa_gradients(Q, K, V, dO, is_causal=is_causal, scale=scale)

    return {
        "flash_attention_forward": torch_flash_forward,
        "flash_attention_backward": backward,
        "flash_attention_triton": torch_flash_attention_triton,
        "flash_attention_backward_triton": backward,
    }
