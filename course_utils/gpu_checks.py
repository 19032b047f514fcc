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

    The launches are captured where the student's code runs and turned into build jobs; the jobs are
    compiled here, by the checking process: under grading that is the trusted pass, which first checks
    that each job's source is the submitted notebook's own (``course_utils.build_requests``). None in
    the sealed run, where nothing is compared.
    """
    from .build_requests import ForgedBuild, checked_jobs
    from .kernels import ARCHES, STUB_LINE, launcher_jobs, run_builds
    from .recording import Mode, mode, submitted_functions

    gpu = {"sm_80": "an A100", "sm_89": "an L4", "sm_90": "an H100"}.get(arch, arch)

    def jobs_instead(student: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *a, **k: launcher_jobs(student, *a, arch=arch, **k)

    outcome = _run_student(launcher, args, kwargs, label, through=(f"gpu_build_jobs:{arch}", jobs_instead))
    if outcome.kind == "raised":
        _fail(label, f"raised {outcome.error_type} before any kernel was compiled: {outcome.message}", inputs=None, hint=hint)
    if _recording():
        return None
    jobs = outcome.value
    if mode() is Mode.REPLAY:
        try:
            jobs = checked_jobs(jobs, submitted_functions())
        except ForgedBuild as forged:
            _fail(label, f"the graded run asked to compile something no launch in this notebook makes ({forged})", inputs=None, hint="")
    if arch not in ARCHES or not isinstance(jobs, list) or not jobs:
        _fail(
            label,
            "started no Triton kernel",
            inputs=None,
            hint=hint or "a launcher starts its kernel, with launch(kernel, grid, ...) or kernel[grid](...)",
        )
    builds = [build.as_data() for build in run_builds(jobs)]
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
