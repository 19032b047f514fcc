"""The inputs tests build: seeded random tensors and shapes, and views whose padding holds NaN."""

from __future__ import annotations

import torch


def random_tensor(
    *shape: int,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    scale: float = 1.0,
) -> torch.Tensor:
    """A reproducible normal tensor: the same seed always gives the same values."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def nan_padded(tensor: torch.Tensor, *pad: int) -> torch.Tensor:
    """``tensor`` as a view into a larger buffer whose extra elements are NaN.

    ``pad`` gives the extra size of the last ``len(pad)`` dimensions: ``nan_padded(Q, 16, 8)`` of a
    ``[B, H, T, d]`` tensor lives in a ``[B, H, T + 16, d + 8]`` buffer. A kernel that loads past the
    view's end (a missing load mask) reads NaN, and NaN reaches its output: zero-filled memory
    there would hide the missing mask.
    """
    shape = list(tensor.shape)
    for offset, extra in enumerate(pad, start=len(shape) - len(pad)):
        shape[offset] += extra
    buffer = torch.full(shape, float("nan"), dtype=tensor.dtype, device=tensor.device)
    view = buffer[tuple(slice(0, size) for size in tensor.shape)]
    view.copy_(tensor)
    return view


def random_shape(seed: int, ndim: int, low: int = 1, high: int = 7) -> tuple[int, ...]:
    """A reproducible random shape with ``ndim`` sizes in ``[low, high)``."""
    generator = torch.Generator().manual_seed(10_000 + seed)
    return tuple(int(n) for n in torch.randint(low, high, (ndim,), generator=generator))
