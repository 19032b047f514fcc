"""Sealing: run one submission's notebook in a bubblewrap sandbox and read back what it left.

The sandbox sees a read-only view of the system (``/usr``, ``/etc``, the Python installation
and the course helpers), a private ``/tmp`` of limited size, no network, and nothing of the
instructor's repository, the solutions, OUT, the home folder or any other submission. It
runs under limits on memory, processes, file size and wall time.

Each grading worker keeps one sandbox with a warm runner in it (``sealed_run.py serve``),
which has imported torch once. Every submission runs in a fresh fork of it that enters its
own user, mount, PID and IPC namespaces and gets its own empty ``/tmp``: nothing it leaves,
no process it starts, and no memory it touches outlives it or reaches the next submission.

Everything it sends back is treated as the submission's own words: size-capped, parsed as
data, never executed.
"""

from __future__ import annotations

import atexit
import functools
import json
import multiprocessing.util
import os
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbformat.notebooknode import NotebookNode

import course_utils
from course_utils import gpu_compiler
from course_utils.interpreter import python_executable
from course_utils.notebook_cells import is_solution_cell, is_test_cell, nbgrader_meta
from course_utils.sealed_protocol import CELL, DONE, END, HEADER, RECORD, RUN, CellFrame, EndFrame, InvalidFrame

from .process_limit import ProcessLimit, process_limit

RUNNER = Path(__file__).with_name("sealed_run.py")
SOLUTION_LOADER = Path(__file__).resolve().parent.parent / "solutions.py"  # autograder.solutions, which withholds when sealed

SCRATCH_BYTES = 512 * 2**20  # the private /tmp
MAX_FILE_BYTES = 256 * 2**20
MAX_PROCESSES = 256
MAX_RETURN_BYTES = 256 * 2**20  # outputs and record together
# The sealed run stops a cell at its limit with SIGALRM, which the cell's own code can ignore; the grader, which
# sees each cell's frame arrive, stops the whole run once no cell has ended for the limit and this much more.
CELL_GRACE_S = 10


BWRAP_MISSING = "bubblewrap (bwrap) is not installed"


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
    record: bytearray = field(default_factory=bytearray)
    ended: str = "the kernel died (a cell crashed Python or exited it)"  # "completed", or why not
    leftover_processes: int = 0
    said_end: bool = False  # the runner sent its end frame: nothing more is read
    sealed: bool = True
    seconds: float = 0.0
    process_limit_note: str = ""  # '' when the process limit held; else why it could not be enforced
    invalid: str = ""  # '' when every frame followed the protocol; else the first that did not, and why


def _python_paths() -> list[Path]:
    """What the sandbox must see to run Python with the course's packages, read-only.

    Of the grader, only the module hidden tests import ``load_solution`` from: in the sealed run it withholds
    (``autograder.solutions``), and no other grader file, the mistakes catalogue included, is there to read.
    """
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(course_utils.__file__).resolve().parent}
    paths |= {SOLUTION_LOADER, SOLUTION_LOADER.with_name("__init__.py")}
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


def bwrap_command(mpl_cache: Path | None, argv: list[str]) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(BWRAP_MISSING)
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
    args += ["--ro-bind", str(RUNNER), "/grader/sealed_run.py"]
    if mpl_cache is not None:
        args += ["--ro-bind", str(mpl_cache), "/grader/matplotlib"]
    # bwrap's / and /dev are tmpfs that the sandbox could write: a file left there (a module on
    # /grader, beside the runner) would wait for the next submission. Only /tmp stays writable.
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp/work", "--"]
    return args + argv


def _environment(home: str, mpl_dir: str, sealed: bool) -> dict[str, str]:
    """A clean environment: nothing of the instructor's is passed on."""
    return {
        "PATH": f"{Path(python_executable()).parent}:/usr/local/bin:/usr/bin:/bin",
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
        "COURSE_SEALED": "1" if sealed else "0",
        "COURSE_UTILS_PARENT": str(Path(course_utils.__file__).resolve().parent.parent),  # the grader's, first on the path
    }


