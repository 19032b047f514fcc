"""What Triton kernels did as they ran in the interpreter: every launch, every program's loads and products.

A kernel's code can hide what it does: one loop that walks the keys twice holds one load of K in its
code, and ``tl.where`` can zero the tiles a kernel should have skipped. So the course measures what
executes. ``trace_kernels(fn, *args)`` runs ``fn`` with Triton's interpreter instrumented and returns a
``KernelTrace``:

* every launch, however it was started (``launch(...)``, ``kernel[grid](...)``, an autotuned kernel):
  the interpreter's grid executor sees them all;
* for each program of a launch, the ``tl.load`` and ``tl.dot`` calls it ran, and for each tensor
  argument the elements it read (masked-out lanes are not reads), how many distinct ones, how many
  lay outside the tensor, and the rows (the second-to-last axis) it read;
and ``returned_by_kernels(fn, *args)`` says, for each tensor ``fn`` returned, how many of its elements
hold what each kernel last stored there: a launcher that computes the answer itself and launches its
kernel for show (or has another kernel copy the answer in) returns none of its kernel's. (Two measurements, so that what a kernel read and what its launcher returned are
evidence of different mistakes.)

Under grading the sealed run traces and the trusted replay reads the trace (plain data), as for
``count_flops``. The trace needs the interpreter (``TRITON_INTERPRET=1``, how kernels are graded);
on a GPU ``trace_kernels`` returns None.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from .memory import tensors_in
from .recording import measured


@dataclass(frozen=True)
class TensorReads:
    """What one program read of one tensor argument."""

    elements: int  # element reads, repeats included
    distinct: int  # distinct elements read
    outside: int  # reads of memory outside the tensor (padding, a neighbour's storage)
    rows: tuple[int, int] | None  # (first, last) index on the tensor's second-to-last axis read; None if none
    fewest: int = 0  # the fewest times any element read was read: 2 for a kernel that reads all it reads twice


@dataclass(frozen=True)
class ProgramTrace:
    pid: tuple[int, int, int]
    loads: int  # tl.load calls executed
    dots: int  # tl.dot calls executed
    reads: dict[str, TensorReads]

    def read(self, name: str) -> TensorReads:
        return self.reads.get(name, TensorReads(0, 0, 0, None, 0))


@dataclass(frozen=True)
class LaunchTrace:
    kernel: str
    grid: tuple[int, int, int]
    constexprs: dict[str, int]
    programs: tuple[ProgramTrace, ...]


@dataclass(frozen=True)
class KernelTrace:
    launches: tuple[LaunchTrace, ...]

    def of(self, kernel: str) -> list[LaunchTrace]:
        return [launch for launch in self.launches if launch.kernel == kernel]

    @staticmethod
    def from_data(data: Any) -> "KernelTrace":
        """From the plain data the measurement records (untrusted: malformed data raises ValueError)."""
        try:
            launches = tuple(
                LaunchTrace(
                    str(launch["kernel"]),
                    tuple(int(g) for g in launch["grid"]),  # type: ignore[arg-type]
                    {str(k): int(v) for k, v in launch["constexprs"].items()},
                    tuple(
                        ProgramTrace(
                            tuple(int(p) for p in program["pid"]),  # type: ignore[arg-type]
                            int(program["loads"]),
                            int(program["dots"]),
                            {
                                str(name): TensorReads(
                                    int(r["elements"]),
                                    int(r["distinct"]),
                                    int(r["outside"]),
                                    None if r["rows"] is None else (int(r["rows"][0]), int(r["rows"][1])),
                                    int(r["fewest"]),
                                )
                                for name, r in program["reads"].items()
                            },
                        )
                        for program in launch["programs"]
                    ),
                )
                for launch in data["launches"]
            )
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValueError(f"a malformed kernel trace: {error}") from None
        return KernelTrace(launches)


# --- the instrumented interpreter -----------------------------------------------------------------------


@dataclass
class _Tensor:
    name: str
    tensor: torch.Tensor
    start: int  # the storage's first and last byte addresses
    stop: int
    offsets: np.ndarray | None = None  # sorted element addresses of the view, and the row of each
    rows: np.ndarray | None = None

    def index(self) -> tuple[np.ndarray, np.ndarray]:
        """The view's element addresses, sorted, and the row (second-to-last axis) of each."""
        if self.offsets is None:
            address, row = _row_major_addresses(self.tensor)
            order = np.argsort(address, kind="stable")
            self.offsets, self.rows = address[order], row[order]
        return self.offsets, self.rows  # type: ignore[return-value]


def _row_major_addresses(tensor: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Each element's byte address, in row-major order, and its index on the second-to-last axis."""
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in tensor.shape], indexing="ij")
    address = np.full(tuple(tensor.shape), tensor.data_ptr(), dtype=np.int64)
    for axis, grid in enumerate(grids):
        address = address + grid * tensor.stride(axis) * tensor.element_size()
    row = grids[-2] if tensor.dim() >= 2 else np.zeros(tuple(tensor.shape), dtype=np.int64)
    return address.ravel(), np.asarray(row).ravel()


