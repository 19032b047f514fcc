# Ungraded: the solution's showcase. The released notebook replaces this cell with a note.
### BEGIN SOLUTION
# (BLOCK_M, BLOCK_N, num_warps, num_stages). In both kernels BLOCK_M counts query rows and BLOCK_N key rows.
# The dK/dV kernel owns BLOCK_N keys and steps through the queries BLOCK_M at a time; the dQ kernel owns
# BLOCK_M queries and steps through the keys BLOCK_N at a time. The owned block is the tall one: its fp32
# accumulators (dK and dV, or dQ) stay in registers for the whole loop, while each step holds four
# [owned, step] fp32 tiles (S, P, dP, dS), so the step is short. The causal diagonal must be whole steps:
# BLOCK_N % BLOCK_M == 0 for dK/dV, BLOCK_M % BLOCK_N == 0 for dQ.
DKDV_TILES = [
    (16, 64, 4, 3),
    (16, 128, 8, 3),
    (32, 64, 4, 3),
    (32, 128, 8, 2),
    (32, 128, 8, 3),
    (32, 128, 8, 4),
    (64, 64, 8, 3),
    (64, 128, 8, 2),
    (64, 128, 8, 3),
]
DQ_TILES = [
    (64, 32, 4, 3),
    (64, 64, 4, 3),
    (128, 16, 8, 3),
    (128, 32, 4, 3),
    (128, 32, 8, 2),
    (128, 32, 8, 3),
    (128, 32, 8, 4),
    (128, 64, 8, 2),
    (128, 64, 8, 3),
]
# The tiles the pruners drop, by GPU family and head dim: they spill registers, or need more shared memory
# than the family's smallest GPU gives a program. "sm_8x": A100 (sm_80, 163 KiB), L4 and RTX 40 (sm_89, 99 KiB)
# and RTX 30 (sm_86, taken as sm_89), whose products are mma.sync; "sm_90": H100 and H200 (227 KiB), whose
# products are wgmma and need fewer registers. Found by compiling every tile ahead of time for sm_80, sm_89 and
# sm_90a (ptxas -v; fp16 and bf16, causal and not, a ragged T so that every stage of both loops is built):
# tests/test_kernels.py compiles every tile the pruners keep. A GPU of another family drops the tiles of both.
DKDV_TILES_THAT_DO_NOT_FIT = {
    ("sm_8x", 16): set(),
    ("sm_8x", 32): set(),
    ("sm_8x", 64): {(64, 128, 8, 2), (64, 128, 8, 3), (64, 64, 8, 3)},
    ("sm_8x", 128): {(64, 128, 8, 2), (64, 128, 8, 3), (32, 128, 8, 2), (32, 128, 8, 3), (32, 128, 8, 4), (64, 64, 8, 3), (32, 64, 4, 3)},
    ("sm_90", 16): set(),
    ("sm_90", 32): set(),
    ("sm_90", 64): set(),
    ("sm_90", 128): {(64, 128, 8, 2), (64, 128, 8, 3)},
}
DQ_TILES_THAT_DO_NOT_FIT = {
    ("sm_8x", 16): set(),
    ("sm_8x", 32): {(128, 64, 8, 2)},
    ("sm_8x", 64): set(),
    ("sm_8x", 128): {(128, 64, 8, 2), (128, 64, 8, 3), (64, 64, 4, 3), (128, 32, 4, 3), (128, 32, 8, 4)},
    ("sm_90", 16): set(),
    ("sm_90", 32): set(),
    ("sm_90", 64): set(),
    ("sm_90", 128): {(64, 64, 4, 3), (128, 32, 4, 3)},
}
HEAD_DIMS = (16, 32, 64, 128)
# The interpreter ignores warps and stages, and with one config the autotuner never times anything.
BACKWARD_CPU_CONFIGS = [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=1, num_stages=1)]
BACKWARD_L2_BUDGET_BYTES = 16 * 2**20  # as the forward's: what one group of heads' re-read rows may take in L2


def tile_configs(tiles: list[tuple[int, int, int, int]]) -> list:
    """Returns: one autotuning config per (BLOCK_M, BLOCK_N, num_warps, num_stages) tile."""
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in tiles]


DKDV_GPU_CONFIGS = tile_configs(DKDV_TILES)
DQ_GPU_CONFIGS = tile_configs(DQ_TILES)


def tile_of(config) -> tuple[int, int, int, int]:
    """Returns: (BLOCK_M, BLOCK_N, num_warps, num_stages) of an autotuning config."""
    return config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.num_warps, config.num_stages


