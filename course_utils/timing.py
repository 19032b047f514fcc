"""Wall-clock timing that is fair to compare: warm up first, then take the median of repeats."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def median_seconds(fn: Callable[..., Any], *args: Any, repeats: int = 5, warmup: int = 1, **kwargs: Any) -> float:
    """Median wall time of ``fn(*args, **kwargs)`` in seconds, gradients off.

    The warm-up calls pay one-time costs (allocator growth, kernel selection, lazy
    imports) that a steady-state measurement should not include. On a GPU, the clock
    waits for the device to finish, since kernels run asynchronously.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    times = []
    with torch.no_grad():
        for i in range(warmup + repeats):
            sync()
            started = time.perf_counter()
            fn(*args, **kwargs)
            sync()
            if i >= warmup:
                times.append(time.perf_counter() - started)
    return statistics.median(times)
