"""Checks on what kernels did as they ran (a ``KernelTrace`` from ``course_utils.kernel_trace``).

Each check returns True or raises AssertionError naming the kernel, the program (its ``pid``) and
what it read. Where kernels run natively on a GPU there is no trace (``trace_kernels`` returns None):
the checks then hold, and the grader, which runs kernels in the interpreter, makes them.
"""

from __future__ import annotations

from typing import Callable

from .comparisons import _fail, _recording
from .kernel_trace import KernelTrace, ProgramTrace


def _programs(trace: KernelTrace, kernel: str, label: str, hint: str) -> list[ProgramTrace]:
    launches = trace.of(kernel)
    if not launches:
        started = sorted({launch.describe() for launch in trace.launches}) or ["none"]
        _fail(label, f"did not launch the notebook's {kernel} (kernels launched: {', '.join(started)})", inputs=None, hint=hint)
    return [program for launch in launches for program in launch.programs]


def check_kernel_outputs(returned: tuple[dict[str, int], ...] | None, kernel: str, *, label: str, hint: str = "") -> bool:
    """Every element of every tensor the call returned is what ``kernel`` last stored at its address
    (``returned`` from ``kernel_trace.returned_by_kernels``).

    A launcher that launches its kernel and then returns something else (a result computed with
    PyTorch, a copy, another kernel's copy of it) fails here.
    """
    if returned is None or _recording():
        return True
    for index, counts in enumerate(returned):
        elements, stored = counts.get("", 0), counts.get(kernel, 0)
        if stored < elements:
            others = {name: count for name, count in counts.items() if name not in ("", kernel)}
            elsewhere = f" ({', '.join(f'{count} from {name}' for name, count in others.items())})" if others else ""
            _fail(
                label,
                f"returned tensor {index} has {elements} elements, of which {stored} hold what {kernel} stored there{elsewhere}",
                inputs=None,
                hint=hint or f"return the tensors {kernel} wrote, as it wrote them",
            )
    return True


def check_reads_at_most(trace: KernelTrace | None, kernel: str, times: dict[str, int], *, label: str, hint: str = "") -> bool:
    """In every program of ``kernel``, each tensor named in ``times`` is read at most that many times over
    (element reads at most ``times[name]`` times the distinct elements read), and never outside itself."""
    if trace is None or _recording():
        return True
    for program in _programs(trace, kernel, label, hint):
        for name, most in times.items():
            read = program.read(name)
            if read.outside:
                _fail(
                    label,
                    f"program {program.pid} of {kernel} read {read.outside} elements of memory outside {name} "
                    "(past its end, in its padding)",
                    inputs=None,
                    hint=hint,
                )
            if read.elements > most * read.distinct:
                _fail(
                    label,
                    f"program {program.pid} of {kernel} made {read.elements} element reads of {name} for "
                    f"{read.distinct} distinct elements: {read.elements / read.distinct:.2f} reads each, where the idea "
                    f"needs at most {most}",
                    inputs=None,
                    hint=hint,
                )
    return True


def check_rows_read(
    trace: KernelTrace | None,
    kernel: str,
    tensor: str,
    *,
    allowed: Callable[[ProgramTrace], tuple[int, int]],
    needed: Callable[[ProgramTrace], int],
    label: str,
    hint: str = "",
    exactly: bool = False,
) -> bool:
    """Every program of ``kernel`` reads ``tensor`` only in rows ``allowed(program)`` (first and last,
    inclusive; rows are the second-to-last axis), and at least ``needed(program)`` distinct elements of it
    (with ``exactly``, no more either: a copy of the tensor made wider cannot hide a second pass)."""
    if trace is None or _recording():
        return True
    for program in _programs(trace, kernel, label, hint):
        read = program.read(tensor)
        first, last = allowed(program)
        if read.rows is not None and (read.rows[0] < first or read.rows[1] > last):
            _fail(
                label,
                f"program {program.pid} of {kernel} read rows {read.rows[0]}..{read.rows[1]} of {tensor}; "
                f"this program needs rows {first}..{last} at most",
                inputs=None,
                hint=hint,
            )
        if read.distinct < needed(program):
            _fail(
                label,
                f"program {program.pid} of {kernel} read {read.distinct} distinct elements of {tensor}, "
                f"fewer than the {needed(program)} its outputs depend on",
                inputs=None,
                hint=hint,
            )
        if exactly and read.distinct > needed(program):
            _fail(
                label,
                f"program {program.pid} of {kernel} read {read.distinct} distinct elements of {tensor}, "
                f"more than the {needed(program)} it needs",
                inputs=None,
                hint=hint,
            )
    return True


def check_products_at_most(
    trace: KernelTrace | None, kernel: str, most: Callable[[ProgramTrace], int], *, label: str, hint: str = ""
) -> bool:
    """Every program of ``kernel`` runs ``tl.dot`` at most ``most(program)`` times."""
    if trace is None or _recording():
        return True
    for program in _programs(trace, kernel, label, hint):
        if program.dots > most(program):
            _fail(
                label,
                f"program {program.pid} of {kernel} ran tl.dot {program.dots} times; its tiles need {most(program)}",
                inputs=None,
                hint=hint,
            )
    return True
