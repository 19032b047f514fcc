"""Notebook 07's solution kernels against PyTorch: under Triton's interpreter on a CPU, natively on a GPU.

The interpreter must be switched on before Triton is imported, so this module sets
TRITON_INTERPRET=1 itself when there is no GPU. The GPU tests are skipped without CUDA
(CI never has one); run them on a GPU machine with `pytest tests/test_kernels.py`.
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch
import torch.nn.functional as F
from child_processes import live_children
from kernel_build_record import recorded_builds

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
triton = pytest.importorskip("triton")

from autograder.solutions import load_solution  # noqa: E402
from course_utils.autograd_refs import logsumexp_of_scores, sdpa_gradients  # noqa: E402
from course_utils.checks import random_tensor  # noqa: E402
from course_utils.kernel_trace import TensorReads  # noqa: E402

ON_GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: the native Triton kernel")
needs_interpreter = pytest.mark.skipif(ON_GPU, reason="a kernel trace is taken in Triton's interpreter")


@pytest.fixture(scope="module")
def solution(repo_root):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_SOLUTIONS_DIR", str(repo_root / "solutions"))
        return load_solution("07_fused_attention")


def qkv(B, H, T_q, T_k, d, *, dtype=torch.float32, device="cpu", seed=0):
    return (random_tensor(B, H, T, d, seed=seed + i).to(device, dtype) for i, T in enumerate((T_q, T_k, T_k)))


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
@pytest.mark.parametrize("T_q, T_k, d, causal", [(16, 16, 16, False), (21, 37, 12, False), (37, 21, 16, True), (33, 33, 8, True)])
def test_triton_kernel_in_the_interpreter_matches_sdpa(solution, T_q, T_k, d, causal):
    Q, K, V = qkv(1, 2, T_q, T_k, d)
    O, L = solution.flash_attention_triton(Q, K, V, is_causal=causal)
    torch.testing.assert_close(O, F.scaled_dot_product_attention(Q, K, V, is_causal=causal), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(L, logsumexp_of_scores(Q, K, is_causal=causal).float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_q, block_k", [(1, 1), (5, 7), (64, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_flash_forward_matches_sdpa_and_logsumexp(solution, block_q, block_k, causal):
    Q, K, V = qkv(2, 2, 19, 23, 8, dtype=torch.float64)
    O, L = solution.flash_attention_forward(Q, K, V, is_causal=causal, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(O, F.scaled_dot_product_attention(Q, K, V, is_causal=causal))
    scores = Q @ K.transpose(-2, -1) / 8**0.5
    if causal:
        scores = scores.masked_fill(torch.ones(19, 23, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(L, torch.logsumexp(scores, dim=-1))


@needs_gpu
# float32 tiles go through tl.dot in TF32 by default, hence the looser float32 tolerance.
@pytest.mark.parametrize("dtype, tol", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2), (torch.float32, 1e-2)])
@pytest.mark.parametrize("causal", [False, True])
def test_triton_kernel_natively_on_the_gpu(solution, dtype, tol, causal):
    Q, K, V = qkv(2, 4, 300, 300, 64, dtype=dtype, device="cuda")
    out, L = solution.flash_attention_triton(Q, K, V, is_causal=causal)
    assert out.dtype == dtype and L.dtype == torch.float32
    torch.testing.assert_close(out.float(), F.scaled_dot_product_attention(Q, K, V, is_causal=causal).float(), rtol=tol, atol=tol)
    torch.testing.assert_close(L, logsumexp_of_scores(Q, K, is_causal=causal).float(), rtol=tol, atol=tol)


@needs_gpu
def test_triton_kernel_on_the_gpu_with_ragged_shapes(solution):
    Q, K, V = qkv(1, 3, 77, 129, 48, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(
        solution.flash_attention_triton(Q, K, V)[0].float(), F.scaled_dot_product_attention(Q, K, V).float(), rtol=2e-3, atol=2e-3
    )


@needs_gpu
def test_a_launch_with_cpu_tensors_runs_on_the_gpu_and_writes_them_back():
    # The notebooks' tests pass CPU tensors (the grader's interpreter runs on them); on a GPU, launch()
    # moves whole storages there and back, so strides into a padded buffer and shared memory survive.
    from course_utils.kernels import launch, tl, triton

    @triton.jit
    def double_rows(X, OUT, n, stride_x, stride_out, BLOCK: tl.constexpr):
        row, cols = tl.program_id(0), tl.arange(0, BLOCK)
        x = tl.load(X + row * stride_x + cols, mask=cols < n)
        tl.store(OUT + row * stride_out + cols, 2 * x, mask=cols < n)

    buffer = torch.full((8, 16), float("nan"))
    x = buffer[:5, :12]  # a view with the buffer's strides; NaN outside it
    x.copy_(random_tensor(5, 12))
    values = x.clone()
    out = torch.empty(5, 12)
    launch(double_rows, (5,), x, out, 12, x.stride(0), out.stride(0), BLOCK=16)
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, 2 * values)
    launch(double_rows, (5,), x, x, 12, x.stride(0), x.stride(0), BLOCK=16)  # in place: one storage, moved once
    torch.testing.assert_close(x, 2 * values)
    assert buffer[5:].isnan().all() and buffer[:, 12:].isnan().all(), "memory outside the view was written"


# --- checked for real GPUs on a CPU: ahead-of-time compiles (course_utils.kernels) ---------------------


def solution_launches(solution):
    """Each solution launcher with GPU-sized float16 inputs, as (name, launcher, args, kwargs)."""
    half = lambda *shape: torch.randn(*shape, generator=torch.Generator().manual_seed(0)).half()  # noqa: E731
    Q = half(2, 4, 256, 64)
    return [
        ("vector_add", solution.vector_add, (half(4096), half(4096)), {}),
        ("row_sums", solution.row_sums, (half(64, 1000),), {}),
        ("softmax_rows", solution.softmax_rows, (half(64, 1000),), {}),
        ("matmul", solution.matmul, (half(256, 256), half(256, 256)), {"block": 64}),
        ("online_softmax_rows", solution.online_softmax_rows, (half(64, 4000),), {"block": 256}),
        ("flash_attention_triton", solution.flash_attention_triton, (Q, Q, Q), {"is_causal": True}),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_solution_kernels_compile_for_gpus_without_spills(solution, arch):
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

    with capturing_launches() as launches:
        for _, launcher, args, kwargs in solution_launches(solution):
            launcher(*args, **kwargs)
    builds = run_builds([job for one in launches for job in build_jobs(one.kernel, one.args, one.kwargs, arch)])
    assert len(builds) == 6
    for build in builds:
        assert build.compiled, build.summary
        assert build.spilled_bytes == 0, build.summary
        assert build.registers is not None and 0 < build.registers <= 255, build.summary
    matmul = next(b for b in builds if b.kernel == "matmul_kernel")
    assert matmul.mma == ("wgmma" if arch == "sm_90" else "mma"), matmul.summary  # tensor cores, not FMA loops


def test_one_compile_child_serves_every_check_and_one_that_dies_fails_only_its_own(solution, monkeypatch):
    """The compile child is kept between checks; one that dies fails the builds it was given,
    with why, and the next check that needs a compile starts a new one, as does a change of environment."""
    from course_utils import gpu_compiler
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

    with capturing_launches() as launches:
        solution.vector_add(torch.ones(100), torch.ones(100))
    [job] = [job for one in launches for job in build_jobs(one.kernel, one.args, one.kwargs, "sm_90")]
    gpu_compiler.close()
    gpu_compiler.forget()  # builds this process compiled before would need no child
    try:
        first = run_builds([job])
        [pid] = compile_children()
        assert run_builds([job]) == first and first[0].compiled, first[0].summary
        assert compile_children() == [pid], "a second check started a second child"

        dying = {**job, "source": "import os, sys\nprint('compiler gone', file=sys.stderr)\nos._exit(3)"}
        [failed] = run_builds([dying])
        assert not failed.compiled and failed.error == "the compiler process failed: compiler gone", failed.error
        assert not gpu_compiler.running() and compile_children() == []
        assert run_builds([job]) == first and compile_children() == [], "a build compiled before is remembered: no child"
        other = {**job, "arch": "sm_80"}
        [again] = run_builds([other])
        assert again.compiled and again.arch == "sm_80" and len(compile_children()) == 1 and compile_children() != [pid]
        [pid] = compile_children()
        monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")  # what the child must see, as a fresh process would
        assert run_builds([job]) == first and len(compile_children()) == 1 and compile_children() != [pid]
    finally:
        gpu_compiler.close()
    assert not gpu_compiler.running() and compile_children() == []


def test_a_build_is_remembered_only_while_what_decides_it_is_the_same(solution, monkeypatch):
    """A build that compiled is answered again without the child; another source, target or Triton setting
    compiles afresh, and a build that failed is never remembered."""
    from course_utils import gpu_compiler
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

    with capturing_launches() as launches:
        solution.vector_add(torch.ones(100), torch.ones(100))
    [job] = [job for one in launches for job in build_jobs(one.kernel, one.args, one.kwargs, "sm_90")]

    def asked() -> int:
        return gpu_compiler.jobs_compiled - before

    gpu_compiler.forget()
    before = gpu_compiler.jobs_compiled
    broken = {**job, "source": job["source"].replace("tl.load(", "tl.lode(", 1)}
    try:
        [built] = run_builds([job])
        assert built.compiled and asked() == 1, built.summary
        assert run_builds([job, broken])[0] == built and asked() == 2, "only the new job goes to the child"
        assert not run_builds([broken])[0].compiled and asked() == 3, "a failed build is compiled again"
        assert run_builds([{**job, "arch": "sm_89"}])[0].compiled and asked() == 4, "another target is another build"
        monkeypatch.setenv("TRITON_DEFAULT_NUM_WARPS", "8")
        assert run_builds([job])[0].compiled and asked() == 5, "a Triton setting is part of what decides a build"
        assert gpu_compiler.remembered() == 3
        monkeypatch.setattr(gpu_compiler, "REMEMBERED_BUILDS", 1)
        run_builds([{**job, "arch": "sm_80"}])
        assert gpu_compiler.remembered() == 1, "the oldest builds are dropped past the bound"
    finally:
        gpu_compiler.close()
        gpu_compiler.forget()


def test_each_kernel_source_is_compiled_by_a_child_no_other_source_has_touched(solution):
    """A source that changes its compile child (here: breaks triton.compile as it loads) changes only its own
    builds: the next source in the same request gets a child of its own, so its build, which is then
    remembered for everyone with that source, is the compiler's."""
    from course_utils import gpu_compiler
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

    with capturing_launches() as launches:
        solution.vector_add(torch.ones(100), torch.ones(100))
    [job] = [job for one in launches for job in build_jobs(one.kernel, one.args, one.kwargs, "sm_90")]
    tamperer = {**job, "source": "triton.compile = lambda *args, **kwargs: 1 / 0\n\n" + job["source"]}
    gpu_compiler.forget()
    try:
        tampered, built = run_builds([tamperer, job])
        assert not tampered.compiled and "ZeroDivisionError" in tampered.error, tampered.summary
        assert built.compiled, f"compiled in the child the other source had changed: {built.summary}"
        assert gpu_compiler.remembered() == 1
    finally:
        gpu_compiler.close()
        gpu_compiler.forget()


