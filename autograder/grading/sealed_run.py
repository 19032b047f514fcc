"""The sealed runner: one warm process per grading worker, one fresh fork per submission.

This file runs alone, inside the sandbox (``sandbox.py`` starts it under bubblewrap and mounts
it read-only). It imports nothing of the autograder, never sees the solutions, and decides
no verdict.

    python sealed_run.py serve CONTROL_FD    # the warm runner
    python sealed_run.py probe               # can this machine isolate a fork? (prints "ok")

``serve`` imports torch, IPython and matplotlib once (about two seconds of every submission
before), then answers requests on its control socket, one at a time. A request is two
descriptors: the write end of a pipe, and a memory file with the notebook's code cells, the
cell time limit and the graded names. The runner never reads that file: only the fork that
runs the submission does, so no submission's code ever sits in the runner's memory, which
every later fork starts from. For each request it forks:

* the child enters new user, mount, PID and IPC namespaces (``isolate``) and forks again;
* the grandchild is PID 1 of the new PID namespace: it mounts a fresh, private ``/tmp``,
  drops its capabilities, closes every other descriptor and runs the cells in process
  (``run_cells``), writing framed messages to the pipe:

  * ``C`` + JSON: one executed cell (index, outputs, whether it finished);
  * ``R`` + bytes: the record (``course_utils.recording``), after each test cell;
  * ``E`` + JSON: the end of the run (why it ended, processes left behind).

After each graded solution cell (a cell whose ``solution`` names its grade id), the objects it bound to graded
names are kept (``recording.end_graded_cell``): the kernel a later cell binds to a graded kernel's name is not
the graded kernel (``course_utils.kernel_trace``).

When the grader has read what it wants, it says so; the runner kills the grandchild, which
takes its whole PID namespace with it, and is ready for the next submission. The runner and
the child are not dumpable, so the student's process, which cannot name them in its PID
namespace, cannot open their memory or descriptors through /proc either. Submissions
therefore share no file, process or memory: each starts from the same warm image.

Everything the grandchild writes is untrusted: the code beside it could have written it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from typing import Any

# The grader's own course_utils, bound read-only at its path (sandbox._python_paths), comes first: a Python whose
# environment has the course installed from another checkout would otherwise import that one, which is not there.
if os.environ.get("COURSE_UTILS_PARENT"):
    sys.path.insert(0, os.environ["COURSE_UTILS_PARENT"])

from course_utils.sealed_protocol import RECORD, RUN, CellFrame, EndFrame, frame  # noqa: E402 - after the path above

SCRATCH_SIZE = "512m"
MAX_STREAM_CHARS = 1_000_000  # per cell; the grader keeps far fewer (nbgrader_ext.limits)

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x08000000, 0x10000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 1 << 18
PR_SET_DUMPABLE = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def emit(out: int, data: bytes) -> None:
    """Write one frame (``course_utils.sealed_protocol``) whole."""
    while data:
        data = data[os.write(out, data) :]


# ----- isolation of one fork (Linux namespaces, nested in bubblewrap's) -----

_libc = ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def _dumpable(flag: bool) -> None:
    _call(_libc.prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def isolate() -> None:
    """In the child: new user, mount, PID and IPC namespaces, mapping only our own ids."""
    uid, gid = os.getuid(), os.getgid()
    _dumpable(True)  # /proc/self/uid_map belongs to root while a process is not dumpable
    _call(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)
    _dumpable(False)


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    _call(_libc.mount(encode(source), encode(target), encode(kind), flags, encode(data)), f"mount {target}")


def _drop_capabilities() -> None:
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    _call(_libc.capset(header, data), "capset")


def private_scratch() -> str:
    """In the grandchild: a fresh /tmp (and /dev/shm) that no other submission sees."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here shows elsewhere
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={SCRATCH_SIZE},mode=1777")
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    _drop_capabilities()  # no unmounting back to the runner's /tmp
    return "/tmp"


def _close_all_but(keep: int) -> None:
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


def leftover_processes() -> list[int]:
    """Other live processes of this PID namespace (or of namespaces inside it).

    The /proc here is the runner's, so a process is ours when its ``NSpid`` line is at least
    as deep as ours.
    """

    def depth_and_state(pid: str) -> tuple[int, str]:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        return len(fields.get("NSpid", "").split()), fields.get("State", "").strip()[:1]

    me = str(os.getpid())
    mine = os.readlink("/proc/self")
    depth = depth_and_state(mine)[0]
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry not in (mine, me):
            try:
                level, state = depth_and_state(entry)
            except (OSError, ValueError):
                continue
            if level >= depth and state != "Z":
                found.append(int(entry))
    return found


# ----- running cells in process -----


class CellTimeoutError(Exception):
    """A cell ran past its time limit."""


