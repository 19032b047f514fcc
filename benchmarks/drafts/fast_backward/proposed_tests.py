"""Proposed tests for tests/test_kernels.py: notebook 08's fast backward (the solution's showcase, ungraded).

Everything above the line "--- 08's fast backward" is scaffolding for running this file on its own against the
scratch module (benchmarks/drafts/fast_backward/load_cells.py loads the proposed cells into 08's solution namespace). In
tests/test_kernels.py the module-level setup, ``qkv``, ``ON_GPU`` and ``needs_gpu`` already exist, and the
``backward_solution`` fixture there loads 08's solution, which will hold these names once the cells land: copy
the section from that line on.

    .venv/bin/python -m pytest -q -n0 -p no:cacheprovider benchmarks/drafts/fast_backward/proposed_tests.py [-m "not slow"]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
triton = pytest.importorskip("triton")

from course_utils.autograd_refs import sdpa_gradients  # noqa: E402
from course_utils.checks import random_tensor  # noqa: E402

ON_GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: the native Triton kernel")


@pytest.fixture(scope="module")
def backward_solution():
    sys.path.insert(0, str(Path(__file__).parent))
    from load_cells import load

    return load()


def qkv(B, H, T_q, T_k, d, *, dtype=torch.float32, device="cpu", seed=0):
    return (random_tensor(B, H, T, d, seed=seed + i).to(device, dtype) for i, T in enumerate((T_q, T_k, T_k)))


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


# Shared memory one program may use: A100 (sm_80), L4 (sm_89), H100 (sm_90), from CUDA's tables of
# compute capabilities (the opt-in maximum per block).
SHARED_BYTES_PER_PROGRAM = {"sm_80": 166912, "sm_89": 101376, "sm_90": 232448}


# The GPU family each compile target belongs to, and the shared memory one program may use there: A100 (sm_80),
# L4 (sm_89), H100 (sm_90), from CUDA's table of compute capabilities (the opt-in maximum per block).
FAMILY = {"sm_80": "sm_8x", "sm_89": "sm_8x", "sm_90": "sm_90"}
SHARED_BYTES_PER_PROGRAM = {"sm_80": 166912, "sm_89": 101376, "sm_90": 232448}


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
    # every stage of both loops: the diagonal, the unmasked blocks and the ragged tail.
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

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
    builds = run_builds(jobs)
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
    B, H, T_q, T_k, d = shape
    Q, K, V = qkv(B, H, T_q, T_k, d, dtype=dtype, device="cuda")
    dO = random_tensor(B, H, T_q, d, seed=9).to("cuda", dtype)
    pin_one_tile(backward_solution, monkeypatch, Q, T_q, T_k)
    O, L = backward_solution.flash_attention_triton(Q, K, V, is_causal=causal)
    grads = backward_solution.flash_attention_backward_fast(Q, K, V, O, dO, L, is_causal=causal)
    expected = sdpa_gradients(Q.float(), K.float(), V.float(), dO.float(), is_causal=causal)
    for name, got, want in zip(("dQ", "dK", "dV"), grads, expected):
        assert got.dtype == dtype, name
        torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")


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
