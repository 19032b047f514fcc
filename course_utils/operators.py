"""Which ATen operators a PyTorch call runs: how to see which SDPA backend was picked.

Read from ``torch.profiler``, PyTorch's public tracer. Its C++ side logs a line on the process's
stderr each time a trace starts and stops; that is noise in a notebook (and stderr in a graded cell
scores 0), so the file descriptor is pointed at /dev/null while the call runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .guards import Guards


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def aten_operators(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """Names of the ATen operators that ran inside ``fn(*args, **kwargs)``, each once, in order of first use.

    >>> aten_operators(F.scaled_dot_product_attention, q, k, v)[:2]
    ['scaled_dot_product_attention', '_scaled_dot_product_flash_attention_for_cpu']
    """
    from torch.profiler import profile

    with _stderr_silenced(), profile() as trace:
        fn(*args, **kwargs)
    names = (event.name.removeprefix("aten::") for event in trace.events() if event.name.startswith("aten::"))
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class OperatorTime:
    """One operator's share of a profiled call: its own time (not its children's), summed over its calls."""

    name: str
    calls: int
    self_ms: float  # on the GPU when one ran the call, else on the CPU


def time_by_operator(fn: Callable[..., Any], *args: Any, top: int = 8, **kwargs: Any) -> list[OperatorTime]:
    """Where the time of ``fn(*args, **kwargs)`` goes, from ``torch.profiler``: the ``top`` operators and
    kernels by their own time, largest first. On a GPU the kernels' device time counts (a Triton kernel
    shows under its own name); on a CPU, each ATen operator's CPU time.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    on_gpu = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if on_gpu else [ProfilerActivity.CPU]
    with _stderr_silenced(), profile(activities=activities) as trace:
        fn(*args, **kwargs)
        if on_gpu:
            torch.cuda.synchronize()
    rows = [
        OperatorTime(event.key, event.count, (event.self_device_time_total if on_gpu else event.self_cpu_time_total) / 1e3)
        for event in trace.key_averages()
    ]
    return sorted((row for row in rows if row.self_ms > 0), key=lambda row: -row.self_ms)[:top]


# --- built-ins by any name: the kernels that ran, not the Python names that were called ---------------

# A range the tests' stand-ins run in (see ``recording._standing_in``): what runs inside it is the
# course's, never the student's, so its kernels are not held against the student.
STAND_IN_RANGE = "course_utils.stand_in"
_shields_opened = [0]  # ranges the stand-ins opened: a student's own range of that name is one too many

# A student's own range of that name, or a patched count, would hide a built-in from its check.
GUARDS = Guards(names=("STAND_IN_RANGE", "_shields_opened"), values=("STAND_IN_RANGE",), module=True)
# What notebooks may import from here (tests/test_public_surface.py); the shields are the grader's.
__all__ = ["aten_operators", "time_by_operator"]


def shields_opened() -> int:
    """How many stand-in ranges the course has opened in this process (each launch of a stand-in opens one)."""
    return _shields_opened[0]


# The ATen operators that compute each forbidden built-in. A Python-name tripwire misses the other
# routes (a default argument bound before the test, a closure, ``torch.ops.aten._softmax``,
# ``torch._C._nn.scaled_dot_product_attention``, ``nn.Softmax``, ``softmin``, ``log_softmax().exp()``);
# the dispatcher sees every one of them.
BUILTIN_KERNELS: dict[str, frozenset[str]] = {
    "softmax": frozenset({"softmax", "_softmax", "_safe_softmax", "special_softmax", "log_softmax", "_log_softmax", "special_log_softmax"}),
    "scaled_dot_product_attention": frozenset(
        {
            "scaled_dot_product_attention",
            "_fused_sdp_choice",
            "_scaled_dot_product_attention_math",
            "_scaled_dot_product_attention_math_for_mps",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_fused_attention_overrideable",
        }
    ),
    "multi_head_attention_forward": frozenset({"_native_multi_head_attention"}),
}


def kernels_of(paths: tuple[str, ...]) -> dict[str, str]:
    """ATen operator -> the forbidden built-in (as named in ``paths``) it computes."""
    found: dict[str, str] = {}
    for path in paths:
        name = path.rsplit(".", 1)[-1]
        for family, operators in BUILTIN_KERNELS.items():
            if name.endswith(family):
                found.update({operator: path for operator in operators if operator not in found})
    if "multi_head_attention_forward" in {p.rsplit(".", 1)[-1] for p in paths}:  # it computes attention with SDPA
        found.update({operator: p for p in paths for operator in BUILTIN_KERNELS["scaled_dot_product_attention"] if operator not in found})
    return found


@contextmanager
def builtin_kernels_run(paths: tuple[str, ...]) -> Iterator[list[str]]:
    """While the block runs, trace the ATen operators; at its end, fill the yielded list with each forbidden
    built-in of ``paths`` whose kernel ran outside a stand-in, as ``"torch.softmax (as aten::_softmax)"``."""
    from torch.profiler import profile

    wanted = kernels_of(paths)
    found: list[str] = []
    if not wanted:
        yield found
        return
    opened_before = _shields_opened[0]
    with _stderr_silenced(), profile() as trace:
        yield found
    events = trace.events()
    shielded = [(e.time_range.start, e.time_range.end) for e in events if e.name == STAND_IN_RANGE]
    if len(shielded) > _shields_opened[0] - opened_before:
        shielded = []  # a range of that name that no stand-in opened: forged, so nothing is shielded
    for event in events:
        operator = event.name.removeprefix("aten::")
        if not event.name.startswith("aten::") or operator not in wanted:
            continue
        start, end = event.time_range.start, event.time_range.end
        if not any(low <= start and end <= high for low, high in shielded):
            found.append(f"{wanted[operator]} (as aten::{operator})")


def shielded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run inside the stand-in range: its kernels are the course's, not the student's.

    A stand-in launched like a kernel (``kernel[grid](...)``, as ``course_utils.kernels.launch`` does:
    ``course_utils.emulated_kernels``) stays subscriptable, and the launch it returns runs shielded.
    """
    import functools

    from torch.profiler import record_function

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        _shields_opened[0] += 1
        with record_function(STAND_IN_RANGE):
            return fn(*args, **kwargs)

    if isinstance(fn, type) or not (callable(fn) and hasattr(type(fn), "__getitem__")):
        return run
    return _ShieldedKernel(fn, run)


class _ShieldedKernel:
    """A shielded stand-in for a kernel: called, it runs shielded; ``[grid]`` gives a shielded launch."""

    def __init__(self, fn: Any, run: Callable[..., Any]) -> None:
        self.__wrapped__ = fn
        self._run = run

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return shielded(self.__wrapped__[grid])
