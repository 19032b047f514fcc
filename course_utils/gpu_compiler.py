"""The compile child: one Python without Triton's interpreter, kept while this process needs it.

Compiling for a GPU cannot happen in a process whose Triton runs in the interpreter (see
``course_utils.gpu_build``), so it happens in a child. Starting a child and importing Triton
costs about 0.2 s, paid once here instead of at every check: the child answers one request per
line until its input closes. It leaves with this process, and ``close`` stops it sooner (a sealed
run does, before it counts the processes a notebook left behind).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import select
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from .interpreter import python_executable

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_build.py")
ANSWER_TIMEOUT_S = 600


class CompilerFailed(RuntimeError):
    """The child died or did not answer; the message is the last line it wrote to stderr."""


CLOSE_WAIT_S = 10  # how long close() waits for a request in flight before it kills the child anyway

_lock = threading.Lock()
_child: subprocess.Popen | None = None
_errors: IO[bytes] | None = None  # the child's stderr, read back when it fails
_started_with: dict[str, str] = {}  # the environment the child was started with

# Compiled builds, by what decides them: a grader compiles the same kernels again and again (each
# submission's unchanged kernels, every health check's solution), and one compile for three GPUs
# costs about half a second. Only builds that compiled are kept: a failure is worked out afresh.
# A build is kept only from a child that has compiled nothing but that kernel's source: a source that
# subverted its child could then forge only its own builds, which every other student with the same
# source would get from that source anyway, never the builds of another kernel.
REMEMBERED_BUILDS = 1024
MAX_ANSWER_BYTES = 1 << 20  # one answer line: a child writing more is refused, not read into memory
_remembered: OrderedDict[str, dict[str, Any]] = OrderedDict()
_child_sources: set[str] = set()  # the kernel sources the running child has been given
jobs_compiled = 0  # jobs sent to a child so far: what the remembered builds saved shows against it


@dataclass(frozen=True)
class Sealing:
    """How the grader's trusted pass starts a compile child for a submission's kernels: inside a sandbox
    (``command`` wraps the child's command line) with an environment of its own."""

    command: Callable[[list[str]], list[str]]
    environment: dict[str, str]


_sealing: Sealing | None = None


@contextlib.contextmanager
def sealed_children(sealing: Sealing | None) -> Iterator[None]:
    """Compile children started inside the block are sealed so; the block's child is stopped at its end."""
    global _sealing
    close()
    saved, _sealing = _sealing, sealing
    try:
        yield
    finally:
        close()
        _sealing = saved


def _environment() -> dict[str, str]:
    """The child's environment: this process's now (or the sealing's), without the interpreter."""
    base = _sealing.environment if _sealing is not None else os.environ
    environment = {k: v for k, v in base.items() if k != "TRITON_INTERPRET"}
    environment["TRITON_DEFAULT_FP_FUSION"] = "1"
    return environment


def _start(environment: dict[str, str]) -> tuple[subprocess.Popen, IO[bytes]]:
    errors = tempfile.TemporaryFile()
    # Run as a script, not ``-m course_utils.gpu_build``: the package imports torch, which costs a fresh
    # process about 1.6 s. -P keeps this folder off sys.path (its modules are not Triton's); a sealed
    # child runs isolated (-I: no PYTHONPATH, no user site).
    python = python_executable()
    command = [python, "-P", SCRIPT] if _sealing is None else _sealing.command([python, "-I", SCRIPT])
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=environment)
    return child, errors


def _why_it_ended() -> str:
    """The last line the child wrote to stderr, or its exit code."""
    assert _child is not None and _errors is not None
    with contextlib.suppress(subprocess.TimeoutExpired):
        _child.wait(timeout=5)
    _errors.seek(0)
    lines = _errors.read().decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"it exited with code {_child.returncode}"


