"""PyTorch emulations of notebook 07's kernels, to grade a launcher whatever its kernel does.

A launcher test stands one of these in for the student's kernel
(``call(softmax_rows, x, stand_ins=SOFTMAX_ROW_KERNEL_STAND_IN)``). The emulation is launched like a
kernel, ``launch(kernel, grid, *args, **kwargs)`` or ``kernel[grid](*args, **kwargs)``, and does what the
kernel's docstring says, through what it was launched with: it reads each input and writes each output
with ``torch.as_strided`` on the tensor it got (its storage, from its storage offset), with the strides
passed, for the programs the grid starts. So a launcher that passes the wrong strides, allocates the
wrong output or starts the wrong grid gets wrong numbers, as it would with a real kernel; and where
the launch itself is wrong, the emulation stops with an ``AssertionError`` that names what is wrong
("the grid has 3 programs on axis 0 but x has 5 rows", "BLOCK=12 is not a power of two").

The arithmetic is PyTorch's (``torch.softmax``; ``F.scaled_dot_product_attention`` and a logsumexp),
computed in float32 as the kernels compute: nothing here shows how to write a kernel.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch
import torch.nn.functional as F

from .tripwires import answers

# Options a real launch accepts besides the kernel's own arguments (``kernel[grid](..., num_warps=4)``).
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion"})


def _fail(message: str) -> None:
    raise AssertionError(message)


class EmulatedKernel:
    """A stand-in for a ``@triton.jit`` kernel: ``emulated[grid](*args, **kwargs)`` runs it.

    Subclasses give the kernel's ``name`` and ``parameters`` (in order, as the notebook's kernel has
    them) and ``run(grid, args)``, which checks the launch and computes through the pointers.
    """

    name = "kernel"
    parameters: tuple[str, ...] = ()

    def __init__(self, marked: bool = False) -> None:
        # marked: every value written is one more than the kernel's docstring says. A launcher must return
        # what its kernel wrote, so its result is then the right answer plus one; one that computes the
        # answer itself (and launches a kernel for show) returns the answer without the one.
        self.marked = marked

    def mark(self, value: torch.Tensor) -> torch.Tensor:
        return value + 1 if self.marked else value

    def __getitem__(self, grid: Any) -> Any:
        def launched(*args: Any, **kwargs: Any) -> None:
            self._launch(grid, args, kwargs)

        launched.__name__ = f"{self.name}[grid]"
        return launched

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        _fail(f"{self.name} is a kernel: start it with launch({self.name}, grid, ...) (or {self.name}[grid](...)), not by calling it")

    def __repr__(self) -> str:
        return f"<PyTorch emulation of {self.name}>"

    def signature(self) -> str:
        return f"{self.name}({', '.join(self.parameters)})"

    def _launch(self, grid: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        kwargs = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
        parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in self.parameters]
        try:
            bound = inspect.Signature(parameters).bind(*args, **kwargs).arguments
        except TypeError as error:
            _fail(
                f"{self.name} was launched with {len(args)} positional and {sorted(kwargs)} keyword arguments: {error}. It takes {self.signature()}"
            )
        if callable(grid):  # an autotuned launch's grid: a function of the launch's arguments, as Triton calls it
            grid = grid(dict(bound))
        self.run(self._grid(grid), dict(bound))

    def _grid(self, grid: Any) -> tuple[int, int, int]:
        if isinstance(grid, int) and not isinstance(grid, bool):
            grid = (grid,)
        if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
            _fail(f"the grid of {self.name} must be a tuple of 1 to 3 program counts, got {grid!r}")
        for axis, size in enumerate(grid):
            if not isinstance(size, int) or isinstance(size, bool):
                _fail(
                    f"the grid's axis {axis} is {size!r}, a {type(size).__name__}: a grid counts programs, in ints (triton.cdiv rounds up)"
                )
        return tuple(grid) + (1,) * (3 - len(grid))  # type: ignore[return-value]


# --- what each kind of argument must be ---------------------------------------------------------------


def pointer(args: dict[str, Any], name: str) -> torch.Tensor:
    value = args[name]
    if not isinstance(value, torch.Tensor):
        _fail(f"{name} must be a tensor (the kernel gets a pointer to its first element), got {_describe(value)}")
    return value


def integer(args: dict[str, Any], name: str, low: int | None = None) -> int:
    value = args[name]
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "a float" if isinstance(value, float) else _describe(value)
        _fail(f"{name}={value!r} is {kind}, where the kernel expects an int (a size or a stride counted in elements)")
    if low is not None and value < low:
        _fail(f"{name}={value} must be at least {low}")
    return value


def block(args: dict[str, Any], name: str, low: int = 1) -> int:
    value = integer(args, name)
    if value < 1 or value & (value - 1):
        _fail(f"{name}={value} is not a power of two: tl.arange(0, {name}) needs one (triton.next_power_of_2 rounds up)")
    if value < low:
        _fail(f"{name}={value}: tl.dot needs every block dimension to be at least {low}")
    return value


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    return f"a {type(value).__name__}"


def _strided(tensor: torch.Tensor, name: str, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
    """The elements a kernel reaches from ``tensor``'s first element with these sizes and strides."""
    if any(s < 0 for s in stride):
        _fail(f"{name}'s strides {list(stride)} include a negative one")
    storage = tensor.untyped_storage().nbytes() // tensor.element_size()
    last = tensor.storage_offset() + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage:
        _fail(
            f"{name} as {list(size)} with strides {list(stride)} reaches element {last - tensor.storage_offset()} from its start, "
            f"past the end of its memory ({storage - tensor.storage_offset()} elements from its start): check the strides and sizes passed"
        )
    return tensor.as_strided(size, stride, tensor.storage_offset())