def gpu_family(tensor: torch.Tensor) -> str:
    """Returns: the family whose tile table applies on the GPU holding ``tensor``: "sm_90", "sm_8x" or "other"."""
    major, minor = torch.cuda.get_device_capability(tensor.device)
    return "sm_90" if (major, minor) == (9, 0) else ("sm_8x" if major == 8 else "other")


def tiles_that_do_not_fit(table: dict, family: str, d: int) -> set:
    """Returns: the set of tiles to drop for this family at head dim d (another family: both families' tiles)."""
    if family in ("sm_8x", "sm_90"):
        return table[family, d]
    return table["sm_8x", d] | table["sm_90", d]


def keep_tiles(configs: list, do_not_fit: set, owned: str, length: int) -> list:
    """The configs that fit, without owned blocks far longer than the sequence they own a part of.

    Returns:
        The configs worth timing (never an empty list).
    """
    fits = [c for c in configs if tile_of(c) not in do_not_fit] or configs
    short = [c for c in fits if c.kwargs[owned] <= max(64, triton.next_power_of_2(length))]
    return short or fits


def prune_dkdv_configs(configs, named_args, **kwargs):
    """The dK/dV autotuner's pre-filter: the tiles that fit this GPU at this head dim, owned key blocks not far past T_k.

    Returns:
        The configs worth timing (never an empty list).
    """
    args = {**named_args, **kwargs}
    do_not_fit = tiles_that_do_not_fit(DKDV_TILES_THAT_DO_NOT_FIT, gpu_family(args["Q"]), args["HEAD_DIM"])
    return keep_tiles(configs, do_not_fit, "BLOCK_N", args["T_k"])


def prune_dq_configs(configs, named_args, **kwargs):
    """The dQ autotuner's pre-filter: the tiles that fit this GPU at this head dim, owned query blocks not far past T_q.

    Returns:
        The configs worth timing (never an empty list).
    """
    args = {**named_args, **kwargs}
    do_not_fit = tiles_that_do_not_fit(DQ_TILES_THAT_DO_NOT_FIT, gpu_family(args["Q"]), args["HEAD_DIM"])
    return keep_tiles(configs, do_not_fit, "BLOCK_M", args["T_q"])


