"""What Triton kernels did as they ran in the interpreter: every launch, every program's loads and products.

A kernel's code can hide what it does: one loop that walks the keys twice holds one load of K in its
code, and ``tl.where`` can zero the tiles a kernel should have skipped. So the course measures what
executes. ``trace_kernels(fn, *args, watch={"K": K, ...}, outputs=("O", "L"))`` runs ``fn`` with
Triton's interpreter instrumented and returns a ``KernelTrace``:

* every launch, however it was started (``launch(...)``, ``kernel[grid](...)``, an autotuned kernel),
  and which kernel it was: the names the notebook binds to that very kernel object (``LaunchTrace.names``),
  never its ``__name__``, so ``trace.of("flash_attention_kernel")`` is the kernel the notebook's cell made,
  not another one given its name (under grading, the kernel the graded cell made: a later cell that binds
  another kernel to the name does not make it the graded one, ``recording.made_by_graded_cells``);
* for each program of a launch, the ``tl.load`` and ``tl.dot`` calls it ran (atomics read and write), and
  for each role the test names by object, what it read of it (masked-out lanes are not reads): how many
  elements, how many distinct ones, how many lay outside the tensor, and the rows (the second-to-last
  axis). A watched input is known by its memory, or, copied, by its values (``course_utils.watched``),
  whatever the kernel's parameter is called; an output, by the memory of the tensor ``fn`` returned in
  that place. A tensor that is none of these is listed as ``"argument <parameter>"``;
and ``returned_by_kernels(fn, *args)`` says, for each tensor ``fn`` returned, how many of its elements
hold what each kernel (by the names bound to it, as above) last stored there: a launcher that computes the
answer itself and launches its kernel for show (or has another kernel copy the answer in) returns none of
its kernel's. (Two measurements, so that what a kernel read and what its launcher returned are evidence
of different mistakes.)

Under grading the sealed run traces and the trusted replay reads the trace (plain data), as for
``count_flops``. The trace needs the interpreter (``TRITON_INTERPRET=1``, how kernels are graded);
on a GPU ``trace_kernels`` returns None.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from .memory import tensors_in
from .recording import made_by_graded_cells, measured
from .watched import ENOUGH, Watched, as_values, copy_of, storage_address, watch_positions


def _unnamed(kernel: str) -> str:
    """A launch's kernel that no name holds, for messages (a kernel a later cell bound to a graded name is one)."""
    return f"{kernel} (a kernel no name of the notebook holds; a graded name is the kernel the graded cell made)"


@dataclass(frozen=True)
class TensorReads:
    """What one program read of one tensor (a role the test named, or an argument no role holds)."""

    elements: int  # element reads, repeats included
    distinct: int  # distinct elements read
    outside: int  # reads of memory outside the tensor (padding, a neighbour's storage)
    rows: tuple[int, int] | None  # (first, last) index on the tensor's second-to-last axis read; None if none
    fewest: int = 0  # the fewest times any element read was read: 2 for a kernel that reads all it reads twice


@dataclass(frozen=True)
class ProgramTrace:
    pid: tuple[int, int, int]
    loads: int  # tl.load calls executed (atomics included)
    dots: int  # tl.dot calls executed
    reads: dict[str, TensorReads]
    writes: dict[str, TensorReads] = field(default_factory=dict)  # where its stores (and atomics) landed, by role

    def read(self, role: str) -> TensorReads:
        return self.reads.get(role, TensorReads(0, 0, 0, None, 0))

    def wrote(self, role: str) -> TensorReads:
        """What the program wrote of a role: ``wrote("O").rows`` are the queries it answered, whatever it read them from."""
        return self.writes.get(role, TensorReads(0, 0, 0, None, 0))


@dataclass(frozen=True)
class LaunchTrace:
    kernel: str  # the kernel's __name__, for messages only
    grid: tuple[int, int, int]
    constexprs: dict[str, int]
    programs: tuple[ProgramTrace, ...]
    names: tuple[str, ...] = ()  # the names bound to this kernel object where it and the test live

    def describe(self) -> str:
        return "/".join(self.names) if self.names else _unnamed(self.kernel)