def _same_strides(tensor: torch.Tensor, name: str, passed: tuple[int, ...], stride_names: tuple[str, ...]) -> None:
    """Strides passed for ``tensor`` are its own (where a dimension has more than one element)."""
    if tensor.dim() != len(passed):
        return  # a pointer to a tensor of another shape: only the strides passed say where its elements are
    for size, own, given, stride_name in zip(tensor.shape, tensor.stride(), passed, stride_names):
        if size > 1 and own != given:
            _fail(
                f"{stride_name}={given}, but the {name} you launched with has strides {list(tensor.stride())} "
                f"(so {stride_name} should be {own}): pass each tensor's own strides, in elements ({name}.stride())"
            )


def _same_device(tensors: dict[str, torch.Tensor]) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        _fail(f"the tensors of one launch must be on one device, got {devices}")


# --- notebook 07's kernels ------------------------------------------------------------------------------


class SoftmaxRowKernel(EmulatedKernel):
    """``softmax_row_kernel``: OUT[i, :] = softmax(X[i, :]) for row i = program_id(0), in one block of BLOCK >= N columns.

    X and OUT are [M, N] with row strides stride_x and stride_out and contiguous columns. Grid: (M,).
    """

    name = "softmax_row_kernel"
    parameters = ("X", "OUT", "n_cols", "stride_x", "stride_out", "BLOCK")

    @answers("07_fused_attention", "softmax_row_kernel", "softmax_rows")  # refused where the real kernel is graded
    def run(self, grid: tuple[int, int, int], args: dict[str, Any]) -> None:
        X, OUT = pointer(args, "X"), pointer(args, "OUT")
        _same_device({"X": X, "OUT": OUT})
        n_cols = integer(args, "n_cols", low=1)
        stride_x, stride_out = integer(args, "stride_x"), integer(args, "stride_out")
        BLOCK = block(args, "BLOCK")
        if BLOCK < n_cols:
            _fail(f"BLOCK={BLOCK} is smaller than n_cols={n_cols}: the kernel reads a whole row in one block of BLOCK >= N columns")
        if grid[1] != 1 or grid[2] != 1:
            _fail(f"the grid is {grid[:2] if grid[2] == 1 else grid}, but {self.name} uses axis 0 only: one program per row")
        rows = grid[0]
        for name, tensor, stride_name in (("x", X, "stride_x"), ("out", OUT, "stride_out")):
            if tensor.dim() != 2:
                continue
            if tensor.shape[0] != rows:
                _fail(f"the grid has {rows} programs on axis 0 but {name} has {tensor.shape[0]} rows: one program per row")
            if tensor.shape[1] != n_cols:
                _fail(f"n_cols={n_cols} but {name} has {tensor.shape[1]} columns")
            if n_cols > 1 and tensor.stride(1) != 1:
                _fail(
                    f"{name} has strides {list(tensor.stride())}: {self.name} reads the columns of a row at unit stride "
                    "(columns contiguous), so give it a tensor whose last stride is 1"
                )
            _same_strides(tensor, name, (stride_x if name == "x" else stride_out, 1), (stride_name, "its column stride"))
        x = _strided(X, "x", (rows, n_cols), (stride_x, 1))
        out = _strided(OUT, "out", (rows, n_cols), (stride_out, 1))
        out.copy_(self.mark(torch.softmax(x.float(), dim=-1)).to(OUT.dtype))


LOG2_E = 1.4426950408889634


