"""course_utils.drop_in: an attention Function takes [B, T, d] as one head, and its gradients flow."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils.autograd_refs import sdpa_gradients
from course_utils.drop_in import AttentionFunction


class _SdpaFunction(AttentionFunction):
    """A 4-D-only Function built on SDPA: forward refuses anything but [B, H, T, d]."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        if Q.dim() != 4:
            raise ValueError(f"expected [B, H, T, d], got {tuple(Q.shape)}")
        ctx.save_for_backward(Q, K, V)
        ctx.is_causal = is_causal
        return F.scaled_dot_product_attention(Q, K, V, is_causal=is_causal)

    @staticmethod
    def backward(ctx, dO):
        Q, K, V = ctx.saved_tensors
        return (*sdpa_gradients(Q, K, V, dO, is_causal=ctx.is_causal), None)


def test_three_dimensional_inputs_run_as_one_head_both_ways() -> None:
    Q, K, V = (torch.randn(2, T, 4, dtype=torch.float64, requires_grad=True) for T in (5, 7, 7))
    out = _SdpaFunction.apply(Q, K, V, True)
    assert out.shape == (2, 5, 4)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, K, V, is_causal=True))
    dO = torch.randn(2, 5, 4, dtype=torch.float64)
    grads = torch.autograd.grad(out, (Q, K, V), dO)
    for got, expected in zip(grads, sdpa_gradients(Q, K, V, dO, is_causal=True)):
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected)


def test_four_dimensional_inputs_pass_through() -> None:
    Q, K, V = (torch.randn(1, 3, T, 4, dtype=torch.float64) for T in (6, 6, 6))
    torch.testing.assert_close(_SdpaFunction.apply(Q, K, V), F.scaled_dot_product_attention(Q, K, V))
