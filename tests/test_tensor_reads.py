"""course_utils.tensor_reads: the elements of a tensor that computations read, whatever computes them."""

from __future__ import annotations

import pytest
import torch

from course_utils.tensor_reads import elements_read


def tiles_by_products(Q, K):
    return [Q @ K[start : start + 4].T for start in range(0, K.shape[0], 4)]


def tiles_by_elementwise_products(Q, K):
    return [(Q[:, None, :] * K[None, start : start + 4, :]).sum(-1) for start in range(0, K.size(0), 4)]


def tiles_from_a_float64_copy(Q, K):
    K64 = K.double().contiguous()  # a copy is read as the tensor itself
    return [torch.einsum("qd,kd->qk", Q.double(), K64[start : start + 4]) for start in range(0, K.dim() * 6, 4)]


def two_passes(Q, K):
    return tiles_by_products(Q, K) + tiles_by_elementwise_products(Q, K)


def sum_through_a_buffer(Q, K):
    buffer = torch.empty_like(K)
    buffer[:] = K  # moved into another tensor: still K
    return buffer.sum()


@pytest.mark.parametrize(
    "fn, reads",
    [
        (tiles_by_products, 96),
        (tiles_by_elementwise_products, 96),
        (tiles_from_a_float64_copy, 96),
        (two_passes, 192),
        (sum_through_a_buffer, 96),
    ],
)
def test_reads_are_counted_whatever_computes_them(fn, reads):
    Q, K = torch.randn(5, 8), torch.randn(12, 8)  # 12 keys in tiles of 4: 96 elements in one pass
    assert elements_read(fn, Q, K, watch={"K": K}) == {"K": reads}


def test_a_watched_tensor_must_be_an_argument():
    K = torch.randn(3, 3)
    with pytest.raises(ValueError, match="not one of the arguments"):
        elements_read(torch.sum, torch.randn(3, 3), watch={"K": K})


def test_values_handed_to_python_are_read():
    K = torch.randn(12, 8)
    assert elements_read(lambda K: K[:4].tolist(), K, watch={"K": K}) == {"K": 32}
    assert elements_read(lambda K: K[:2].numpy().sum(), K, watch={"K": K}) == {"K": 16}
