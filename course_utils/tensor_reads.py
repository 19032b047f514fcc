"""How many elements of given tensors a PyTorch function reads, counted as its operations run.

FLOP counters see matrix products only: attention written with elementwise products and a sum does its
work unseen. What every way of computing a tile of scores shares is that it reads the tile's keys. So
``elements_read(fn, *args, watch={"K": K, "V": V})`` counts, for each watched tensor, the elements the
operations inside ``fn`` read from it (``torch.utils._python_dispatch.TorchDispatchMode`` sees every
operation, whatever Python called it):

* an operation that computes from a watched tensor (a product, a sum, an exp, a comparison) reads the
  distinct elements of the view it is given (a broadcast reads each element once);
* a view (a slice, a transpose) reads nothing, and a copy (``.to``, ``.contiguous``, ``torch.cat``, an
  index) reads nothing either: its result is watched under the same name, so computing from a copy
  counts as computing from the tensor.

So a tile read twice, by two passes or by the same products in another order, counts twice, while
``einsum``, float64 copies and other correct variants count as the plain products do. Under grading the
sealed run counts and the trusted replay reads the counts, as for ``count_flops``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .recording import measured

aten = torch.ops.aten
# Operations that move data without computing from it: their outputs are what they read, under its name.
MOVES = {
    aten._to_copy.default,
    aten.clone.default,
    aten.copy_.default,
    aten.cat.default,
    aten.stack.default,
    aten.index_select.default,
    aten.gather.default,
    aten.index.Tensor,
    aten.constant_pad_nd.default,
    aten.repeat.default,
    aten.expand_copy.default,
    aten._unsafe_view.default,
    aten.lift_fresh.default,
    aten.lift_fresh_copy.default,
    aten.alias.default,
    aten.detach.default,
}


def _distinct_elements(tensor: torch.Tensor) -> int:
    """The elements a view reaches: dimensions of stride 0 (a broadcast) add none."""
    if tensor.numel() == 0:
        return 0
    return math.prod(size for size, stride in zip(tensor.shape, tensor.stride()) if stride != 0)


class _ReadCounter(TorchDispatchMode):
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

    def _name(self, value: Any) -> str | None:
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            return self.names.get(value.untyped_storage().data_ptr())
        return None

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        inputs = [value for value in tree_flatten((args, kwargs))[0] if self._name(value) is not None]
        if not inputs or func.is_view:
            return result
        if func in MOVES:
            source = self._name(args[1] if func is aten.copy_.default else inputs[0])
            for output in tree_flatten(result)[0]:
                if isinstance(output, torch.Tensor) and source is not None:
                    self._watch(output, source)
            return result
        for value in inputs:
            self.reads[self._name(value)] += _distinct_elements(value)  # type: ignore[index]
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
