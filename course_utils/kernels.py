"""Triton kernels in the course: launching them, and checking ahead of time that they would run on a GPU.

Notebook 07's launchers call every kernel through ``launch(kernel, grid, *args, **kwargs)``. That one
door does three things:

* it runs the kernel, natively on a GPU or in Triton's interpreter on a CPU;
* it turns an unwritten kernel (its body still ``raise NotImplementedError()``) into the course's
  "not written yet" on both paths: the interpreter wraps the stub's error in an ``InterpreterError``,
  and the GPU compiler refuses the ``raise`` statement itself;
* inside ``capturing_launches()`` the launch is recorded instead of run (as is any ``kernel[grid](...)``:
  the capture sits where Triton starts every kernel), so that a check can compile exactly the
  kernels a launcher would start, with its argument types, for a GPU this machine does not have.

``build_for_gpu(kernel, args, kwargs, arch)`` compiles one kernel ahead of time (Triton ships ptxas)
and returns a ``GpuBuild``: whether it compiled, its registers, spills, shared memory, and whether its
matrix products are tensor-core instructions (``wgmma`` on sm_90, ``mma`` on sm_80). The interpreter
accepts code no GPU compiler does (``break``, ``raise``, Python calls), so a kernel graded there is also
built here.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import os
import textwrap
import types
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from . import gpu_compiler
from .gpu_build import ARCHES  # one table of targets, shared with the compiler process
from .guards import Guards

DEFAULT_WARPS, DEFAULT_STAGES = 4, 3  # Triton's own defaults for a launch that names none

# The first error of a kernel body that is still nbgrader's stub.
STUB_LINE = "raise NotImplementedError"


class KernelNotWritten(NotImplementedError):
    """A kernel's body is still the stub: the course's checks report it as "not written yet"."""


# --- importing Triton, or saying what to install -------------------------------------------------------

INSTALL_TRITON = (
    "Triton is not installed here. It runs on Linux (and on Colab): `pip install triton`, or "
    "`pip install 'attention-course[kernels]'`. On macOS or Windows, open this notebook on Colab; "
    "the PyTorch sections above run without it."
)


class MissingTriton:
    """Stands in for ``triton`` and ``triton.language`` where Triton cannot be installed.

    Kernel definitions still run (their decorators and ``tl.constexpr`` annotations resolve to
    stand-ins), so the PyTorch sections of a notebook work; launching a kernel, or calling any
    other Triton function, raises ImportError with what to install.
    """

    DECORATORS = ("jit", "autotune", "heuristics", "Config")

    def __init__(self, path: str = "triton") -> None:
        self._path = path

    def __getattr__(self, name: str) -> "MissingTriton":
        if name.startswith("__"):
            raise AttributeError(name)
        return MissingTriton(f"{self._path}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaf = self._path.rsplit(".", 1)[-1].removesuffix("()")
        if leaf not in self.DECORATORS:
            raise ImportError(f"{self._path}: {INSTALL_TRITON}")
        if len(args) == 1 and not kwargs and isinstance(args[0], MissingKernel):
            return args[0]  # @triton.autotune(...) around a kernel already stood in for
        if len(args) == 1 and not kwargs and callable(args[0]):
            return MissingKernel(args[0])  # @triton.jit
        return MissingTriton(f"{self._path}()")  # triton.autotune(configs=...): a decorator to come


class MissingKernel:
    """A kernel defined where Triton is missing: launching it says what to install."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __getitem__(self, grid: Any) -> Any:
        raise ImportError(f"{getattr(self.fn, '__name__', 'this kernel')}: {INSTALL_TRITON}")


# Triton compiles for NVIDIA GPUs of compute capability 8.0 (A100) and newer since Triton 3.3. Colab's
# free T4 is 7.5: its fp16 tl.dot fails in the compiler, and Triton's maintainers will not fix it.
MIN_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class KernelBackend:
    """Where this machine runs Triton kernels, and why."""

    native: bool  # True: compiled for this machine's GPU; False: Triton's interpreter, on the CPU
    reason: str  # one line for the reader

    @property
    def label(self) -> str:
        return "natively on the GPU" if self.native else f"in Triton's interpreter on the CPU ({self.reason})"