@dataclass(frozen=True)
class KernelTrace:
    launches: tuple[LaunchTrace, ...]

    def of(self, kernel: str) -> list[LaunchTrace]:
        """The launches of the kernel object the notebook binds to ``kernel``."""
        return [launch for launch in self.launches if kernel in launch.names]

    @staticmethod
    def from_data(data: Any) -> "KernelTrace":
        """From the plain data the measurement records (untrusted: malformed data raises ValueError)."""
        try:
            launches = tuple(
                LaunchTrace(
                    str(launch["kernel"]),
                    tuple(int(g) for g in launch["grid"]),  # type: ignore[arg-type]
                    {str(k): int(v) for k, v in launch["constexprs"].items()},
                    tuple(_program_from_data(program) for program in launch["programs"]),
                    tuple(str(name) for name in launch["names"]),
                )
                for launch in data["launches"]
            )
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            raise ValueError(f"a malformed kernel trace: {error}") from None
        return KernelTrace(launches)


def _reads_from_data(reads: Any) -> dict[str, TensorReads]:
    return {
        str(name): TensorReads(
            int(r["elements"]),
            int(r["distinct"]),
            int(r["outside"]),
            None if r["rows"] is None else (int(r["rows"][0]), int(r["rows"][1])),
            int(r["fewest"]),
        )
        for name, r in reads.items()
    }


def _program_from_data(program: Any) -> ProgramTrace:
    return ProgramTrace(
        tuple(int(p) for p in program["pid"]),  # type: ignore[arg-type]
        int(program["loads"]),
        int(program["dots"]),
        _reads_from_data(program["reads"]),
        _reads_from_data(program["writes"]),
    )


# --- which kernel a launch was ---------------------------------------------------------------------------


def _python_function(kernel: Any) -> Any:
    for _ in range(8):  # an autotuner around a heuristics around a JITFunction: a few layers, never a cycle
        if not hasattr(kernel, "fn"):
            break
        kernel = kernel.fn
    return kernel


def _is_kernel(value: Any) -> bool:
    return type(value).__module__.startswith("triton.") and hasattr(value, "fn")


def callers_kernels(depth: int = 2) -> dict[str, Any]:
    """The Triton kernels bound to names where the test runs (its globals and locals), by name: what a launch's
    kernel is checked against. ``depth``: frames up from here to the test's."""
    frame = sys._getframe(depth)
    found = {**frame.f_globals, **frame.f_locals}
    return {name: value for name, value in found.items() if _is_kernel(value)}


def _written(fn: Any) -> Any:
    """The function as written, for the interpreter's rewritten copy of it (what its grid executor runs)."""
    from triton.runtime import interpreter

    rewritten = getattr(interpreter.InterpretedFunction, "rewritten_fn", {})
    return next((original for original, copy in list(rewritten.items()) if copy is fn), fn)


def kernel_names(fn: Any, known: dict[str, Any]) -> tuple[str, ...]:
    """The names bound to the kernel whose Python function is ``fn``: in ``known`` (where the test runs) and in the
    namespace the kernel was defined in (the notebook's, or a module's); under grading, a graded name only where
    ``fn`` is the kernel the graded cell bound to it."""
    fn = _written(fn)
    names = {name for name, value in known.items() if _python_function(value) is fn}
    namespace = getattr(fn, "__globals__", None)
    if isinstance(namespace, dict):
        names.update(name for name, value in list(namespace.items()) if _is_kernel(value) and _python_function(value) is fn)
    # Under grading, a graded name is the kernel its graded cell made, whatever a later cell bound to the name;
    # the same code run again (a cell copied while experimenting) is the same kernel.
    for name, made in made_by_graded_cells().items():
        if _is_kernel(made) and _python_function(made) is fn or _same_code(made, fn):
            names.add(name)
        else:
            names.discard(name)
    return tuple(sorted(names))


def _same_code(made: Any, fn: Any) -> bool:
    """Whether ``fn`` is the graded kernel ``made`` defined again from the same text (its decorators aside)."""
    if not _is_kernel(made):
        return False
    source = _source(_python_function(made))
    return source is not None and source == _source(fn)


def _source(fn: Any) -> str | None:
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):  # no text kept for it
        return None
    return text[text.find("def ") :]


# --- the instrumented interpreter -----------------------------------------------------------------------


@dataclass
class _Memory:
    """A tensor a launch can reach: an argument, or a watched input (a kernel may reach it through another's pointer)."""

    parameter: str  # "" for a watched input that is not an argument
    tensor: torch.Tensor
    start: int  # the storage's first and last byte addresses
    stop: int
    copy: Watched | None = None  # the watched tensor its storage held a copy of when the launch began
    values: np.ndarray | None = None  # the storage's values then, for a copy


