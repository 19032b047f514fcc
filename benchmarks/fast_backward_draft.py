"""A draft of notebook 08's fast FlashAttention-2 backward in Triton, to become the solution's showcase.

The companion of notebook 07's ``fast_attention_kernel`` (the solution's section 6), in its style:
autotuned tiles with a pruner that drops the tiles that spill at a head dim, EVEN_M/EVEN_N heuristics,
loops split so that only the diagonal and ragged blocks pay for masks, exp2 with scale*log2(e) folded in.
Three kernels, no atomics:

    backward_preprocess_kernel  D = rowsum(dO * O), float32 [B, H, T_q]
    fast_dkdv_kernel            dK, dV: a program per key block, K and V loaded once, a loop over query blocks
    fast_dq_kernel              dQ: a program per query block, Q, dO, L and D loaded once, a loop over key blocks

Written without a GPU: checked against PyTorch's autograd in Triton's interpreter (float32) and
compiled for sm_80, sm_89 and sm_90 on the CPU (tests/test_fast_backward_draft.py). Not yet timed on a
GPU: the tile lists and FAST_BWD_TILES_THAT_SPILL come from ptxas, not from measurements.

    flash_attention_backward_fast(Q, K, V, O, dO, L, is_causal=False, scale=None) -> (dQ, dK, dV)
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the checkout's course_utils

from course_utils.kernels import launch, tl, triton

Tile = tuple[int, int, int, int]  # (BLOCK_M, BLOCK_N, num_warps, num_stages)

# BLOCK_M is always a query tile and BLOCK_N a key tile. The dK/dV kernel owns BLOCK_N keys and steps
# through queries BLOCK_M at a time: BLOCK_N % BLOCK_M == 0, so the diagonal is whole query steps. The dQ
# kernel owns BLOCK_M queries and steps through keys: BLOCK_M % BLOCK_N == 0. Owned tiles are the big ones
# (their fp32 accumulators stay in registers); steps are small, since each step holds four score-sized tiles.
DKDV_TILES: list[Tile] = [
    (32, 128, 4, 2),
    (32, 128, 4, 3),
    (32, 128, 8, 3),
    (64, 128, 8, 2),
    (16, 64, 4, 3),
    (32, 64, 4, 2),
    (32, 64, 4, 3),
    (64, 64, 4, 2),
]
DQ_TILES: list[Tile] = [
    (128, 32, 4, 2),
    (128, 32, 8, 3),
    (128, 64, 8, 2),
    (64, 16, 4, 3),
    (64, 32, 4, 2),
    (64, 32, 4, 3),
    (64, 64, 4, 2),
]
# Tiles that spill registers at a head dim, found with ptxas -v (sm_80, sm_89, sm_90a; fp16 and bf16;
# causal with a ragged T, the build with every loop stage). The pruner drops them.
DKDV_TILES_THAT_SPILL: dict[int, set[Tile]] = {16: set(), 32: set(), 64: set(), 128: set()}
DQ_TILES_THAT_SPILL: dict[int, set[Tile]] = {16: set(), 32: set(), 64: set(), 128: set()}


def configs_of(tiles: list[Tile]) -> list[Any]:
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in tiles]


# The interpreter ignores warps and stages, and with one config the autotuner never times anything.
CPU_CONFIGS = [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=1, num_stages=1)]
ON_GPU = torch.cuda.is_available()
L2_BUDGET_BYTES = 16 * 2**20  # as notebook 07's forward: what one group of heads' re-read tensors may take
PREPROCESS_ROWS = 64  # rows of dO and O per preprocess program on a GPU (16 in the interpreter)
LOG2E = 1.4426950408889634


def tile_of(config: Any) -> Tile:
    """Returns: (BLOCK_M, BLOCK_N, num_warps, num_stages) of an autotuning config."""
    return config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.num_warps, config.num_stages


def _prune(configs: list[Any], spill: dict[int, set[Tile]], d: int, owned: str, length: int) -> list[Any]:
    """The configs that do not spill at head dim d, without owned tiles far longer than the sequence."""
    fits = [c for c in configs if tile_of(c) not in spill[d]] or configs  # never empty: a spill is slow, not wrong
    short = [c for c in fits if c.kwargs[owned] <= max(64, triton.next_power_of_2(length))]
    return short or fits


def prune_dkdv_configs(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
    """The dK/dV autotuner's pre-filter. Returns: the configs worth timing (never empty)."""
    args = {**named_args, **kwargs}
    return _prune(configs, DKDV_TILES_THAT_SPILL, args["HEAD_DIM"], "BLOCK_N", args["T_k"])


