"""Wall-clock timing that is fair to compare: warm up first, then take the median of repeats."""

from __future__ import annotations

import functools
import statistics
import timeit
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.benchmark import timer as synchronized_clock


def median_seconds(fn: Callable[..., Any], *args: Any, repeats: int = 5, warmup: int = 1, **kwargs: Any) -> float:
    """Median wall time of ``fn(*args, **kwargs)`` in seconds, gradients off.

    The warm-up calls pay one-time costs (allocator growth, kernel selection, lazy
    imports) that a steady-state measurement should not include. On the CPU exactly
    ``warmup + repeats`` calls are made, each timed call on its own, with the clock of
    ``torch.utils.benchmark`` (which waits for an accelerator to finish, since kernels
    run asynchronously). With CUDA tensors, and Triton installed, ``triton.testing.do_bench``
    times instead: CUDA events, the L2 cache flushed before each call, and its own counts
    of warm-up and timed calls (about 25 ms and 100 ms of them).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    call = functools.partial(fn, *args, **kwargs)
    with torch.no_grad():
        do_bench = _do_bench() if _uses_cuda(fn, args, kwargs) else None
        if do_bench is not None:
            return do_bench(call, return_mode="median") / 1e3  # milliseconds
        # torch.utils.benchmark.Timer wraps this same timeit.Timer, but its timeit() adds two warm-up
        # calls and reports one block's mean; here each call is timed, and the calls are counted.
        clock = timeit.Timer(call, timer=synchronized_clock)
        clock.timeit(number=warmup)
        return statistics.median(clock.repeat(repeat=repeats, number=1))


def _uses_cuda(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A CUDA tensor among the arguments, or ``fn`` a CUDA tensor's method (``target.copy_``)."""
    candidates = (*args, *kwargs.values(), getattr(fn, "__self__", None))
    return any(isinstance(value, torch.Tensor) and value.is_cuda for value in candidates)


def _do_bench() -> Callable[..., Any] | None:
    try:
        import triton.testing
    except ImportError:
        return None
    return triton.testing.do_bench