def test_an_answer_longer_than_the_bound_is_refused_unread(solution):
    """A compile child that writes an endless answer line costs the grader at most MAX_ANSWER_BYTES of memory."""
    from course_utils import gpu_compiler
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

    with capturing_launches() as launches:
        solution.vector_add(torch.ones(100), torch.ones(100))
    [job] = [job for one in launches for job in build_jobs(one.kernel, one.args, one.kwargs, "sm_90")]
    flood = "import os\nfor fd in range(3, 32):\n    try:\n        os.write(fd, b'[' * (3 << 20))\n    except OSError:\n        pass\nos._exit(0)\n"
    gpu_compiler.forget()
    try:
        [refused] = run_builds([{**job, "source": flood + job["source"]}])
        assert not refused.compiled and "longer than" in refused.error, refused.error
    finally:
        gpu_compiler.close()


def test_a_compile_leaves_no_folder_behind(solution, monkeypatch, tmp_path):
    """Each build writes its kernel's source to a file for Triton; the file's folder goes when the build ends."""
    from course_utils import gpu_compiler
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

    with capturing_launches() as launches:
        solution.vector_add(torch.ones(100), torch.ones(100))
    [job] = [job for one in launches for job in build_jobs(one.kernel, one.args, one.kwargs, "sm_90")]
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the child's temporary folders, apart from everyone else's
    gpu_compiler.forget()
    try:
        broken = {**job, "source": job["source"].replace("tl.load(", "tl.lode(", 1)}
        built, failed = run_builds([job, broken])
        assert built.compiled and not failed.compiled, built.summary
    finally:
        gpu_compiler.close()
    assert not list(tmp_path.glob("gpu_build_*")), "a build left its source folder behind"


def compile_children() -> list[int]:
    """This process's live compile children (they run ``course_utils/gpu_build.py``), as the system lists them."""
    return live_children(lambda command: any(part.endswith(b"gpu_build.py") for part in command))


