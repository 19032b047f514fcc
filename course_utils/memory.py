"""Peak tensor memory of a piece of PyTorch code, measured the same way on any machine.

``torch.cuda.max_memory_allocated`` has no CPU twin, and the process's resident size is
blurred by the allocator (freed memory is kept for reuse). So we count what PyTorch itself
returns: every torch function and tensor method called inside ``track_tensor_memory``
reports its output tensors (through torch's public ``TorchFunctionMode``), and we add up
the bytes of the storages that are alive at the same moment. A storage is freed when the
last tensor that uses it is gone. Views share their base's storage and cost nothing extra.

What it does not see: what one call allocates and frees before it returns (the small
per-thread tiles inside PyTorch's CPU flash-attention kernel, the temporaries inside a
composite such as ``nn.MultiheadAttention``), what runs outside Python's reach (a
``torch.jit.script`` function, a ``torch.func.vmap`` body, code under
``torch._C.DisableTorchFunction``), and tensors created before the block began (the inputs).
Code written with tensor operations, as the graded functions are, shows every intermediate
it keeps; the notebooks say so where it matters, and the grader flags the ways around it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .recording import measured


@dataclass
class MemoryReport:
    """Bytes of tensor storage alive at once while a block ran (inputs not counted)."""

    peak_bytes: int = 0
    live_bytes: int = 0
    largest_tensor_bytes: int = 0
    _owners: dict[int, int] = field(default_factory=dict)  # storage address -> live tensors using it
    _sizes: dict[int, int] = field(default_factory=dict)  # storage address -> bytes

    def _adopt(self, tensor: torch.Tensor, storage: torch.UntypedStorage) -> None:
        address, size = storage.data_ptr(), storage.nbytes()
        if size == 0:
            return
        if address not in self._owners:
            self._owners[address] = 0
            self._sizes[address] = size
            self.live_bytes += size
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            self.largest_tensor_bytes = max(self.largest_tensor_bytes, size)
        self._owners[address] += 1
        # PyTorch keeps a tensor's Python object alive as long as the tensor itself lives,
        # so this runs when the tensor is really gone, not when a Python name is dropped.
        weakref.finalize(tensor, self._release, address)

    def _release(self, address: int) -> None:
        self._owners[address] -= 1
        if self._owners[address] == 0:
            del self._owners[address]
            self.live_bytes -= self._sizes.pop(address)


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a (nested) tuple, list or dict of outputs or arguments."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def storage_of(tensor: torch.Tensor) -> torch.UntypedStorage | None:
    """The tensor's storage, or None for a torch.func wrapper (vmap, grad), which has none of its own."""
    try:
        return tensor.untyped_storage()
    except (NotImplementedError, RuntimeError):
        return None


class _Recorder(TorchFunctionMode):
    def __init__(self, report: MemoryReport, known: set[int]) -> None:
        super().__init__()
        self.report = report
        self.known = known  # storages that existed before the block: the inputs

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))  # the mode is off while it handles a call: no recursion
        for tensor in tensors_in(out):
            storage = storage_of(tensor)
            if storage is not None and tensor.device.type != "meta" and storage.data_ptr() not in self.known:
                self.report._adopt(tensor, storage)
        return out


@contextmanager
def track_tensor_memory(*existing: Any) -> Iterator[MemoryReport]:
    """Count the tensor bytes created inside the block; ``existing`` tensors are not counted.

    >>> with track_tensor_memory(q, k, v) as report:
    ...     out = attention(q, k, v)
    >>> report.peak_bytes
    """
    known = {storage.data_ptr() for storage in map(storage_of, tensors_in(existing)) if storage is not None}
    report = MemoryReport()
    with _Recorder(report, known):
        yield report


def peak_tensor_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Peak bytes of tensors alive at once while ``fn(*args, **kwargs)`` ran, inputs excluded.

    The result is kept until the end of the measurement, as a caller would keep it.
    """

    def measure(thunk: Callable[[], Any]) -> int:
        with torch.no_grad(), track_tensor_memory(args, kwargs) as report:
            result = thunk()
        del result
        return report.peak_bytes

    # Under grading the sealed run measures and the trusted replay reads the measurement.
    return measured("peak_tensor_bytes", fn, args, kwargs, measure)
