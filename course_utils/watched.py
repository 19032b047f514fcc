"""The tensors a measurement watches, known by their memory and by their values, never by a name.

A test names roles by object (``watch={"K": K}``): what student code calls its tensors is its own
choice, so a measurement attributes what it sees to a role by what the tensor *is*:

* its storage: the watched tensor itself and every view of it (a slice, a transpose, a storage alias);
* its values: a tensor whose storage is none of the watched ones, yet holds a watched tensor's values
  at its own dtype (a clone, a contiguous or float64 copy, a copy made through the storage with ctypes,
  a padded copy), is a copy of it, however made. Test inputs are random, so an unrelated tensor holds
  at most a stray value or two of another: ``ENOUGH`` of them make a copy.

``elements_read`` (``course_utils.tensor_reads``) and ``trace_kernels`` (``course_utils.kernel_trace``)
both take ``watch=`` and share this.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

ENOUGH = 8  # values of a watched tensor (or all of a smaller one) that make a 32- or 64-bit tensor a copy of it


def watch_positions(args: tuple[Any, ...], watch: dict[str, torch.Tensor]) -> dict[str, int]:
    """Where each watched tensor sits among ``args`` (it must be one of them: the measurement may be rerun on copies)."""
    positions = {}
    for name, tensor in watch.items():
        found = [index for index, value in enumerate(args) if value is tensor]
        if not found:
            raise ValueError(f"watch: {name} is not one of the arguments")
        positions[name] = found[0]
    return positions


def storage_address(tensor: torch.Tensor) -> int | None:
    """The first byte of the tensor's storage; None for a tensor without one (meta, a wrapper subclass)."""
    if tensor.device.type == "meta":
        return None
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return None


class Watched:
    """One watched tensor: its role, its storage, and its values, sorted, at any dtype asked."""

    def __init__(self, role: str, tensor: torch.Tensor) -> None:
        self.role, self.tensor = role, tensor
        self.storage = storage_address(tensor)
        self._values: dict[torch.dtype, tuple[np.ndarray, np.ndarray]] = {}

    def values(self, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
        """(distinct values of the tensor cast to ``dtype``, sorted, as float64; the row-major index of one element holding each)."""
        if dtype not in self._values:
            flat = self.tensor.detach().to(dtype).reshape(-1).double().cpu().numpy()
            kept = ~np.isnan(flat)
            distinct, first = np.unique(flat[kept], return_index=True)
            self._values[dtype] = distinct, np.flatnonzero(kept)[first]
        return self._values[dtype]

    def match(self, values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
        """For each of ``values`` (held at ``dtype``), the index of a watched element with that value, or -1."""
        distinct, index = self.values(dtype)
        if not distinct.size:
            return np.full(values.shape, -1, dtype=np.int64)
        at = np.clip(np.searchsorted(distinct, values), 0, distinct.size - 1)
        return np.where(distinct[at] == values, index[at], -1)

    def copied_in(self, values: np.ndarray, dtype: torch.dtype) -> bool:
        """``values`` (a tensor's, at its ``dtype``) hold this tensor's: ``ENOUGH`` of its distinct values for 32- and
        64-bit dtypes, every one of them for narrower ones (where unrelated values collide often)."""
        if not dtype.is_floating_point:
            return False
        distinct, _ = self.values(dtype)
        if distinct.size < min(ENOUGH, self.tensor.numel()):
            return False  # a tensor of few values (all zeros, all equal scores): any buffer might hold them
        present = np.isin(distinct, values)
        if torch.finfo(dtype).bits < 32:
            return bool(present.all())
        return int(present.sum()) >= min(ENOUGH, distinct.size)


def as_values(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's values, flat, as float64 (what ``Watched.match`` compares)."""
    return tensor.detach().reshape(-1).double().cpu().numpy()


def copy_of(watched: list[Watched], tensor: torch.Tensor) -> Watched | None:
    """The watched tensor ``tensor`` holds a copy of (by its values; see the module's docstring), if any."""
    if not tensor.dtype.is_floating_point or tensor.numel() == 0 or tensor.device.type == "meta":
        return None
    values = as_values(tensor)
    for candidate in watched:
        if candidate.copied_in(values, tensor.dtype):
            return candidate
    return None