def test_the_compile_child_gets_the_key_it_would_work_out_itself():
    """Each compile child takes its parent's key for the Triton installation instead of hashing it
    again. That is sound only if the parent, with the interpreter on, works out the same key as a
    compiling process does; and the child must really use the key it is given."""
    import subprocess
    import sys

    from course_utils import gpu_build
    from course_utils.kernels import triton_installation_key

    key = triton_installation_key()
    assert key.startswith(triton.__version__), key[:80]
    own = "import triton.runtime.cache as c; print(c.triton_key())"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    worked_out = subprocess.run([sys.executable, "-P", "-c", own], capture_output=True, text=True, env=env, check=True)
    assert worked_out.stdout.strip() == key
    given = (
        "import runpy, sys, triton.runtime.cache as c; runpy.run_path(sys.argv[1])['reuse_installation_key']('k1'); print(c.triton_key())"
    )
    taken = subprocess.run([sys.executable, "-P", "-c", given, gpu_build.__file__], capture_output=True, text=True, env=env)
    assert taken.stdout.strip() == "k1", taken.stderr[-2000:]


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path: a GPU launch compiles first")
def test_a_kernel_the_interpreter_runs_but_no_gpu_compiles_is_caught():
    from course_utils.checks import check_builds_for_gpu
    from course_utils.kernels import launch, tl, triton

    @triton.jit
    def first_blocks(X, n, BLOCK: tl.constexpr):
        for start in range(0, 1 << 20, BLOCK):
            if start >= n:
                break  # the interpreter accepts this; Triton's GPU compiler does not
            tl.store(X + start + tl.arange(0, BLOCK), 1.0)

    def fill(x):
        launch(first_blocks, (1,), x, x.numel(), BLOCK=16)
        return x

    assert fill(torch.zeros(64)).sum().item() == 64  # correct in the interpreter
    with pytest.raises(AssertionError, match="does not compile for sm_90"):
        check_builds_for_gpu(fill, torch.zeros(64))


def test_an_unwritten_kernel_is_not_written_yet_on_both_paths():
    from course_utils.checks import call, check_builds_for_gpu
    from course_utils.kernels import KernelNotWritten, launch, tl, triton
    from course_utils.recording import NotWritten

    @triton.jit
    def stub_kernel(X, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)  # noqa: F841 - the given first line, then nbgrader's stub
        raise NotImplementedError()

    def stub(x):
        launch(stub_kernel, (1,), x, x.numel(), BLOCK=16)
        return x

    with pytest.raises(KernelNotWritten, match="stub_kernel is not written yet"):
        stub(torch.zeros(16))  # the interpreter's path
    with pytest.raises(NotWritten, match="not written yet"):
        call(stub, torch.zeros(16))
    with pytest.raises(NotWritten, match="not written yet"):
        check_builds_for_gpu(stub, torch.zeros(16))  # the GPU compiler's path


def test_without_triton_kernels_are_defined_and_launching_says_what_to_install():
    from course_utils.kernels import MissingKernel, MissingTriton, launch

    triton_, tl_ = MissingTriton("triton"), MissingTriton("triton.language")

    @triton_.autotune(configs=[triton_.Config({"BLOCK": 16})], key=["n"])
    @triton_.jit
    def kernel(X, n, BLOCK: tl_.constexpr):
        pass

    assert isinstance(kernel, MissingKernel)
    with pytest.raises(ImportError, match="pip install triton"):
        launch(kernel, (1,), torch.zeros(4), 4, BLOCK=16)
    with pytest.raises(ImportError, match="pip install triton"):
        triton_.cdiv(10, 4)