@dataclass
class _Launch:
    kernel: str
    grid: tuple[int, int, int] = (1, 1, 1)
    constexprs: dict[str, int] = field(default_factory=dict)
    tensors: list[_Tensor] = field(default_factory=list)
    programs: dict[tuple[int, int, int], dict[str, Any]] = field(default_factory=dict)


@dataclass
class _Tracer:
    launches: list[_Launch] = field(default_factory=list)
    current: _Launch | None = None
    stored: list[tuple[np.ndarray, np.ndarray, str]] = field(default_factory=list)  # (addresses, values as float64, kernel), in order

    def program(self, builder: Any) -> dict[str, Any] | None:
        if self.current is None:
            return None
        pid = tuple(int(i) for i in builder.grid_idx)
        return self.current.programs.setdefault(pid, {"loads": 0, "dots": 0, "reads": {}})

    def loaded(self, builder: Any, addresses: np.ndarray) -> None:
        program = self.program(builder)
        if program is None:
            return
        program["loads"] += 1
        for tensor in self.current.tensors:  # type: ignore[union-attr]
            inside = addresses[(addresses >= tensor.start) & (addresses < tensor.stop)]
            if inside.size:
                program["reads"].setdefault(tensor.name, []).append(inside)
                break  # tensors sharing a storage: the first argument gets the reads

    def dotted(self, builder: Any) -> None:
        program = self.program(builder)
        if program is not None:
            program["dots"] += 1

    def wrote(self, ptrs: Any, mask: Any) -> None:
        """Keep what a store left at each address it wrote, read back from memory (after an atomic, the result)."""
        from triton.runtime import interpreter

        addresses = _masked_addresses(ptrs, mask)
        if not addresses.size:
            return
        dtype = interpreter._get_np_dtype(ptrs.get_element_ty())
        now = interpreter._interpreter.load(
            addresses.astype(np.uint64), np.ones(addresses.shape, bool), np.zeros(addresses.shape, dtype), dtype
        )
        kernel = self.current.kernel if self.current is not None else ""
        self.stored.append((addresses, np.asarray(now, dtype=np.float64), kernel))


def _masked_addresses(ptrs: Any, mask: Any) -> np.ndarray:
    addresses = np.asarray(ptrs.data).astype(np.int64)
    lanes = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
    return addresses[lanes].ravel()


