"""Sealing: run one submission's notebook in a bubblewrap sandbox and read back what it left.

The sandbox sees a read-only view of the system (``/usr``, ``/etc``, the Python installation
and the course helpers), a private ``/tmp`` of limited size that disappears with it, no
network, and nothing of the instructor's repository, the solutions, OUT, the home folder or
any other submission. It runs in its own process namespace, so every process it started
dies with it, and under limits on memory, processes, file size and wall time.

Everything it sends back is treated as the submission's own words: size-capped, parsed as
data, never executed.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode

import course_utils

RUNNER = Path(__file__).with_name("sealed_run.py")
HEADER_SIZE = 9  # sealed_run.HEADER: one byte of kind, eight of length

SCRATCH_BYTES = 512 * 2**20  # the private /tmp
MAX_FILE_BYTES = 256 * 2**20
MAX_PROCESSES = 256
MAX_RETURN_BYTES = 256 * 2**20  # outputs and record together


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here."""


@dataclass(frozen=True)
class SandboxLimits:
    cell_timeout: int
    memory_bytes: int | None  # per process, RLIMIT_DATA
    wall_seconds: int
    sealed: bool = True


@dataclass
class SealedRun:
    """What came back from one sealed run: untrusted data."""

    outputs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # cell index -> outputs
    finished: set[int] = field(default_factory=set)  # cells that ran to their end
    record: bytes = b""
    ended: str = "the run ended without a word"  # "completed", or why not
    leftover_processes: int = 0
    sealed: bool = True
    seconds: float = 0.0


def _python_paths() -> list[Path]:
    """What the sandbox must see to run Python with the course's packages, read-only."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(course_utils.__file__).resolve().parent}
    return sorted(paths)


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(top), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    return args


def bwrap_command(notebook: Path, mpl_cache: Path | None, argv: list[str]) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
    args = [
        bwrap,
        "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--uid", "65534", "--gid", "65534", "--hostname", "sandbox",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        *_system_binds(),
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp",
        "--dir", "/tmp/home", "--dir", "/tmp/work",
    ]  # fmt: skip
    for path in _python_paths():
        args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", str(RUNNER), "/grader/sealed_run.py", "--ro-bind", str(notebook), "/grader/submission.ipynb"]
    if mpl_cache is not None:
        args += ["--ro-bind", str(mpl_cache), "/grader/matplotlib"]
    args += ["--chdir", "/tmp/work", "--"]
    return args + argv


def _environment(record_file: str, home: str, mpl_dir: str, sealed: bool) -> dict[str, str]:
    """A clean environment: nothing of the instructor's is passed on."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": mpl_dir,
        "NBGRADER_EXECUTION": "autograde",  # heavy cells shrink, as under nbgrader
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TRITON_INTERPRET": "1",  # kernels are graded in Triton's interpreter, on the CPU
        "TRITON_CACHE_DIR": f"{home}/.triton",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONDONTWRITEBYTECODE": "1",
        "COURSE_RECORD_FILE": record_file,
        "COURSE_SEALED": "1" if sealed else "0",
    }


def _limit(limits: SandboxLimits) -> None:
    """Runs in the child before bwrap: every process of the sandbox inherits these."""
    if limits.memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@functools.lru_cache(maxsize=1)
