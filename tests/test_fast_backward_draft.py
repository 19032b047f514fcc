"""benchmarks/fast_backward_draft.py, the draft fast backward: its gradients against PyTorch's autograd in Triton's
interpreter (float64 references), and every tile its pruners keep compiled for real GPUs on the CPU.

The interpreter must be switched on before Triton is imported, so this module sets TRITON_INTERPRET=1
itself when there is no GPU (as tests/test_kernels.py does).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
triton = pytest.importorskip("triton")

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from autograder.settings import REPO_ROOT  # noqa: E402
from course_utils.autograd_refs import logsumexp_of_scores, sdpa_gradients  # noqa: E402

ON_GPU = torch.cuda.is_available()
on_the_interpreter = pytest.mark.skipif(ON_GPU, reason="the interpreter path is the CPU path")
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: the native Triton kernels")


@pytest.fixture(scope="module")
def draft() -> Iterator[ModuleType]:
    """The draft, loaded from its file (benchmarks/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("fast_backward_draft", REPO_ROOT / "benchmarks" / "fast_backward_draft.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Triton reads a kernel's source through its module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def forward_inputs(B, H, T_q, T_k, d, causal, scale=None, seed=0):
    """Float64 (Q, K, V, O, dO, L) on the CPU: random inputs and the forward's O and L.

    SDPA's math backend: PyTorch's CPU flash backend returns NaN for a negative scale with is_causal.
    """
    generator = torch.Generator().manual_seed(seed)
    Q, dO = (torch.randn(B, H, T_q, d, generator=generator, dtype=torch.float64) for _ in range(2))
    K, V = (torch.randn(B, H, T_k, d, generator=generator, dtype=torch.float64) for _ in range(2))
    with sdpa_kernel(SDPBackend.MATH):
        O = F.scaled_dot_product_attention(Q, K, V, is_causal=causal, scale=scale)
    return Q, K, V, O, dO, logsumexp_of_scores(Q, K, scale=scale, is_causal=causal)


def problem(B, H, T_q, T_k, d, causal, scale=None, seed=0):
    """forward_inputs, and autograd's (dQ, dK, dV) of them in float64."""
    inputs = forward_inputs(B, H, T_q, T_k, d, causal, scale, seed)
    Q, K, V, _, dO, _ = inputs
    with sdpa_kernel(SDPBackend.MATH):
        return inputs, sdpa_gradients(Q, K, V, dO, is_causal=causal, scale=scale)


def check_gradients(got, expected, tol=2e-5):
    # float32 kernels against float64 autograd: sums of at most 70 terms of O(1) values.
    for name, g, want in zip(("dQ", "dK", "dV"), got, expected):
        assert g.dtype == torch.float32 and g.shape == want.shape and g.is_contiguous(), name
        torch.testing.assert_close(g.double(), want, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")


def run_float32(draft, inputs, causal, scale=None):
    return draft.flash_attention_backward_fast(*(t.float() for t in inputs), is_causal=causal, scale=scale)


@on_the_interpreter
@pytest.mark.parametrize(
    "T_q, T_k, d, causal, scale",
    [
        (16, 16, 16, False, None),
        (16, 16, 16, True, None),
        (37, 21, 16, True, None),  # T_q > T_k, both ragged
        (21, 37, 32, True, None),  # T_q < T_k: keys 21..36 are seen by no query, their dK and dV are 0
        (33, 70, 16, False, None),
        (70, 33, 32, False, 0.5),
        (48, 48, 16, True, -0.3),  # a negative scale: nothing relies on a max
        (1, 1, 16, True, None),
    ],
)
def test_gradients_match_autograd_in_the_interpreter(draft, T_q, T_k, d, causal, scale):
    inputs, expected = problem(2, 2, T_q, T_k, d, causal, scale)
    got = run_float32(draft, inputs, causal, scale)
    check_gradients(got, expected)
    if causal and T_k > T_q:
        assert not got[1][:, :, T_q:].any() and not got[2][:, :, T_q:].any(), "keys no query sees get no gradient"


@on_the_interpreter
@pytest.mark.parametrize("dkdv_tile, dq_tile", [((16, 32), (32, 16)), ((16, 64), (64, 16)), ((32, 32), (16, 16))])
@pytest.mark.parametrize("T_q, T_k, causal", [(70, 45, True), (45, 70, True), (64, 64, True), (64, 64, False), (50, 64, False)])
def test_owned_tiles_several_steps_long(draft, monkeypatch, dkdv_tile, dq_tile, T_q, T_k, causal):
    # The GPU tiles own several steps: the causal diagonal then spans several masked steps, and the
    # stages (diagonal, unmasked, ragged tail) meet inside an owned block. Even and ragged T both.
    config = lambda m, n: triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=1, num_stages=1)  # noqa: E731
    monkeypatch.setattr(draft.fast_dkdv_kernel, "configs", [config(*dkdv_tile)])
    monkeypatch.setattr(draft.fast_dq_kernel, "configs", [config(*dq_tile)])
    inputs, expected = problem(1, 2, T_q, T_k, 16, causal, seed=1)
    check_gradients(run_float32(draft, inputs, causal), expected)


@on_the_interpreter
def test_heads_in_groups_whose_last_group_is_smaller(draft, monkeypatch):
    # Causal, programs walk groups of heads (sized to L2); 3 heads in groups of 2 leave a group of 1.
    T, d = 40, 16
    monkeypatch.setattr(draft, "L2_BUDGET_BYTES", 2 * T * (2 * d * 4 + 8))
    assert draft.heads_per_group(3, T * (2 * d * 4 + 8), True) == 2 and draft.heads_per_group(3, T * 2 * d * 4, True) == 2
    assert draft.heads_per_group(3, T * 2 * d * 4, False) == 1
    inputs, expected = problem(1, 3, T, T, d, True, seed=2)
    check_gradients(run_float32(draft, inputs, True), expected)


@on_the_interpreter
def test_strided_inputs_and_a_strided_L(draft):
    inputs, expected = problem(2, 3, 24, 40, 32, True, seed=3)
    Q, K, V, O, dO, L = (t.float() for t in inputs)
    head_major = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)  # noqa: E731 - [B, T, H, d] memory
    spread = lambda t: torch.stack([t, torch.full_like(t, float("nan"))], -1).flatten(-2)[..., ::2]  # noqa: E731 - stride 2 along d
    L_strided = torch.stack([L, torch.full_like(L, float("nan"))], -1)[..., 0]
    check_gradients(draft.flash_attention_backward_fast(head_major(Q), head_major(K), spread(V), O, spread(dO), L_strided, True), expected)


def test_bad_shapes_are_refused(draft):
    Q = torch.zeros(1, 2, 8, 16)
    with pytest.raises(ValueError, match="head dim"):
        draft.flash_attention_backward_fast(*(torch.zeros(1, 2, 8, 48),) * 5, torch.zeros(1, 2, 8))
    with pytest.raises(ValueError, match="L"):
        draft.flash_attention_backward_fast(Q, Q, Q, Q, Q, torch.zeros(1, 2, 9))
    with pytest.raises(ValueError, match="one dtype"):
        draft.flash_attention_backward_fast(Q, Q, Q.double(), Q, Q, torch.zeros(1, 2, 8))


def test_pruners_keep_tiles_for_every_head_dim_and_none_that_spill(draft):
    for d in (16, 32, 64, 128):
        for prune, tiles, spill, owned, length in (
            (draft.prune_dkdv_configs, draft.DKDV_TILES, draft.DKDV_TILES_THAT_SPILL, "T_k", 0),
            (draft.prune_dq_configs, draft.DQ_TILES, draft.DQ_TILES_THAT_SPILL, "T_q", 1),
        ):
            kept = [draft.tile_of(c) for c in prune(draft.configs_of(tiles), {"HEAD_DIM": d, owned: 4096})]
            assert kept and not set(kept) & spill[d], (d, owned)
            assert set(kept) == set(tiles) - spill[d], "at a long T every tile that fits is timed"
            short = [draft.tile_of(c) for c in prune(draft.configs_of(tiles), {"HEAD_DIM": d, owned: 20})]
            assert short and all(tile[length] <= 64 for tile in short), "no owned tile far longer than T"
    for m, n, _, _ in draft.DKDV_TILES:
        assert n % m == 0, "the dK/dV diagonal is whole query steps"
    for m, n, _, _ in draft.DQ_TILES:
        assert m % n == 0, "the dQ diagonal is whole key steps"


# (arch, shared memory one program may use): A100, L4, H100
SHARED_LIMITS = {"sm_80": 166912, "sm_89": 101376, "sm_90": 232448}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_every_tile_the_pruners_keep_compiles_without_spills(draft, arch, monkeypatch):
    # The autotuner picks among the tiles the pruner keeps for a head dim; each must build for real GPUs.
    # Causal with a ragged T compiles every stage of both loops: diagonal, unmasked and ragged tail.
    from course_utils.kernels import build_jobs, capturing_launches, run_builds

    jobs, made_for = [], []  # a build job, and the (d, dtype) it was made for
    T = 1000  # ragged for every tile: 1000 % 16 == 8
    for d in (64, 128):
        monkeypatch.setattr(
            draft.fast_dkdv_kernel, "configs", draft.prune_dkdv_configs(draft.configs_of(draft.DKDV_TILES), {"HEAD_DIM": d, "T_k": T})
        )
        monkeypatch.setattr(
            draft.fast_dq_kernel, "configs", draft.prune_dq_configs(draft.configs_of(draft.DQ_TILES), {"HEAD_DIM": d, "T_q": T})
        )
        for dtype in (torch.float16, torch.bfloat16):
            Q = torch.zeros(2, 4, T, d, dtype=dtype)
            with capturing_launches() as launches:
                draft.flash_attention_backward_fast(Q, Q, Q, Q, Q, torch.zeros(2, 4, T), is_causal=True)
            assert [one.kernel for one in launches] == [draft.backward_preprocess_kernel, draft.fast_dkdv_kernel, draft.fast_dq_kernel]
            for one in launches[1:]:  # the preprocess has no tile to choose (tests/test_kernels.py builds such kernels)
                new = build_jobs(one.kernel, one.args, one.kwargs, arch)
                jobs += new
                made_for += [(d, dtype)] * len(new)
    builds = run_builds(jobs)
    assert len(builds) == len(jobs) >= 16
    for build, (d, dtype) in zip(builds, made_for):
        where = f"{build.summary} with {build.config} at d={d}, {dtype}"
        assert build.compiled, where
        assert build.spilled_bytes == 0, where
        assert build.mma, where  # tensor cores: wgmma or mma.sync on sm_90 (by tile rows), mma.sync before
        assert build.shared_bytes <= SHARED_LIMITS[arch], where


@needs_gpu
@pytest.mark.parametrize("dtype, tol", [(torch.float16, 1e-2), (torch.bfloat16, 5e-2), (torch.float32, 2e-2)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 1000, 1000, 64), (1, 3, 77, 129, 128)], ids=["square", "ragged"])
def test_gradients_natively_on_the_gpu(draft, shape, dtype, tol, causal):
    # Against SDPA's autograd in float32; float32 tiles go through TF32, hence its wide tolerance.
    B, H, T_q, T_k, d = shape
    Q, K, V, O, dO, L = forward_inputs(B, H, T_q, T_k, d, causal)
    Q, K, V, O, dO = (t.to("cuda", dtype) for t in (Q, K, V, O, dO))
    got = draft.flash_attention_backward_fast(Q, K, V, O, dO, L.float().cuda(), is_causal=causal)
    expected = sdpa_gradients(Q.float(), K.float(), V.float(), dO.float(), is_causal=causal)
    for name, g, want in zip(("dQ", "dK", "dV"), got, expected):
        assert g.dtype == dtype, name
        torch.testing.assert_close(g.float(), want, rtol=tol, atol=tol, msg=lambda m, name=name: f"{name}: {m}")
