"""PyTorch's own versions of graded helpers, to stand in for the student's in other tests.

A test of one graded function replaces the graded helpers it calls with these
(``call(..., stand_ins=CAUSAL_MASK_STAND_IN)``), so a bug in a helper costs points only on the
helper's own tests. Built from public torch operations only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .guards import Guards
from .tripwires import answers

# Bound once, here: a test that trips the Python name ``torch.softmax`` (``check_no_builtin``) must not
# trip over the stand-in; its kernels run in a stand-in range, which the dispatcher check leaves out.
_softmax = torch.softmax
_sdpa = F.scaled_dot_product_attention
_logsumexp = torch.logsumexp


@answers("01_soft_dictionary_lookup", "softmax")
def torch_softmax(scores: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """Notebook 01's ``softmax`` by PyTorch: ``torch.softmax(scores / temperature, dim)``, same shape as scores."""
    return _softmax(scores / temperature, dim=dim)


@answers("02_dot_product_attention", "dot_product_scores")
def torch_dot_product_scores(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Notebook 02's ``dot_product_scores``: [..., T_q, T_k] from Q [..., T_q, d] and K [..., T_k, d]."""
    return Q @ K.transpose(-2, -1)


@answers("02_dot_product_attention", "dot_product_attention")
def torch_dot_product_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 02's unscaled ``dot_product_attention`` from matrix products and ``torch.softmax``.

    Returns:
        (output [..., T_q, d_v], weights [..., T_q, T_k]). Not ``F.scaled_dot_product_attention``,
        so that a "do not call the built-in" test of the caller cannot trip over the stand-in.
    """
    weights = _softmax(torch_dot_product_scores(Q, K), dim=-1)
    return weights @ V, weights


@answers("04_masking", "causal_mask")
def torch_causal_mask(T_q: int, T_k: int, bottom_right: bool = False, device: torch.device | str | None = None) -> torch.Tensor:
    """PyTorch's causal mask: top-left as ``is_causal=True``, bottom-right as ``causal_lower_right``.

    Returns:
        [T_q, T_k] bool, True where query i may see key j: j <= i (top-left) or j <= i + T_k - T_q (bottom-right).
    """
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(diagonal=T_k - T_q if bottom_right else 0)


@answers("05_multi_head_attention", "split_heads")
def torch_split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Notebook 05's ``split_heads`` by another route: chunk the features and stack the chunks as heads.

    Returns:
        [..., H, T, D / H] from x [..., T, D].
    """
    return torch.stack(x.chunk(num_heads, dim=-1), dim=-3)


@answers("05_multi_head_attention", "merge_heads")
def torch_merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Notebook 05's ``merge_heads`` by another route: the heads' features side by side.

    Returns:
        [..., T, H * d] from x [..., H, T, d].
    """
    return torch.cat(x.unbind(dim=-3), dim=-1)


@answers("07_fused_attention", "flash_attention_forward", "flash_attention_triton")
def scores_logsumexp(Q: torch.Tensor, K: torch.Tensor, is_causal: bool, scale: float | None) -> torch.Tensor:
    """The natural-log logsumexp of each row of scaled scores (top-left causal mask), in float64: [..., T_q]."""
    scores = Q.double() @ K.double().transpose(-2, -1) * (Q.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool, device=Q.device).triu(1), float("-inf"))
    return _logsumexp(scores, dim=-1)


@answers("07_fused_attention", "flash_attention_forward")
def torch_flash_forward(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    is_causal: bool = False,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 07's ``flash_attention_forward`` by PyTorch: O from SDPA, L from a logsumexp of the scores.

    Not tiled (``block_q`` and ``block_k`` are checked, then unused): the same answer, not the same memory.

    Args:
        Q: [B, H, T_q, d], K: [B, H, T_k, d], V: [B, H, T_k, d_v].
        is_causal: top-left, as ``F.scaled_dot_product_attention``; scale: 1/sqrt(d) when None.

    Returns:
        (O [B, H, T_q, d_v] in Q's dtype, L [B, H, T_q]: float64 for float64 inputs, float32 otherwise).

    Raises:
        ValueError: if block_q or block_k < 1.
    """
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be at least 1, got block_q={block_q}, block_k={block_k}")
    O = _sdpa(Q, K, V, is_causal=is_causal, scale=scale)
    return O, scores_logsumexp(Q, K, is_causal, scale).to(torch.promote_types(Q.dtype, torch.float32))


@answers("07_fused_attention", "flash_attention_triton")
def torch_flash_attention_triton(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool = False, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 07's ``flash_attention_triton`` (kernel and launcher) by PyTorch: O from SDPA, L from a logsumexp.

    Args:
        Q: [B, H, T_q, d], K: [B, H, T_k, d], V: [B, H, T_k, d], as the launcher takes them.
        is_causal: top-left; scale: 1/sqrt(d) when None.

    Returns:
        (O [B, H, T_q, d] in Q's dtype, L [B, H, T_q] float32, as the kernel writes it).

    Raises:
        ValueError: unless Q is [B, H, T_q, d] and K, V are [B, H, T_k, d] (as the launcher).
    """
    if Q.dim() != 4 or K.shape[:2] != Q.shape[:2] or V.shape != K.shape or K.shape[-1] != Q.shape[-1]:
        raise ValueError(f"expected Q [B, H, T_q, d] and K, V [B, H, T_k, d], got {tuple(Q.shape)}, {tuple(K.shape)}, {tuple(V.shape)}")
    O = _sdpa(Q, K, V, is_causal=is_causal, scale=scale)
    return O, scores_logsumexp(Q, K, is_causal, scale).float()


@answers("08_flash_backward", "softmax_backward")
def torch_softmax_backward(P: torch.Tensor, dP: torch.Tensor) -> torch.Tensor:
    """Notebook 08's ``softmax_backward`` by autograd: dS for weights P = softmax(S) and the upstream gradient dP.

    The scores are recovered as log P (the softmax of log P is P again), and autograd differentiates
    ``torch.softmax`` at them. Returns dS [..., T_k]; a masked key (P = 0) gets 0.
    """
    with torch.enable_grad():
        scores = P.detach().log().requires_grad_()
        (grad,) = torch.autograd.grad(torch.softmax(scores, dim=-1), scores, dP)
    return grad.nan_to_num(0.0)


@answers("08_flash_backward", "flash_backward_preprocess")
def torch_flash_backward_preprocess(O: torch.Tensor, dO: torch.Tensor) -> torch.Tensor:
    """Notebook 08's ``flash_backward_preprocess``: D = rowsum(dO * O), summed in float32 (float64 for float64).

    Returns:
        D [..., T_q] in the summing dtype.
    """
    acc = torch.float64 if O.dtype == torch.float64 else torch.float32
    return torch.linalg.vecdot(dO.to(acc), O.to(acc))  # elementwise and a sum: no matrix product for count_flops


SOFTMAX_STAND_IN = {"softmax": torch_softmax}
SCORES_STAND_IN = {"dot_product_scores": torch_dot_product_scores}
ATTENTION_STAND_IN = {"dot_product_attention": torch_dot_product_attention}
CAUSAL_MASK_STAND_IN = {"causal_mask": torch_causal_mask}
HEADS_STAND_IN = {"split_heads": torch_split_heads, "merge_heads": torch_merge_heads}
FLASH_PREPROCESS_STAND_IN = {"flash_backward_preprocess": torch_flash_backward_preprocess}  # 08's, inside its backward
SOFTMAX_BACKWARD_STAND_IN = {"softmax_backward": torch_softmax_backward}  # notebook 08's, inside attention_backward
FLASH_FORWARD_STAND_IN = {"flash_attention_forward": torch_flash_forward}  # notebook 07's forward, carried into 08
FLASH_TRITON_STAND_IN = {"flash_attention_triton": torch_flash_attention_triton}  # 07's kernel and launcher, carried into 08

# PyTorch's answers to graded functions: a line a student adds that names one (to hand it in as their own, say)
# is flagged for a person to read (course_utils.guards); the given cells that run them as stand-ins are not.
GUARDS = Guards(
    names=(
        "torch_softmax",
        "torch_dot_product_scores",
        "torch_dot_product_attention",
        "torch_causal_mask",
        "torch_split_heads",
        "torch_merge_heads",
        "torch_flash_forward",
        "torch_flash_attention_triton",
        "torch_softmax_backward",
        "torch_flash_backward_preprocess",
        "SOFTMAX_STAND_IN",
        "SCORES_STAND_IN",
        "ATTENTION_STAND_IN",
        "CAUSAL_MASK_STAND_IN",
        "HEADS_STAND_IN",
        "FLASH_PREPROCESS_STAND_IN",
        "SOFTMAX_BACKWARD_STAND_IN",
        "FLASH_FORWARD_STAND_IN",
        "FLASH_TRITON_STAND_IN",
    )
)
