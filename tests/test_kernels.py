"""Notebook 07's solution kernels against PyTorch: under Triton's interpreter on a CPU, natively on a GPU.

The interpreter must be switched on before Triton is imported, so this module sets
TRITON_INTERPRET=1 itself when there is no GPU. The GPU tests are skipped without CUDA
(CI never has one); run them on a GPU machine with `pytest tests/test_kernels.py`.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
triton = pytest.importorskip("triton")

from course_utils.checks import random_tensor  # noqa: E402
from course_utils.reference import load_solution  # noqa: E402

ON_GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: the native Triton kernel")


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
    torch.testing.assert_close(solution.flash_attention_triton(Q, K, V, is_causal=causal),
                               F.scaled_dot_product_attention(Q, K, V, is_causal=causal), rtol=1e-5, atol=1e-5)


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
    out = solution.flash_attention_triton(Q, K, V, is_causal=causal)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), F.scaled_dot_product_attention(Q, K, V, is_causal=causal).float(), rtol=tol, atol=tol)


@needs_gpu
def test_triton_kernel_on_the_gpu_with_ragged_shapes(solution):
    Q, K, V = qkv(1, 3, 77, 129, 48, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(solution.flash_attention_triton(Q, K, V).float(),
                               F.scaled_dot_product_attention(Q, K, V).float(), rtol=2e-3, atol=2e-3)