def _matplotlib_cache() -> Path | None:
    """matplotlib's font list, built once per worker so that each sealed run need not rebuild it."""
    folder = Path(tempfile.mkdtemp(prefix="attention-mplcache-"))
    probe = "import matplotlib; matplotlib.use('Agg'); import matplotlib.font_manager"
    result = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "MPLCONFIGDIR": str(folder)}, capture_output=True, timeout=120)
    return folder if result.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why the sandbox cannot start here, or None when it can."""
    try:
        with tempfile.NamedTemporaryFile(suffix=".ipynb") as placeholder:
            command = bwrap_command(Path(placeholder.name), None, [sys.executable, "-c", "import torch"])
            result = subprocess.run(command, capture_output=True, timeout=120)
    except SandboxUnavailable as missing:
        return str(missing)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap could not start: {error}"
    if result.returncode != 0:
        return f"bwrap could not start a sandbox: {result.stderr.decode(errors='replace').strip()[:300]}"
    return None


def run_sealed(notebook: NotebookNode, graded: list[str], limits: SandboxLimits) -> SealedRun:
    """Execute ``notebook`` sealed (or, with ``limits.sealed`` False, only in its own process group)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="attention-sealed-") as folder:
        submission = Path(folder) / "submission.ipynb"
        nbformat.write(notebook, submission)
        read_end, write_end = os.pipe()
        mpl_cache = _matplotlib_cache()
        if limits.sealed:
            env = _environment("/tmp/.course-record", "/tmp/home", "/tmp/matplotlib", sealed=True)
            argv = [sys.executable, "/grader/sealed_run.py", "/grader/submission.ipynb", str(write_end), str(limits.cell_timeout), ",".join(graded)]
            command = bwrap_command(submission, mpl_cache, argv)
            # The runner starts by copying the prepared font list into its private /tmp.
            env["COURSE_MPL_SOURCE"] = "/grader/matplotlib" if mpl_cache else ""
            cwd = None
        else:
            scratch = Path(folder) / "scratch"
            (scratch / "home").mkdir(parents=True)
            env = _environment(str(scratch / ".course-record"), str(scratch / "home"), str(scratch / "matplotlib"), sealed=False)
            env["COURSE_MPL_SOURCE"] = str(mpl_cache or "")
            command = [sys.executable, str(RUNNER), str(submission), str(write_end), str(limits.cell_timeout), ",".join(graded)]
            cwd = str(scratch)
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            pass_fds=(write_end,),
            start_new_session=True,  # its own process group: all of it is killed at the end
            preexec_fn=functools.partial(_limit, limits),
        )
        os.close(write_end)
        run = _read_frames(read_end, process, limits.wall_seconds)
        run.sealed = limits.sealed
        run.seconds = time.monotonic() - started
    return run


def _read_frames(read_end: int, process: subprocess.Popen, wall_seconds: int) -> SealedRun:
    import selectors

    run = SealedRun()
    deadline = time.monotonic() + wall_seconds
    buffer = bytearray()
    total = 0
    ended_by_us = ""
    with selectors.DefaultSelector() as selector:
        selector.register(read_end, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                ended_by_us = f"the notebook ran past the {wall_seconds} s limit for a whole submission and was stopped"
                break
            if not selector.select(timeout=min(left, 1.0)):
                if process.poll() is not None and not selector.select(timeout=0):
                    break
                continue
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_RETURN_BYTES:
                ended_by_us = "the notebook produced more output than the grader keeps and was stopped"
                break
            buffer += chunk
            _parse(buffer, run)
    os.close(read_end)
    _kill_group(process)
    if ended_by_us:
        run.ended = ended_by_us
    return run


def _parse(buffer: bytearray, run: SealedRun) -> None:
    while len(buffer) >= HEADER_SIZE:
        kind = bytes(buffer[:1])
        size = int.from_bytes(buffer[1:HEADER_SIZE], "little")
        if len(buffer) < HEADER_SIZE + size:
            return
        payload = bytes(buffer[HEADER_SIZE : HEADER_SIZE + size])
        del buffer[: HEADER_SIZE + size]
        try:
            if kind == b"R":
                run.record += payload
            elif kind == b"C":
                message = json.loads(payload)
                index = int(message["index"])
                run.outputs[index] = [o for o in message.get("outputs", []) if isinstance(o, dict)]
                if message.get("finished"):
                    run.finished.add(index)
            elif kind == b"E":
                message = json.loads(payload)
                run.ended = str(message.get("ended", run.ended))[:300]
                run.leftover_processes = int(message.get("leftover_processes", 0))
        except (ValueError, KeyError, TypeError):
            continue  # a malformed frame is the submission's loss, never the grader's


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
