"""The sealed run: execute one submitted notebook and record what its code gave the tests.

This file runs alone, inside the sandbox (``sandbox.py`` mounts it read-only), next to the
student's code: it imports nothing of the autograder, never sees the solutions, and decides
no verdict. It writes framed messages to the file descriptor given on the command line:

* ``C`` + JSON: one executed cell (index, outputs, whether it finished);
* ``R`` + bytes: the record (``course_utils.recording``), after each test cell;
* ``E`` + JSON: the end of the run (why it ended, processes left behind).

Everything it writes is untrusted: the code beside it could have written it instead.

    python sealed_run.py NOTEBOOK OUT_FD CELL_TIMEOUT GRADED_NAMES
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys

RECORD_FILE = "/tmp/.course-record"  # replaced by the caller's scratch when not sealed
HEADER = struct.Struct("<cQ")


def emit(out: int, kind: bytes, payload: bytes) -> None:
    data = HEADER.pack(kind, len(payload)) + payload
    while data:
        data = data[os.write(out, data) :]


def leftover_processes() -> list[int]:
    """Processes other than this one still alive in the sandbox's process namespace."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (me, 1):
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent_state = stat.read().rsplit(")", 1)[1].split()
                if parent_state[0] != "Z":
                    found.append(int(entry))
            except OSError:
                continue
    return found


def main(notebook_path: str, out: int, cell_timeout: int, graded: str) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    prepared_fonts = os.environ.get("COURSE_MPL_SOURCE")
    if prepared_fonts and os.path.isdir(prepared_fonts):
        import shutil

        shutil.copytree(prepared_fonts, os.environ["MPLCONFIGDIR"], dirs_exist_ok=True)
    record_file = os.environ.get("COURSE_RECORD_FILE", RECORD_FILE)
    os.environ["COURSE_RECORD_FILE"] = record_file
    os.environ["COURSE_GRADED_NAMES"] = graded
    notebook = nbformat.read(notebook_path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=cell_timeout,
        startup_timeout=120,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={
            "ename": "CellTimeoutError",
            "evalue": f"the cell ran past the {cell_timeout} s limit and was stopped",
            "traceback": [f"CellTimeoutError: the cell ran past the {cell_timeout} s limit and was stopped"],
        },
        shutdown_kernel="immediate",
        extra_arguments=["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=CRITICAL"],
        record_timing=False,
    )
    ended = "completed"
    sent = 0
    with client.setup_kernel():
        start = nbformat.v4.new_code_cell(
            "import course_utils.recording as _course_recording\n"
            "_course_recording.recording_from_environment(get_ipython().user_ns)\n"
            "del _course_recording"
        )
        client.execute_cell(start, 0, store_history=False)
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            is_test = bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))
            if is_test:
                marker = nbformat.v4.new_code_cell(f"__import__('course_utils.recording').recording.begin_cell({grade_id!r})")
                client.execute_cell(marker, index, store_history=False)
            try:
                client.execute_cell(cell, index)
            except DeadKernelError:
                ended = "the kernel died (a cell crashed Python or exited it)"
                emit(out, b"C", json.dumps({"index": index, "outputs": cell.get("outputs", []), "finished": False}).encode())
                break
            emit(out, b"C", json.dumps({"index": index, "outputs": cell.get("outputs", []), "finished": True}).encode())
            if is_test:
                try:
                    with open(record_file, "rb") as record:
                        record.seek(sent)
                        chunk = record.read()
                except OSError:
                    chunk = b""
                sent += len(chunk)
                emit(out, b"R", chunk)
    left = leftover_processes() if os.environ.get("COURSE_SEALED") == "1" else []
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    emit(out, b"E", json.dumps({"ended": ended, "leftover_processes": len(left)}).encode())


if __name__ == "__main__":
    path, fd, timeout, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    # stdout and stderr go nowhere: the kernel inherits them, and only the frames count.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    main(path, fd, timeout, names)