class _Outputs:
    """Where the current cell's outputs go, in order, as nbformat dictionaries."""

    cell: list[dict[str, Any]] = []
    chars = 0

    @classmethod
    def add(cls, output: dict[str, Any]) -> None:
        cls.cell.append(output)

    @classmethod
    def stream(cls, name: str, text: str) -> None:
        if cls.chars >= MAX_STREAM_CHARS:
            return
        text = text[: MAX_STREAM_CHARS - cls.chars]
        cls.chars += len(text)
        last = cls.cell[-1] if cls.cell else None
        if last and last.get("output_type") == "stream" and last.get("name") == name:
            last["text"] += text
        else:
            cls.add({"output_type": "stream", "name": name, "text": text})


class _Stream:
    """``sys.stdout`` or ``sys.stderr`` while a cell runs."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        _Outputs.stream(self.name, str(text))
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def make_shell() -> Any:
    """An IPython shell whose displays, results and errors become notebook outputs."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import Type
    from traitlets.config import Config

    class Publisher(DisplayPublisher):
        def publish(self, data: dict, metadata: dict | None = None, *args: Any, **kwargs: Any) -> None:
            _Outputs.add({"output_type": "display_data", "data": dict(data), "metadata": dict(metadata or {})})

        def clear_output(self, wait: bool = False) -> None:
            _Outputs.cell.clear()

    class ResultHook(DisplayHook):
        def write_output_prompt(self) -> None:
            pass

        def write_format_data(self, format_dict: dict, md_dict: dict | None = None) -> None:
            _Outputs.add(
                {"output_type": "execute_result", "data": dict(format_dict), "metadata": dict(md_dict or {}), "execution_count": None}
            )

        def finish_displayhook(self) -> None:
            self._is_active = False

    class SealedShell(InteractiveShell):
        displayhook_class = Type(ResultHook)
        display_pub_class = Type(Publisher)

        def _showtraceback(self, etype: type, evalue: BaseException, stb: list[str]) -> None:
            _Outputs.add(
                {"output_type": "error", "ename": getattr(etype, "__name__", "Error"), "evalue": str(evalue), "traceback": list(stb)}
            )

        def enable_gui(self, gui: str | None = None) -> None:
            pass  # no event loop: figures are drawn inline, after each cell

    config = Config()
    config.HistoryManager.hist_file = ":memory:"  # no history thread, no file
    config.InteractiveShell.colors = "nocolor"
    return SealedShell.instance(config=config)


def preload() -> Any:
    """What every notebook imports, once: each fork starts with it in memory."""
    import matplotlib

    matplotlib.use("module://matplotlib_inline.backend_inline")
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch.optim  # noqa: F401

    # The first optimizer a notebook makes imports torch._dynamo (about 2 s): once here, not per submission.
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])

    import course_utils  # noqa: F401
    import course_utils.checks  # noqa: F401
    import course_utils.recording  # noqa: F401

    try:
        import triton  # noqa: F401 - notebook 07's kernels, in the interpreter
    except ImportError:
        pass
    else:
        from course_utils.kernels import skip_unasserted_overflow_checks, triton_installation_key

        triton_installation_key()  # hashed once here: every compile for a GPU check reuses it
        skip_unasserted_overflow_checks()
    shell = make_shell()
    shell.enable_matplotlib("inline")  # figures become display outputs after each cell
    return shell


def run_cells(shell: Any, request: dict[str, Any], out: int) -> None:
    """Run the cells in order; after each test cell, send what the record gained."""
    import course_utils.recording as recording

    record_file = os.environ["COURSE_RECORD_FILE"]
    os.environ["COURSE_GRADED_NAMES"] = request["graded"]
    limit = int(request["timeout"])

    def on_alarm(signum: int, frame: Any) -> None:
        __tracebackhide__ = True  # noqa: F841 - IPython leaves this frame out of tracebacks
        raise CellTimeoutError(f"the cell ran past the {limit} s limit and was stopped")

    signal.signal(signal.SIGALRM, on_alarm)
    recording.recording_from_environment(shell.user_ns)
    sent = 0
    streams = sys.stdout, sys.stderr
    for cell in request["cells"]:
        _Outputs.cell, _Outputs.chars = [], 0
        if cell["test"]:
            recording.begin_cell(cell["test"])
        bound = recording.graded_bindings() if cell.get("solution") else None
        sys.stdout, sys.stderr = _Stream("stdout"), _Stream("stderr")
        try:
            signal.setitimer(signal.ITIMER_REAL, limit)
            shell.run_cell(cell["source"], store_history=True)
        except BaseException as error:  # noqa: BLE001 - the alarm can land outside the cell's code
            shell.showtraceback((type(error), error, None))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stderr = streams
        if bound is not None:  # a graded solution cell: what it bound to graded names is what the tests grade
            recording.end_graded_cell(bound)
        emit(out, CellFrame(cell["index"], tuple(_Outputs.cell), True).to_wire())
        if cell["test"]:
            try:
                with open(record_file, "rb") as record:
                    record.seek(sent)
                    chunk = record.read()
            except OSError:
                chunk = b""
            sent += len(chunk)
            emit(out, frame(RECORD, chunk))


