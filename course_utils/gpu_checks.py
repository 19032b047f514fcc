"""Checks on what a Triton kernel compiles to for a real GPU, built ahead of time on any machine."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Callable, Sequence

from .comparisons import _fail, _recording
from .recording import NotWritten
from .student_calls import _format_call, _run_student


@contextlib.contextmanager
def _launches_run(arch: str) -> Iterator[list[dict[str, Any]]]:
    """The build jobs of every kernel launched inside the block, taken as each launch starts, which then runs.

    The launches run as in any graded call (a launcher cannot tell this check from the others by what its
    kernels do), and what is compiled is what ran.
    """
    from .kernels import HAVE_TRITON, _launch_entries, build_jobs

    jobs: list[dict[str, Any]] = []
    entries = _launch_entries() if HAVE_TRITON else []
    saved = {cls: cls.__dict__["run"] for cls in entries}
    depth = [0]  # an autotuned kernel's run starts its configs' runs: the outermost launch is the one asked for

    def recorded(run: Callable[..., Any]) -> Callable[..., Any]:
        def run_recorded(kernel: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
            if depth[0] == 0 and not warmup:
                jobs.extend(job for job in build_jobs(kernel, args, kwargs, arch) if job not in jobs)
            depth[0] += 1
            try:
                return run(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                depth[0] -= 1

        return run_recorded

    for cls, run in saved.items():
        cls.run = recorded(run)
    try:
        yield jobs
    finally:
        for cls, run in saved.items():
            cls.run = run


def _run_for_jobs(student: Callable[..., Any], arch: str) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        with _launches_run(arch) as jobs:
            student(*args, **kwargs)
        return jobs

    return run


def _gpu_builds(
    launcher: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], arch: str, label: str, hint: str
) -> list[dict[str, Any]] | None:
    """Every kernel ``launcher(*args, **kwargs)`` starts, compiled for ``arch``, as plain data; each one built.

    The launcher runs, as in any graded call, and each launch is turned into build jobs as it starts; the jobs are
    compiled here, by the checking process: under grading that is the trusted pass, which first checks
    that each job's source is the submitted notebook's own (``course_utils.build_requests``). None in
    the sealed run, where nothing is compared.
    """
    from .build_requests import ForgedBuild, checked_jobs
    from .kernels import ARCHES, STUB_LINE, run_builds
    from .recording import Mode, mode, submitted_functions

    gpu = {"sm_80": "an A100", "sm_89": "an L4", "sm_90": "an H100"}.get(arch, arch)

    outcome = _run_student(launcher, args, kwargs, label, through=(f"gpu_build_jobs:{arch}", lambda student: _run_for_jobs(student, arch)))
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

    The launcher runs as in any other call, and each kernel it launched is compiled ahead of time for that GPU.
    The interpreter that grades the kernels accepts code no GPU compiler does (``break``,
    ``continue``, ``raise``, a Python call), so this is the only check that sees it.
    """
    _gpu_builds(launcher, args, kwargs, arch, label or _format_call(launcher, args, kwargs), hint)
    return True
