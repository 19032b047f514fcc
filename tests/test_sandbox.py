"""The sealed runner: submissions that run one after another in the same warm runner share nothing."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import nbformat
import pytest
from child_processes import live_children

from autograder.grading import sandbox
from autograder.grading.sandbox import SandboxLimits, run_sealed, sandbox_problem

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
LIMITS = SandboxLimits(cell_timeout=20, memory_bytes=None, wall_seconds=120)

# Every writable-looking place a file could wait in for the next submission; /grader holds the
# runner, so a module there would be imported by the next one.
PLACES = ("/tmp/planted", "/tmp/home/planted", "/tmp/work/planted", "/dev/shm/planted", "/dev/planted", "/planted", "/grader/stack_data.py")
# Everything a first submission could leave for, or do to, whatever runs after it.
ATTACK = (
    f"PLACES = {PLACES!r}\n"
    + """
import os, signal, subprocess
for path in PLACES:
    try:
        open(path, 'w').write('from the first submission')
    except OSError:
        pass
try:
    os.kill(0, signal.SIGUSR1)  # its whole process group: was the runner's once
except OSError:
    pass
os.environ['PLANTED'] = '1'
import torch
torch.planted = True
subprocess.Popen(['sleep', '1000'], start_new_session=True)
def depth(pid):  # how many PID namespaces deep: ours and our children's are deeper than the runner's
    return len(next(line for line in open(f'/proc/{pid}/status') if line.startswith('NSpid')).split()) - 1

reached = []
for entry in os.listdir('/proc'):  # the runner's /proc: it shows the runner, but lets nothing through
    if entry.isdigit() and depth(entry) < depth('self'):
        for what, attempt in (
            ('memory', lambda: open(f'/proc/{entry}/mem', 'rb').read(1)),
            ('descriptors', lambda: [os.open(f'/proc/{entry}/fd/{n}', os.O_RDONLY) for n in os.listdir(f'/proc/{entry}/fd')]),
            ('environment', lambda: open(f'/proc/{entry}/environ').read()),
            ('files', lambda: os.listdir(f'/proc/{entry}/root/tmp')),
        ):
            try:
                attempt()
                reached.append(f'{what} of {entry}')
            except OSError:
                pass
for pid in range(2, 100):  # numbers name processes of its own namespace only
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print(json.dumps({'parent': os.getppid(), 'reached': reached, 'outside': sum(e.isdigit() and depth(e) < depth('self') for e in os.listdir('/proc'))}))
"""
)

LOOK = (
    f"PLACES = {PLACES!r}\n"
    + """
import os, torch
print(json.dumps({
    'planted': [p for p in PLACES if os.path.exists(p)],
    'environment': 'PLANTED' in os.environ,
    'torch patched': hasattr(torch, 'planted'),
    'processes': [e for e in os.listdir('/proc') if e.isdigit() and open(f'/proc/{e}/cmdline', 'rb').read().startswith(b'sleep')],
}))
"""
)


def printed(source: str) -> dict:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import json"), nbformat.v4.new_code_cell(source)])
    run = run_sealed(notebook, [], LIMITS)
    assert run.ended == "completed", run.ended
    text = "".join(o.get("text", "") for o in run.outputs[1] if o.get("output_type") == "stream")
    assert text, run.outputs
    return json.loads(text.strip().splitlines()[-1])


def test_a_submission_leaves_nothing_for_the_next_and_cannot_reach_the_runner() -> None:
    attacked = printed(ATTACK)
    runners = sealed_runners()
    assert runners, "no sealed runner is running"
    assert attacked["parent"] == 0, "the runner is visible as the parent of the student's process"
    assert attacked["outside"] >= 2, "the attack saw no process outside its namespace to try"
    assert attacked["reached"] == [], f"the student's process could open {attacked['reached']}"

    seen = printed(LOOK)
    assert seen == {"planted": [], "environment": False, "torch patched": False, "processes": []}, seen
    assert sealed_runners() == runners, "the runner was replaced"


def sealed_runners() -> set[int]:
    """This process's live sealed runners (a bwrap that serves ``/grader/sealed_run.py``), as the system lists them."""
    return set(live_children(lambda command: command[0].endswith(b"bwrap") and b"/grader/sealed_run.py" in command))


