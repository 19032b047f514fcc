"""A fast FlashAttention-2 forward kernel in Triton: the course's showcase kernel (draft).

Self-contained (math, torch, triton only) so that it can move into notebook 07's solution as is.
Compared with the notebook's simple kernel it adds, each marked in the code with the reason:
autotuned tiles, a causal loop in two stages (unmasked blocks, then the diagonal), an EVEN path
without bounds masks, the scale folded into one FMA, the heaviest query blocks first, int64 base
offsets, and fp32 statistics with exp2.

Runs natively on a CUDA GPU (float16, bfloat16, float32 via tf32), and in Triton's interpreter on
a CPU when TRITON_INTERPRET=1 is set before triton is imported (small sizes: it is slow).
"""

import math

import torch
import triton
import triton.language as tl

# On a GPU the autotuner times these once per (T_q, T_k, d, causal, dtype) and keeps the fastest.
# (BLOCK_M, BLOCK_N, num_warps, num_stages). All have BLOCK_M % BLOCK_N == 0, which the two-stage
# causal loop relies on. 128-row tiles use 8 warps: two Hopper warpgroups of 64 rows each.
_GPU_TILES = [
    (128, 128, 8, 2), (128, 128, 8, 3), (128, 128, 8, 4),
    (128, 64, 8, 2), (128, 64, 8, 3),
    (128, 32, 8, 3),
    (64, 64, 4, 2), (64, 64, 4, 3), (64, 64, 4, 4),
    (64, 32, 4, 3),
]
# Tiles that spill registers to local memory (ptxas -v, sm_80 or sm_90a, causal or not, even or
# ragged) at a head dim: the pruner drops them there. A bigger d means a bigger fp32 accumulator.
_SPILLS = {16: set(), 32: {(128, 64, 8, 2)}, 64: {(128, 128, 8, 2)},
           128: {(128, 128, 8, 2), (128, 128, 8, 3), (128, 128, 8, 4), (128, 64, 8, 3), (64, 32, 4, 3)}}
_GPU_CONFIGS = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in _GPU_TILES]
# The interpreter ignores warps and stages, and one config means the autotuner never benchmarks.
_CPU_CONFIGS = [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=1, num_stages=1)]