def prune_dq_configs(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
    """The dQ autotuner's pre-filter. Returns: the configs worth timing (never empty)."""
    args = {**named_args, **kwargs}
    return _prune(configs, DQ_TILES_THAT_SPILL, args["HEAD_DIM"], "BLOCK_M", args["T_q"])


@triton.jit
def block_and_head(pid, num_blocks, BH, HEADS_PER_GROUP, HEAVY_LAST: tl.constexpr):
    """Which block of which (batch, head) program ``pid`` takes, as notebook 07's forward orders them.

    Programs walk groups of HEADS_PER_GROUP heads, all of a group's first blocks, then its second: a group's
    re-read tensors stay in L2. Causal, the heaviest blocks go first so that light ones fill the tail: the
    first key blocks for dK/dV (every query sees them), the last query blocks for dQ (HEAVY_LAST).

    Returns:
        (block index, 64-bit flat (batch, head) index).
    """
    first_bh = (pid // (HEADS_PER_GROUP * num_blocks)) * HEADS_PER_GROUP
    group_size = tl.minimum(BH - first_bh, HEADS_PER_GROUP)  # the last group may be smaller
    local = pid - first_bh * num_blocks
    block = local // group_size
    if HEAVY_LAST:
        block = num_blocks - 1 - block
    return block, (first_bh + local % group_size).to(tl.int64)  # 64-bit before any stride product


@triton.jit
def backward_preprocess_kernel(
    O,
    dO,
    D,
    stride_ob,
    stride_oh,
    stride_ot,
    stride_dob,
    stride_doh,
    stride_dot,
    H,
    T_q,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """D = rowsum(dO * O) in float32 for BLOCK_M rows of one (batch, head). Grid: (cdiv(T_q, BLOCK_M) * B * H,).

    Both kernels after it need D; here O and dO are read once and never copied to float32 in full.
    """
    num_m = tl.cdiv(T_q, BLOCK_M)
    pid = tl.program_id(0)
    off_bh = (pid // num_m).to(tl.int64)
    off_b = off_bh // H
    off_h = off_bh % H
    rows = (pid % num_m) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    in_bounds = rows < T_q
    o = tl.load(O + off_b * stride_ob + off_h * stride_oh + rows[:, None] * stride_ot + offs_d[None, :], mask=in_bounds[:, None], other=0.0)
    do = tl.load(
        dO + off_b * stride_dob + off_h * stride_doh + rows[:, None] * stride_dot + offs_d[None, :], mask=in_bounds[:, None], other=0.0
    )
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(D + off_bh * T_q + rows, delta, mask=in_bounds)


@triton.jit
def fast_dkdv_inner(
    dk,
    dv,
    k,
    v,
    q_base,
    do_base,
    l_base,
    d_base,
    stride_qt,
    stride_dot,
    offs_m,
    keys,
    offs_d,
    lo,
    hi,
    T_q,
    qk_scale,
    CAUSAL_MASK: tl.constexpr,
    BOUNDS_MASK: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Adds query blocks [lo, hi) to one key block's dK and dV (unscaled: dK takes the scale once, at the end).

    Score tiles are transposed (keys x queries), so that dV += P^T dO and dK += dS^T Q need no transpose.
    CAUSAL_MASK: the diagonal blocks, where key j counts for query i only if j <= i.
    BOUNDS_MASK: the ragged last query block. Its missing rows load Q = dO = L = D = 0, which makes their
    P^T column 1 and their dS^T column 0: they add exactly nothing, with no mask on the tiles. Padded key
    rows need no mask either: a row of dK or dV depends on its own key only, and is never stored.

    Returns:
        (dk, dv), [BLOCK_N, HEAD_DIM] float32.
    """
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)  # rows BLOCK_M-aligned: vector loads
        rows = start_m + offs_m
        q_ptrs = q_base + rows[:, None] * stride_qt + offs_d[None, :]
        do_ptrs = do_base + rows[:, None] * stride_dot + offs_d[None, :]
        if BOUNDS_MASK:
            q = tl.load(q_ptrs, mask=rows[:, None] < T_q, other=0.0)
            lse = tl.load(l_base + rows, mask=rows < T_q, other=0.0)
        else:
            q = tl.load(q_ptrs)
            lse = tl.load(l_base + rows)
        qkT = tl.dot(k, tl.trans(q))  # [BLOCK_N, BLOCK_M] raw k.q, fp32 sums on the tensor cores
        pT = tl.exp2(qkT * qk_scale - (lse * 1.4426950408889634)[None, :])  # the forward's P, rebuilt from L
        if CAUSAL_MASK:
            pT = tl.where(keys[:, None] <= rows[None, :], pT, 0.0)  # a select, not a product: inf above the diagonal is dropped
        if BOUNDS_MASK:
            do = tl.load(do_ptrs, mask=rows[:, None] < T_q, other=0.0)
            delta = tl.load(d_base + rows, mask=rows < T_q, other=0.0)
        else:
            do = tl.load(do_ptrs)
            delta = tl.load(d_base + rows)
        dv += tl.dot(pT.to(do.dtype), do)  # dV += P^T dO, P in the inputs' dtype for the tensor cores
        dpT = tl.dot(v, tl.trans(do))  # dP^T = V dO^T
        dsT = pT * (dpT - delta[None, :])  # dS = P * (dP - D): softmax's backward
        dk += tl.dot(dsT.to(q.dtype), q)  # dK += dS^T Q
    return dk, dv


@triton.autotune(
    configs=configs_of(DKDV_TILES) if ON_GPU else CPU_CONFIGS,
    key=["T_q", "T_k", "HEAD_DIM", "IS_CAUSAL"],  # timed again for each shape and masking (Triton adds the dtypes)
    prune_configs_by={"early_config_prune": prune_dkdv_configs},
)
@triton.heuristics(
    {
        "EVEN_M": lambda args: args["T_q"] % args["BLOCK_M"] == 0,  # no query-row masks on the loop's loads
        "EVEN_N": lambda args: args["T_k"] % args["BLOCK_N"] == 0,  # no key masks on K, V, dK, dV
    }
)
@triton.jit(do_not_specialize=["HEADS_PER_GROUP"])  # a run-time value: changing it does not recompile
def fast_dkdv_kernel(
    Q,
    K,
    V,
    dO,
    L,
    D,
    dK,
    dV,
    stride_qb,
    stride_qh,
    stride_qt,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_dob,
    stride_doh,
    stride_dot,
    H,
    T_q,
    T_k,
    qk_scale,
    scale,
    HEADS_PER_GROUP,
    HEAD_DIM: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """dK and dV for BLOCK_N key rows of one (batch, head). Grid: (cdiv(T_k, BLOCK_N) * B * H,).

    Args:
        Q, K, V, dO: [B, H, T, d] with unit stride along d; L, D: [B, H, T_q] contiguous float32;
        dK, dV: contiguous like K. qk_scale = scale * log2(e).

    Returns:
        Nothing: writes its rows of dK and dV.
    """
    num_n = tl.cdiv(T_k, BLOCK_N)
    pid_n, off_bh = block_and_head(tl.program_id(0), num_n, tl.num_programs(0) // num_n, HEADS_PER_GROUP, False)
    off_b = off_bh // H
    off_h = off_bh % H
    q_base = Q + off_b * stride_qb + off_h * stride_qh
    do_base = dO + off_b * stride_dob + off_h * stride_doh
    l_base = L + off_bh * T_q
    d_base = D + off_bh * T_q

    start_n = pid_n * BLOCK_N
    keys = start_n + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    k_ptrs = K + off_b * stride_kb + off_h * stride_kh + keys[:, None] * stride_kt + offs_d[None, :]
    v_ptrs = V + off_b * stride_vb + off_h * stride_vh + keys[:, None] * stride_vt + offs_d[None, :]
    if EVEN_N:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    else:
        k = tl.load(k_ptrs, mask=keys[:, None] < T_k, other=0.0)
        v = tl.load(v_ptrs, mask=keys[:, None] < T_k, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)

    # Stage 1, causal: the query blocks that cross this key block's diagonal, with the causal mask. Queries
    # before start_n see none of its keys and are skipped; start_n is a multiple of BLOCK_M (BLOCK_N % BLOCK_M == 0).
    full_end = (T_q // BLOCK_M) * BLOCK_M
    lo = 0
    if IS_CAUSAL:
        lo = start_n + BLOCK_N
        dk, dv = fast_dkdv_inner(
            dk,
            dv,
            k,
            v,
            q_base,
            do_base,
            l_base,
            d_base,
            stride_qt,
            stride_dot,
            offs_m,
            keys,
            offs_d,
            start_n,
            tl.minimum(lo, T_q),
            T_q,
            qk_scale,
            True,
            not EVEN_M,
            BLOCK_M,
        )
    # Stage 2: whole query blocks that see every key of this block: no masks at all.
    dk, dv = fast_dkdv_inner(
        dk,
        dv,
        k,
        v,
        q_base,
        do_base,
        l_base,
        d_base,
        stride_qt,
        stride_dot,
        offs_m,
        keys,
        offs_d,
        lo,
        full_end,
        T_q,
        qk_scale,
        False,
        False,
        BLOCK_M,
    )
    # Stage 3: the ragged last query block, with a bounds mask. Compiled out when T_q % BLOCK_M == 0.
    if not EVEN_M:
        dk, dv = fast_dkdv_inner(
            dk,
            dv,
            k,
            v,
            q_base,
            do_base,
            l_base,
            d_base,
            stride_qt,
            stride_dot,
            offs_m,
            keys,
            offs_d,
            tl.maximum(lo, full_end),
            T_q,
            T_q,
            qk_scale,
            False,
            True,
            BLOCK_M,
        )

    dk = dk * scale  # dS is d(loss)/d(scaled score): dK = scale * dS^T Q, scaled once
    dk_ptrs = dK + off_bh * T_k * HEAD_DIM + keys[:, None] * HEAD_DIM + offs_d[None, :]
    dv_ptrs = dV + off_bh * T_k * HEAD_DIM + keys[:, None] * HEAD_DIM + offs_d[None, :]
    if EVEN_N:
        tl.store(dk_ptrs, dk.to(dK.dtype.element_ty))
        tl.store(dv_ptrs, dv.to(dV.dtype.element_ty))
    else:
        tl.store(dk_ptrs, dk.to(dK.dtype.element_ty), mask=keys[:, None] < T_k)
        tl.store(dv_ptrs, dv.to(dV.dtype.element_ty), mask=keys[:, None] < T_k)


@triton.jit
def fast_dq_inner(
    dq,
    q,
    do,
    lse2,
    delta,
    k_base,
    v_base,
    stride_kt,
    stride_vt,
    rows,
    offs_n,
    offs_d,
    lo,
    hi,
    T_k,
    qk_scale,
    MASKED: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    EVEN_N: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Adds key blocks [lo, hi) to one query block's dQ (unscaled).

    MASKED=False: every key in [lo, hi) exists and every row may see it: no masks.
    MASKED=True: the diagonal block(s) and the ragged last key block: the causal mask and the T_k bound.
    A missing key loads K = V = 0; its P is set to 0, since exp2(-L) alone may overflow and 0 * inf is NaN.

    Returns:
        dq, [BLOCK_M, HEAD_DIM] float32.
    """
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        keys = start_n + offs_n
        k_ptrs = k_base + keys[:, None] * stride_kt + offs_d[None, :]
        v_ptrs = v_base + keys[:, None] * stride_vt + offs_d[None, :]
        if MASKED and not EVEN_N:
            k = tl.load(k_ptrs, mask=keys[:, None] < T_k, other=0.0)  # only the ragged stage pays a bounds mask
            v = tl.load(v_ptrs, mask=keys[:, None] < T_k, other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        qk = tl.dot(q, tl.trans(k))  # [BLOCK_M, BLOCK_N]
        p = tl.exp2(qk * qk_scale - lse2[:, None])  # the forward's P, rebuilt from L (base 2)
        if MASKED:
            allowed = keys[None, :] < T_k
            if IS_CAUSAL:
                allowed = allowed & (keys[None, :] <= rows[:, None])  # top-left: query i sees keys 0..i
            p = tl.where(allowed, p, 0.0)
        dp = tl.dot(do, tl.trans(v))  # dP = dO V^T
        ds = p * (dp - delta[:, None])  # dS = P * (dP - D)
        dq += tl.dot(ds.to(k.dtype), k)  # dQ += dS K
    return dq


@triton.autotune(
    configs=configs_of(DQ_TILES) if ON_GPU else CPU_CONFIGS,
    key=["T_q", "T_k", "HEAD_DIM", "IS_CAUSAL"],
    prune_configs_by={"early_config_prune": prune_dq_configs},
)
@triton.heuristics(
    {
        "EVEN_M": lambda args: args["T_q"] % args["BLOCK_M"] == 0,
        "EVEN_N": lambda args: args["T_k"] % args["BLOCK_N"] == 0,
    }
)
@triton.jit(do_not_specialize=["HEADS_PER_GROUP"])
def fast_dq_kernel(
    Q,
    K,
    V,
    dO,
    L,
    D,
    dQ,
    stride_qb,
    stride_qh,
    stride_qt,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_dob,
    stride_doh,
    stride_dot,
    H,
    T_q,
    T_k,
    qk_scale,
    scale,
    HEADS_PER_GROUP,
    HEAD_DIM: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """dQ for BLOCK_M query rows of one (batch, head). Grid: (cdiv(T_q, BLOCK_M) * B * H,).

    Args:
        as fast_dkdv_kernel's; dQ: contiguous like Q.

    Returns:
        Nothing: writes its rows of dQ.
    """
    num_m = tl.cdiv(T_q, BLOCK_M)
    pid_m, off_bh = block_and_head(tl.program_id(0), num_m, tl.num_programs(0) // num_m, HEADS_PER_GROUP, IS_CAUSAL)
    off_b = off_bh // H
    off_h = off_bh % H
    k_base = K + off_b * stride_kb + off_h * stride_kh
    v_base = V + off_b * stride_vb + off_h * stride_vh

    start_m = pid_m * BLOCK_M
    rows = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + rows[:, None] * stride_qt + offs_d[None, :]
    do_ptrs = dO + off_b * stride_dob + off_h * stride_doh + rows[:, None] * stride_dot + offs_d[None, :]
    if EVEN_M:
        q = tl.load(q_ptrs)
        do = tl.load(do_ptrs)
        lse = tl.load(L + off_bh * T_q + rows)
        delta = tl.load(D + off_bh * T_q + rows)
    else:  # missing rows read 0, stay finite (P = 1, dS = 0) and are never stored
        q = tl.load(q_ptrs, mask=rows[:, None] < T_q, other=0.0)
        do = tl.load(do_ptrs, mask=rows[:, None] < T_q, other=0.0)
        lse = tl.load(L + off_bh * T_q + rows, mask=rows < T_q, other=0.0)
        delta = tl.load(D + off_bh * T_q + rows, mask=rows < T_q, other=0.0)
    lse2 = lse * 1.4426950408889634  # L in base-2 units, once per row
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # Stage 1: whole key blocks every row may see, no masks; causal, keys < start_m (a multiple of BLOCK_N).
    # Stage 2: the diagonal block(s) and the ragged last key block, with masks; compiled out when there is
    # nothing to mask. Causal, keys past the block's last row are never touched.
    full_end = (T_k // BLOCK_N) * BLOCK_N
    if IS_CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, T_k)
        stage1_end = tl.minimum(start_m, full_end)
    else:
        hi = T_k
        stage1_end = full_end
    dq = fast_dq_inner(
        dq,
        q,
        do,
        lse2,
        delta,
        k_base,
        v_base,
        stride_kt,
        stride_vt,
        rows,
        offs_n,
        offs_d,
        0,
        stage1_end,
        T_k,
        qk_scale,
        False,
        IS_CAUSAL,
        EVEN_N,
        BLOCK_N,
    )
    if IS_CAUSAL or not EVEN_N:
        dq = fast_dq_inner(
            dq,
            q,
            do,
            lse2,
            delta,
            k_base,
            v_base,
            stride_kt,
            stride_vt,
            rows,
            offs_n,
            offs_d,
            stage1_end,
            hi,
            T_k,
            qk_scale,
            True,
            IS_CAUSAL,
            EVEN_N,
            BLOCK_N,
        )

    dq = dq * scale
    dq_ptrs = dQ + off_bh * T_q * HEAD_DIM + rows[:, None] * HEAD_DIM + offs_d[None, :]
    if EVEN_M:
        tl.store(dq_ptrs, dq.to(dQ.dtype.element_ty))
    else:
        tl.store(dq_ptrs, dq.to(dQ.dtype.element_ty), mask=rows[:, None] < T_q)


def heads_per_group(BH: int, reread_bytes_per_head: int, is_causal: bool) -> int:
    """How many (batch, head) pairs a kernel walks together (notebook 07's rule, for what each kernel re-reads).

    Returns:
        int, between 1 and BH: 1 when not causal (every block has the same work: one head at a time shares
        its tensors in L2), else as many heads as keep their re-read tensors in L2 at once.
    """
    if not is_causal:
        return 1
    return max(1, min(BH, L2_BUDGET_BYTES // max(1, reread_bytes_per_head)))


def flash_attention_backward_fast(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    O: torch.Tensor,
    dO: torch.Tensor,
    L: torch.Tensor,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2 backward, tuned: the same gradients as notebook 08's flash_attention_backward_triton.

    Args:
        Q: [B, H, T_q, d]; K, V: [B, H, T_k, d]: the forward's inputs, one dtype: float16, bfloat16 or
            float32 (TF32 dots) on a GPU, float32 in the interpreter. d is 16, 32, 64 or 128; any strides.
        O, dO: [B, H, T_q, d]: the forward's output and the loss's gradient with respect to it.
        L: [B, H, T_q] float32: the forward's natural-log logsumexp of each row of scaled scores.
        is_causal: query i attends to keys 0..i (top-left, as F.scaled_dot_product_attention).
        scale: multiplies the scores; 1/sqrt(d) when None. Any sign: nothing here relies on a max.

    Returns:
        (dQ [B, H, T_q, d], dK [B, H, T_k, d], dV [B, H, T_k, d]), contiguous, in the inputs' dtype.
    """
    B, H, T_q, d = Q.shape
    T_k = K.shape[2]
    if K.shape != (B, H, T_k, d) or V.shape != K.shape:
        raise ValueError(f"expected Q [B, H, T_q, d] and K, V [B, H, T_k, d], got {tuple(Q.shape)}, {tuple(K.shape)}, {tuple(V.shape)}")
    if O.shape != Q.shape or dO.shape != Q.shape or tuple(L.shape) != (B, H, T_q):
        raise ValueError(f"expected O, dO shaped like Q and L [B, H, T_q], got {tuple(O.shape)}, {tuple(dO.shape)}, {tuple(L.shape)}")
    if d not in DKDV_TILES_THAT_SPILL:
        raise ValueError(f"head dim d must be 16, 32, 64 or 128 (tiles use it unpadded), got {d}")
    if T_q < 1 or T_k < 1 or len({t.dtype for t in (Q, K, V, O, dO)}) != 1:
        raise ValueError(f"need T_q, T_k >= 1 and one dtype, got T_q={T_q}, T_k={T_k}, {[str(t.dtype) for t in (Q, K, V, O, dO)]}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    Q, K, V, O, dO = (t if t.stride(-1) == 1 else t.contiguous() for t in (Q, K, V, O, dO))  # unit stride along d
    L = L.to(torch.float32).contiguous()  # read as a flat [B * H, T_q]
    dQ = torch.empty((B, H, T_q, d), device=Q.device, dtype=Q.dtype)
    dK = torch.empty((B, H, T_k, d), device=K.device, dtype=K.dtype)
    dV = torch.empty((B, H, T_k, d), device=V.device, dtype=V.dtype)
    if dQ.numel() == 0:
        return dQ, dK, dV
    D = torch.empty((B, H, T_q), device=Q.device, dtype=torch.float32)
    rows = PREPROCESS_ROWS if ON_GPU else 16
    launch(
        backward_preprocess_kernel,
        (triton.cdiv(T_q, rows) * B * H,),
        O,
        dO,
        D,
        *O.stride()[:3],
        *dO.stride()[:3],
        H,
        T_q,
        HEAD_DIM=d,
        BLOCK_M=rows,
    )

    strides = (*Q.stride()[:3], *K.stride()[:3], *V.stride()[:3], *dO.stride()[:3])
    element = Q.element_size()
    qk_scale = scale * LOG2E  # once: scores go straight to base-2 units
    # dK/dV re-reads Q and dO (and L, D) for every key block; dQ re-reads K and V for every query block.
    launch(
        fast_dkdv_kernel,
        lambda meta: (triton.cdiv(T_k, meta["BLOCK_N"]) * B * H,),
        Q,
        K,
        V,
        dO,
        L,
        D,
        dK,
        dV,
        *strides,
        H,
        T_q,
        T_k,
        qk_scale,
        scale,
        heads_per_group(B * H, T_q * (2 * d * element + 8), bool(is_causal)),
        HEAD_DIM=d,
        IS_CAUSAL=bool(is_causal),
    )
    launch(
        fast_dq_kernel,
        lambda meta: (triton.cdiv(T_q, meta["BLOCK_M"]) * B * H,),
        Q,
        K,
        V,
        dO,
        L,
        D,
        dQ,
        *strides,
        H,
        T_q,
        T_k,
        qk_scale,
        scale,
        heads_per_group(B * H, T_k * 2 * d * element, bool(is_causal)),
        HEAD_DIM=d,
        IS_CAUSAL=bool(is_causal),
    )
    return dQ, dK, dV
