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
