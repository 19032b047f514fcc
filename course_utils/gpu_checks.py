"""Checks on what a Triton kernel compiles to for a real GPU, built ahead of time on any machine."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .comparisons import _fail, _recording
from .recording import NotWritten
from .student_calls import _format_call, _run_student


def _gpu_builds(
    launcher: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], arch: str, label: str, hint: str
) -> list[dict[str, Any]] | None:
    """Every kernel ``launcher(*args, **kwargs)`` starts, compiled for ``arch``, as plain data; each one built.

    None in the sealed run, where nothing is compared (the trusted replay sees the builds).
    """
    from .kernels import ARCHES, STUB_LINE, launcher_builds

    gpu = {"sm_80": "an A100", "sm_89": "an L4", "sm_90": "an H100"}.get(arch, arch)

    def compile_instead(student: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *a, **k: launcher_builds(student, *a, arch=arch, **k)

    outcome = _run_student(launcher, args, kwargs, label, through=(f"gpu_build:{arch}", compile_instead))
    if outcome.kind == "raised":
        _fail(label, f"raised {outcome.error_type} before any kernel was compiled: {outcome.message}", inputs=None, hint=hint)
    if _recording():
        return None
    builds = outcome.value
    if arch not in ARCHES or not isinstance(builds, list) or not builds:
        _fail(
            label,
            "started no kernel through course_utils.kernels.launch",
            inputs=None,
            hint=hint or "a launcher starts its kernel with launch(kernel, grid, ...)",
        )
    for build in builds:
        if not isinstance(build, dict) or build.get("compiled") is True:
            continue
        error = str(build.get("error", ""))
        if STUB_LINE in error:
            raise NotWritten(
                f"{label}: not written yet (the kernel {build.get('kernel')} still raises NotImplementedError).",
                str(build.get("kernel", "")),
            )
        _fail(
            label,
            f"runs in the interpreter, but {build.get('kernel')} does not compile for {arch} ({gpu}):\n    {error}",
            inputs=None,
            hint=hint
            or "GPU kernels have no break, continue, raise or return inside loops, and call only "
            "tl.* functions and other @triton.jit functions; write loop exits as masks or loop bounds",
        )
    return [build for build in builds if isinstance(build, dict)]


def check_builds_for_gpu(
    launcher: Callable[..., Any],
    *args: Any,
    arch: str = "sm_90",
    label: str | None = None,
    hint: str = "",
    **kwargs: Any,
) -> bool:
    """Every kernel ``launcher(*args, **kwargs)`` starts compiles for a real GPU (``sm_90``: an H100).

    Nothing runs: the launches are captured and compiled ahead of time (``course_utils.kernels``).
    The interpreter that grades the kernels accepts code no GPU compiler does (``break``,
    ``continue``, ``raise``, a Python call), so this is the only check that sees it.
    """
    _gpu_builds(launcher, args, kwargs, arch, label or _format_call(launcher, args, kwargs), hint)
    return True


KERNEL_OPS = {"loads": "reads a block of memory (tl.load)", "dots": "multiplies two blocks (tl.dot)"}


def check_kernel_ops(
    launcher: Callable[..., Any],
    *args: Any,
    most: dict[str, dict[str, int]],
    label: str | None = None,
    hint: str = "",
    **kwargs: Any,
) -> bool:
    """The kernels ``launcher`` starts read memory and multiply blocks in no more places than the idea needs.

    ``most`` maps a kernel's name to the most ``loads`` and ``dots`` its code may hold, counted in
    Triton's IR after compiling for an H100 (loops are not unrolled there, so a loop body counts
    once however often it runs). A softmax that walks a row three times holds three loads of it
    where the online softmax holds two; a forward pass that walks the keys twice holds three
    products where one pass holds two. A kernel this launcher does not start fails the check.
    """
    label = label or _format_call(launcher, args, kwargs)
    builds = _gpu_builds(launcher, args, kwargs, "sm_90", label, hint)
    if builds is None:
        return True
    for kernel, limits in most.items():
        found = [build for build in builds if build.get("kernel") == kernel]
        if not found:
            _fail(
                label,
                f"did not start the kernel {kernel}",
                inputs=None,
                hint=f"keep the kernel's name, {kernel}, and start it with launch(...)",
            )
        for build in found:
            for op, limit in limits.items():
                count = build.get(op)
                if not isinstance(count, int) or count > limit:
                    _fail(
                        label,
                        f"{kernel} {KERNEL_OPS[op]} in {count} places in its code; the idea needs at most {limit}",
                        inputs=None,
                        hint=hint,
                    )
    return True