def _read_request(fd: int) -> dict[str, Any]:
    with os.fdopen(fd, "rb") as file:
        return json.loads(file.read())


def _grandchild(shell: Any, request_fd: int, out: int, sealed: bool, scratch: str) -> None:
    ended = "completed"
    left: list[int] = []
    try:
        os.setsid()  # out of the runner's process group: kill(0, ...) reaches only this run
        root = private_scratch() if sealed else scratch
        request = _read_request(request_fd)  # read here, never in the runner, whose memory every fork shares
        _close_all_but(out)
        for folder in ("home", "work", "matplotlib"):
            os.makedirs(f"{root}/{folder}", exist_ok=True)
        os.environ.update(HOME=f"{root}/home", MPLCONFIGDIR=f"{root}/matplotlib", COURSE_RECORD_FILE=f"{root}/.course-record")
        os.chdir(f"{root}/work")
        run_cells(shell, request, out)
        compiler = sys.modules.get("course_utils.gpu_compiler")
        if compiler is not None:
            with contextlib.suppress(Exception):  # a notebook that broke it is counted below with what it left
                compiler.close()  # the compile child kept for the GPU checks is the course's, not a leftover
        if sealed:
            left = leftover_processes()
    except Exception as problem:  # noqa: BLE001 - said in the end frame, never raised into the runner
        ended = f"the sandbox could not run the notebook: {type(problem).__name__}: {problem}"
    emit(out, EndFrame(ended, len(left)).to_wire())
    os._exit(0)  # PID 1 leaving takes every process of its namespace with it


def _child(shell: Any, request_fd: int, out: int, sealed: bool, scratch: str, report: int) -> None:
    try:
        if sealed:
            isolate()
        grandchild = os.fork()
        if grandchild == 0:
            os.close(report)
            _grandchild(shell, request_fd, out, sealed, scratch)
        os.close(out)
        os.close(request_fd)
        os.write(report, str(grandchild).encode())
        os.close(report)
        os.waitpid(grandchild, 0)
    except BaseException as problem:  # noqa: BLE001
        try:
            emit(out, EndFrame(f"the sandbox could not be set up: {problem}").to_wire())
        except OSError:
            pass
    os._exit(0)


def _receive(control: socket.socket) -> tuple[bytes, list[int]] | None:
    """One message from the grader: a byte (RUN or DONE) and, with RUN, two descriptors."""
    kind, fds, _, _ = socket.recv_fds(control, 1, 2)
    return (kind, fds) if kind else None


def _reply(control: socket.socket, message: dict[str, Any]) -> None:
    control.sendall(json.dumps(message).encode() + b"\n")


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def serve(control_fd: int) -> None:
    sealed = os.environ.get("COURSE_SEALED") == "1"
    if sealed:
        _dumpable(False)
    scratch_root = os.getcwd()
    prepared_fonts = os.environ.get("COURSE_MPL_SOURCE")
    if prepared_fonts and os.path.isdir(prepared_fonts):
        shutil.copytree(prepared_fonts, os.environ["MPLCONFIGDIR"], dirs_exist_ok=True)
    shell = preload()
    control = socket.socket(fileno=control_fd)
    _reply(control, {"ready": True})
    while (message := _receive(control)) is not None:
        kind, fds = message
        if kind != RUN or len(fds) != 2:
            _close(fds)
            continue
        out, request_fd = fds
        scratch = "" if sealed else tempfile.mkdtemp(dir=scratch_root)  # sealed: a fresh /tmp instead
        report_read, report_write = os.pipe()
        child = os.fork()
        if child == 0:
            control.close()
            os.close(report_read)
            _child(shell, request_fd, out, sealed, scratch, report_write)
        _close([out, request_fd, report_write])
        with os.fdopen(report_read, "rb") as report:
            text = report.read()
        grandchild = int(text) if text.isdigit() else 0
        # The grader reads the pipe, then says DONE; the run ends then, whatever it was doing.
        done = _receive(control)
        if done:
            _close(done[1])  # DONE carries none; anything else is dropped
        if grandchild:
            try:
                os.killpg(grandchild, signal.SIGKILL) if not sealed else os.kill(grandchild, signal.SIGKILL)
            except OSError:
                pass
        os.waitpid(child, 0)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        if done is None:
            return
        _reply(control, {"ended": True})


def probe() -> None:
    """Fork, isolate and mount as ``serve`` does, without the imports; print "ok"."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            isolate()
            grandchild = os.fork()
            if grandchild == 0:
                private_scratch()
                os.write(write_end, b"ok")
                os._exit(0)
            os.waitpid(grandchild, 0)
        except BaseException as problem:  # noqa: BLE001
            os.write(write_end, str(problem).encode()[:300])
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as said:
        answer = said.read().decode(errors="replace")
    os.waitpid(child, 0)
    print(answer)


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        probe()
    else:
        # stdout and stderr go nowhere: only the frames count.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        serve(int(sys.argv[2]))