def choose_backend(cuda: bool, capability: tuple[int, int] | None = None, name: str = "") -> KernelBackend:
    """The backend for a machine with (or without) a CUDA GPU of this compute capability."""
    if not cuda:
        return KernelBackend(False, "no CUDA GPU here; TRITON_INTERPRET=1, float32, small sizes")
    if capability is not None and tuple(capability) < MIN_CAPABILITY:
        gpu = f"{name} (sm_{capability[0]}{capability[1]})" if name else f"sm_{capability[0]}{capability[1]}"
        return KernelBackend(
            False,
            f"this GPU, {gpu}, is older than Triton supports (sm_80 and newer): the kernels run in the "
            "interpreter instead, and the PyTorch sections still use the GPU",
        )
    return KernelBackend(True, "")


def this_machine() -> KernelBackend:
    cuda = torch.cuda.is_available()
    if not cuda:
        return choose_backend(False)
    return choose_backend(True, torch.cuda.get_device_capability(), torch.cuda.get_device_name())


def gpu_family(tensor: torch.Tensor) -> str:
    """The family of GPU whose table of tiles applies where ``tensor`` lives: tuned kernels prune by it.

    Returns:
        "sm_90" (Hopper: ``wgmma`` products, 227 KiB of shared memory a program), "sm_8x" (Ampere and Ada:
        ``mma``, the L4's 99 KiB), or "other" (any other GPU, which takes both families' limits).
    """
    major, minor = torch.cuda.get_device_capability(tensor.device)
    return "sm_90" if (major, minor) == (9, 0) else ("sm_8x" if major == 8 else "other")


def import_triton(backend: KernelBackend | None = None) -> tuple[Any, Any]:
    """``(triton, triton.language)``, with Triton's interpreter on wherever kernels cannot run natively.

    The interpreter must be chosen before Triton is imported, which is why notebooks import it
    through here: no CUDA GPU, or one older than Triton supports (Colab's free T4), means the
    interpreter. Where Triton is not installed, stand-ins keep the notebook running up to the
    first kernel launch, which then says what to install.
    """
    backend = backend or this_machine()
    if not backend.native:
        os.environ["TRITON_INTERPRET"] = "1"  # run kernels on the CPU, in float32, as the grader does
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return MissingTriton("triton"), MissingTriton("triton.language")
    return triton, tl


# --- launching ------------------------------------------------------------------------------------------


# A grid: a tuple, or a function of an autotuned launch's chosen meta-parameters that returns one.
Grid = tuple[int, ...] | Callable[[dict[str, Any]], tuple[int, ...]]


@dataclass
class Launch:
    """One kernel launch, as a launcher asked for it."""

    kernel: Any
    grid: Grid
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


_captured: list[list[Launch]] = []  # a stack: capturing_launches() blocks may nest


def _launch_entries() -> list[type]:
    """Triton's classes whose ``run`` starts a kernel: ``kernel[grid](...)`` and ``launch`` both end there."""
    from triton.runtime import autotuner, interpreter, jit

    return [
        cls
        for cls in (jit.JITFunction, interpreter.InterpretedFunction, autotuner.Autotuner, autotuner.Heuristics)
        if "run" in cls.__dict__
    ]


@contextlib.contextmanager
def capturing_launches() -> Iterator[list[Launch]]:
    """Record the kernel launches made inside the block instead of running them.

    Launches are caught where Triton starts every kernel (the ``run`` of a jitted, interpreted or
    autotuned kernel), so ``kernel[grid](...)`` is seen as well as ``launch(kernel, grid, ...)``.
    """
    launches: list[Launch] = []
    entries = _launch_entries() if HAVE_TRITON and not _captured else []
    saved = {cls: cls.__dict__["run"] for cls in entries}

    def captured(kernel: Any, *args: Any, grid: Grid, warmup: bool = False, **kwargs: Any) -> None:
        if not warmup:
            _captured[-1].append(Launch(kernel, grid, args, dict(kwargs)))

    _captured.append(launches)
    for cls in entries:
        cls.run = captured
    try:
        yield launches
    finally:
        for cls, run in saved.items():
            cls.run = run
        _captured.pop()