class FlashAttentionKernel(EmulatedKernel):
    """``flash_attention_kernel``: O and L for BLOCK_M query rows of one (batch, head) per program.

    Q, O: [B, H, T_q, d]; K, V: [B, H, T_k, d]; L: [B, H, T_q], each with the strides passed.
    Grid: (cdiv(T_q, BLOCK_M), B * H). Scores are scaled by ``scale_log2e / log2(e)``.
    """

    name = "flash_attention_kernel"
    parameters = (
        "Q",
        "K",
        "V",
        "O",
        "L",
        *(f"stride_q{a}" for a in "bhtd"),
        *(f"stride_k{a}" for a in "bhtd"),
        *(f"stride_v{a}" for a in "bhtd"),
        *(f"stride_o{a}" for a in "bhtd"),
        *(f"stride_l{a}" for a in "bht"),
        "H",
        "T_q",
        "T_k",
        "head_dim",
        "scale_log2e",
        "IS_CAUSAL",
        "BLOCK_M",
        "BLOCK_N",
        "BLOCK_D",
    )

    @answers("07_fused_attention", "flash_attention_kernel", "flash_attention_triton")
    def run(self, grid: tuple[int, int, int], args: dict[str, Any]) -> None:
        tensors = {name: pointer(args, name) for name in "QKVOL"}
        _same_device(tensors)
        strides = {name: tuple(integer(args, f"stride_{name.lower()}{a}") for a in ("bht" if name == "L" else "bhtd")) for name in "QKVOL"}
        H, T_q, T_k = integer(args, "H", low=1), integer(args, "T_q", low=1), integer(args, "T_k", low=1)
        head_dim = integer(args, "head_dim", low=1)
        scale_log2e = args["scale_log2e"]
        if isinstance(scale_log2e, bool) or not isinstance(scale_log2e, (int, float)) or not math.isfinite(scale_log2e):
            _fail(f"scale_log2e must be a finite number (scale * log2(e)), got {scale_log2e!r}")
        causal = args["IS_CAUSAL"]
        if not isinstance(causal, bool) and causal not in (0, 1):
            _fail(f"IS_CAUSAL must be a bool, got {causal!r}")
        BLOCK_M, BLOCK_N, BLOCK_D = (block(args, name, low=16) for name in ("BLOCK_M", "BLOCK_N", "BLOCK_D"))
        if BLOCK_D < head_dim:
            _fail(f"BLOCK_D={BLOCK_D} must be >= head_dim={head_dim}: the kernel covers the head dimension in one block")

        Q = tensors["Q"]
        if Q.dim() == 4:
            for what, value, actual in (("H", H, Q.shape[1]), ("T_q", T_q, Q.shape[2]), ("head_dim", head_dim, Q.shape[3])):
                if value != actual:
                    _fail(f"{what}={value}, but Q has shape {list(Q.shape)} ([B, H, T_q, d]), so {what} is {actual}")
        if tensors["K"].dim() == 4 and T_k != tensors["K"].shape[2]:
            _fail(f"T_k={T_k}, but K has shape {list(tensors['K'].shape)} ([B, H, T_k, d]), so T_k is {tensors['K'].shape[2]}")
        query_blocks = -(-T_q // BLOCK_M)
        if grid[0] != query_blocks:
            _fail(
                f"the grid has {grid[0]} programs on axis 0 but T_q={T_q} in blocks of BLOCK_M={BLOCK_M} is "
                f"cdiv({T_q}, {BLOCK_M}) = {query_blocks} query blocks: one program per query block"
            )
        if Q.dim() == 4 and grid[1] != Q.shape[0] * Q.shape[1]:
            B, H_q = Q.shape[:2]
            _fail(
                f"the grid has {grid[1]} programs on axis 1 but Q has B * H = {B} * {H_q} = {B * H_q} (batch, head) pairs: "
                "one program per query block and (batch, head)"
            )
        if grid[1] % H:
            _fail(f"the grid has {grid[1]} programs on axis 1, not a multiple of H={H}: axis 1 counts (batch, head) pairs, B * H")
        if grid[2] != 1:
            _fail(f"the grid has {grid[2]} programs on axis 2, but {self.name} uses axes 0 and 1 only")
        B = grid[1] // H

        letters = {"L": ("b", "h", "t")}
        for name, tensor in tensors.items():
            axes = letters.get(name, ("b", "h", "t", "d"))
            _same_strides(tensor, name, strides[name], tuple(f"stride_{name.lower()}{a}" for a in axes))
        sizes = {"Q": (B, H, T_q, head_dim), "K": (B, H, T_k, head_dim), "V": (B, H, T_k, head_dim), "O": (B, H, T_q, head_dim)}
        sizes["L"] = (B, H, T_q)
        view = {name: _strided(tensors[name], name, sizes[name], strides[name]) for name in "QKVOL"}

        q, k, v = (view[name].float() for name in "QKV")
        scale = scale_log2e / LOG2_E
        out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=scale)
        scores = (q @ k.transpose(-2, -1)) * scale
        if causal:
            scores = scores.masked_fill(torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        view["O"].copy_(self.mark(out).to(tensors["O"].dtype))
        view["L"].copy_(self.mark(torch.logsumexp(scores, dim=-1)).to(tensors["L"].dtype))


SOFTMAX_ROW_KERNEL = SoftmaxRowKernel()
FLASH_ATTENTION_KERNEL = FlashAttentionKernel()
SOFTMAX_ROW_KERNEL_STAND_IN = {"softmax_row_kernel": SOFTMAX_ROW_KERNEL}
FLASH_ATTENTION_KERNEL_STAND_IN = {"flash_attention_kernel": FLASH_ATTENTION_KERNEL}
# Kernels that write their answer plus one: the launcher's result must be exactly what its kernel wrote.
MARKED_SOFTMAX_ROW_KERNEL_STAND_IN = {"softmax_row_kernel": SoftmaxRowKernel(marked=True)}
MARKED_FLASH_ATTENTION_KERNEL_STAND_IN = {"flash_attention_kernel": FlashAttentionKernel(marked=True)}