def _launch_of(executor: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Launch:
    """A launch as it starts: its kernel, tensor arguments, integer constexprs and grid (a grid function's comes after)."""
    bound = inspect.signature(executor.fn).bind_partial(*args, **{k: v for k, v in kwargs.items() if k in executor.arg_names})
    launch = _Launch(getattr(executor.fn, "__name__", "kernel"))
    for name, value in bound.arguments.items():
        value = getattr(value, "base", value) if type(value).__name__ == "TensorWrapper" else value
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            launch.tensors.append(_Tensor(name, value, storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
        elif name in executor.constexprs and isinstance(value, (bool, int)):
            launch.constexprs[name] = int(value)
        elif type(value).__name__ == "constexpr" and isinstance(value.value, (bool, int)):
            launch.constexprs[name] = int(value.value)
    if not callable(executor.grid):
        launch.grid = tuple(int(g) for g in (*executor.grid, 1, 1, 1)[:3])  # type: ignore[assignment]
    return launch


@contextlib.contextmanager
def _instrumented() -> Iterator[_Tracer]:
    """Triton's interpreter with its loads, stores, atomics, products and launches reported to a tracer, while the block runs."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    tracer = _Tracer()
    load, store, dot, rmw = builder.create_masked_load, builder.create_masked_store, builder.create_dot, builder.create_atomic_rmw
    run = interpreter.GridExecutor.__call__

    def masked_load(ptrs: Any, mask: Any, other: Any, *rest: Any, **named: Any) -> Any:
        tracer.loaded(builder, _masked_addresses(ptrs, mask))
        return load(ptrs, mask, other, *rest, **named)

    def masked_store(ptrs: Any, value: Any, mask: Any, *rest: Any, **named: Any) -> Any:
        result = store(ptrs, value, mask, *rest, **named)
        tracer.wrote(ptrs, mask)
        return result

    def atomic_rmw(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **named: Any) -> Any:
        result = rmw(op, ptr, val, mask, *rest, **named)
        tracer.wrote(ptr, mask)
        return result

    def counted_dot(*args: Any, **kwargs: Any) -> Any:
        tracer.dotted(builder)
        return dot(*args, **kwargs)

    def traced_run(executor: Any, *args: Any, **kwargs: Any) -> Any:
        grid, launch = executor.grid, _launch_of(executor, args, kwargs)
        saved, tracer.current = tracer.current, launch
        tracer.launches.append(launch)
        try:
            return run(executor, *args, **kwargs)
        finally:
            if callable(grid):  # known once the interpreter has called it
                launch.grid = tuple(int(g) for g in builder.grid_dim)  # type: ignore[assignment]
            tracer.current = saved

    builder.create_masked_load, builder.create_masked_store, builder.create_dot = masked_load, masked_store, counted_dot
    builder.create_atomic_rmw = atomic_rmw
    interpreter.GridExecutor.__call__ = traced_run
    try:
        yield tracer
    finally:
        for name in ("create_masked_load", "create_masked_store", "create_dot", "create_atomic_rmw"):
            builder.__dict__.pop(name, None)
        interpreter.GridExecutor.__call__ = run


def _summary(tracer: _Tracer) -> dict[str, Any]:
    """The trace as plain data: what crosses from the sealed run to the trusted pass."""
    launches = []
    for launch in tracer.launches:
        by_name = {tensor.name: tensor for tensor in launch.tensors}
        programs = []
        for pid, program in sorted(launch.programs.items()):
            reads = {}
            for name, chunks in program["reads"].items():
                addresses = np.concatenate(chunks)
                distinct, times = np.unique(addresses, return_counts=True)
                offsets, rows = by_name[name].index()
                at = np.clip(np.searchsorted(offsets, distinct), 0, max(len(offsets) - 1, 0))
                inside = (offsets[at] == distinct) if len(offsets) else np.zeros(distinct.shape, bool)
                read_rows = rows[at][inside]
                reads[name] = {
                    "elements": int(addresses.size),
                    "distinct": int(distinct.size),
                    "outside": int((~inside).sum()),
                    "rows": None if not read_rows.size else [int(read_rows.min()), int(read_rows.max())],
                    "fewest": int(times.min()),
                }
            programs.append({"pid": list(pid), "loads": program["loads"], "dots": program["dots"], "reads": reads})
        launches.append({"kernel": launch.kernel, "grid": list(launch.grid), "constexprs": launch.constexprs, "programs": programs})
    return {"launches": launches}


def _as_stored(tracer: _Tracer, tensor: torch.Tensor) -> dict[str, int]:
    """For each kernel, how many elements of ``tensor`` hold exactly what that kernel last stored at their address
    (and ``""``: the tensor's elements in all)."""
    counts = {"": int(tensor.numel())}
    if tensor.device.type != "cpu" or not tensor.numel() or not tracer.stored:
        return counts
    offsets, _ = _row_major_addresses(tensor)
    values = tensor.detach().contiguous().double().numpy().ravel()
    addresses = np.concatenate([a for a, _, _ in tracer.stored])
    stored = np.concatenate([v for _, v, _ in tracer.stored])
    kernels = np.concatenate([np.full(a.shape, index) for index, (a, _, _) in enumerate(tracer.stored)])
    unique_addresses, first_from_the_end = np.unique(addresses[::-1], return_index=True)  # sorted
    last_values, last_store = stored[::-1][first_from_the_end], kernels[::-1][first_from_the_end]  # the last store at each address
    at = np.clip(np.searchsorted(unique_addresses, offsets), 0, len(unique_addresses) - 1)
    hit = unique_addresses[at] == offsets
    same = hit & ((last_values[at] == values) | (np.isnan(last_values[at]) & np.isnan(values)))
    for store in np.unique(last_store[at][same]):
        kernel = tracer.stored[int(store)][2]
        counts[kernel] = counts.get(kernel, 0) + int((same & (last_store[at] == store)).sum())
    return counts


def interpreted() -> bool:
    """Kernels run in Triton's interpreter here, where a trace can be taken."""
    from .kernels import HAVE_TRITON, KERNELS_NATIVE

    return HAVE_TRITON and not KERNELS_NATIVE


def trace_kernels(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> KernelTrace | None:
    """``fn(*args, **kwargs)`` with every kernel launch traced; None where kernels run natively on a GPU."""
    if not interpreted():
        return None

    def measure(thunk: Callable[[], Any]) -> dict[str, Any]:
        with _instrumented() as tracer:
            thunk()
        return _summary(tracer)

    return KernelTrace.from_data(measured("kernel_trace", fn, args, kwargs, measure))


def returned_by_kernels(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[dict[str, int], ...] | None:
    """For each tensor ``fn(*args, **kwargs)`` returns: ``{"": its elements, kernel: how many of them hold what that
    kernel last stored at their address, ...}``. None where kernels run natively on a GPU."""
    if not interpreted():
        return None

    def measure(thunk: Callable[[], Any]) -> list[dict[str, int]]:
        with _instrumented() as tracer:
            result = thunk()
        return [_as_stored(tracer, tensor) for tensor in tensors_in(result)]

    data = measured("kernel_outputs", fn, args, kwargs, measure)
    try:
        return tuple({str(kernel): int(count) for kernel, count in counts.items()} for counts in data)
    except (AttributeError, TypeError, ValueError) as error:
        raise ValueError(f"a malformed record of a launcher's outputs: {error}") from None
