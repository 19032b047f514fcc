"""course_utils.drop_in: a Function that reshapes inside forward and backward is a drop-in for SDPA's shapes.

Its output is the Function's own, so a project's test can read L from ``out.grad_fn.saved_tensors``;
reshaping around ``apply`` gives the same numbers but a reshape's node.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils.autograd_refs import logsumexp_of_scores, sdpa_gradients
from course_utils.drop_in import as_heads


class _SdpaFunction(torch.autograd.Function):
    """SDPA as a Function on any leading shape, through 4-D-only code (as the course's tile functions are)."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        q, k, v = as_heads(Q), as_heads(K), as_heads(V)
        assert q.dim() == 4
        O = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).reshape(*Q.shape[:-1], V.shape[-1])
        L = logsumexp_of_scores(q, k, is_causal=is_causal).reshape(Q.shape[:-1])
        ctx.save_for_backward(Q, K, V, L)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, L = ctx.saved_tensors
        assert as_heads(L, trailing=1).shape == as_heads(Q).shape[:-1]
        grads = sdpa_gradients(as_heads(Q), as_heads(K), as_heads(V), as_heads(dO), is_causal=ctx.is_causal)
        return (*(g.reshape(t.shape) for g, t in zip(grads, (Q, K, V))), None)


@pytest.mark.parametrize("lead", [(), (2,), (2, 3), (2, 2, 3)])
def test_any_leading_shape_runs_and_differentiates_as_sdpa(lead) -> None:
    Q, K, V = (torch.randn(*lead, T, 4, dtype=torch.float64, requires_grad=True) for T in (5, 7, 7))
    out = _SdpaFunction.apply(Q, K, V, True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, K, V, is_causal=True))
    dO = torch.randn(*lead, 5, 4, dtype=torch.float64)
    for got, expected in zip(torch.autograd.grad(out, (Q, K, V), dO), sdpa_gradients(Q, K, V, dO, is_causal=True)):
        torch.testing.assert_close(got, expected)


def test_a_project_reads_L_from_the_outputs_own_node() -> None:
    # The interface a project's attention tests use: apply(q, k, v, is_causal) on [batch, seq, d], and L from the node.
    q, k, v = (torch.randn(3, 6, 4, requires_grad=True) for _ in range(3))
    out = _SdpaFunction.apply(q, k, v, True)
    saved = [t for t in out.grad_fn.saved_tensors if t.shape == (3, 6)]
    assert len(saved) == 1
    torch.testing.assert_close(saved[0], logsumexp_of_scores(q.detach(), k.detach(), is_causal=True).float())
    # Reshaping around apply instead: the same numbers, but the node is the reshape's, with no saved_tensors.
    around = _SdpaFunction.apply(as_heads(q), as_heads(k), as_heads(v), True).reshape(3, 6, 4)
    torch.testing.assert_close(around, out)
    assert not hasattr(around.grad_fn, "saved_tensors")


def test_as_heads_shapes() -> None:
    assert as_heads(torch.zeros(2, 3, 5, 4)).shape == (2, 3, 5, 4)
    assert as_heads(torch.zeros(2, 5, 4)).shape == (2, 1, 5, 4)
    assert as_heads(torch.zeros(5, 4)).shape == (1, 1, 5, 4)
    assert as_heads(torch.zeros(6, 2, 3, 5, 4)).shape == (12, 3, 5, 4)
    assert as_heads(torch.zeros(2, 5), trailing=1).shape == (2, 1, 5)
