"""Inputs that can be read only once: what makes a one-pass algorithm testable.

An online softmax is meant to see each block of a row once, in order, and never the whole row. Given
a tensor, a two-pass version can take the global max first; given ``one_shot_blocks``, it cannot.
The blocks come from a stream that refills one buffer: a function that keeps the blocks to read
them again finds every one of them overwritten by the last, and one that copies them keeps the whole
row alive, which ``peak_tensor_bytes`` sees.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


class OneShotBlocks(Iterator[torch.Tensor]):
    """The last dimension of ``x`` in blocks of ``block_size`` columns (the last may be shorter), read once.

    Each block is written into the same buffer ``[..., block_size]``, made at the first read: hold a
    block only until you ask for the next one. A copy (``copy.deepcopy``) is a stream of its own over
    the same columns, from where this one stands, so the grader can hand the same stream to another
    implementation.
    """

    def __init__(self, x: torch.Tensor, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1, got {block_size}")
        self._x, self._block_size, self._start = x, block_size, 0
        self._buffer: torch.Tensor | None = None

    def __iter__(self) -> OneShotBlocks:
        return self

    def __next__(self) -> torch.Tensor:
        if self._start >= self._x.shape[-1]:
            raise StopIteration
        if self._buffer is None:
            self._buffer = torch.empty(*self._x.shape[:-1], self._block_size, dtype=self._x.dtype, device=self._x.device)
        width = min(self._block_size, self._x.shape[-1] - self._start)
        block = self._buffer[..., :width]
        block.copy_(self._x[..., self._start : self._start + width])
        self._start += width
        return block

    def __deepcopy__(self, memo: dict) -> OneShotBlocks:
        copy = OneShotBlocks(self._x, self._block_size)
        copy._start = self._start
        return copy


def one_shot_blocks(x: torch.Tensor, block_size: int) -> OneShotBlocks:
    """``x``'s last dimension as a stream of blocks that can be read once (``OneShotBlocks``)."""
    return OneShotBlocks(x, block_size)
