"""How many elements of given tensors a PyTorch function reads, counted as its operations run.

FLOP counters see matrix products only: attention written with elementwise products and a sum does its
work unseen. What every way of computing a tile of scores shares is that it reads the tile's keys. So
``elements_read(fn, *args, watch={"K": K, "V": V})`` counts, for each watched tensor, the elements the
operations run inside ``fn`` read from it. They are counted where every operation goes, Python's or not:
PyTorch's dispatcher (a ``TorchDispatchMode``), which also sees operations run with torch functions
disabled. A tensor is the watched one by its memory or its values (``course_utils.watched``), never its name:

* an operation that computes from a watched tensor (a product, a sum, an exp, a comparison, SDPA) reads
  the distinct elements of the view it is given (a broadcast reads each element once);
* a view or a copy (a slice, a transpose, ``.to``, ``.contiguous``, ``torch.cat``, an index) reads
  nothing: a view shares the tensor's memory, and a copy is watched as the tensor, so computing
  from either counts as computing from the tensor; so is a tensor that holds its values however it got
  them (a copy made through its storage, with ctypes);
* asking for a shape, a dtype or a tensor like it (``.size()``, ``torch.empty_like``) reads nothing;
  handing the values to Python or NumPy (``.tolist()``, ``.numpy()``, ``.item()``) reads them.

So a tile read twice, by two passes or by the same products in another order, counts twice, while
``einsum``, float64 copies and other correct variants count as the plain products do. Under grading the
sealed run counts and the trusted replay reads the counts, as for ``count_flops``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .memory import tensors_in
from .recording import grader_bookkeeping, measured
from .watched import Watched, copy_of, storage_address, watch_positions

# Operations that move data without computing from it (as the dispatcher names them); an output that is not
# a view is a copy, watched as its input. copy_ and index_put_ move their source into their first argument.
MOVES = frozenset(
    {
        "_to_copy", "clone", "copy_", "index_put_", "index_put", "cat", "stack", "index", "index_select", "gather",
        "constant_pad_nd", "pad", "repeat", "repeat_interleave", "masked_select", "expand_copy", "lift_fresh",
        "lift_fresh_copy", "_unsafe_view", "contiguous", "alias", "detach", "slice_scatter", "select_scatter",
    }
)  # fmt: skip
# Operations that make a new tensor from another's shape alone.
SHAPE_ONLY = frozenset(
    {
        "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like", "new_empty",
        "new_zeros", "new_ones", "new_full", "new_empty_strided", "empty_strided", "is_same_size", "_has_compatible_shallow_copy_type",
    }
)  # fmt: skip
# Methods that hand a tensor's values to Python or NumPy without an operation the dispatcher sees (``.item()``
# is one: it is counted there).
TO_PYTHON = frozenset({"tolist", "numpy", "__array__"})


def _distinct_elements(tensor: torch.Tensor) -> int:
    """The elements a view reaches: dimensions of stride 0 (a broadcast) add none."""
    if tensor.numel() == 0:
        return 0
    return math.prod(size for size, stride in zip(tensor.shape, tensor.stride()) if stride != 0)


class _Reads:
    """The watched tensors, the storages that hold them or copies of them, and the elements read of each."""

    def __init__(self, watched: dict[str, torch.Tensor]) -> None:
        self.watched = [Watched(name, tensor) for name, tensor in watched.items()]
        self.names: dict[int, str] = {}  # storage address -> the watched tensor it holds (or a copy of)
        self.kept: list[torch.Tensor] = []  # the copies, alive while counting: their addresses stay theirs
        self.reads = dict.fromkeys(watched, 0)
        for name, tensor in watched.items():
            self.watch(tensor, name)

    def watch(self, tensor: torch.Tensor, name: str) -> None:
        address = storage_address(tensor)
        if address is not None:
            self.names[address] = name
            self.kept.append(tensor)

    def name(self, tensor: torch.Tensor) -> str | None:
        """The watched tensor this one is, by its storage, or else by its values (a copy made out of sight)."""
        address = storage_address(tensor)
        if address is None:
            return None
        if address in self.names:
            return self.names[address]
        found = copy_of(self.watched, tensor)
        if found is not None:
            self.watch(tensor, found.role)
            return found.role
        return None

    def count(self, tensors: list[torch.Tensor]) -> None:
        for tensor in tensors:
            name = self.name(tensor)
            if name is not None:
                self.reads[name] += _distinct_elements(tensor)


class _DispatchedReads(TorchDispatchMode):
    def __init__(self, reads: _Reads) -> None:
        super().__init__()
        self.counted = reads

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if grader_bookkeeping():  # the sealed run fingerprinting the inputs between calls: not the student's reads
            return result
        name = func.overloadpacket.__name__
        if name in SHAPE_ONLY:
            return result
        inputs = [t for t in tensors_in((args, kwargs)) if isinstance(t, torch.Tensor)]
        known = [(t, self.counted.name(t)) for t in inputs]
        watched = [(t, n) for t, n in known if n is not None]
        if not watched:
            return result
        outputs = [t for t in tensors_in(result) if isinstance(t, torch.Tensor)]
        sources = {storage_address(t) for t, _ in watched}
        if outputs and all(storage_address(t) in sources for t in outputs) and name not in ("copy_", "index_put_"):
            return result  # a view: it shares the watched tensor's memory
        if name in MOVES:
            moved = watched[-1][1] if name in ("copy_", "index_put_") else watched[0][1]
            targets = [args[0]] if name in ("copy_", "index_put_") else outputs
            for output in targets:
                if self.counted.name(output) is None:
                    self.counted.watch(output, moved)
            return result
        self.counted.count([t for t, _ in watched])
        return result


class _ValuesToPython(TorchFunctionMode):
    """Values handed to Python or NumPy: no operation the dispatcher sees reads them."""

    def __init__(self, reads: _Reads) -> None:
        super().__init__()
        self.counted = reads

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if getattr(func, "__name__", "") in TO_PYTHON and not grader_bookkeeping():
            self.counted.count([t for t in tensors_in((args, kwargs)) if isinstance(t, torch.Tensor)])
        return result


def elements_read(fn: Callable[..., Any], *args: Any, watch: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, int]:
    """For each tensor in ``watch`` (each one of ``args``), the elements ``fn(*args, **kwargs)`` read from it (see the
    module's docstring)."""
    positions = watch_positions(args, watch)

    def measure(thunk: Callable[[], Any], inputs: tuple, named: dict[str, Any]) -> dict[str, int]:
        reads = _Reads({name: inputs[index] for name, index in positions.items()})
        with torch.no_grad(), _ValuesToPython(reads), _DispatchedReads(reads):
            thunk()
        return dict(reads.reads)

    measure.takes_inputs = True  # type: ignore[attr-defined]  # run again on copies of the inputs, it watches the copies
    return measured("elements_read", fn, args, kwargs, measure)
