"""Count the floating-point operations of a call, with ``torch.utils.flop_counter``."""

from __future__ import annotations

from typing import Any, Callable

from .recording import measured


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """FLOPs of the matrix products (and other counted ops) in ``fn(*args, **kwargs)``.

    Under grading the sealed run counts and the trusted replay reads the count.
    """
    from torch.utils.flop_counter import FlopCounterMode

    def measure(thunk: Callable[[], Any]) -> int:
        with FlopCounterMode(display=False) as counter:
            thunk()
        return int(counter.get_total_flops())

    return measured("flops", fn, args, kwargs, measure)


def visited_tiles(T_q: int, T_k: int, block_q: int, block_k: int, is_causal: bool = False) -> list[tuple[int, int]]:
    """(rows, columns) of every score tile a tiled attention pass must compute.

    Without a mask, every (query block, key block) pair. Under a top-left causal mask, only the key
    blocks that start at or before the query block's last row: the others are entirely in the future.
    The last block of each side may be ragged.
    """
    tiles = []
    for q_start in range(0, T_q, block_q):
        q_stop = min(q_start + block_q, T_q)
        k_end = min(T_k, q_stop) if is_causal else T_k
        tiles += [(q_stop - q_start, min(k_start + block_k, T_k) - k_start) for k_start in range(0, k_end, block_k)]
    return tiles


def tiled_attention_flops(batch_heads: int, tiles: list[tuple[int, int]], d: int, d_v: int | None = None, backward: bool = False) -> int:
    """Matrix FLOPs of a tiled attention pass over ``tiles`` (from ``visited_tiles``), for ``batch_heads`` heads.

    A forward pass does two products per tile, S = Q K^T (width d) and P V (width d_v); a backward pass
    does five: S again, dP = dO V^T, dV += P^T dO, dK += dS^T Q and dQ += dS K. A product of an
    [r, n] and an [n, c] block is 2 r n c FLOPs (a multiply and an add per term).
    """
    d_v = d if d_v is None else d_v
    width = (3 * d + 2 * d_v) if backward else (d + d_v)
    return batch_heads * sum(2 * rows * cols * width for rows, cols in tiles)
