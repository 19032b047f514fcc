"""Inputs that can be read only once: what makes a one-pass algorithm testable.

An online softmax is meant to see each block of a row once, in order, and never the whole row. Given
a tensor, a two-pass version can take the global max first; given ``one_shot_blocks``, it cannot.
The blocks come from a generator that refills one buffer: a function that keeps the blocks to read
them again finds every one of them overwritten by the last, and one that copies them keeps the whole
row alive, which ``peak_tensor_bytes`` sees.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def one_shot_blocks(x: torch.Tensor, block_size: int) -> Iterator[torch.Tensor]:
    """The last dimension of ``x`` in blocks of ``block_size`` columns (the last may be shorter), read once.

    Each block is written into the same buffer ``[..., block_size]``: hold a block only until you
    ask for the next one.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    buffer = torch.empty(*x.shape[:-1], block_size, dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block_size):
        width = min(block_size, x.shape[-1] - start)
        block = buffer[..., :width]
        block.copy_(x[..., start : start + width])
        yield block