def _build_key(triton_key: str, job: dict[str, Any], environment: dict[str, str]) -> str:
    """What decides a job's build: Triton's installation, the job itself (source, signature, constants,
    options, target), the Triton settings the child runs with, and whether it runs sealed."""
    settings = sorted((k, v) for k, v in environment.items() if k.startswith("TRITON"))
    text = json.dumps([triton_key, job, settings, _sealing is None], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def compile_request(request: dict[str, Any]) -> list[dict[str, Any]]:
    """One result per job of ``request`` (``{"triton_key": ..., "jobs": [...]}``): remembered builds, and the
    child's answer for the rest."""
    with _lock:
        environment = _environment()
        keys = [_build_key(request.get("triton_key", ""), job, environment) for job in request["jobs"]]
        answers = {key: dict(_remembered[key]) for key in keys if key in _remembered}  # before any is dropped
        for key in answers:
            _remembered.move_to_end(key)
        new = [(key, job) for key, job in zip(keys, request["jobs"]) if key not in answers]
        for source in dict.fromkeys(job["source"] for _, job in new):  # one source at a time, in order
            group = [(key, job) for key, job in new if job["source"] == source]
            if _child_sources - {source}:
                _stop()  # the child has seen another source: this one gets a child of its own
            found = _ask({**request, "jobs": [job for _, job in group]}, environment)
            for (key, _), result in zip(group, found):
                answers[key] = result
                if result.get("compiled") is True and _child_sources == {source}:
                    _remembered[key] = dict(result)
                    while len(_remembered) > REMEMBERED_BUILDS:
                        _remembered.popitem(last=False)
        return [answers[key] for key in keys]


def _ask(request: dict[str, Any], environment: dict[str, str]) -> list[dict[str, Any]]:
    """The child's answer to one request; the caller holds ``_lock``."""
    global _child, _errors, _started_with, jobs_compiled
    jobs_compiled += len(request["jobs"])
    # A child that died, or that a change of environment (a Triton setting, say) has made stale, is replaced.
    if _child is None or _child.poll() is not None or environment != _started_with:
        _stop()
        _child, _errors = _start(environment)
        _started_with = environment
    assert _child.stdin is not None and _child.stdout is not None
    _child_sources.update(job["source"] for job in request["jobs"])
    line, answered = b"", False
    try:
        _child.stdin.write(json.dumps(request).encode() + b"\n")
        _child.stdin.flush()
        answered = bool(select.select([_child.stdout], [], [], ANSWER_TIMEOUT_S)[0])
        line = _child.stdout.readline(MAX_ANSWER_BYTES + 1) if answered else b""
    except OSError:
        answered = True  # the child had gone: its pipe was closed
    if not line:
        reason = _why_it_ended() if answered else f"no answer in {ANSWER_TIMEOUT_S} s"
        _stop()
        raise CompilerFailed(reason)
    if len(line) > MAX_ANSWER_BYTES:
        _stop()
        raise CompilerFailed(f"its answer was longer than {MAX_ANSWER_BYTES} bytes")
    answer = json.loads(line)
    if not isinstance(answer, list) or len(answer) != len(request["jobs"]):
        _stop()
        raise CompilerFailed(f"it answered {type(answer).__name__} for {len(request['jobs'])} jobs")
    return answer


def _stop() -> None:
    global _child, _errors
    if _child is not None:
        with contextlib.suppress(OSError):
            _child.stdin.close()  # the child's signal to leave
        try:
            _child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _child.kill()
            _child.wait()
        with contextlib.suppress(OSError):
            _child.stdout.close()
    _child_sources.clear()
    if _errors is not None:
        _errors.close()
    _child = _errors = None


def close() -> None:
    """Stop the child, if one is running; the next request starts a new one.

    A request still in flight after ``CLOSE_WAIT_S`` (a thread stuck in a compile) does not keep
    the child alive: it is killed, and that request fails.
    """
    if _lock.acquire(timeout=CLOSE_WAIT_S):
        try:
            _stop()
        finally:
            _lock.release()
    elif (child := _child) is not None:
        child.kill()


def forget() -> None:
    """Drop the remembered builds (a test that needs the child to compile)."""
    with _lock:
        _remembered.clear()


def remembered() -> int:
    """How many builds are remembered."""
    return len(_remembered)


def running() -> bool:
    return _child is not None and _child.poll() is None


atexit.register(close)