# --- the solution's showcase: the autotuned kernel of section 6 (ungraded) -----------------------------


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
@pytest.mark.parametrize(
    "T_q, T_k, d, causal", [(16, 16, 16, False), (37, 21, 16, True), (21, 37, 32, True), (33, 70, 16, False), (1, 1, 16, True)]
)
def test_fast_kernel_in_the_interpreter_matches_sdpa(solution, T_q, T_k, d, causal):
    Q, K, V = qkv(2, 2, T_q, T_k, d)
    O, L = solution.flash_attention_fast(Q, K, V, is_causal=causal)
    torch.testing.assert_close(O, F.scaled_dot_product_attention(Q, K, V, is_causal=causal), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(L, logsumexp_of_scores(Q, K, is_causal=causal).float(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
def test_fast_kernel_takes_strided_inputs_and_a_negative_scale(solution):
    Q, K, V = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in qkv(1, 3, 24, 24, 16))  # head-major strides
    Q_odd = torch.randn(1, 3, 24, 32)[..., ::2]  # stride 2 along d: the launcher makes it contiguous
    for q, scale in ((Q, -0.3), (Q_odd, 0.5)):
        O, _ = solution.flash_attention_fast(q, K, V, is_causal=True, scale=scale)
        # Not SDPA here: PyTorch 2.13's CPU flash backend returns NaN for a negative scale with is_causal
        # (its math backend does not). The plain formula in float64 instead.
        scores = (q.double() @ K.double().transpose(-2, -1) * scale).masked_fill(
            torch.ones(24, 24, dtype=torch.bool).triu(1), float("-inf")
        )
        torch.testing.assert_close(O, (scores.softmax(-1) @ V.double()).float(), rtol=1e-5, atol=1e-5)


@needs_gpu
@pytest.mark.parametrize("dtype, tol", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("causal", [False, True])
def test_fast_kernel_natively_on_the_gpu(solution, dtype, tol, causal):
    Q, K, V = qkv(2, 4, 1000, 1000, 64, dtype=dtype, device="cuda")
    out, L = solution.flash_attention_fast(Q, K, V, is_causal=causal)
    torch.testing.assert_close(out.float(), F.scaled_dot_product_attention(Q, K, V, is_causal=causal).float(), rtol=tol, atol=tol)
    torch.testing.assert_close(L, logsumexp_of_scores(Q, K, is_causal=causal).float(), rtol=tol, atol=tol)


# The GPU family each compile target belongs to, and the shared memory one program may use there: A100 (sm_80),
# L4 (sm_89), H100 (sm_90), from CUDA's table of compute capabilities (the opt-in maximum per block).
FAMILY = {"sm_80": "sm_8x", "sm_89": "sm_8x", "sm_90": "sm_90"}
SHARED_BYTES_PER_PROGRAM = {"sm_80": 166912, "sm_89": 101376, "sm_90": 232448}


def test_the_fast_kernels_pruner_keeps_tiles_for_every_gpu_path_and_head_dim(solution):
    s = solution
    assert set(s.FAST_TILES_THAT_DO_NOT_FIT) == {
        (f, d, even) for f in ("sm_8x", "sm_90") for d in s.FAST_HEAD_DIMS for even in (True, False)
    }
    for family in ("sm_8x", "sm_90", "other"):
        for d in s.FAST_HEAD_DIMS:
            for T, even in ((4096, True), (4000, False)):  # 4000 is no multiple of 64: every tile takes the ragged path
                kept = {s.tile_of(c) for c in s.fast_configs_that_fit(s.FAST_GPU_CONFIGS, family, d, T, T)}
                assert kept and kept == set(s.FAST_TILES) - s.fast_tiles_that_do_not_fit(family, d, even), (family, d, even)
            assert all(c.kwargs["BLOCK_M"] <= 64 for c in s.fast_configs_that_fit(s.FAST_GPU_CONFIGS, family, d, 20, 20))
    # Hopper keeps 128 x 128 at d = 128 on the even path only; Ampere and Ada never.
    big = (128, 128, 8, 2)
    assert big not in s.fast_tiles_that_do_not_fit("sm_90", 128, True) and big in s.fast_tiles_that_do_not_fit("sm_90", 128, False)
    assert big in s.fast_tiles_that_do_not_fit("sm_8x", 128, True) and big in s.fast_tiles_that_do_not_fit("other", 128, True)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_every_tile_the_fast_kernel_may_pick_compiles_without_spills(solution, arch, monkeypatch):
    # The autotuner picks among the tiles the pruner keeps for a GPU family, head dim and path; each must build
    # for that family's GPUs, spill nothing and fit in shared memory. T = 1024 takes the even path of every tile,
    # T = 1000 the ragged one; causal builds both stages of the loop, masked and unmasked. Built once per kernel
    # edit or Triton release: the record holds the rest (kernel_build_record.py).
    from course_utils.kernels import build_jobs, capturing_launches

    s = solution
    jobs, made_for = [], []  # a build job, and what it was made for
    for d in s.FAST_HEAD_DIMS:
        for T in (1024, 1000):
            kept = s.fast_configs_that_fit(s.FAST_GPU_CONFIGS, FAMILY[arch], d, T, T)
            monkeypatch.setattr(s.fast_attention_kernel, "configs", kept)
            for causal in (False, True):
                Q, K, V = qkv(2, 4, T, T, d, dtype=torch.float16)
                with capturing_launches() as launches:
                    s.flash_attention_fast(Q, K, V, is_causal=causal)
                [one] = launches
                new = build_jobs(one.kernel, one.args, one.kwargs, arch)
                jobs += new
                made_for += [f"d={d}, T={T}, causal={causal}"] * len(new)
    builds = recorded_builds(jobs)
    assert len(builds) == len(jobs) >= 100
    for build, where in zip(builds, made_for):
        assert build.compiled, f"{build.summary} at {where}"
        assert build.spilled_bytes == 0, f"{build.summary} with {build.config} at {where}"
        assert build.shared_bytes <= SHARED_BYTES_PER_PROGRAM[arch], f"{build.summary} with {build.config} at {where}"
    assert {build.mma for build in builds} == {"wgmma" if arch == "sm_90" else "mma"}


def test_a_build_record_is_used_only_while_it_tells_the_truth(solution, tmp_path, monkeypatch):
    # Two jobs recorded: only the one nearest a register limit is built again, and a record that differs from
    # that build fails; a job the record lacks is built.
    import kernel_build_record

    from course_utils.kernels import build_jobs, capturing_launches

    with capturing_launches() as launches:
        for name, launcher, args, kwargs in solution_launches(solution):
            if name in ("vector_add", "row_sums"):
                launcher(*args, **kwargs)
    jobs = [job for one in launches for job in build_jobs(one.kernel, one.args, one.kwargs, "sm_80")]
    monkeypatch.setattr(kernel_build_record, "RECORD", tmp_path / "builds.json")
    built: list[str] = []
    real = kernel_build_record.run_builds
    monkeypatch.setattr(kernel_build_record, "run_builds", lambda some: built.extend(j["name"] for j in some) or real(some))
    monkeypatch.setenv("COURSE_RECORD_BUILDS", "1")
    truth = kernel_build_record.recorded_builds(jobs)
    assert built == [job["name"] for job in jobs] and all(b.compiled for b in truth)
    monkeypatch.delenv("COURSE_RECORD_BUILDS")
    built.clear()
    assert kernel_build_record.recorded_builds(jobs) == truth and len(built) == 1
    record = json.loads(kernel_build_record.RECORD.read_text())
    nearest = max(record.values(), key=lambda build: build["registers"])
    nearest["registers"] -= 1  # as if the kernel or the compiler had changed since it was written
    kernel_build_record.RECORD.write_text(json.dumps(record))
    with pytest.raises(AssertionError, match="stale"):
        kernel_build_record.recorded_builds(jobs)
    kernel_build_record.RECORD.write_text("{}")
    built.clear()
    assert kernel_build_record.recorded_builds(jobs) == truth and len(built) == 2


def _row_softmax_launcher(kernel):
    from course_utils.kernels import launch

    def softmax(x):
        out = torch.empty_like(x)
        launch(kernel, (x.shape[0],), x, out, x.shape[1], x.stride(0), BLOCK=16)
        return out

    return softmax


@needs_interpreter
def test_skipping_the_dropped_overflow_checks_changes_no_result(monkeypatch):
    # Grading turns off the interpreter's int32 overflow checks, which its device_assert drops with debug off:
    # an int32 product that wraps, and one that does not, come out the same either way.
    from triton.runtime import interpreter

    from course_utils.kernels import launch, skip_unasserted_overflow_checks, tl, triton

    @triton.jit
    def wrap(X, OUT, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(X + offs)
        tl.store(OUT + offs, x * 65537 + offs - 3)

    x = torch.tensor([1, -7, 40000, 2**30, -(2**31), 123456, 0, 5], dtype=torch.int32)
    checked = dataclasses.replace(interpreter.interpreter_builder.options, sanitize_overflow=True, debug=False)
    runs = []
    for skip in (False, True):
        monkeypatch.setattr(interpreter.interpreter_builder, "options", checked)  # restored after the test
        if skip:
            skip_unasserted_overflow_checks()
            assert not interpreter.interpreter_builder.options.sanitize_overflow
        out = torch.empty_like(x)
        launch(wrap, (1,), x, out, BLOCK=8)
        runs.append(out)
    expected = (x.long() * 65537 + torch.arange(8) - 3).to(torch.int32)  # two's-complement wrap, as a GPU does
    assert torch.equal(runs[0], expected) and torch.equal(runs[1], expected)


@needs_interpreter
def test_a_trace_counts_what_each_program_reads_as_it_runs():
    from course_utils.execution_checks import check_kernel_outputs, check_reads_at_most, check_rows_read
    from course_utils.kernel_trace import returned_by_kernels, trace_kernels
    from course_utils.kernels import tl, triton

    @triton.jit
    def online_rows(X, OUT, n, stride, BLOCK: tl.constexpr):
        row, cols = tl.program_id(0), tl.arange(0, BLOCK)
        m = tl.full([1], float("-inf"), dtype=tl.float32)
        l = tl.zeros([1], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            x = tl.load(X + row * stride + start + cols, mask=start + cols < n, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(x, axis=0))
            l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
        for start in range(0, n, BLOCK):
            x = tl.load(X + row * stride + start + cols, mask=start + cols < n, other=float("-inf"))
            tl.store(OUT + row * stride + start + cols, tl.exp(x - m) / l, mask=start + cols < n)

    @triton.jit
    def two_passes_in_one_loop(X, OUT, n, stride, BLOCK: tl.constexpr):
        # One load and one store in the code, as in a one-pass kernel; the loop walks the row twice.
        row, cols = tl.program_id(0), tl.arange(0, BLOCK)
        m = tl.full([1], float("-inf"), dtype=tl.float32)
        l = tl.zeros([1], dtype=tl.float32)
        steps = tl.cdiv(n, BLOCK)
        for step in range(0, 3 * steps):
            start = (step % steps) * BLOCK
            x = tl.load(X + row * stride + start + cols, mask=start + cols < n, other=float("-inf"))
            if step < steps:
                m = tl.maximum(m, tl.max(x, axis=0))
            elif step < 2 * steps:
                l += tl.sum(tl.exp(x - m), axis=0)
            else:
                tl.store(OUT + row * stride + start + cols, tl.exp(x - m) / l, mask=start + cols < n)

    x = torch.randn(3, 40)
    for kernel in (online_rows, two_passes_in_one_loop):  # both right: only what ran tells them apart
        torch.testing.assert_close(_row_softmax_launcher(kernel)(x), torch.softmax(x, dim=-1))
    trace = trace_kernels(_row_softmax_launcher(online_rows), x, watch={"X": x}, outputs=("OUT",))
    [launch] = trace.of("online_rows")
    assert launch.grid == (3, 1, 1) and launch.constexprs == {"BLOCK": 16}
    assert [p.read("X") for p in launch.programs] == [TensorReads(80, 40, 0, (row, row), 2) for row in range(3)]
    assert all(p.loads == 6 and p.dots == 0 for p in launch.programs)  # three blocks, two passes: six loads ran
    assert check_reads_at_most(trace, "online_rows", {"X": 2}, label="online")
    assert check_rows_read(trace, "online_rows", "X", allowed=lambda p: (0, 2), needed=lambda p: 40, label="online")
    assert check_kernel_outputs(returned_by_kernels(_row_softmax_launcher(online_rows), x), "online_rows", label="online")

    three = trace_kernels(_row_softmax_launcher(two_passes_in_one_loop), x, watch={"X": x})
    assert [p.read("X").elements for p in three.of("two_passes_in_one_loop")[0].programs] == [120] * 3
    with pytest.raises(AssertionError, match=r"made 120 element reads of X for 40 distinct elements: 3.00 reads each"):
        check_reads_at_most(three, "two_passes_in_one_loop", {"X": 2}, label="three")
    with pytest.raises(AssertionError, match="did not launch the notebook's online_rows"):
        check_reads_at_most(three, "online_rows", {"X": 2}, label="three")


@needs_interpreter
def test_a_trace_sees_kernel_grid_launches_and_what_the_launcher_returns():
    from course_utils.execution_checks import check_kernel_outputs, check_rows_read
    from course_utils.kernel_trace import returned_by_kernels, trace_kernels
    from course_utils.kernels import capturing_launches, tl, triton

    @triton.jit
    def copy_rows(X, OUT, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        tl.store(OUT + tl.program_id(0) * n + cols, tl.load(X + tl.program_id(0) * n + cols), mask=cols < n)

    def direct(x):  # kernel[grid](...) and a grid function: no launch() at all
        out = torch.empty_like(x)
        copy_rows[lambda meta: (x.shape[0],)](x, out, x.shape[1], BLOCK=16)
        return out

    def for_show(x):  # the kernel runs, but the launcher returns its own result
        direct(x)
        return x.clone()

    x = torch.randn(4, 10)
    trace = trace_kernels(direct, x, watch={"X": x})
    assert [launch.grid for launch in trace.of("copy_rows")] == [(4, 1, 1)]
    assert returned_by_kernels(direct, x) == ({"": 40, "copy_rows": 40},)
    assert check_kernel_outputs(returned_by_kernels(direct, x), "copy_rows", label="direct")
    # The unmasked load reads 16 elements a row: the last rows run past x into memory that is not x's.
    with pytest.raises(AssertionError, match="program"):
        check_rows_read(trace, "copy_rows", "X", allowed=lambda p: (p.pid[0], p.pid[0]), needed=lambda p: 16, label="direct")
    shown = returned_by_kernels(for_show, x)
    assert shown == ({"": 40},)
    with pytest.raises(AssertionError, match="returned tensor 0 has 40 elements, of which 0 hold what copy_rows stored there"):
        check_kernel_outputs(shown, "copy_rows", label="for show")

    @triton.jit
    def copy_in(X, OUT, n, BLOCK: tl.constexpr):  # any other kernel, storing what the launcher computed
        cols = tl.arange(0, BLOCK)
        tl.store(OUT + tl.program_id(0) * n + cols, tl.load(X + tl.program_id(0) * n + cols, mask=cols < n), mask=cols < n)

    def copied_in_by_another_kernel(x):
        direct(x)  # the kernel under test runs, for show
        out = torch.empty_like(x)
        copy_in[(x.shape[0],)](x.clone(), out, x.shape[1], BLOCK=16)
        return out

    with pytest.raises(AssertionError, match=r"0 hold what copy_rows stored there \(40 from copy_in\)"):
        check_kernel_outputs(returned_by_kernels(copied_in_by_another_kernel, x), "copy_rows", label="copied in")
    with capturing_launches() as launches:  # the compile checks capture the same launch, without running it
        direct(x)
    assert [launch.kernel.fn.__name__ for launch in launches] == ["copy_rows"]


def test_a_malformed_trace_is_refused():
    from course_utils.kernel_trace import KernelTrace

    for data in ({}, {"launches": [{"kernel": "k"}]}, {"launches": [{"kernel": "k", "grid": ["x"], "constexprs": {}, "programs": []}]}):
        with pytest.raises(ValueError, match="malformed kernel trace"):
            KernelTrace.from_data(data)


@pytest.fixture(scope="module")
def backward_solution(repo_root):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_SOLUTIONS_DIR", str(repo_root / "solutions"))
        return load_solution("08_flash_backward")


@pytest.mark.parametrize("function", ["FlashAttention", "FlashAttentionTriton"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_a_projects_own_flash_attention_test_passes_with_either_function(backward_solution, function, is_causal):
    """Written as a course or project tests its FlashAttention: [batch, seq, d], apply(Q, K, V, is_causal), backward.

    The reference is attention written out by hand, not SDPA, so the two Functions are checked against
    the definition. Both must be drop-ins for the same interface (08's FlashAttentionTriton once raised here).
    """
    apply = getattr(backward_solution, function).apply
    generator = torch.Generator().manual_seed(0)
    B, T, d = 2, 24, 16
    device = "cuda" if ON_GPU else "cpu"
    q, k, v = (torch.randn(B, T, d, generator=generator).to(device).requires_grad_() for _ in range(3))
    dO = torch.randn(B, T, d, generator=generator).to(device)

    def by_hand(q, k, v):
        scores = q @ k.transpose(-2, -1) / d**0.5
        if is_causal:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=device).triu(1), float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    out = apply(q, k, v, is_causal)
    assert out.shape == (B, T, d)
    grads = torch.autograd.grad(out, (q, k, v), dO)
    expected = by_hand(q, k, v)
    tol = dict(rtol=2e-2, atol=2e-2) if ON_GPU else dict(rtol=1e-4, atol=1e-4)  # TF32 products on a GPU
    torch.testing.assert_close(out, expected, **tol)
    for got, want in zip(grads, torch.autograd.grad(expected, (q, k, v), dO)):
        torch.testing.assert_close(got, want, **tol)


@needs_gpu
@pytest.mark.parametrize("dtype, tol", [(torch.float16, 1e-2), (torch.bfloat16, 5e-2), (torch.float32, 2e-2)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 1000, 1000, 64), (1, 3, 77, 129, 80)], ids=["square", "ragged"])
def test_triton_backward_natively_on_the_gpu(backward_solution, shape, dtype, tol, causal):
    # Notebook 08's two kernels compiled for this GPU, against SDPA's autograd in float32. Gradients sum over
    # T terms in low precision, so their tolerances are wider than the forward's; float32 tiles go through TF32.
    assert_native_gradients_close(backward_solution, backward_solution.flash_attention_backward_triton, shape, dtype, tol, causal)


def assert_native_gradients_close(solution, backward, shape, dtype, tol, causal, before=None):
    """``backward`` on the GPU after 08's forward kernel, against SDPA's autograd in float32; ``before(Q)`` runs first."""
    B, H, T_q, T_k, d = shape
    Q, K, V = qkv(B, H, T_q, T_k, d, dtype=dtype, device="cuda")
    dO = random_tensor(B, H, T_q, d, seed=9).to("cuda", dtype)
    if before is not None:
        before(Q)
    O, L = solution.flash_attention_triton(Q, K, V, is_causal=causal)
    grads = backward(Q, K, V, O, dO, L, is_causal=causal)
    expected = sdpa_gradients(Q.float(), K.float(), V.float(), dO.float(), is_causal=causal)
    for name, got, want in zip(("dQ", "dK", "dV"), grads, expected):
        assert got.dtype == dtype, name
        torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")


def test_a_gpu_older_than_triton_supports_falls_back_to_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Colab's free T4 (sm_75): kernels run in the interpreter with a one-line reason, never a compiler error."""
    from course_utils import kernels

    t4 = kernels.choose_backend(True, (7, 5), "Tesla T4")
    assert not t4.native and "Tesla T4 (sm_75)" in t4.reason and "interpreter" in t4.label
    assert kernels.choose_backend(True, (8, 0), "NVIDIA A100").native  # A100, L4 (8.9), H100 (9.0): native
    assert kernels.choose_backend(True, (8, 9), "NVIDIA L4").native and kernels.choose_backend(True, (9, 0)).native
    assert not kernels.choose_backend(False).native
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kernels.import_triton(t4)  # what the notebooks' import does on a T4: the interpreter, chosen before Triton loads
    assert os.environ["TRITON_INTERPRET"] == "1"
    monkeypatch.setattr(kernels.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(kernels.torch.cuda, "get_device_capability", lambda: (7, 5))
    monkeypatch.setattr(kernels.torch.cuda, "get_device_name", lambda: "Tesla T4")
    assert kernels.this_machine() == t4


# --- 08's fast backward: the solution's showcase after section 7 (ungraded) -----------------------------


def plain_attention_in_float64(Q, K, V, dO, is_causal, scale=None):
    """softmax(Q K^T * scale) V written out in float64 (top-left causal), and autograd's gradients of it.

    Returns:
        (O, L, (dQ, dK, dV)), all float64: L the natural-log logsumexp of each row of scaled scores.
    """
    leaves = [t.detach().double().requires_grad_() for t in (Q, K, V)]
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    scores = leaves[0] @ leaves[1].transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    O = torch.softmax(scores, dim=-1) @ leaves[2]
    grads = torch.autograd.grad(O, leaves, dO.double())
    return O.detach(), torch.logsumexp(scores, dim=-1).detach(), grads


def backward_problem(B, H, T_q, T_k, d, is_causal, scale=None, seed=0):
    """Float32 (Q, K, V, O, dO, L) with O and L from the float64 formula, and the float64 (dQ, dK, dV)."""
    Q, K, V = qkv(B, H, T_q, T_k, d, seed=seed)
    dO = random_tensor(B, H, T_q, d, seed=seed + 3)
    O, L, grads = plain_attention_in_float64(Q, K, V, dO, is_causal, scale)
    return (Q, K, V, O.float(), dO, L.float()), grads


def assert_gradients_close(got, expected, tol=2e-5):
    # float32 kernels in the interpreter against float64 autograd: sums of at most 70 terms of O(1) values.
    for name, g, want in zip(("dQ", "dK", "dV"), got, expected):
        assert g.dtype == torch.float32 and g.shape == want.shape, name
        torch.testing.assert_close(g.double(), want, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
@pytest.mark.parametrize(
    "T_q, T_k, d, causal, scale",
    [
        (16, 16, 16, False, None),
        (32, 32, 64, True, None),  # multiples of the interpreter's 16-row blocks: no bounds masks
        (37, 21, 16, True, None),  # T_q > T_k, both ragged
        (21, 37, 32, True, None),  # T_q < T_k: keys 21..36 are seen by no query, their dK and dV are 0
        (33, 70, 64, False, None),
        (70, 33, 32, False, 0.5),
        (48, 48, 16, True, -0.3),  # a negative scale: nothing in the backward takes a max
        (1, 1, 16, True, None),
    ],
)
def test_fast_backward_in_the_interpreter_matches_float64_autograd(backward_solution, T_q, T_k, d, causal, scale):
    inputs, expected = backward_problem(2, 2, T_q, T_k, d, causal, scale)
    got = backward_solution.flash_attention_backward_fast(*inputs, is_causal=causal, scale=scale)
    assert_gradients_close(got, expected)
    assert all(g.is_contiguous() for g in got)


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
@pytest.mark.parametrize("dkdv_tile, dq_tile", [((16, 32), (32, 16)), ((16, 64), (64, 16))])
@pytest.mark.parametrize("T_q, T_k, causal", [(70, 45, True), (45, 70, True), (64, 64, True), (50, 64, False)])
def test_fast_backward_tiles_that_own_several_steps(backward_solution, monkeypatch, dkdv_tile, dq_tile, T_q, T_k, causal):
    # The GPU's tiles own several steps: the causal diagonal then spans several masked steps, and the stages
    # (diagonal, unmasked, ragged tail) meet inside one owned block. One config each: the autotuner times nothing.
    config = lambda m, n: triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=1, num_stages=1)  # noqa: E731
    monkeypatch.setattr(backward_solution.fast_dkdv_kernel, "configs", [config(*dkdv_tile)])
    monkeypatch.setattr(backward_solution.fast_dq_kernel, "configs", [config(*dq_tile)])
    inputs, expected = backward_problem(1, 2, T_q, T_k, 16, causal, seed=1)
    assert_gradients_close(backward_solution.flash_attention_backward_fast(*inputs, is_causal=causal), expected)


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
def test_fast_backward_walks_heads_in_groups_whose_last_group_is_smaller(backward_solution, monkeypatch):
    # Causal, programs walk groups of heads sized to L2; a budget of two heads' rows leaves 3 heads as 2 + 1.
    T, d = 40, 16
    monkeypatch.setattr(backward_solution, "BACKWARD_L2_BUDGET_BYTES", 2 * T * (2 * d * 4 + 8))
    group = backward_solution.backward_heads_per_group
    assert group(3, T * (2 * d * 4 + 8), True) == 2 and group(3, T * 2 * d * 4, True) == 2 and group(3, T * 2 * d * 4, False) == 1
    inputs, expected = backward_problem(1, 3, T, T, d, True, seed=2)
    assert_gradients_close(backward_solution.flash_attention_backward_fast(*inputs, is_causal=True), expected)


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
def test_fast_backward_takes_strided_inputs(backward_solution):
    (Q, K, V, O, dO, L), expected = backward_problem(2, 3, 24, 40, 32, True, seed=3)
    head_major = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)  # noqa: E731 - [B, T, H, d] in memory
    spread = lambda t: torch.stack([t, torch.full_like(t, float("nan"))], -1).flatten(-2)[..., ::2]  # noqa: E731 - stride 2 along d
    L_strided = torch.stack([L, torch.full_like(L, float("nan"))], -1)[..., 0]
    got = backward_solution.flash_attention_backward_fast(
        head_major(Q), head_major(K), spread(V), head_major(O), spread(dO), L_strided, True
    )
    assert_gradients_close(got, expected)


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
def test_fast_backward_never_reads_keys_that_no_query_sees(backward_solution):
    # Causal, 20 queries and 48 keys in the interpreter's 16-row blocks: keys from 32 on are in blocks that no
    # query block reaches. They hold NaN: a loop that visits them and masks the scores afterwards gives NaN
    # (0 * NaN in a product); one that stops at the diagonal never reads them, and their dK and dV are 0.
    (Q, K, V, O, dO, L), expected = backward_problem(1, 2, 20, 48, 16, True, seed=4)
    K_nan, V_nan = K.clone(), V.clone()
    K_nan[:, :, 32:] = V_nan[:, :, 32:] = float("nan")
    got = backward_solution.flash_attention_backward_fast(Q, K_nan, V_nan, O, dO, L, is_causal=True)
    assert_gradients_close(got, expected)
    assert not got[1][:, :, 20:].any() and not got[2][:, :, 20:].any(), "keys no query sees get no gradient"


def test_fast_backward_refuses_what_its_tiles_cannot_take(backward_solution):
    Q = torch.zeros(1, 2, 8, 16)
    with pytest.raises(ValueError, match="head dim"):
        backward_solution.flash_attention_backward_fast(*(torch.zeros(1, 2, 8, 48),) * 5, torch.zeros(1, 2, 8))
    with pytest.raises(ValueError, match="L"):
        backward_solution.flash_attention_backward_fast(Q, Q, Q, Q, Q, torch.zeros(1, 2, 9))
    with pytest.raises(ValueError, match="one dtype"):
        backward_solution.flash_attention_backward_fast(Q, Q, Q.double(), Q, Q, torch.zeros(1, 2, 8))


def test_fast_backward_pruners_keep_tiles_for_every_gpu_and_head_dim_and_none_that_do_not_fit(backward_solution):
    s = backward_solution
    for tiles, configs, table, owned, length in (
        (s.DKDV_TILES, s.DKDV_GPU_CONFIGS, s.DKDV_TILES_THAT_DO_NOT_FIT, "BLOCK_N", 1),
        (s.DQ_TILES, s.DQ_GPU_CONFIGS, s.DQ_TILES_THAT_DO_NOT_FIT, "BLOCK_M", 0),
    ):
        assert set(table) == {(family, d) for family in ("sm_8x", "sm_90") for d in s.HEAD_DIMS}
        for family in ("sm_8x", "sm_90", "other"):
            for d in s.HEAD_DIMS:
                do_not_fit = s.tiles_that_do_not_fit(table, family, d)
                kept = [s.tile_of(c) for c in s.keep_tiles(configs, do_not_fit, owned, 4096)]
                assert kept and set(kept) == set(tiles) - do_not_fit, f"at a long T every tile that fits is timed ({family}, d={d})"
                short = [s.tile_of(c) for c in s.keep_tiles(configs, do_not_fit, owned, 20)]
                assert short and all(tile[length] <= 64 for tile in short), "no owned block far longer than T"
    assert all(n % m == 0 for m, n, _, _ in s.DKDV_TILES), "the dK/dV diagonal is whole query steps"
    assert all(m % n == 0 for m, n, _, _ in s.DQ_TILES), "the dQ diagonal is whole key steps"


@pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_fast_function_on_three_d_inputs(backward_solution, causal):
    # The Function: the notebook's forward kernel, the tuned backward, [B, T, d] inputs as one head each.
    q, k, v = (random_tensor(2, T, 16, seed=10 + i).requires_grad_() for i, T in enumerate((19, 26, 26)))
    dO = random_tensor(2, 19, 16, seed=13)
    out = backward_solution.FlashAttentionFast.apply(q, k, v, causal)
    saved = [tuple(t.shape) for t in out.grad_fn.saved_tensors]
    assert saved == [(2, 19, 16), (2, 26, 16), (2, 26, 16), (2, 19, 16), (2, 19)], "Q, K, V, O and L only"
    grads = torch.autograd.grad(out, (q, k, v), dO)
    O, _, expected = plain_attention_in_float64(q, k, v, dO, causal)
    torch.testing.assert_close(out.double(), O, rtol=1e-5, atol=1e-5)
    assert_gradients_close(grads, expected)


def kept_tiles(solution, family, d, T_q, T_k):
    """The configs each pruner keeps on this GPU family at this head dim: (dK/dV's, dQ's)."""
    s = solution
    return (
        s.keep_tiles(s.DKDV_GPU_CONFIGS, s.tiles_that_do_not_fit(s.DKDV_TILES_THAT_DO_NOT_FIT, family, d), "BLOCK_N", T_k),
        s.keep_tiles(s.DQ_GPU_CONFIGS, s.tiles_that_do_not_fit(s.DQ_TILES_THAT_DO_NOT_FIT, family, d), "BLOCK_M", T_q),
    )


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_every_tile_the_fast_backward_may_pick_compiles_without_spills(backward_solution, arch, monkeypatch):
    # The autotuners pick among the tiles the pruners keep for a GPU family and head dim; each must build for that
    # family's GPUs, spill nothing and fit in shared memory. Causal with a ragged T (1000 = 7 * 128 + 104) builds
    # every stage of both loops: the diagonal, the unmasked blocks and the ragged tail. Built once per kernel
    # edit or Triton release: the record holds the rest (kernel_build_record.py).
    from course_utils.kernels import build_jobs, capturing_launches

    s = backward_solution
    jobs, made_for = [], []  # a build job, and the head dim it was made for
    for d in (64, 128):
        dkdv, dq = kept_tiles(s, FAMILY[arch], d, 1000, 1000)
        monkeypatch.setattr(s.fast_dkdv_kernel, "configs", dkdv)
        monkeypatch.setattr(s.fast_dq_kernel, "configs", dq)
        Q = torch.zeros(2, 4, 1000, d, dtype=torch.float16)
        with capturing_launches() as launches:
            s.flash_attention_backward_fast(Q, Q, Q, Q, Q, torch.zeros(2, 4, 1000), is_causal=True)
        assert [one.kernel for one in launches] == [s.fast_dq_kernel, s.fast_dkdv_kernel], "D is computed in the dQ kernel"
        for one in launches:
            new = build_jobs(one.kernel, one.args, one.kwargs, arch)
            jobs += new
            made_for += [d] * len(new)
    builds = recorded_builds(jobs)
    assert len(builds) == len(jobs) >= 16
    for build, d in zip(builds, made_for):
        where = f"{build.summary} with {build.config} at d={d}"
        assert build.compiled, where
        assert build.spilled_bytes == 0, where
        assert build.shared_bytes <= SHARED_BYTES_PER_PROGRAM[arch], where
    assert {build.mma for build in builds} == {"wgmma" if arch == "sm_90" else "mma"}  # tensor cores, not FMA loops


def pin_one_tile(solution, monkeypatch, Q, T_q, T_k, which=0):
    """Each backward kernel's configs cut to one tile the pruner keeps on this GPU: one compile, no timing."""
    family = solution.gpu_family(Q)
    dkdv, dq = kept_tiles(solution, family, Q.shape[-1], T_q, T_k)
    monkeypatch.setattr(solution.fast_dkdv_kernel, "configs", [dkdv[which % len(dkdv)]])
    monkeypatch.setattr(solution.fast_dq_kernel, "configs", [dq[which % len(dq)]])
    return max(len(dkdv), len(dq))


@needs_gpu
@pytest.mark.parametrize("dtype, tol", [(torch.float16, 1e-2), (torch.bfloat16, 5e-2), (torch.float32, 2e-2)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 1000, 1000, 64), (1, 3, 77, 129, 128)], ids=["square", "ragged"])
def test_fast_backward_natively_on_the_gpu(backward_solution, monkeypatch, shape, dtype, tol, causal):
    # Against SDPA's autograd in float32, as section 7's kernels are; float32 tiles go through TF32. One tile each
    # (the autotuners' timing of every tile at every shape would take minutes): the next test runs every tile.
    s, (_, _, T_q, T_k, _) = backward_solution, shape
    pin = lambda Q: pin_one_tile(s, monkeypatch, Q, T_q, T_k)  # noqa: E731
    assert_native_gradients_close(s, s.flash_attention_backward_fast, shape, dtype, tol, causal, before=pin)


@needs_gpu
@pytest.mark.parametrize("d", [64, 128])
def test_every_tile_the_fast_backward_may_pick_natively(backward_solution, monkeypatch, d):
    # Each tile the pruners keep on this GPU, on a causal ragged shape with T_q != T_k (all three stages of the
    # dK/dV loop, both of the dQ loop), float16 against SDPA's autograd in float32.
    Q, K, V = qkv(1, 3, 77 * 3, 129 * 2, d, dtype=torch.float16, device="cuda")
    dO = random_tensor(1, 3, 77 * 3, d, seed=9).to("cuda", torch.float16)
    O, L = backward_solution.flash_attention_triton(Q, K, V, is_causal=True)
    expected = sdpa_gradients(Q.float(), K.float(), V.float(), dO.float(), is_causal=True)
    runs = pin_one_tile(backward_solution, monkeypatch, Q, 77 * 3, 129 * 2)
    for which in range(runs):
        pin_one_tile(backward_solution, monkeypatch, Q, 77 * 3, 129 * 2, which)
        tiles = [backward_solution.tile_of(k.configs[0]) for k in (backward_solution.fast_dkdv_kernel, backward_solution.fast_dq_kernel)]
        grads = backward_solution.flash_attention_backward_fast(Q, K, V, O, dO, L, is_causal=True)
        for name, got, want in zip(("dQ", "dK", "dV"), grads, expected):
            torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2, msg=lambda m, name=name: f"{name} with tiles {tiles}: {m}")