def compiler_sealing(sealed: bool) -> gpu_compiler.Sealing | None:
    """How the trusted pass starts the child that compiles a submission's kernels: in the same sandbox
    as the submission's own run (no network, read-only files, a scratch /tmp), with a clean environment.
    The child defines the submission's kernels (only after ``build_requests`` has checked that doing so
    runs no code) and compiles them; what it answers is a compile report, read as data."""
    if not sealed:
        return None
    environment = _environment("/tmp/home", "/tmp/matplotlib", sealed=True)
    return gpu_compiler.Sealing(command=lambda argv: bwrap_command(None, argv), environment=environment)


def _limit(memory_bytes: int | None, processes: ProcessLimit | None = None) -> None:
    """Runs in the child before bwrap: every process of the sandbox inherits these.

    RLIMIT_NPROC does not bind root; ``processes`` (a pids control group) does (see process_limit).
    """
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if processes is not None:
        processes.join()


@functools.lru_cache(maxsize=1)
def _matplotlib_cache() -> Path | None:
    """matplotlib's font list, built once per worker so that no sealed runner need rebuild it."""
    folder = Path(tempfile.mkdtemp(prefix="attention-mplcache-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    probe = "import matplotlib; matplotlib.use('Agg'); import matplotlib.font_manager"
    result = subprocess.run(
        [python_executable(), "-c", probe], env={**os.environ, "MPLCONFIGDIR": str(folder)}, capture_output=True, timeout=120
    )
    return folder if result.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why the sandbox cannot start here, or None when it can (bubblewrap, then a nested fork)."""
    # Each sealed run mounts an empty /tmp of its own (sealed_run.py): Python under /tmp would vanish.
    hidden = [path for path in _python_paths() if path == Path("/tmp") or Path("/tmp") in path.parents]
    if hidden:
        return f"{hidden[0]} is under /tmp, which every sealed run replaces with an empty one; keep the checkout and its venv elsewhere"
    try:
        command = bwrap_command(None, [python_executable(), "-I", "/grader/sealed_run.py", "probe"])
        result = subprocess.run(command, capture_output=True, timeout=120, env=_environment("/tmp/home", "/tmp/matplotlib", sealed=True))
    except SandboxUnavailable as missing:
        return str(missing)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap could not start: {error}"
    if result.returncode != 0:
        return f"bwrap could not start a sandbox: {result.stderr.decode(errors='replace').strip()[:300]}"
    said = result.stdout.decode(errors="replace").strip()
    return None if said == "ok" else f"the sandbox cannot isolate a submission: {said[:300]}"


def sandbox_remedy(problem: str) -> str:
    """What to do about a ``sandbox_problem``: installing bubblewrap helps only where it is what is missing."""
    if problem == BWRAP_MISSING:
        return "install bubblewrap (the README's setup)"
    return "the sandbox sees only the Python installation, its packages and this checkout's course_utils, read-only"


class RunnerBroken(RuntimeError):
    """The warm runner did not start or stopped answering; a fresh one is started."""


class WarmRunner:
    """One ``sealed_run.py serve`` process: torch imported once, a fresh fork per submission."""

    START_TIMEOUT_S = 180
    REPLY_TIMEOUT_S = 30

    def __init__(self, sealed: bool, memory_bytes: int | None) -> None:
        self.sealed = sealed
        self.processes = process_limit(MAX_PROCESSES)
        self._scratch = tempfile.TemporaryDirectory(prefix="attention-runner-")
        ours, theirs = socket.socketpair()
        mpl_cache = _matplotlib_cache()
        if sealed:
            env = _environment("/tmp/home", "/tmp/matplotlib", sealed=True)
            env["COURSE_MPL_SOURCE"] = "/grader/matplotlib" if mpl_cache else ""
            command = bwrap_command(mpl_cache, [python_executable(), "-I", "/grader/sealed_run.py", "serve", str(theirs.fileno())])
            cwd = None
        else:
            root = Path(self._scratch.name)
            (root / "home").mkdir()
            env = _environment(str(root / "home"), str(root / "matplotlib"), sealed=False)
            env["COURSE_MPL_SOURCE"] = str(mpl_cache or "")
            command = [python_executable(), "-I", str(RUNNER), "serve", str(theirs.fileno())]
            cwd = str(root)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,  # its own process group: all of it is killed at the end
            preexec_fn=functools.partial(_limit, memory_bytes, self.processes),
        )
        theirs.close()
        self.control = ours
        self._replies = b""
        self._ready = False  # it is importing torch; the first run waits for it

    def run(self, cells: list[dict[str, Any]], graded: list[str], cell_timeout: int, wall_seconds: int) -> SealedRun:
        """One submission in a fresh fork; RunnerBroken if the runner failed (never the submission's fault)."""
        if not self._ready:
            if not self._reply(self.START_TIMEOUT_S).get("ready"):
                raise RunnerBroken("the sealed runner did not start")
            self._ready = True
        request = os.memfd_create("request")  # read only by the fork, never by the runner
        os.write(request, json.dumps({"cells": cells, "graded": ",".join(graded), "timeout": cell_timeout}).encode())
        os.lseek(request, 0, os.SEEK_SET)
        read_end, write_end = os.pipe()
        try:
            self.control.settimeout(self.REPLY_TIMEOUT_S)
            socket.send_fds(self.control, [RUN], [write_end, request])
        except OSError as error:
            os.close(read_end)
            raise RunnerBroken(f"the sealed runner is gone: {error}") from error
        finally:
            os.close(write_end)
            os.close(request)
        try:
            run = _read_frames(read_end, wall_seconds, cell_timeout, {cell["index"] for cell in cells})
        finally:
            try:  # whatever happened while reading, the run ends before the next one starts
                self.control.sendall(DONE)
                ended = self._reply(self.REPLY_TIMEOUT_S).get("ended")
            except OSError as error:
                raise RunnerBroken(f"the sealed runner stopped answering: {error}") from error
        if not ended:
            raise RunnerBroken("the sealed runner did not end the run")
        run.sealed = self.sealed
        run.process_limit_note = self.processes.note
        return run

    def _reply(self, timeout: float) -> dict[str, Any]:
        """One JSON line from the runner (trusted code, but parsed as data all the same)."""
        self.control.settimeout(timeout)
        try:
            while b"\n" not in self._replies:
                chunk = self.control.recv(4096)
                if not chunk:
                    return {}
                self._replies += chunk
        except OSError:
            return {}
        line, self._replies = self._replies.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    def close(self) -> None:
        self.control.close()
        _kill_group(self.process)
        self.processes.release()
        self._scratch.cleanup()


_runners: dict[tuple[int, bool, int | None], WarmRunner] = {}  # by thread: a Dask worker may run tasks in threads


def close_runners() -> None:
    while _runners:
        _runners.popitem()[1].close()


atexit.register(close_runners)
multiprocessing.util.Finalize(None, close_runners, exitpriority=10)  # pool workers skip atexit


def _runner_key(sealed: bool, memory_bytes: int | None) -> tuple[int, bool, int | None]:
    return threading.get_ident(), sealed, memory_bytes


def _runner(sealed: bool, memory_bytes: int | None) -> WarmRunner:
    key = _runner_key(sealed, memory_bytes)
    if key not in _runners:
        _runners[key] = WarmRunner(sealed, memory_bytes)
    return _runners[key]


def prewarm_runner(sealed: bool, memory_bytes: int | None) -> None:
    """Start this thread's runner now, so that it imports torch while other work goes on."""
    try:
        _runner(sealed, memory_bytes)
    except (OSError, SandboxUnavailable):
        pass  # the first run tries again and says why


def run_sealed(notebook: NotebookNode, graded: list[str], limits: SandboxLimits) -> SealedRun:
    """Execute ``notebook``'s code cells sealed (or, with ``limits.sealed`` False, only in a fork)."""
    started = time.monotonic()
    cells = [
        {
            "index": index,
            "source": cell.source,
            "test": nbgrader_meta(cell).get("grade_id", "") if is_test_cell(cell) else "",
            # What a graded solution cell binds is the graded object (``recording.made_by_graded_cells``).
            "solution": nbgrader_meta(cell).get("grade_id", "") if is_solution_cell(cell) else "",
        }
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
    ]
    key = _runner_key(limits.sealed, limits.memory_bytes)
    for attempt in (1, 2):  # a runner that broke is replaced once; the submission is not blamed
        try:
            run = _runner(limits.sealed, limits.memory_bytes).run(cells, graded, limits.cell_timeout, limits.wall_seconds)
            break
        except RunnerBroken:
            if key in _runners:
                _runners.pop(key).close()
            if attempt == 2:
                raise
    run.seconds = time.monotonic() - started
    return run


def _read_frames(read_end: int, wall_seconds: int, cell_timeout: int, cells: set[int]) -> SealedRun:
    """Frames until the end frame, the end of the pipe (the run died), the wall limit, a cell past its limit
    (plus ``CELL_GRACE_S``: whatever the cell does with signals), or too much.

    A cell's limit starts again when a frame of one of ``cells`` (the notebook's code cells) arrives for the
    first time: a run that forges such frames gains at most one limit per cell, which the wall limit covers.
    """
    run = SealedRun()
    deadline = time.monotonic() + wall_seconds
    cell_deadline = time.monotonic() + cell_timeout + CELL_GRACE_S
    buffer = bytearray()
    total = 0
    ended_by_us = ""
    with selectors.DefaultSelector() as selector:
        selector.register(read_end, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline:
                ended_by_us = f"the notebook ran past the {wall_seconds} s limit for a whole submission and was stopped"
                break
            if now >= cell_deadline:
                ended_by_us = (
                    f"a cell ran past the {cell_timeout} s limit for a cell, kept running through the signal that stops it, and was stopped"
                )
                break
            if not selector.select(timeout=min(deadline - now, cell_deadline - now, 1.0)):
                continue
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_RETURN_BYTES:
                ended_by_us = "the notebook produced more output than the grader keeps and was stopped"
                break
            buffer += chunk
            ended_before = len(run.outputs.keys() & cells)
            _parse(buffer, run)
            if len(run.outputs.keys() & cells) > ended_before:  # a cell ended: the next one has its own limit
                cell_deadline = time.monotonic() + cell_timeout + CELL_GRACE_S
            if run.said_end or run.invalid:
                break  # the kernel's shutdown is not waited for: the group is killed below
    os.close(read_end)
    if ended_by_us:
        run.ended = ended_by_us
    return run


def _parse(buffer: bytearray, run: SealedRun) -> None:
    """Read the whole frames in ``buffer`` into ``run`` (``course_utils.sealed_protocol``).

    A frame that does not validate is kept as the reason the run is invalid: the first one
    stands, and nothing after it is read.
    """
    while len(buffer) >= HEADER.size and not run.invalid:
        kind, size = HEADER.unpack(bytes(buffer[: HEADER.size]))
        if len(buffer) < HEADER.size + size:
            return
        payload = bytes(buffer[HEADER.size : HEADER.size + size])
        del buffer[: HEADER.size + size]
        try:
            if kind == RECORD:
                run.record += payload
            elif kind == CELL:
                cell = CellFrame.from_wire(payload)
                run.outputs[cell.index] = list(cell.outputs)
                if cell.finished:
                    run.finished.add(cell.index)
            elif kind == END:
                end = EndFrame.from_wire(payload)
                run.ended, run.leftover_processes, run.said_end = end.ended, end.leftover_processes, True
            else:
                raise InvalidFrame(f"unknown frame kind {kind!r}")
        except InvalidFrame as problem:
            run.invalid = f"a {kind!r} frame: {problem}"[:300]


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