SCAN = """
import ctypes
head, tail = b'secret-of-the-', b'first-submission'  # never joined here, or the scan would find itself
found = False
for line in open('/proc/self/maps'):
    span, mode = line.split()[:2]
    if mode.startswith('rw') and '[vvar' not in line:
        start, end = (int(x, 16) for x in span.split('-'))
        data = ctypes.string_at(start, end - start)
        at = data.find(head)
        while at >= 0 and not found:
            found = data[at + len(head):at + len(head) + len(tail)] == tail
            at = data.find(head, at + 1)
print(json.dumps({'found': found}))
"""


def test_a_submission_cannot_read_an_earlier_one_from_memory() -> None:
    # The runner never reads a request, so no submission's text is in the memory later forks copy.
    assert printed("secret = 'secret-of-the-first-submission'\nprint(json.dumps({'said': secret}))") == {
        "said": "secret-of-the-first-submission"
    }
    assert printed(SCAN) == {"found": False}


def raw_frame(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("<Q", len(payload)) + payload


FORGED_FRAMES = {
    "not an object": raw_frame(b"E", b"[]"),
    "another schema": raw_frame(b"E", b'{"schema": 99, "ended": "completed", "leftover_processes": 0}'),
    "a field too many": raw_frame(b"C", b'{"schema": 1, "index": 1, "outputs": [], "finished": true, "x": 1}'),
    "a wrong type": raw_frame(b"E", b'{"schema": 1, "ended": "completed", "leftover_processes": "0"}'),
    "an unknown kind": raw_frame(b"Z", b""),
}


@pytest.mark.parametrize("forged", FORGED_FRAMES.values(), ids=list(FORGED_FRAMES))
def test_a_forged_frame_invalidates_its_own_run_only(forged: bytes) -> None:
    forge = f"import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, {forged!r})\n    except OSError:\n        pass"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(forge), nbformat.v4.new_code_cell("print('after')")])
    run = run_sealed(notebook, [], LIMITS)
    assert run.invalid, "a frame that breaks the protocol must make its run invalid"
    assert printed("print(json.dumps({'next': True}))") == {"next": True}


COMPILES_AND_LEAVES_A_SLEEPER = """
import subprocess
import torch
from course_utils import gpu_compiler
from course_utils.kernels import build_for_gpu, tl, triton

@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

builds = build_for_gpu(double, (torch.zeros(10), 10), {"BLOCK": 16}) + build_for_gpu(double, (torch.zeros(10), 10), {"BLOCK": 32})
subprocess.Popen(['sleep', '1000'], start_new_session=True)
print(json.dumps({'compiled': [b.compiled for b in builds], 'child': gpu_compiler.running()}))
"""


def test_the_compile_child_of_gpu_checks_is_not_a_leftover_but_a_sleeper_is() -> None:
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import json"), nbformat.v4.new_code_cell(COMPILES_AND_LEAVES_A_SLEEPER)]
    )
    run = run_sealed(notebook, [], LIMITS)
    assert run.ended == "completed", run.ended
    text = "".join(o.get("text", "") for o in run.outputs[1] if o.get("output_type") == "stream")
    assert json.loads(text.strip().splitlines()[-1]) == {"compiled": [True, True], "child": True}, text
    assert run.leftover_processes == 1, "the sleeper alone is left: the compile child is stopped before the count"


def test_a_cell_that_kills_its_process_ends_the_run_and_the_runner_carries_on() -> None:
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print('before')"), nbformat.v4.new_code_cell("import os\nos._exit(3)")]
    )
    run = run_sealed(notebook, [], LIMITS)
    assert run.ended.startswith("the kernel died"), run.ended
    assert 0 in run.finished and 1 not in run.finished
    assert printed("print(json.dumps({'alive': True}))") == {"alive": True}


def test_a_python_under_tmp_is_refused_with_the_reason(repo_root: Path) -> None:
    # Every sealed run mounts an empty /tmp of its own, so a checkout and venv under /tmp would vanish
    # mid-run (found with a clone in /tmp: every notebook scored 0 and the health check stopped the run).
    # A venv made under /tmp, with this venv's packages on its path, asks the grader whether it can seal.
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        under_tmp = Path(scratch).resolve() / "venv"
        venv.create(under_tmp, with_pip=False, symlinks=True)
        packages = [str(repo_root), *(p for p in sys.path if p.endswith("site-packages"))]
        asked = subprocess.run(
            [str(under_tmp / "bin" / "python"), "-c", "from autograder.grading.sandbox import sandbox_problem; print(sandbox_problem())"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(packages)},
        )
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == (
        f"{under_tmp} is under /tmp, which every sealed run replaces with an empty one; keep the checkout and its venv elsewhere"
    )