def _storage_values(tensor: torch.Tensor) -> torch.Tensor:
    """The whole storage under ``tensor``, flat, at its dtype."""
    storage = tensor.untyped_storage()
    whole = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    return whole.set_(storage, 0, (storage.nbytes() // tensor.element_size(),), (1,))


def _memory(parameter: str, tensor: torch.Tensor, watched: list[Watched]) -> _Memory:
    start = storage_address(tensor) or 0
    memory = _Memory(parameter, tensor, start, start + tensor.untyped_storage().nbytes())
    if parameter and all(start != w.storage for w in watched):
        whole = _storage_values(tensor)
        memory.copy = copy_of(watched, whole)
        memory.values = as_values(whole) if memory.copy is not None else None
    return memory


@dataclass
class _Launch:
    kernel: str
    names: tuple[str, ...]
    grid: tuple[int, int, int] = (1, 1, 1)
    constexprs: dict[str, int] = field(default_factory=dict)
    memory: list[_Memory] = field(default_factory=list)
    programs: dict[tuple[int, int, int], dict[str, Any]] = field(default_factory=dict)

    def key(self) -> tuple[str, ...]:
        """Whose stores these are: the names bound to the kernel, or one that no notebook name can be."""
        return self.names or (_unnamed(self.kernel),)


@dataclass
class _Tracer:
    watched: list[Watched] = field(default_factory=list)
    known: dict[str, Any] = field(default_factory=dict)  # the kernels bound to names where the test runs
    launches: list[_Launch] = field(default_factory=list)
    current: _Launch | None = None
    stored: list[tuple[np.ndarray, np.ndarray, tuple[str, ...]]] = field(default_factory=list)  # (addresses, values, whose)

    def program(self, builder: Any) -> dict[str, Any] | None:
        if self.current is None:
            return None
        pid = tuple(int(i) for i in builder.grid_idx)
        return self.current.programs.setdefault(pid, {"loads": 0, "dots": 0, "reads": {}, "writes": {}, "copied": {}})

    def loaded(self, builder: Any, addresses: np.ndarray, values: np.ndarray | None = None) -> None:
        program = self.program(builder)
        if program is not None:
            program["loads"] += 1
            if values is not None:
                addresses = self._copied_in_the_launch(program, addresses, values)
            self._reached(program["reads"], addresses)

    def _copied_in_the_launch(self, program: dict[str, Any], addresses: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Loads of a watched tensor's values (``ENOUGH`` of them at once) from memory that held no copy of it when the
        launch began: a copy the kernel made itself, read as the tensor. Returns the addresses left to file by memory."""
        for memory in self.current.memory:  # type: ignore[union-attr]
            inside = (addresses >= memory.start) & (addresses < memory.stop)
            dtype = memory.tensor.dtype
            if not inside.any() or memory.copy is not None or not dtype.is_floating_point or torch.finfo(dtype).bits < 32:
                continue
            if any(memory.start == w.storage for w in self.watched):
                continue
            for watched in self.watched:
                ids = watched.match(values[inside], dtype)
                found = ids[ids >= 0]
                if found.size >= min(ENOUGH, watched.values(dtype)[0].size):
                    program["copied"].setdefault(watched.role, []).append(found)
                    addresses, values = addresses[~inside], values[~inside]
                    break
        return addresses

    def _reached(self, into: dict[int, list[np.ndarray]], addresses: np.ndarray) -> None:
        """File the addresses under the memory each lies in (the first that holds it)."""
        for index, memory in enumerate(self.current.memory):  # type: ignore[union-attr]
            inside = (addresses >= memory.start) & (addresses < memory.stop)
            if inside.any():
                into.setdefault(index, []).append(addresses[inside])
                addresses = addresses[~inside]

    def dotted(self, builder: Any) -> None:
        program = self.program(builder)
        if program is not None:
            program["dots"] += 1

    def wrote(self, builder: Any, ptrs: Any, mask: Any) -> None:
        """Keep where the program wrote, and what a store left at each address, read back from memory (after an
        atomic, the result)."""
        from triton.runtime import interpreter

        addresses = _masked_addresses(ptrs, mask)
        if not addresses.size:
            return
        program = self.program(builder)
        if program is not None:
            self._reached(program["writes"], addresses)
        dtype = interpreter._get_np_dtype(ptrs.get_element_ty())
        now = interpreter._interpreter.load(
            addresses.astype(np.uint64), np.ones(addresses.shape, bool), np.zeros(addresses.shape, dtype), dtype
        )
        whose = self.current.key() if self.current is not None else ("",)
        self.stored.append((addresses, np.asarray(now, dtype=np.float64), whose))


def _masked_addresses(ptrs: Any, mask: Any) -> np.ndarray:
    addresses = np.asarray(ptrs.data).astype(np.int64)
    if mask is None:
        return addresses.ravel()
    lanes = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
    return addresses[lanes].ravel()


def _masked_values(ptrs: Any, mask: Any, loaded: Any) -> np.ndarray:
    """What a load gave, in the lanes ``_masked_addresses`` lists, as float64."""
    shape = np.asarray(ptrs.data).shape
    lanes = np.broadcast_to(np.asarray(mask.data, dtype=bool), shape)
    return np.broadcast_to(np.asarray(loaded.data), shape)[lanes].ravel().astype(np.float64)


def _launch_of(executor: Any, args: tuple[Any, ...], kwargs: dict[str, Any], tracer: _Tracer) -> _Launch:
    """A launch as it starts: its kernel, the memory it can reach, integer constexprs and grid (a grid function's comes after)."""
    bound = inspect.signature(executor.fn).bind_partial(*args, **{k: v for k, v in kwargs.items() if k in executor.arg_names})
    launch = _Launch(getattr(executor.fn, "__name__", "kernel"), kernel_names(executor.fn, tracer.known))
    for name, value in bound.arguments.items():
        value = getattr(value, "base", value) if type(value).__name__ == "TensorWrapper" else value
        if isinstance(value, torch.Tensor):
            launch.memory.append(_memory(name, value, tracer.watched))
        elif name in executor.constexprs and isinstance(value, (bool, int)):
            launch.constexprs[name] = int(value)
        elif type(value).__name__ == "constexpr" and isinstance(value.value, (bool, int)):
            launch.constexprs[name] = int(value.value)
    launch.memory.extend(_memory("", w.tensor, tracer.watched) for w in tracer.watched)
    if not callable(executor.grid):
        launch.grid = tuple(int(g) for g in (*executor.grid, 1, 1, 1)[:3])  # type: ignore[assignment]
    return launch


@contextlib.contextmanager
def _instrumented(watched: list[Watched] | None = None, known: dict[str, Any] | None = None) -> Iterator[_Tracer]:
    """Triton's interpreter with its loads, stores, atomics, products and launches reported to a tracer, while the block runs."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    tracer = _Tracer(watched or [], known or {})
    load, store, dot = builder.create_masked_load, builder.create_masked_store, builder.create_dot
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas
    run = interpreter.GridExecutor.__call__

    def masked_load(ptrs: Any, mask: Any, other: Any, *rest: Any, **named: Any) -> Any:
        result = load(ptrs, mask, other, *rest, **named)
        tracer.loaded(builder, _masked_addresses(ptrs, mask), _masked_values(ptrs, mask, result))
        return result

    def masked_store(ptrs: Any, value: Any, mask: Any, *rest: Any, **named: Any) -> Any:
        result = store(ptrs, value, mask, *rest, **named)
        tracer.wrote(builder, ptrs, mask)
        return result

    def atomic_rmw(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **named: Any) -> Any:
        tracer.loaded(builder, _masked_addresses(ptr, mask))  # an atomic reads what it changes
        result = rmw(op, ptr, val, mask, *rest, **named)
        tracer.wrote(builder, ptr, mask)
        return result

    def atomic_cas(ptr: Any, cmp: Any, val: Any, *rest: Any, **named: Any) -> Any:
        tracer.loaded(builder, _masked_addresses(ptr, None))
        result = cas(ptr, cmp, val, *rest, **named)
        tracer.wrote(builder, ptr, None)
        return result

    def counted_dot(*args: Any, **kwargs: Any) -> Any:
        tracer.dotted(builder)
        return dot(*args, **kwargs)

    def traced_run(executor: Any, *args: Any, **kwargs: Any) -> Any:
        grid, launch = executor.grid, _launch_of(executor, args, kwargs, tracer)
        saved, tracer.current = tracer.current, launch
        tracer.launches.append(launch)
        try:
            return run(executor, *args, **kwargs)
        finally:
            if callable(grid):  # known once the interpreter has called it
                launch.grid = tuple(int(g) for g in builder.grid_dim)  # type: ignore[assignment]
            tracer.current = saved

    builder.create_masked_load, builder.create_masked_store, builder.create_dot = masked_load, masked_store, counted_dot
    builder.create_atomic_rmw, builder.create_atomic_cas = atomic_rmw, atomic_cas
    interpreter.GridExecutor.__call__ = traced_run
    try:
        yield tracer
    finally:
        for name in ("create_masked_load", "create_masked_store", "create_dot", "create_atomic_rmw", "create_atomic_cas"):
            builder.__dict__.pop(name, None)
        interpreter.GridExecutor.__call__ = run


# --- what the trace holds ---------------------------------------------------------------------------------

Resolver = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # addresses -> (element ids, rows of those inside)


def _row_major_addresses(tensor: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Each element's byte address, in row-major order, and its index on the second-to-last axis."""
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in tensor.shape], indexing="ij")
    address = np.full(tuple(tensor.shape), tensor.data_ptr(), dtype=np.int64)
    for axis, grid in enumerate(grids):
        address = address + grid * tensor.stride(axis) * tensor.element_size()
    row = grids[-2] if tensor.dim() >= 2 else np.zeros(tuple(tensor.shape), dtype=np.int64)
    return address.ravel(), np.asarray(row).ravel()


def _by_layout(tensor: torch.Tensor) -> Resolver:
    """Reads of ``tensor``'s storage as its elements (their row-major index), and as outside it (ids below 0: the address)."""
    address, row = _row_major_addresses(tensor)
    order = np.argsort(address, kind="stable")
    offsets, rows = address[order], row[order]

    def resolve(addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not offsets.size:
            return -addresses - 1, np.zeros(0, dtype=np.int64)
        at = np.clip(np.searchsorted(offsets, addresses), 0, offsets.size - 1)
        inside = offsets[at] == addresses
        return np.where(inside, order[at], -addresses - 1), rows[at][inside]

    return resolve


def _by_values(memory: _Memory) -> Resolver:
    """Reads of a copy as the watched elements whose values they read (reads of anything else in it are not the tensor's)."""
    watched, values = memory.copy, memory.values
    size = memory.tensor.element_size()
    shape = watched.tensor.shape  # type: ignore[union-attr]

    def resolve(addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.clip((addresses - memory.start) // size, 0, values.size - 1)  # type: ignore[union-attr]
        ids = watched.match(values[at], memory.tensor.dtype)  # type: ignore[index, union-attr]
        ids = ids[ids >= 0]
        rows = (ids // shape[-1]) % shape[-2] if len(shape) >= 2 else np.zeros(ids.shape, dtype=np.int64)
        return ids, rows

    return resolve


def _role(memory: _Memory, inputs: dict[int | None, Watched], outputs: dict[int | None, tuple[str, torch.Tensor]]) -> tuple[str, Resolver]:
    """Whose reads a reach into this memory are: a watched input's (by storage, then by values), an output's, or the argument's."""
    if memory.start in inputs:
        return inputs[memory.start].role, _by_layout(inputs[memory.start].tensor)
    if memory.start in outputs:
        name, tensor = outputs[memory.start]
        return name, _by_layout(tensor)
    if memory.copy is not None:
        return memory.copy.role, _by_values(memory)
    return f"argument {memory.parameter}", _by_layout(memory.tensor)


def _reads(ids: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    distinct, times = np.unique(ids, return_counts=True)
    return {
        "elements": int(ids.size),
        "distinct": int(distinct.size),
        "outside": int((distinct < 0).sum()),
        "rows": None if not rows.size else [int(rows.min()), int(rows.max())],
        "fewest": int(times.min()) if times.size else 0,
    }


def _parts_by_role(
    reached: dict[int, list[np.ndarray]], roles: list[tuple[str, Resolver]]
) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """The addresses a program reached in each memory, as the elements (and rows) it reached of each role."""
    found: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for index, chunks in reached.items():
        role, resolve = roles[index]
        found.setdefault(role, []).append(resolve(np.concatenate(chunks)))
    return found


def _copies_read(copied: dict[str, list[np.ndarray]], watched: list[Watched]) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """The watched elements a program read from copies its launch made, and their rows."""
    shapes = {w.role: w.tensor.shape for w in watched}
    found = {}
    for role, chunks in copied.items():
        ids, shape = np.concatenate(chunks), shapes[role]
        rows = (ids // shape[-1]) % shape[-2] if len(shape) >= 2 else np.zeros(ids.shape, dtype=np.int64)
        found[role] = [(ids, rows)]
    return found


def _summarized(parts: dict[str, list[tuple[np.ndarray, np.ndarray]]]) -> dict[str, dict[str, Any]]:
    return {role: _reads(np.concatenate([i for i, _ in found]), np.concatenate([r for _, r in found])) for role, found in parts.items()}


def _summary(tracer: _Tracer, outputs: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The trace as plain data: what crosses from the sealed run to the trusted pass."""
    inputs = {w.storage: w for w in tracer.watched}
    returned = {storage_address(tensor): (name, tensor) for name, tensor in outputs.items()}
    launches = []
    for launch in tracer.launches:
        roles = [_role(memory, inputs, returned) for memory in launch.memory]
        programs = []
        for pid, program in sorted(launch.programs.items()):
            parts = _parts_by_role(program["reads"], roles)
            for role, found in _copies_read(program["copied"], tracer.watched).items():
                parts.setdefault(role, []).extend(found)  # the tensor itself and the launch's own copies of it: one count
            reads, writes = _summarized(parts), _summarized(_parts_by_role(program["writes"], roles))
            programs.append({"pid": list(pid), "loads": program["loads"], "dots": program["dots"], "reads": reads, "writes": writes})
        launches.append(
            {
                "kernel": launch.kernel,
                "names": list(launch.names),
                "grid": list(launch.grid),
                "constexprs": launch.constexprs,
                "programs": programs,
            }
        )
    return {"launches": launches}


def _as_stored(tracer: _Tracer, tensor: torch.Tensor) -> dict[str, int]:
    """For each kernel (by the names bound to it), how many elements of ``tensor`` hold exactly what that kernel last
    stored at their address (and ``""``: the tensor's elements in all)."""
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
        for kernel in tracer.stored[int(store)][2]:
            counts[kernel] = counts.get(kernel, 0) + int((same & (last_store[at] == store)).sum())
    return counts


def interpreted() -> bool:
    """Kernels run in Triton's interpreter here, where a trace can be taken."""
    from .kernels import HAVE_TRITON, KERNELS_NATIVE

    return HAVE_TRITON and not KERNELS_NATIVE


def _watching(args: tuple[Any, ...], watch: dict[str, torch.Tensor] | None) -> Callable[[tuple[Any, ...]], list[Watched]]:
    """The watched tensors among the inputs a measure is given (the test's, or the copies a replay makes of them)."""
    positions = watch_positions(args, watch or {})
    return lambda inputs: [Watched(role, inputs[index]) for role, index in positions.items()]


def trace_kernels(
    fn: Callable[..., Any],
    *args: Any,
    watch: dict[str, torch.Tensor] | None = None,
    outputs: tuple[str, ...] = (),
    **kwargs: Any,
) -> KernelTrace | None:
    """``fn(*args, **kwargs)`` with every kernel launch traced; None where kernels run natively on a GPU.

    ``watch``: the roles the test reads by (each tensor one of ``args``); ``outputs``: the roles of the tensors ``fn``
    returns, in order. See the module's docstring.
    """
    if not interpreted():
        return None
    watching, known = _watching(args, watch), callers_kernels()

    def measure(thunk: Callable[[], Any], inputs: tuple, named: dict[str, Any]) -> dict[str, Any]:
        with _instrumented(watching(inputs), known) as tracer:
            result = thunk()
        return _summary(tracer, dict(zip(outputs, tensors_in(result))))

    measure.takes_inputs = True  # type: ignore[attr-defined]  # run again on copies of the inputs, it watches the copies
    return KernelTrace.from_data(measured("kernel_trace", fn, args, kwargs, measure))


def returned_by_kernels(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[dict[str, int], ...] | None:
    """For each tensor ``fn(*args, **kwargs)`` returns: ``{"": its elements, kernel: how many of them hold what that
    kernel (by each name bound to it) last stored at their address, ...}``. None where kernels run natively on a GPU."""
    if not interpreted():
        return None
    known = callers_kernels()

    def measure(thunk: Callable[[], Any]) -> list[dict[str, int]]:
        with _instrumented(None, known) as tracer:
            result = thunk()
        return [_as_stored(tracer, tensor) for tensor in tensors_in(result)]

    data = measured("kernel_outputs", fn, args, kwargs, measure)
    try:
        return tuple({str(kernel): int(count) for kernel, count in counts.items()} for counts in data)
    except (AttributeError, TypeError, ValueError) as error:
        raise ValueError(f"a malformed record of a launcher's outputs: {error}") from None