def is_stub_error(error: BaseException) -> bool:
    """The error a kernel whose body is still ``raise NotImplementedError()`` gives, on either path."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:  # the interpreter chains the stub's error
        seen.add(id(current))
        if isinstance(current, NotImplementedError):
            return True
        is_compile_error = any(c.__name__ == "CompilationError" for c in type(current).__mro__)
        if is_compile_error and STUB_LINE in str(current):  # the GPU compiler rejects the raise itself
            return True
        current = current.__cause__ or current.__context__
    return False


def kernel_name(kernel: Any) -> str:
    return getattr(python_function(kernel), "__name__", "the kernel")


def launch(kernel: Any, grid: Grid, *args: Any, **kwargs: Any) -> None:
    """Run ``kernel[grid](*args, **kwargs)``; an unwritten kernel raises KernelNotWritten.

    ``grid`` is a tuple, or (for an autotuned kernel, whose block sizes are chosen at launch) a
    function of the chosen meta-parameters that returns one, as ``kernel[grid]`` takes.
    """
    if isinstance(kernel, MissingKernel):
        kernel[grid]  # raises ImportError: what to install
    if not callable(grid):
        grid = tuple(int(g) for g in grid)
    try:
        # a PyTorch stand-in for the kernel (a test's emulation) runs where its tensors are
        with on_the_gpu(args, kwargs, KERNELS_NATIVE and isinstance(kernel, triton.runtime.KernelInterface)) as (args, kwargs):
            kernel[grid](*args, **kwargs)
    except Exception as error:
        if is_stub_error(error):
            raise KernelNotWritten(f"{kernel_name(kernel)} is not written yet") from None
        raise


@contextlib.contextmanager
def on_the_gpu(args: tuple[Any, ...], kwargs: dict[str, Any], native: bool) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The launch's arguments with every CPU tensor on the GPU, its memory copied back afterwards.

    The notebooks' tests build CPU tensors, which is what the interpreter (and the grader) runs on; a
    kernel compiled for a GPU can only read GPU memory. Whole storages move, so a launcher's strides,
    a view into a larger buffer (NaN padding) and tensors that share memory stay exactly as they were.
    """
    cpu = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.device.type == "cpu"]
    if not native or not cpu:
        yield args, kwargs
        return

    def storage_key(tensor: torch.Tensor) -> tuple[int, int]:  # two storages may start at one address (numpy slices)
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()

    storages: dict[tuple[int, int], tuple[Any, Any]] = {}  # -> (CPU storage, its GPU copy)
    for tensor in cpu:
        if storage_key(tensor) not in storages:
            storages[storage_key(tensor)] = (tensor.untyped_storage(), tensor.untyped_storage().cuda())

    def moved(a: Any) -> Any:
        if not (isinstance(a, torch.Tensor) and a.device.type == "cpu"):
            return a
        gpu_storage = storages[storage_key(a)][1]
        return torch.empty(0, dtype=a.dtype, device="cuda").set_(gpu_storage, a.storage_offset(), a.shape, a.stride())

    yield tuple(map(moved, args)), {key: moved(value) for key, value in kwargs.items()}
    torch.cuda.synchronize()
    for storage, gpu_storage in storages.values():  # the kernel may have written any of them
        storage.copy_(gpu_storage)


# --- building for a GPU, on any machine ------------------------------------------------------------------


@dataclass(frozen=True)
class GpuBuild:
    """What compiling one kernel for one GPU gave."""

    kernel: str
    arch: str
    compiled: bool
    error: str = ""
    registers: int | None = None
    spilled_bytes: int | None = None  # spill stores: registers that did not fit, moved to slow local memory
    shared_bytes: int | None = None
    mma: str = ""  # "wgmma", "mma" or "" (no tensor-core matrix product)
    # Places in the kernel's code (Triton IR, loops not unrolled) that read a block of memory, and
    # that multiply two blocks: how many passes a kernel makes, whatever its loops look like.
    loads: int | None = None
    dots: int | None = None
    config: dict[str, int] = field(default_factory=dict)  # the block sizes, warps and stages built

    @property
    def summary(self) -> str:
        if not self.compiled:
            return f"{self.kernel} for {self.arch}: does not compile: {self.error}"
        mma = self.mma or "no tensor-core MMA"
        return (
            f"{self.kernel} for {self.arch}: {self.registers} registers, {self.spilled_bytes} bytes spilled, "
            f"{self.shared_bytes} bytes of shared memory, {mma}"
        )

    def as_data(self) -> dict[str, Any]:
        """Plain data, to cross from the sealed run to the trusted pass."""
        return asdict(self)


TORCH_TO_TRITON = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "i1",
}


def python_function(kernel: Any) -> Any:
    """The plain Python function under a kernel (``@triton.jit``, interpreted, or autotuned)."""
    while hasattr(kernel, "fn"):
        kernel = kernel.fn
    return kernel


