"""Shapes for attention's autograd Functions, so that they are drop-ins for F.scaled_dot_product_attention.

SDPA takes ``[..., T, d]`` with any leading shape: ``[B, H, T, d]`` from a multi-head layer, ``[B, T, d]``
from a project's own tests. A drop-in Function takes them all *inside* ``forward`` and ``backward``, so that
the tensor ``apply`` returns is the Function's own output: its ``grad_fn`` is the Function's node, whose
``saved_tensors`` a project's test may read (L among them, in Q's leading shape ``[..., T_q]``). Reshaping
around ``apply`` instead would make the output's ``grad_fn`` the reshape.

``as_heads`` gives the ``[N, H, T, d]`` that the course's tile functions and kernels take.
"""

from __future__ import annotations

import torch


def as_heads(tensor: torch.Tensor, trailing: int = 2) -> torch.Tensor:
    """``tensor`` with its leading dimensions as ``[N, H]``, its last ``trailing`` ones kept.

    ``[B, H, T, d]`` stays as it is; ``[B, T, d]`` becomes one head, ``[B, 1, T, d]``; ``[T, d]`` becomes
    ``[1, 1, T, d]``; more leading dimensions fold into N (``[A, B, H, T, d]`` is ``[A * B, H, T, d]``).
    ``trailing=1`` does the same for a per-row tensor such as L (``[B, T]`` becomes ``[B, 1, T]``).
    A view where the memory allows it, a copy otherwise.
    """
    lead = tensor.shape[: tensor.dim() - trailing]
    rest = tensor.shape[tensor.dim() - trailing :]
    if len(lead) >= 2:
        return tensor.reshape(-1, lead[-1], *rest)
    if len(lead) == 1:
        return tensor.unsqueeze(1)
    return tensor.reshape(1, 1, *rest)