@triton.jit
def block_and_head(pid, num_blocks, BH, HEADS_PER_GROUP, HEAVY_LAST: tl.constexpr):
    """Which owned block of which (batch, head) program ``pid`` takes, as the forward's grid orders them.

    Programs walk groups of HEADS_PER_GROUP heads: the group's first blocks, then its second ones, so that
    the rows the group's programs re-read stay in L2. Causal, the heaviest blocks go first and the light ones
    fill the tail: the first key blocks for dK/dV (every query sees them), the last query blocks for dQ
    (HEAVY_LAST: they see every key).

    Returns:
        (the owned block's index, the flat (batch, head) index in 64 bits).
    """
    first_bh = (pid // (HEADS_PER_GROUP * num_blocks)) * HEADS_PER_GROUP
    group_size = tl.minimum(BH - first_bh, HEADS_PER_GROUP)  # the last group may be smaller
    local = pid - first_bh * num_blocks
    block = local // group_size
    if HEAVY_LAST:
        block = num_blocks - 1 - block
    return block, (first_bh + local % group_size).to(tl.int64)  # 64-bit before any stride product


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
    """Adds key blocks [lo, hi) to one query block's dQ (without the scale: it is applied once, at the end).

    MASKED=False: every key in [lo, hi) exists and every row may see it: no masks at all.
    MASKED=True: the diagonal block(s) and the ragged last key block: the causal mask and the T_k bound.
    A missing key loads K = V = 0; its P is selected away, since exp2(-L) alone may overflow and 0 * inf is NaN.

    Returns:
        dq, [BLOCK_M, HEAD_DIM] float32.
    """
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)  # the rows are BLOCK_N-aligned: vector loads
        keys = start_n + offs_n
        k_ptrs = k_base + keys[:, None] * stride_kt + offs_d[None, :]  # [BLOCK_N, d], contiguous in d
        v_ptrs = v_base + keys[:, None] * stride_vt + offs_d[None, :]
        if MASKED and not EVEN_N:
            k = tl.load(k_ptrs, mask=keys[:, None] < T_k, other=0.0)  # only the masked stage pays a bounds mask
            v = tl.load(v_ptrs, mask=keys[:, None] < T_k, other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        qk = tl.dot(q, tl.trans(k))  # [BLOCK_M, BLOCK_N] raw q.k, fp32 sums on the tensor cores
        p = tl.exp2(qk * qk_scale - lse2[:, None])  # the forward's P, rebuilt from L: one FMA and an exp2 a score
        if MASKED:
            allowed = keys[None, :] < T_k
            if IS_CAUSAL:
                allowed = allowed & (keys[None, :] <= rows[:, None])  # top-left: query i sees keys 0..i
            p = tl.where(allowed, p, 0.0)  # a select, not a product: an inf above the diagonal is dropped
        dp = tl.dot(do, tl.trans(v))  # dP = dO V^T
        ds = p * (dp - delta[:, None])  # dS = P * (dP - D): softmax's backward
        dq += tl.dot(ds.to(k.dtype), k)  # dQ += dS K, dS in the inputs' dtype for the tensor cores
    return dq


@triton.autotune(
    configs=DQ_GPU_CONFIGS if KERNELS_NATIVE else BACKWARD_CPU_CONFIGS,
    key=["T_q", "T_k", "HEAD_DIM", "IS_CAUSAL"],  # timed again for each shape and masking (Triton adds the dtypes)
    prune_configs_by={"early_config_prune": prune_dq_configs},
)
@triton.heuristics(
    {
        "EVEN_M": lambda args: args["T_q"] % args["BLOCK_M"] == 0,  # no query-row masks on loads and stores
        "EVEN_N": lambda args: args["T_k"] % args["BLOCK_N"] == 0,  # no key masks anywhere
    }
)
@triton.jit(do_not_specialize=["HEADS_PER_GROUP"])  # a run-time value: changing it does not recompile
def fast_dq_kernel(
    Q,
    K,
    V,
    O,
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
    stride_ob,
    stride_oh,
    stride_ot,
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
    """dQ, and D = rowsum(dO * O), for BLOCK_M query rows of one (batch, head). Grid: (cdiv(T_q, BLOCK_M) * B * H,).

    Args:
        Q, K, V, O, dO: [B, H, T, d] with unit stride along d; L: [B, H, T_q] contiguous float32, the forward's
            natural-log logsumexp; D: [B, H, T_q] contiguous float32, written here for the dK/dV kernel;
            dQ: [B, H, T_q, d] contiguous. qk_scale = scale * log2(e).

    Returns:
        Nothing: writes its rows of dQ and D.
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
    o_ptrs = O + off_b * stride_ob + off_h * stride_oh + rows[:, None] * stride_ot + offs_d[None, :]
    do_ptrs = dO + off_b * stride_dob + off_h * stride_doh + rows[:, None] * stride_dot + offs_d[None, :]
    if EVEN_M:
        q = tl.load(q_ptrs)
        o = tl.load(o_ptrs)
        do = tl.load(do_ptrs)
        lse = tl.load(L + off_bh * T_q + rows)
    else:  # missing rows read 0 and stay finite (P = 1, dS = 0); they are never stored
        q = tl.load(q_ptrs, mask=rows[:, None] < T_q, other=0.0)
        o = tl.load(o_ptrs, mask=rows[:, None] < T_q, other=0.0)
        do = tl.load(do_ptrs, mask=rows[:, None] < T_q, other=0.0)
        lse = tl.load(L + off_bh * T_q + rows, mask=rows < T_q, other=0.0)
    # The preprocess, fused: this program already holds its rows of dO and needs exactly their D. It writes
    # them for the dK/dV kernel, launched after this one.
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    if EVEN_M:
        tl.store(D + off_bh * T_q + rows, delta)
    else:
        tl.store(D + off_bh * T_q + rows, delta, mask=rows < T_q)
    lse2 = lse * 1.4426950408889634  # L in base-2 units, once per row
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # Stage 1: whole key blocks that every row may see: no masks. Causal (top-left): keys < start_m, a multiple
    # of BLOCK_N because BLOCK_M % BLOCK_N == 0. Both ends are cut to the last whole key block.
    # Stage 2: the diagonal block(s) and the ragged last key block, with masks; compiled out when there is
    # nothing to mask (not causal, and T_k a multiple of BLOCK_N). Causal, keys past the block's last row
    # are never read.
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

    dq = dq * scale  # dS is d(loss)/d(scaled score): dQ = scale * dS K, scaled once
    dq_ptrs = dQ + off_bh * T_q * HEAD_DIM + rows[:, None] * HEAD_DIM + offs_d[None, :]
    if EVEN_M:
        tl.store(dq_ptrs, dq.to(dQ.dtype.element_ty))
    else:
        tl.store(dq_ptrs, dq.to(dQ.dtype.element_ty), mask=rows[:, None] < T_q)


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
    """Adds query blocks [lo, hi) to one key block's dK and dV (dK without the scale: applied once, at the end).

    The score tiles are transposed (keys x queries), so that dV += P^T dO and dK += dS^T Q need no transpose.
    CAUSAL_MASK: the diagonal blocks, where key j counts for query i only if j <= i.
    BOUNDS_MASK: the ragged last query block. Its missing rows load Q = dO = L = D = 0, which makes their
    column of P^T 1 and of dS^T 0: they add exactly nothing, with no mask on the tiles. Missing key rows need
    no mask either: a row of dK or dV depends on its own key only, and is never stored.

    Returns:
        (dk, dv), [BLOCK_N, HEAD_DIM] float32 each.
    """
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)  # the rows are BLOCK_M-aligned: vector loads
        rows = start_m + offs_m
        q_ptrs = q_base + rows[:, None] * stride_qt + offs_d[None, :]
        do_ptrs = do_base + rows[:, None] * stride_dot + offs_d[None, :]
        if BOUNDS_MASK:
            q = tl.load(q_ptrs, mask=rows[:, None] < T_q, other=0.0)
            lse = tl.load(l_base + rows, mask=rows < T_q, other=0.0)
        else:
            q = tl.load(q_ptrs)
            lse = tl.load(l_base + rows)
        qkT = tl.dot(k, tl.trans(q))  # [BLOCK_N, BLOCK_M] raw k.q
        pT = tl.exp2(qkT * qk_scale - (lse * 1.4426950408889634)[None, :])  # the forward's P^T, rebuilt from L
        if CAUSAL_MASK:
            pT = tl.where(keys[:, None] <= rows[None, :], pT, 0.0)  # a select: an inf above the diagonal is dropped
        if BOUNDS_MASK:
            do = tl.load(do_ptrs, mask=rows[:, None] < T_q, other=0.0)
            delta = tl.load(d_base + rows, mask=rows < T_q, other=0.0)
        else:
            do = tl.load(do_ptrs)
            delta = tl.load(d_base + rows)
        dv += tl.dot(pT.to(do.dtype), do)  # dV += P^T dO
        dpT = tl.dot(v, tl.trans(do))  # dP^T = V dO^T
        dsT = pT * (dpT - delta[None, :])  # dS = P * (dP - D)
        dk += tl.dot(dsT.to(q.dtype), q)  # dK += dS^T Q
    return dk, dv


@triton.autotune(
    configs=DKDV_GPU_CONFIGS if KERNELS_NATIVE else BACKWARD_CPU_CONFIGS,
    key=["T_q", "T_k", "HEAD_DIM", "IS_CAUSAL"],
    prune_configs_by={"early_config_prune": prune_dkdv_configs},
)
@triton.heuristics(
    {
        "EVEN_M": lambda args: args["T_q"] % args["BLOCK_M"] == 0,  # no query-row masks on the loop's loads
        "EVEN_N": lambda args: args["T_k"] % args["BLOCK_N"] == 0,  # no key masks on K, V, dK, dV
    }
)
@triton.jit(do_not_specialize=["HEADS_PER_GROUP"])
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
        Q, K, V, dO: [B, H, T, d] with unit stride along d; L, D: [B, H, T_q] contiguous float32 (D from the
            dQ kernel); dK, dV: [B, H, T_k, d] contiguous. qk_scale = scale * log2(e).

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

    # Stage 1, causal only: the query blocks on this key block's diagonal, with the causal mask. Queries before
    # start_n see none of its keys and are never read; start_n is a multiple of BLOCK_M (BLOCK_N % BLOCK_M == 0).
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
    # Stage 3: the ragged last query block, with a bounds mask; compiled out when T_q % BLOCK_M == 0.
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

    dk = dk * scale  # dK = scale * dS^T Q, scaled once
    dk_ptrs = dK + off_bh * T_k * HEAD_DIM + keys[:, None] * HEAD_DIM + offs_d[None, :]
    dv_ptrs = dV + off_bh * T_k * HEAD_DIM + keys[:, None] * HEAD_DIM + offs_d[None, :]
    if EVEN_N:
        tl.store(dk_ptrs, dk.to(dK.dtype.element_ty))
        tl.store(dv_ptrs, dv.to(dV.dtype.element_ty))
    else:
        tl.store(dk_ptrs, dk.to(dK.dtype.element_ty), mask=keys[:, None] < T_k)
        tl.store(dv_ptrs, dv.to(dV.dtype.element_ty), mask=keys[:, None] < T_k)


def backward_heads_per_group(BH: int, reread_bytes_per_head: int, is_causal: bool) -> int:
    """How many (batch, head) pairs a backward kernel walks together: the forward's rule, for what it re-reads.

    Returns:
        int, between 1 and BH: 1 when not causal (every block has the same work, and one head at a time shares
        its rows in L2), else as many heads as keep their re-read rows in L2 at once.
    """
    if not is_causal:
        return 1
    return max(1, min(BH, BACKWARD_L2_BUDGET_BYTES // max(1, reread_bytes_per_head)))


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
    """FlashAttention-2 backward, tuned: the same gradients as flash_attention_backward_triton.

    Args:
        Q: [B, H, T_q, d]; K, V: [B, H, T_k, d]: the forward's inputs, one dtype: float16, bfloat16 or float32
            (TF32 products) on a GPU, float32 in the interpreter. d is 16, 32, 64 or 128; any strides.
        O, dO: [B, H, T_q, d]: the forward's output and the loss's gradient with respect to it.
        L: [B, H, T_q]: the forward's natural-log logsumexp of each row of scaled scores (float32).
        is_causal: query i attends to keys 0..i (top-left, as F.scaled_dot_product_attention).
        scale: multiplies the scores; 1/sqrt(d) when None. Any sign: nothing here takes a max.

    Returns:
        (dQ [B, H, T_q, d], dK [B, H, T_k, d], dV [B, H, T_k, d]), contiguous, in the inputs' dtype.

    Raises:
        ValueError: for shapes that do not match, a head dim the tiles do not take, or mixed dtypes.
    """
    B, H, T_q, d = Q.shape
    T_k = K.shape[2]
    if K.shape != (B, H, T_k, d) or V.shape != K.shape:
        raise ValueError(f"expected Q [B, H, T_q, d] and K, V [B, H, T_k, d], got {tuple(Q.shape)}, {tuple(K.shape)}, {tuple(V.shape)}")
    if O.shape != Q.shape or dO.shape != Q.shape or tuple(L.shape) != (B, H, T_q):
        raise ValueError(f"expected O, dO shaped like Q and L [B, H, T_q], got {tuple(O.shape)}, {tuple(dO.shape)}, {tuple(L.shape)}")
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim d must be 16, 32, 64 or 128 (the tiles use it unpadded), got {d}")
    if T_q < 1 or T_k < 1 or len({t.dtype for t in (Q, K, V, O, dO)}) != 1:
        raise ValueError(f"need T_q, T_k >= 1 and one dtype, got T_q={T_q}, T_k={T_k}, {[str(t.dtype) for t in (Q, K, V, O, dO)]}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    Q, K, V, O, dO = (t if t.stride(-1) == 1 else t.contiguous() for t in (Q, K, V, O, dO))  # unit stride along d
    L = L.to(torch.float32).contiguous()  # read as a flat [B * H, T_q]
    dQ = torch.empty((B, H, T_q, d), device=Q.device, dtype=Q.dtype)
    dK = torch.empty((B, H, T_k, d), device=K.device, dtype=K.dtype)
    dV = torch.empty((B, H, T_k, d), device=V.device, dtype=V.dtype)
    if B * H == 0:
        return dQ, dK, dV
    D = torch.empty((B, H, T_q), device=Q.device, dtype=torch.float32)  # rowsum(dO * O): the dQ kernel writes it
    qk_scale = scale * 1.4426950408889634  # scale * log2(e), once: scores go straight to base-2 units
    element = Q.element_size()
    # dQ first: it writes D, which the dK/dV kernel reads. Each re-reads other rows for every block it owns:
    # dQ the keys and values, dK/dV the queries, dO, L and D; a causal group of heads keeps them in L2.
    launch(
        fast_dq_kernel,
        lambda meta: (triton.cdiv(T_q, meta["BLOCK_M"]) * B * H,),
        Q,
        K,
        V,
        O,
        dO,
        L,
        D,
        dQ,
        *Q.stride()[:3],
        *K.stride()[:3],
        *V.stride()[:3],
        *O.stride()[:3],
        *dO.stride()[:3],
        H,
        T_q,
        T_k,
        qk_scale,
        scale,
        backward_heads_per_group(B * H, T_k * 2 * d * element, bool(is_causal)),
        HEAD_DIM=d,
        IS_CAUSAL=bool(is_causal),
    )
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
        *Q.stride()[:3],
        *K.stride()[:3],
        *V.stride()[:3],
        *dO.stride()[:3],
        H,
        T_q,
        T_k,
        qk_scale,
        scale,
        backward_heads_per_group(B * H, T_q * (2 * d * element + 8), bool(is_causal)),
        HEAD_DIM=d,
        IS_CAUSAL=bool(is_causal),
    )
    return dQ, dK, dV


### END SOLUTION