def test_the_process_limit_binds_even_when_the_grader_runs_as_root() -> None:
    """RLIMIT_NPROC does not bind root: a sealed run started by root becomes nobody, for whom it does."""
    seen = printed(
        """
import os, subprocess
started, refused = [], None
for _ in range(400):
    try:
        started.append(subprocess.Popen(['sleep', '30']))
    except OSError as error:
        refused = type(error).__name__
        break
for child in started:
    child.kill()
    child.wait()
print(json.dumps({'started': len(started), 'refused': refused, 'uid': os.getuid()}))
"""
    )
    assert seen["started"] < sandbox.MAX_PROCESSES and seen["refused"] == "BlockingIOError", seen


def test_without_a_pids_group_a_root_grader_says_the_limit_is_not_enforced(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.grading import process_limit as module

    monkeypatch.setattr(module.os, "geteuid", lambda: 0)
    none = module.process_limit(256, root=tmp_path)  # no cgroup filesystem at all
    assert none.group is None and none.note.startswith("processes not limited: the grader runs as root")
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "cgroup.procs").write_text("")  # a v1 pids hierarchy (a plain folder stands in)
    made = module.process_limit(256, root=tmp_path)
    assert made.note == "" and (made.group / "pids.max").read_text() == "256"
    monkeypatch.setattr(module.os, "geteuid", lambda: 1000)
    assert module.process_limit(256, root=tmp_path) == module.ProcessLimit(None, "")  # RLIMIT_NPROC binds a user


def test_a_cell_that_ignores_the_alarm_is_stopped_by_the_grader_near_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sealed run stops a cell with SIGALRM; this cell ignores it and sleeps on. Only the grader, which sees no
    # frame of the cell arrive, can stop it: at the cell's limit plus the grace, long before the whole run's limit.
    monkeypatch.setattr(sandbox, "CELL_GRACE_S", 2)
    stubborn = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(100)"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(stubborn)])
    run = run_sealed(notebook, [], SandboxLimits(cell_timeout=3, memory_bytes=None, wall_seconds=120))
    assert "ran past the 3 s limit for a cell, kept running through the signal that stops it" in run.ended, run.ended
    assert 0 in run.finished and 1 not in run.finished  # stopped by the cell's limit, not the whole run's (120 s)
    assert printed("print(json.dumps({'next': True}))") == {"next": True}, "the runner carries on"


def test_a_sealed_run_imports_the_graders_own_course_utils() -> None:
    # A venv with the course installed from another checkout imports that checkout's course_utils in isolation; the
    # sandbox sees only this one (bound at its path), so the runner puts it first: the two sides share one protocol.
    import course_utils

    seen = printed(
        "import course_utils, json, os, sys, site\n"
        "first = os.environ['COURSE_UTILS_PARENT']\n"
        "print(json.dumps({'path': course_utils.__file__, 'first': first, 'before_site': sys.path.index(first)"
        " < min(sys.path.index(p) for p in site.getsitepackages() if p in sys.path)}))"
    )
    parent = str(Path(course_utils.__file__).resolve().parent.parent)
    assert seen == {"path": course_utils.__file__, "first": parent, "before_site": True}


def test_only_a_missing_bwrap_is_answered_with_install_bubblewrap(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from autograder.grading import pipeline

    for problem, told in (
        (sandbox.BWRAP_MISSING, "install bubblewrap"),
        ("bwrap could not start a sandbox: ModuleNotFoundError: No module named 'course_utils'", "this checkout's course_utils"),
    ):
        monkeypatch.setattr(pipeline, "sandbox_problem", lambda problem=problem: problem)
        with pytest.raises(ValueError) as refused:
            (tmp_path / "class").mkdir(exist_ok=True)
            pipeline.grade(tmp_path / "class", tmp_path / "out", progress=False)
        assert f"cannot seal the grading runs here: {problem}; " in str(refused.value) and told in str(refused.value)
        assert ("install bubblewrap" in str(refused.value)) == (problem == sandbox.BWRAP_MISSING)