def _is_triton_function(value: Any) -> bool:
    return type(value).__module__.startswith("triton.") and isinstance(python_function(value), types.FunctionType)


def kernel_source(fn: types.FunctionType) -> str:
    """The kernel's source for a fresh process: its @triton.jit helpers first, its constexpr globals, itself.

    Decorators are dropped (autotuning configs and heuristics are applied here, as constexprs) and
    each function gets a plain ``@triton.jit``.
    """
    parts: list[str] = []
    seen: set[int] = set()

    def add(function: types.FunctionType) -> None:
        if id(function) in seen:
            return
        seen.add(id(function))
        for name in function.__code__.co_names:  # the globals it uses: helpers and constants
            value = function.__globals__.get(name)
            if _is_triton_function(value):
                add(python_function(value))
            elif type(value).__name__ == "constexpr":
                parts.append(f"{name} = tl.constexpr({value.value!r})")
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        definition = tree.body[0]
        definition.decorator_list = [ast.parse("triton.jit").body[0].value]
        parts.append(ast.unparse(definition))

    add(fn)
    return "\n\n".join(parts)


def _argument_types(fn: Any, args: tuple, kwargs: dict) -> tuple[dict[str, str], dict[str, Any], dict]:
    """Triton's signature, constexprs and alignment hints for these arguments, as a launch specialises them."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    declared = {name for name, p in inspect.signature(fn).parameters.items() if "constexpr" in str(p.annotation)}
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list] = {}
    for index, (name, value) in enumerate(bound.arguments.items()):
        value = value.value if type(value).__name__ == "constexpr" else value
        aligned = False
        if name in declared or value is None:
            signature[name], constexprs[name] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[name] = "*" + TORCH_TO_TRITON[value.dtype]
            aligned = value.data_ptr() % 16 == 0
        elif isinstance(value, bool):
            signature[name] = "u1"
        elif isinstance(value, int):
            if value == 1:  # Triton specialises an integer argument equal to 1 into a constant
                signature[name], constexprs[name] = "constexpr", 1
            else:
                signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
                aligned = value % 16 == 0
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"argument {name}: cannot pass a {type(value).__name__} to a kernel")
        if aligned:  # the divisibility hint a real launch adds: it decides vector widths
            attrs[(index,)] = [["tt.divisibility", 16]]
    return signature, constexprs, attrs


def _heuristics(kernel: Any) -> list[dict[str, Any]]:
    """The @triton.heuristics rules wrapped around a kernel, outermost first."""
    found = []
    while kernel is not None and hasattr(kernel, "fn"):
        if hasattr(kernel, "values") and isinstance(kernel.values, dict):
            found.append(kernel.values)
        kernel = kernel.fn
    return found


def build_jobs(kernel: Any, args: tuple, kwargs: dict[str, Any], arch: str) -> list[dict[str, Any]]:
    """What to compile for one launch: one job per autotuning config (one if none), as plain data."""
    if arch not in ARCHES:
        raise ValueError(f"arch must be one of {sorted(ARCHES)}, got {arch!r}")
    fn = python_function(kernel)
    source = kernel_source(fn)
    jobs = []
    for config in getattr(kernel, "configs", None) or [None]:
        options = {
            "num_warps": kwargs.get("num_warps", DEFAULT_WARPS),
            "num_stages": kwargs.get("num_stages", DEFAULT_STAGES),
            "enable_fp_fusion": True,
        }  # named, so Triton 3.9 does not warn
        call_kwargs = {k: v for k, v in kwargs.items() if k not in ("num_warps", "num_stages")}
        chosen: dict[str, int] = {}
        if config is not None:
            call_kwargs.update(config.kwargs)
            options.update(num_warps=config.num_warps, num_stages=config.num_stages)
            chosen = {**{k: int(v) for k, v in config.kwargs.items()}, "num_warps": config.num_warps, "num_stages": config.num_stages}
        for rules in _heuristics(kernel):  # @triton.heuristics: constexprs computed from the arguments
            named = {**inspect.signature(fn).bind_partial(*args, **call_kwargs).arguments, **call_kwargs}
            call_kwargs.update({name: rule(named) for name, rule in rules.items()})
        signature, constexprs, attrs = _argument_types(fn, args, call_kwargs)
        jobs.append(
            {
                "name": fn.__name__,
                "arch": arch,
                "source": source,
                "signature": signature,
                "constexprs": constexprs,
                "attrs": [[list(k), v] for k, v in attrs.items()],
                "options": options,
                "config": chosen,
            }
        )
    return jobs


def triton_installation_key() -> str:
    """Triton's key for its own installation, which begins every compile's cache key ('' if unknown).

    Working it out hashes Triton's sources and its compiler library (about 0.4 s); Triton keeps
    it for the life of a process, and a compile child is a new process. So it is worked out
    here, once, and handed to the child: the sealed runner does it before it forks.
    """
    try:
        from triton.runtime import cache
    except ImportError:
        return ""
    key = getattr(cache, "triton_key", None)
    return key() if callable(key) else ""


def skip_unasserted_overflow_checks() -> None:
    """Triton's interpreter redoes every int32 add, sub and mul in int64 to check it for overflow, then drops the
    check: its ``device_assert`` does nothing unless ``debug`` is on. Without that work, kernels run about a quarter
    faster in the interpreter and compute, raise and print the same. Grading calls it in the sealed run
    (``sealed_run.preload``) and the trusted pass (``verdicts.decide``)."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    options = interpreter.interpreter_builder.options
    if options.sanitize_overflow and not options.debug:
        interpreter.interpreter_builder.options = dataclasses.replace(options, sanitize_overflow=False)


