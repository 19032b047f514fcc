"""How many elements of given tensors a PyTorch function reads, counted as its operations run.

FLOP counters see matrix products only: attention written with elementwise products and a sum does its
work unseen. What every way of computing a tile of scores shares is that it reads the tile's keys. So
``elements_read(fn, *args, watch={"K": K, "V": V})`` counts, for each watched tensor, the elements the
torch functions called inside ``fn`` read from it (through torch's public ``TorchFunctionMode``, which
sees each call from Python, methods and operators included):

* a function that computes from a watched tensor (a product, a sum, an exp, a comparison, SDPA) reads
  the distinct elements of the view it is given (a broadcast reads each element once);
* a view or a copy (a slice, a transpose, ``.to``, ``.contiguous``, ``torch.cat``, an index) reads
  nothing: a view shares the tensor's memory, and a copy is watched under the same name, so computing
  from either counts as computing from the tensor;
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

from .memory import tensors_in
from .recording import grader_bookkeeping, measured

# Functions that view or move data without computing from it; an output that is not a view is a copy, watched
# under its input's name. copy_ and __setitem__ move their source into their first argument.
MOVES = frozenset(
    {
        "__get__", "__getitem__", "__setitem__", "copy_", "to", "float", "double", "half", "bfloat16", "type", "clone",
        "contiguous", "detach", "cpu", "cuda", "reshape", "view", "view_as", "reshape_as", "flatten", "unflatten", "permute",
        "transpose", "t", "unsqueeze", "squeeze", "movedim", "swapaxes", "narrow", "select", "split", "chunk", "unbind",
        "expand", "expand_as", "broadcast_to", "cat", "concat", "concatenate", "stack", "hstack", "vstack", "index_select",
        "gather", "repeat", "repeat_interleave", "tile", "pad", "as_strided", "masked_select", "requires_grad_",
    }
)  # fmt: skip


# Functions that hand a tensor's values to Python or NumPy: reads, though what they return is not a tensor.
TO_PYTHON = frozenset({"tolist", "numpy", "item", "__array__", "__float__", "__int__", "__index__", "__complex__"})
# Functions that make a new tensor from another's shape alone.
SHAPE_ONLY = frozenset(
    {
        "empty_like",
        "zeros_like",
        "ones_like",
        "full_like",
        "rand_like",
        "randn_like",
        "randint_like",
        "new_empty",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_tensor",
    }
)


def _distinct_elements(tensor: torch.Tensor) -> int:
    """The elements a view reaches: dimensions of stride 0 (a broadcast) add none."""
    if tensor.numel() == 0:
        return 0
    return math.prod(size for size, stride in zip(tensor.shape, tensor.stride()) if stride != 0)


class _ReadCounter(TorchFunctionMode):
    def __init__(self, watched: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.names: dict[int, str] = {}  # storage address -> the watched tensor it holds (or a copy of)
        self.kept: list[torch.Tensor] = []  # the copies, alive while counting: their addresses stay theirs
        self.reads = dict.fromkeys(watched, 0)
        for name, tensor in watched.items():
            self._watch(tensor, name)

    def _watch(self, tensor: torch.Tensor, name: str) -> None:
        self.names[tensor.untyped_storage().data_ptr()] = name
        self.kept.append(tensor)

    def _name(self, tensor: torch.Tensor) -> str | None:
        return None if tensor.device.type == "meta" else self.names.get(tensor.untyped_storage().data_ptr())

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if grader_bookkeeping():  # the sealed run fingerprinting the inputs between calls: not the student's reads
            return result
        inputs = [t for t in tensors_in((args, kwargs)) if self._name(t) is not None]
        if not inputs:
            return result
        if getattr(func, "__name__", "") in MOVES:
            name = self._name(inputs[-1] if func.__name__ in ("copy_", "__setitem__") else inputs[0])
            targets = (
                [args[0]] if func.__name__ in ("copy_", "__setitem__") and isinstance(args[0], torch.Tensor) else list(tensors_in(result))
            )
            for output in targets:
                if name is not None and self._name(output) is None:
                    self._watch(output, name)
            return result
        name = getattr(func, "__name__", "")
        if name in SHAPE_ONLY or (name not in TO_PYTHON and next(tensors_in(result), None) is None):
            return result  # a shape, a dtype, a number of elements: no values computed from
        for tensor in inputs:
            self.reads[self._name(tensor)] += _distinct_elements(tensor)  # type: ignore[index]
        return result


def elements_read(fn: Callable[..., Any], *args: Any, watch: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, int]:
    """For each tensor in ``watch`` (each one of ``args``), the elements ``fn(*args, **kwargs)`` read from it (see the
    module's docstring)."""
    positions = {}
    for name, tensor in watch.items():
        found = [index for index, value in enumerate(args) if value is tensor]
        if not found:
            raise ValueError(f"watch: {name} is not one of the arguments")
        positions[name] = found[0]

    def measure(thunk: Callable[[], Any], inputs: tuple, named: dict[str, Any]) -> dict[str, int]:
        with torch.no_grad(), _ReadCounter({name: inputs[index] for name, index in positions.items()}) as counter:
            thunk()
        return dict(counter.reads)

    measure.takes_inputs = True  # type: ignore[attr-defined]  # run again on copies of the inputs, it watches the copies
    return measured("elements_read", fn, args, kwargs, measure)