def _prune_configs(configs, named_args, **kwargs):
    """Drops the tiles that spill at this head dim, and tiles far taller than T_q (timing them only wastes time)."""
    args = {**named_args, **kwargs}
    spills = _SPILLS[args["HEAD_DIM"]]
    kept = [c for c in configs
            if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) not in spills
            and c.kwargs["BLOCK_M"] <= max(64, triton.next_power_of_2(args["T_q"]))]
    return kept or [c for c in configs if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) not in spills]


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, offs_m, offs_n, offs_d,
                    lo, hi, T_k, qk_scale,
                    MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, EVEN_N: tl.constexpr,
                    BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Folds key blocks [lo, hi) into the running (acc, l, m) of one query block.

    MASKED=False: every key in [lo, hi) exists and is visible to every query row (no masks at all).
    MASKED=True: the diagonal and/or ragged last block: the causal mask and/or the T_k bound.
    """
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)  # tells the compiler the rows are BLOCK_N-aligned (vector loads)
        offs_k = start_n + offs_n
        k_ptrs = k_base + offs_k[:, None] * stride_kt + offs_d[None, :]  # [BLOCK_N, d], contiguous in d
        v_ptrs = v_base + offs_k[:, None] * stride_vt + offs_d[None, :]
        if MASKED and not EVEN_N:
            k = tl.load(k_ptrs, mask=offs_k[:, None] < T_k, other=0.0)  # ragged T_k: only stage 2's blocks pay a mask
        else:
            k = tl.load(k_ptrs)  # EVEN, or stage 1 (full blocks only): no bounds mask, plain vector loads
        qk = tl.dot(q, tl.trans(k))  # [BLOCK_M, BLOCK_N] raw scores q.k, fp32 accumulation on tensor cores
        if MASKED:
            s = qk * qk_scale  # the diagonal blocks only: scale first so that a masked -inf never meets 0 * inf
            if IS_CAUSAL:
                s = tl.where(offs_k[None, :] <= offs_m[:, None], s, float("-inf"))  # top-left: query i sees keys 0..i
            if not EVEN_N:
                s = tl.where(offs_k[None, :] < T_k, s, float("-inf"))  # keys past the ragged end
            m_new = tl.maximum(m_i, tl.max(s, 1))  # finite: every row has seen key 0 by now (blocks run in order)
            p = tl.exp2(s - m_new[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # running max in scaled base-2 units (qk_scale > 0)
            p = tl.exp2(qk * qk_scale - m_new[:, None])  # one FMA per score, then exp2 (MUFU.EX2): no separate scaling pass
        alpha = tl.exp2(m_i - m_new)  # rescales the old sum and accumulator to the new max (0 on the first block)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED and not EVEN_N:
            v = tl.load(v_ptrs, mask=offs_k[:, None] < T_k, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)  # P in the inputs' dtype for the tensor cores, fp32 acc
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(
    configs=_GPU_CONFIGS if torch.cuda.is_available() else _CPU_CONFIGS,
    key=["T_q", "T_k", "HEAD_DIM", "IS_CAUSAL"],  # retune per shape and masking (dtypes are added to the key by Triton)
    prune_configs_by={"early_config_prune": _prune_configs},
)
@triton.heuristics({
    "EVEN_M": lambda args: args["T_q"] % args["BLOCK_M"] == 0,  # no query-row masks on loads and stores
    "EVEN_N": lambda args: args["T_k"] % args["BLOCK_N"] == 0,  # no key masks anywhere
})
@triton.jit(do_not_specialize=["HEADS_PER_GROUP"])  # a run-time value: no recompiles when it changes
def _flash_fwd_kernel(Q, K, V, O, L,
                      stride_qb, stride_qh, stride_qt,
                      stride_kb, stride_kh, stride_kt,
                      stride_vb, stride_vh, stride_vt,
                      stride_ob, stride_oh, stride_ot,
                      H, T_q, T_k, qk_scale, HEADS_PER_GROUP,
                      HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      EVEN_M: tl.constexpr, EVEN_N: tl.constexpr):
    """O and L for BLOCK_M query rows of one (batch, head). Grid: (cdiv(T_q, BLOCK_M) * B * H,).

    The last dimension of every tensor is contiguous (the launcher makes it so). L is [B, H, T_q]
    contiguous float32.
    """
    # One flat grid axis (axis 0 allows 2**31 - 1 programs; axes 1 and 2 only 65535, too few for B * H).
    # Programs walk groups of HEADS_PER_GROUP (batch, head) pairs. Inside a group: the LAST query
    # block of each of its heads first (causal: the most key blocks), then the block before, ...:
    # heaviest first, so the short blocks fill the tail. The launcher sizes a group so that its
    # heads' K and V fit in L2 together (1 head when not causal: one head's blocks share its K, V).
    num_m = tl.cdiv(T_q, BLOCK_M)
    BH = tl.num_programs(0) // num_m
    pid = tl.program_id(0)
    first_bh = (pid // (HEADS_PER_GROUP * num_m)) * HEADS_PER_GROUP
    group_size = tl.minimum(BH - first_bh, HEADS_PER_GROUP)  # the last group may be smaller
    local = pid - first_bh * num_m
    pid_m = num_m - 1 - local // group_size
    off_bh = first_bh + local % group_size
    off_bh = off_bh.to(tl.int64)  # int64 before multiplying by strides: no overflow past 2**31 elements
    off_b = off_bh // H
    off_h = off_bh % H
    q_base = Q + off_b * stride_qb + off_h * stride_qh
    k_base = K + off_b * stride_kb + off_h * stride_kh
    v_base = V + off_b * stride_vb + off_h * stride_vh
    o_base = O + off_b * stride_ob + off_h * stride_oh
    l_base = L + off_bh * T_q

    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    q_ptrs = q_base + offs_m[:, None] * stride_qt + offs_d[None, :]
    if EVEN_M:
        q = tl.load(q_ptrs)  # EVEN: no mask
    else:
        q = tl.load(q_ptrs, mask=offs_m[:, None] < T_q, other=0.0)  # padded rows read 0 and are never stored

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # fp32 running max (scaled, base 2)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # fp32 running sum of exp2
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # fp32 unnormalised output

    # Stage 1: key blocks that exist in full and that every row of this block may see: no masks.
    # Causal (top-left): keys < start_m are visible to all rows >= start_m; start_m is a multiple of
    # BLOCK_N because BLOCK_M % BLOCK_N == 0. Both ends are cut to the last full key block.
    full_end = (T_k // BLOCK_N) * BLOCK_N
    if IS_CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, T_k)  # keys past the block's last row are never computed
        stage1_end = tl.minimum(start_m, full_end)
    else:
        hi = T_k
        stage1_end = full_end
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, offs_m, offs_n, offs_d,
                                    0, stage1_end, T_k, qk_scale,
                                    False, IS_CAUSAL, EVEN_N, BLOCK_N, HEAD_DIM)
    # Stage 2: the diagonal block(s) (BLOCK_M / BLOCK_N of them) and/or the ragged last key block,
    # with the masks. Compiled out when there is nothing to mask (non-causal with T_k % BLOCK_N == 0).
    if IS_CAUSAL or not EVEN_N:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, offs_m, offs_n, offs_d,
                                        stage1_end, hi, T_k, qk_scale,
                                        True, IS_CAUSAL, EVEN_N, BLOCK_N, HEAD_DIM)

    inv_l = 1.0 / l_i  # l >= 1 for every real row (its max term is exp2(0)); one division per row, not per element
    out = acc * inv_l[:, None]
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453  # natural-log logsumexp: (m2 + log2 l) * ln 2
    o_ptrs = o_base + offs_m[:, None] * stride_ot + offs_d[None, :]
    if EVEN_M:
        tl.store(o_ptrs, out.to(O.dtype.element_ty))  # EVEN: no mask
        tl.store(l_base + offs_m, lse)
    else:
        tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=offs_m[:, None] < T_q)
        tl.store(l_base + offs_m, lse, mask=offs_m < T_q)


_L2_BUDGET_BYTES = 16 * 2**20  # of the H100's 50 MB (A100: 40 MB) L2, what one group's K and V may take


def _heads_per_group(BH: int, T_k: int, d: int, element_size: int, is_causal: bool) -> int:
    """How many (batch, head) pairs the kernel walks together, heaviest query blocks first.

    Causal: as many heads as keep their K and V in L2 at once. (H100, fp16, B*T=16384, H=16: all
    256 heads at once at T=1024 re-read K, V from memory, 19% slower at d=64 and 49% at d=128; one
    head at a time loses 3-10% of the heaviest-first gain.) Not causal: every block has the same
    work, so one head at a time, whose query blocks then share its K and V in L2.
    """
    if not is_causal:
        return 1
    return max(1, min(BH, _L2_BUDGET_BYTES // (2 * T_k * d * element_size)))


def flash_attention_fast(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool = False,
                         scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2 forward: softmax(scale * Q K^T [+ causal mask]) V without the score matrix.

    Args:
        Q: [B, H, T_q, d]; K, V: [B, H, T_k, d]. float16, bfloat16 or float32 (tf32 dots) on a
            GPU; float32 in the interpreter. d must be 16, 32, 64 or 128; T_q, T_k >= 1; any strides.
        is_causal: query i attends to keys 0..i (top-left, as F.scaled_dot_product_attention).
        scale: multiplies the scores; 1/sqrt(d) when None.

    Returns:
        (O [B, H, T_q, d] in Q's dtype, L [B, H, T_q] float32: natural-log logsumexp of each row of scaled scores)
    """
    if Q.dim() != 4 or K.dim() != 4 or V.dim() != 4:
        raise ValueError(f"expected 4-d Q, K, V [B, H, T, d], got {tuple(Q.shape)}, {tuple(K.shape)}, {tuple(V.shape)}")
    B, H, T_q, d = Q.shape
    T_k = K.shape[2]
    if K.shape != (B, H, T_k, d) or V.shape != K.shape:
        raise ValueError(f"expected Q [B, H, T_q, d] and K, V [B, H, T_k, d], got {tuple(Q.shape)}, {tuple(K.shape)}, {tuple(V.shape)}")
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head dim d must be 16, 32, 64 or 128 (a power of two the tiles use unpadded), got {d}")
    if T_q < 1 or T_k < 1:
        raise ValueError(f"sequence lengths must be at least 1, got T_q={T_q}, T_k={T_k}")
    if not (Q.dtype == K.dtype == V.dtype):
        raise ValueError(f"Q, K, V must share a dtype, got {Q.dtype}, {K.dtype}, {V.dtype}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if scale < 0:  # the kernel's max trick needs a positive scale: (-s) q.k == s (-q).k
        Q, scale = -Q, -scale
    # The kernel assumes unit stride along d (coalesced 16-byte loads); other strides are passed through.
    Q, K, V = (t if t.stride(-1) == 1 else t.contiguous() for t in (Q, K, V))
    O = torch.empty((B, H, T_q, d), device=Q.device, dtype=Q.dtype)
    L = torch.empty((B, H, T_q), device=Q.device, dtype=torch.float32)
    qk_scale = scale * 1.4426950408889634  # scale * log2(e), once: scores go straight to base-2 units
    if O.numel() == 0:  # B == 0 or H == 0: nothing to launch
        return O, L

    def grid(meta):
        return (triton.cdiv(T_q, meta["BLOCK_M"]) * B * H,)

    _flash_fwd_kernel[grid](
        Q, K, V, O, L,
        Q.stride(0), Q.stride(1), Q.stride(2),
        K.stride(0), K.stride(1), K.stride(2),
        V.stride(0), V.stride(1), V.stride(2),
        O.stride(0), O.stride(1), O.stride(2),
        H, T_q, T_k, qk_scale, _heads_per_group(B * H, T_k, d, Q.element_size(), bool(is_causal)),
        HEAD_DIM=d, IS_CAUSAL=bool(is_causal),
    )
    return O, L