def run_builds(jobs: list[dict[str, Any]]) -> list[GpuBuild]:
    """Compile the jobs in a Python without Triton's interpreter (``course_utils.gpu_compiler``)."""
    if not jobs:
        return []
    try:
        found = gpu_compiler.compile_request({"triton_key": triton_installation_key(), "jobs": jobs})
    except gpu_compiler.CompilerFailed as failed:
        return [
            GpuBuild(job["name"], job["arch"], False, error=f"the compiler process failed: {failed}", config=job["config"]) for job in jobs
        ]
    return [GpuBuild(**result) for result in found]


def build_for_gpu(kernel: Any, args: tuple, kwargs: dict[str, Any], arch: str = "sm_90") -> list[GpuBuild]:
    """Compile ``kernel`` for ``arch`` with these arguments: one GpuBuild per autotuning config (one if none)."""
    return run_builds(build_jobs(kernel, args, kwargs, arch))


def launcher_jobs(launcher: Any, *args: Any, arch: str = "sm_90", **kwargs: Any) -> list[dict[str, Any]]:
    """What to compile for every kernel the launcher would start with these arguments, as plain data.

    Nothing runs: the launches are captured (see ``capturing_launches``). Under grading these jobs are
    what the sealed run records; the trusted pass checks and compiles them (``course_utils.build_requests``).
    """
    with capturing_launches() as launches:
        launcher(*args, **kwargs)
    return [job for captured in launches for job in build_jobs(captured.kernel, captured.args, captured.kwargs, arch)]


def launcher_builds(launcher: Any, *args: Any, arch: str = "sm_90", **kwargs: Any) -> list[dict[str, Any]]:
    """Every kernel the launcher would start for these arguments, compiled for ``arch``, as plain data."""
    return [build.as_data() for build in run_builds(launcher_jobs(launcher, *args, arch=arch, **kwargs))]


# A notebook calls these to see its own builds; rebinding one would forge a build report (the grader
# compiles for itself, so it gains nothing, but a person should read it).
GUARDS = Guards(rebinding=("launcher_builds", "build_for_gpu", "build_jobs", "run_builds"))


# What notebooks import: ``from course_utils.kernels import launch, tl, triton`` (and KERNELS_NATIVE,
# True where kernels run on the GPU: tensors for them go there; elsewhere they stay on the CPU).
KERNEL_BACKEND = this_machine()
triton, tl = import_triton(KERNEL_BACKEND)
HAVE_TRITON = not isinstance(triton, MissingTriton)
KERNELS_NATIVE = HAVE_TRITON and KERNEL_BACKEND.native

# What notebooks may import from here (tests/test_public_surface.py); the rest is the grader's, imported by name.
__all__ = [
    "HAVE_TRITON",
    "KERNELS_NATIVE",
    "KERNEL_BACKEND",
    "build_jobs",
    "capturing_launches",
    "gpu_family",
    "launch",
    "launcher_builds",
    "run_builds",
    "tl",
    "triton",
]
