"""Kernel builds are made by the grader: the sealed run records what to compile, the trusted pass checks it and compiles it.

A submission that rebinds the compiler in its own process (``gpu_compiler.compile_request``) changes
nothing, because its process compiles nothing under grading. What it can still send is the build
jobs, so those are checked (``course_utils.build_requests``): a kernel the notebook does not hold, a
definition that would run code, or options no launch makes are refused.
"""

from __future__ import annotations

import linecache
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from course_utils import gpu_compiler, recording  # noqa: E402
from course_utils.build_requests import ForgedBuild, checked_jobs, notebook_functions  # noqa: E402

KERNEL_CELL = """
%matplotlib inline
@triton.jit
def double_kernel(X, OUT, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(OUT + offsets, 2 * tl.load(X + offsets, mask=offsets < n), mask=offsets < n)


def double(x):
    out = torch.empty_like(x)
    launch(double_kernel, (triton.cdiv(x.numel(), 16),), x, out, x.numel(), BLOCK=16)
    return out
"""


def _notebook_namespace() -> dict:
    from course_utils.kernels import launch, tl, triton

    namespace = {"launch": launch, "tl": tl, "triton": triton, "torch": torch}
    code, name = KERNEL_CELL.replace("%matplotlib inline", ""), "<notebook cell double_kernel>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # as IPython keeps a cell's source
    exec(compile(code, name, "exec"), namespace)
    return namespace


def _jobs() -> list[dict]:
    from course_utils.kernels import launcher_jobs

    return launcher_jobs(_notebook_namespace()["double"], torch.zeros(40, dtype=torch.float16))


def test_the_notebooks_own_kernel_passes_and_others_are_refused():
    functions = notebook_functions([KERNEL_CELL, "this cell does not parse ("])
    [job] = checked_jobs(_jobs(), functions)
    assert job["name"] == "double_kernel" and job["signature"]["X"] == "*fp16"
    forged = [dict(job, source=job["source"].replace("2 * tl.load", "tl.load"))]  # a kernel the notebook does not hold
    with pytest.raises(ForgedBuild, match="double_kernel is not a function of the submitted notebook"):
        checked_jobs(forged, functions)


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"source": "import os\nos.system('id')"}, "neither a kernel nor a constant"),
        ({"source": "@triton.jit\ndef k(X, N=__import__('os').system('id')):\n    pass"}, "defaults must be literals"),
        ({"source": "@triton.jit\ndef k(X, N: print('hi')):\n    pass"}, "annotations plain names"),
        ({"source": "B = tl.constexpr(open('/etc/passwd').read())"}, "neither a kernel nor a constant"),
        ({"arch": "sm_100"}, "a GPU the course does not build for"),
        ({"signature": {"X": "*fp16; rm -rf"}}, "argument types"),
        ({"options": {"num_warps": 3, "num_stages": 3, "enable_fp_fusion": True}}, "launch options"),
        ({"attrs": [[[0], [["tt.pointer_range", 32]]]]}, "argument hints"),
    ],
)
def test_a_job_no_launch_makes_is_refused(change, reason):
    [job] = _jobs()
    with pytest.raises(ForgedBuild, match=reason):
        checked_jobs([{**job, **change}], None)


def test_a_submission_that_rebinds_the_compiler_forges_nothing(tmp_path, monkeypatch):
    # In the sealed run the check records the jobs; the compiler, rebound there, is never asked.
    from course_utils.checks import check_builds_for_gpu

    namespace = _notebook_namespace()
    monkeypatch.setattr(gpu_compiler, "compile_request", lambda request: [{"compiled": True}] * 99)  # the student's rebinding
    record = tmp_path / "record"
    try:
        recording.start_recording(str(record), ["double"], namespace)
        recording.begin_cell("test_double")
        assert check_builds_for_gpu(namespace["double"], torch.zeros(40, dtype=torch.float16))
    finally:
        recording._state = recording._State()
    monkeypatch.undo()  # the trusted pass: a process the submission never touched
    events = recording.read_record(record.read_bytes())
    assert [e["op"] for e in events["test_double"]] == ["call:gpu_build_jobs:sm_90"]
    broken = KERNEL_CELL.replace(
        "2 * tl.load(X + offsets, mask=offsets < n)", "2 * tl.load(X + offsets, mask=offsets < n) + undefined_name"
    )
    for cells, verdict in (([KERNEL_CELL], None), ([broken], "not a function of the submitted notebook")):
        with recording.replaying(events, submitted=notebook_functions(cells)):
            recording.begin_cell("test_double")
            if verdict is None:
                assert check_builds_for_gpu(recording.Placeholder("double"), torch.zeros(40, dtype=torch.float16))
            else:
                with pytest.raises(AssertionError, match=verdict):
                    check_builds_for_gpu(recording.Placeholder("double"), torch.zeros(40, dtype=torch.float16))
    gpu_compiler.close()
