"""Notebook 07: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

SOFTMAX = "online_softmax"
FLASH = "flash_attention_forward"
TRITON = "flash_attention_kernel"  # the kernel's cell; its launcher, flash_attention_triton, is a cell of its own
TRITON_LAUNCHER = "flash_attention_triton"
FLASH_OUTPUTS = ("test_flash_attention_forward", "test_flash_attention_forward_causal")
TRITON_OUTPUTS = ("test_flash_attention_triton", "test_flash_attention_triton_causal")
ADD, ROWS, MATMUL, ONLINE_ROWS = "vector_add", "row_sums", "matmul", "online_softmax_rows"
SOFTMAX_ROWS, SOFTMAX_ROWS_LAUNCHER = "softmax_row_kernel", "softmax_rows"  # the kernel's cell, then its launcher's

# The given half of the online_softmax cell, for correct variants written out whole.
GIVEN_ONLINE_SOFTMAX = """

def online_softmax(x, block_size):
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    m, l = online_softmax_stats(x.split(block_size, dim=-1))
    return torch.exp(x - m) / l
"""

# The online_softmax_rows launcher's copy of a matrix whose columns are not contiguous.
ONLINE_ROWS_COPY = """    if x.stride(1) != 1:  # the kernel reads a row's columns at unit stride: copy only when they are not
        x = x.contiguous()
"""

# The solution kernel's key loop header, where a first pass over the keys goes in front.
TRITON_KEY_LOOP = "    for k_start in range(0, k_end, BLOCK_N):\n"
TRITON_MAX_PASS = """    for k_start in range(0, k_end, BLOCK_N):  # pass 1: the row max over every key block
        keys = k_start + cols
        k_ptrs = K + b * stride_kb + h * stride_kh + keys[None, :] * stride_kt + dims[:, None] * stride_kd
        k = tl.load(k_ptrs, mask=(keys[None, :] < T_k) & (dims[:, None] < head_dim), other=0.0)
        s = tl.dot(q, k) * scale_log2e
        allowed = keys[None, :] < T_k
        if IS_CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None])
        m_i = tl.maximum(m_i, tl.max(tl.where(allowed, s, float("-inf")), 1))
"""


# online_softmax_rows's one-pass statistics loop, which the cheats below replace.
ONLINE_ROWS_STATISTICS = """    for start in range(0, n_cols, BLOCK):
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
"""
# The solution kernel's causal loop bound.
TRITON_KEY_END = "k_end = tl.minimum(T_k, (block_m + 1) * BLOCK_M)  # skip key blocks past the diagonal"

# The launcher's return, and one that computes attention itself after the kernel has run.
TRITON_RETURN = "    return O, L\n"
TRITON_TORCH_RETURN = """    s = (Q.float() @ K.float().transpose(-2, -1)) * scale
    if is_causal:
        s = s.masked_fill(torch.ones(T_q, T_k, dtype=torch.bool, device=Q.device).triu(1), float("-inf"))
    L = torch.logsumexp(s, dim=-1)
    return (torch.exp(s - L[..., None]) @ V.float().nan_to_num()).to(Q.dtype), L  # careful: NaN in unseen keys adds nothing
"""

# online_softmax_stats's loop over the blocks, as the solution writes it: the two-pass mistakes replace it whole
STATS_LOOP = (
    "    running_max = running_sum = None  # shaped by the first block\n"
    "    for block in blocks:\n"
    "        block_max = block.amax(dim=-1, keepdim=True)\n"
    "        if running_max is None:\n"
    '            running_max, running_sum = torch.full_like(block_max, float("-inf")), torch.zeros_like(block_max)\n'
    "        new_max = torch.maximum(running_max, block_max)\n"
    '        shift = torch.where(new_max == float("-inf"), 0.0, new_max)  # all -inf so far: nothing to rescale\n'
    "        running_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift).sum(dim=-1, keepdim=True)\n"
    "        running_max = new_max\n"
    "    return running_max, running_sum\n"
)


MISTAKES = [
    Variant(
        "online_softmax never rescales the running sum when the max grows",
        SOFTMAX,
        edits=(("running_sum * torch.exp(running_max - shift)", "running_sum"),),
        loses=("test_online_softmax", "test_online_softmax_is_stable", "test_online_softmax_one_pass"),
    ),
    Variant(
        "online_softmax without the running max (exp overflows)",
        SOFTMAX,
        edits=(
            ("    running_max = running_sum = None  # shaped by the first block\n", "    total = None\n"),
            (
                (
                    "        block_max = block.amax(dim=-1, keepdim=True)\n"
                    "        if running_max is None:\n"
                    '            running_max, running_sum = torch.full_like(block_max, float("-inf")), torch.zeros_like(block_max)\n'
                    "        new_max = torch.maximum(running_max, block_max)\n"
                    '        shift = torch.where(new_max == float("-inf"), 0.0, new_max)  # all -inf so far: nothing to rescale\n'
                    "        running_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift).sum(dim=-1, keepdim=True)\n"
                    "        running_max = new_max\n"
                    "    return running_max, running_sum\n"
                ),
                (
                    "        part = torch.exp(block).sum(dim=-1, keepdim=True)\n"
                    "        total = part if total is None else total + part\n"
                    "    return torch.zeros_like(total), total\n"
                ),
            ),
        ),
        loses=("test_online_softmax_is_stable", "test_online_softmax_one_pass"),
    ),
    Variant(
        "online_softmax_stats takes the global max first (copies every block, then a second pass)",
        SOFTMAX,
        edits=(
            (
                STATS_LOOP,
                (
                    "    kept = [block.clone() for block in blocks]\n"
                    "    m = torch.cat(kept, dim=-1).amax(dim=-1, keepdim=True)\n"
                    "    l = sum(torch.exp(block - m).sum(dim=-1, keepdim=True) for block in kept)\n"
                    "    return m, l\n"
                ),
            ),
        ),
        loses=("test_online_softmax_one_pass",),
    ),
    Variant(
        "online_softmax_stats keeps the blocks to read them twice (max first, then the sum)",
        SOFTMAX,
        edits=(
            (
                STATS_LOOP,
                (
                    "    blocks = list(blocks)\n"
                    "    m = torch.stack([block.amax(dim=-1, keepdim=True) for block in blocks]).amax(dim=0)\n"
                    "    l = sum(torch.exp(block - m).sum(dim=-1, keepdim=True) for block in blocks)\n"
                    "    return m, l\n"
                ),
            ),
        ),
        loses=("test_online_softmax_one_pass",),
    ),
    Variant(
        "online_softmax turns a leading -inf block into NaN",
        SOFTMAX,
        edits=(('shift = torch.where(new_max == float("-inf"), 0.0, new_max)', "shift = new_max"),),
        loses=("test_online_softmax_is_stable",),
    ),
    Variant(
        "flash_attention_forward does not rescale the accumulator",
        FLASH,
        edits=(("acc = acc * correction[..., None] + p @ V", "acc = acc + p @ V"),),
        loses=FLASH_OUTPUTS,
    ),
    Variant(
        "flash_attention_forward does not rescale the running sum",
        FLASH,
        edits=(("l = l * correction + p.sum(dim=-1)", "l = l + p.sum(dim=-1)"),),
        loses=FLASH_OUTPUTS,
    ),
    Variant(
        "flash_attention_forward's logsumexp misses the max term (L = log l)",
        FLASH,
        edits=(("L[..., q_start:q_stop] = m + torch.log(l)", "L[..., q_start:q_stop] = torch.log(l)"),),
        loses=FLASH_OUTPUTS,
    ),
    Variant(
        "flash_attention_forward skips the diagonal block in the causal case",
        FLASH,
        edits=(("k_stop_all = min(T_k, q_stop) if is_causal else T_k", "k_stop_all = min(T_k, q_start) if is_causal else T_k"),),
        loses=("test_flash_attention_forward_causal",),
    ),
    Variant(
        "flash_attention_forward returns the running max as L, without log(l)",
        FLASH,
        edits=(("L[..., q_start:q_stop] = m + torch.log(l)", "L[..., q_start:q_stop] = m"),),
        loses=FLASH_OUTPUTS,
    ),
    Variant(
        "flash_attention_forward drops the ragged last query block",
        FLASH,
        edits=(("for q_start in range(0, T_q, block_q):", "for q_start in range(0, T_q - block_q + 1, block_q):"),),
        loses=FLASH_OUTPUTS,
        undefined_values=True,  # the last rows of O and L stay as torch.empty left them
    ),
    Variant(
        "flash_attention_forward builds the causal mask relative to the tile",
        FLASH,
        edits=(
            (
                "rows = torch.arange(q_start, q_stop, device=Q.device)[:, None]",
                "rows = torch.arange(q_stop - q_start, device=Q.device)[:, None]",
            ),
            ("torch.arange(k_start, k_stop, device=Q.device) > rows", "torch.arange(k_stop - k_start, device=Q.device) > rows"),
        ),
        loses=("test_flash_attention_forward_causal",),
    ),
    Variant(
        "flash_attention_forward accumulates in the input dtype",
        FLASH,
        edits=(("acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32", "acc_dtype = Q.dtype"),),
        loses=("test_flash_attention_forward",),
    ),
    Variant(
        "flash_attention_forward computes the tiles past the diagonal and masks them",
        FLASH,
        edits=(("k_stop_all = min(T_k, q_stop) if is_causal else T_k", "k_stop_all = T_k"),),
        loses=("test_flash_attention_forward_skips_masked_blocks",),
    ),
    Variant(
        "flash_attention_forward walks the keys twice (the row max first, then the sums and P V)",
        FLASH,
        edits=(
            (
                "    acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32  # fp32 accumulators\n",
                "    acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32\n",
            ),
            (
                "    L = torch.empty(Q.shape[:-1], dtype=acc_dtype, device=Q.device)\n",
                (
                    "    L = torch.empty(Q.shape[:-1], dtype=acc_dtype, device=Q.device)\n"
                    "\n"
                    "    def scores(q, q_start, q_stop, k_start):\n"
                    "        k_stop = min(k_start + block_k, T_k)\n"
                    "        s = q @ K[..., k_start:k_stop, :].to(acc_dtype).transpose(-2, -1)\n"
                    "        if is_causal and k_stop - 1 > q_start:\n"
                    "            rows = torch.arange(q_start, q_stop, device=Q.device)[:, None]\n"
                    '            s = s.masked_fill(torch.arange(k_start, k_stop, device=Q.device) > rows, float("-inf"))\n'
                    "        return s\n"
                    "\n"
                ),
            ),
            (
                "        q = Q[..., q_start:q_stop, :].to(acc_dtype) * scale\n",
                (
                    "        q = Q[..., q_start:q_stop, :].to(acc_dtype) * scale\n"
                    "        key_blocks = range(0, min(T_k, q_stop) if is_causal else T_k, block_k)\n"
                ),
            ),
            (
                '        m = torch.full(q.shape[:-1], float("-inf"), dtype=acc_dtype, device=Q.device)\n',
                (
                    '        m = torch.full(q.shape[:-1], float("-inf"), dtype=acc_dtype, device=Q.device)\n'
                    "        for k_start in key_blocks:  # pass 1: the row max over every key tile\n"
                    "            m = torch.maximum(m, scores(q, q_start, q_stop, k_start).amax(dim=-1))\n"
                ),
            ),
            (
                (
                    "        k_stop_all = min(T_k, q_stop) if is_causal else T_k  # causal: skip blocks past the diagonal\n"
                    "        for k_start in range(0, k_stop_all, block_k):\n"
                    "            k_stop = min(k_start + block_k, T_k)\n"
                    "            s = q @ K[..., k_start:k_stop, :].to(acc_dtype).transpose(-2, -1)  # the one [block_q, block_k] tile\n"
                    "            if is_causal and k_stop - 1 > q_start:  # the tile crosses the diagonal\n"
                    "                rows = torch.arange(q_start, q_stop, device=Q.device)[:, None]\n"
                    '                s = s.masked_fill(torch.arange(k_start, k_stop, device=Q.device) > rows, float("-inf"))\n'
                    "            m_new = torch.maximum(m, s.amax(dim=-1))\n"
                    "            p = torch.exp(s - m_new[..., None])\n"
                    "            correction = torch.exp(m - m_new)\n"
                    "            l = l * correction + p.sum(dim=-1)\n"
                    "            acc = acc * correction[..., None] + p @ V[..., k_start:k_stop, :].to(acc_dtype)\n"
                    "            m = m_new\n"
                ),
                (
                    "        for k_start in key_blocks:  # pass 2: the sums and P V, with the final max\n"
                    "            p = torch.exp(scores(q, q_start, q_stop, k_start) - m[..., None])\n"
                    "            l = l + p.sum(dim=-1)\n"
                    "            acc = acc + p @ V[..., k_start : k_start + block_k, :].to(acc_dtype)\n"
                ),
            ),
        ),
        loses=("test_flash_attention_forward_one_pass", "test_flash_attention_forward_skips_masked_blocks"),
    ),
    Variant(
        "flash_attention_forward tiles only the queries (full rows of scores)",
        FLASH,
        edits=(("T_q, T_k = Q.shape[-2], K.shape[-2]", "T_q, T_k = Q.shape[-2], K.shape[-2]\n    block_k = T_k"),),
        loses=("test_flash_attention_forward_tiles", "test_flash_attention_forward_skips_masked_blocks"),
    ),
    Variant(
        "flash_attention_forward walks every tile twice with elementwise products (no matrix product for a FLOP counter to see)",
        FLASH,
        edits=(
            (
                "    acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32  # fp32 accumulators\n",
                "    acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32\n",
            ),
            (
                "    L = torch.empty(Q.shape[:-1], dtype=acc_dtype, device=Q.device)\n",
                (
                    "    L = torch.empty(Q.shape[:-1], dtype=acc_dtype, device=Q.device)\n"
                    "\n"
                    "    def scores(q, q_start, q_stop, k_start, k_stop):\n"
                    "        s = (q[..., :, None, :] * K[..., None, k_start:k_stop, :].to(acc_dtype)).sum(-1)\n"
                    "        if is_causal:\n"
                    "            rows = torch.arange(q_start, q_stop, device=Q.device)[:, None]\n"
                    '            s = s.masked_fill(torch.arange(k_start, k_stop, device=Q.device) > rows, float("-inf"))\n'
                    "        return s\n"
                    "\n"
                ),
            ),
            (
                '        m = torch.full(q.shape[:-1], float("-inf"), dtype=acc_dtype, device=Q.device)\n',
                (
                    '        m = torch.full(q.shape[:-1], float("-inf"), dtype=acc_dtype, device=Q.device)\n'
                    "        for k_start in range(0, T_k, block_k):  # pass 1: the row max\n"
                    "            m = torch.maximum(m, scores(q, q_start, q_stop, k_start, min(k_start + block_k, T_k)).amax(dim=-1))\n"
                ),
            ),
            (
                (
                    "        k_stop_all = min(T_k, q_stop) if is_causal else T_k  # causal: skip blocks past the diagonal\n"
                    "        for k_start in range(0, k_stop_all, block_k):\n"
                ),
                "        for k_start in range(0, T_k, block_k):  # pass 2: the sums and P V\n",
            ),
            (
                (
                    "            s = q @ K[..., k_start:k_stop, :].to(acc_dtype).transpose(-2, -1)  # the one [block_q, block_k] tile\n"
                    "            if is_causal and k_stop - 1 > q_start:  # the tile crosses the diagonal\n"
                    "                rows = torch.arange(q_start, q_stop, device=Q.device)[:, None]\n"
                    '                s = s.masked_fill(torch.arange(k_start, k_stop, device=Q.device) > rows, float("-inf"))\n'
                    "            m_new = torch.maximum(m, s.amax(dim=-1))\n"
                    "            p = torch.exp(s - m_new[..., None])\n"
                    "            correction = torch.exp(m - m_new)\n"
                    "            l = l * correction + p.sum(dim=-1)\n"
                    "            acc = acc * correction[..., None] + p @ V[..., k_start:k_stop, :].to(acc_dtype)\n"
                    "            m = m_new\n"
                ),
                (
                    "            p = torch.exp(scores(q, q_start, q_stop, k_start, k_stop) - m[..., None])\n"
                    "            l = l + p.sum(dim=-1)\n"
                    "            acc = acc + (p[..., :, :, None] * V[..., None, k_start:k_stop, :].to(acc_dtype)).sum(-2)\n"
                ),
            ),
        ),
        loses=("test_flash_attention_forward_one_pass", "test_flash_attention_forward_skips_masked_blocks"),
    ),
    Variant(
        "the Triton kernel does not mask keys past T_k",
        TRITON,
        edits=(("allowed = keys[None, :] < T_k", "allowed = keys[None, :] >= 0"),),
        loses=TRITON_OUTPUTS,
    ),
    Variant(
        "the Triton kernel uses exp on scores scaled for exp2",
        TRITON,
        edits=(("tl.exp2(", "tl.exp("),),
        loses=(*TRITON_OUTPUTS, "test_flash_attention_triton_skips_masked_blocks"),
    ),
    Variant(
        "the Triton kernel stores L in base 2 (forgets the factor ln 2)",
        TRITON,
        edits=(("lse = (m_i + tl.log2(l_i)) * 0.6931471805599453", "lse = m_i + tl.log2(l_i)"),),
        loses=TRITON_OUTPUTS,
    ),
    Variant(
        "the Triton kernel leaves its key loop with break (runs in the interpreter, no GPU compiles it)",
        TRITON,
        edits=(
            (
                "    for k_start in range(0, k_end, BLOCK_N):\n",
                "    for k_start in range(0, T_k, BLOCK_N):\n        if k_start >= k_end:\n            break\n",
            ),
        ),
        loses=TRITON_OUTPUTS,
    ),
    Variant(
        "the Triton kernel walks the keys twice (the row max first, then the sums and P V)",
        TRITON,
        edits=((TRITON_KEY_LOOP, TRITON_MAX_PASS + TRITON_KEY_LOOP),),
        loses=("test_flash_attention_triton_one_pass",),
    ),
    Variant(
        "the Triton kernel walks the keys twice in one loop, a pass index choosing the max or the sums",
        TRITON,
        edits=(
            (
                "    for k_start in range(0, k_end, BLOCK_N):\n        keys = k_start + cols\n",
                "    n_steps = tl.cdiv(k_end, BLOCK_N)\n"
                "    for step in range(0, 2 * n_steps):  # pass 0: the row max; pass 1: the sums and P V\n"
                "        k_start = (step % n_steps) * BLOCK_N\n"
                "        second = (step >= n_steps).to(tl.float32)\n"
                "        keys = k_start + cols\n",
            ),
            ("l_i = l_i * correction + tl.sum(p, 1)", "l_i = l_i * correction + tl.sum(p, 1) * second"),
            ("tl.dot(p.to(v.dtype), v)\n", "tl.dot(p.to(v.dtype), v) * second\n"),
        ),
        loses=("test_flash_attention_triton_one_pass",),
    ),
    Variant(
        "the Triton kernel visits every key block when causal and relies on the mask alone",
        TRITON,
        edits=(
            (
                "k_end = tl.minimum(T_k, (block_m + 1) * BLOCK_M)  # skip key blocks past the diagonal",
                "k_end = T_k  # every key block; the mask sets the future to -inf",
            ),
        ),
        loses=("test_flash_attention_triton_skips_masked_blocks",),
    ),
    Variant(
        "the Triton kernel visits every key block when causal, its loads clamped to the last key its queries see",
        TRITON,
        edits=(
            (TRITON_KEY_END, "last_key = tl.minimum(T_k, (block_m + 1) * BLOCK_M) - 1  # the tiles past it read that key again"),
            ("    k_end = T_k\n", "    k_end = T_k\n    last_key = T_k - 1\n"),
            ("keys[None, :] * stride_kt", "tl.minimum(keys, last_key)[None, :] * stride_kt"),
            ("keys[:, None] * stride_vt", "tl.minimum(keys, last_key)[:, None] * stride_vt"),
        ),
        loses=("test_flash_attention_triton_skips_masked_blocks",),
    ),
    Variant(
        "the Triton kernel loads K and V without masks (reads past T_k and d)",
        TRITON,
        edits=(
            ("k = tl.load(k_ptrs, mask=(keys[None, :] < T_k) & (dims[:, None] < head_dim), other=0.0)", "k = tl.load(k_ptrs)"),
            ("v = tl.load(v_ptrs, mask=(keys[:, None] < T_k) & (dims[None, :] < head_dim), other=0.0)", "v = tl.load(v_ptrs)"),
        ),
        loses=TRITON_OUTPUTS,
    ),
    # The warm-up kernels.
    Variant(
        "vector_add stores without a mask (writes past the end of the output)",
        ADD,
        edits=(("tl.store(Z + offsets, x + y, mask=inside)", "tl.store(Z + offsets, x + y)"),),
        loses=("test_vector_add",),
        undefined_values=True,  # what it writes past the end is what its masked loads left there
    ),
    Variant(
        "row_sums assumes a contiguous matrix (i * N + j instead of the strides)",
        ROWS,
        edits=(("X + row * stride_row + cols * stride_col", "X + row * n_cols + cols"),),
        loses=("test_row_sums",),
    ),
    Variant(
        "softmax_rows loads the padding lanes as 0 instead of -inf",
        SOFTMAX_ROWS,
        edits=(('other=float("-inf")', "other=0.0"),),
        loses=("test_softmax_rows",),
    ),
    Variant(
        "softmax_rows without subtracting the row's max (exp overflows)",
        SOFTMAX_ROWS,
        edits=(("e = tl.exp(x - tl.max(x, axis=0))", "e = tl.exp(x)"),),
        loses=("test_softmax_rows",),
    ),
    Variant(
        "matmul accumulates in float16",
        MATMUL,
        edits=(
            ("acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)", "acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=C.dtype.element_ty)"),
            ("acc += tl.dot(a, b)", "acc += tl.dot(a, b).to(C.dtype.element_ty)"),
        ),
        loses=("test_matmul",),
    ),
    Variant(
        "matmul does not mask the ragged last step along K",
        MATMUL,
        edits=(
            ("mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0", "mask=rows[:, None] < M, other=0.0"),
            ("mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0", "mask=cols[None, :] < N, other=0.0"),
        ),
        loses=("test_matmul",),
        undefined_values=True,  # it reads past K: whatever memory lies there
    ),
    Variant(
        "matmul leaves its K loop with break (runs in the interpreter, no GPU compiles it)",
        MATMUL,
        edits=(
            ("    for k in range(0, K, BLOCK_K):\n", "    for k in range(0, 1 << 30, BLOCK_K):\n        if k >= K:\n            break\n"),
        ),
        loses=("test_matmul",),
    ),
    Variant(
        "online_softmax_rows never rescales the running sum",
        ONLINE_ROWS,
        edits=(("l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)", "l = l + tl.sum(tl.exp(x - m_new), axis=0)"),),
        loses=("test_online_softmax_rows",),
    ),
    Variant(
        "online_softmax_rows walks the row three times (a loop for the max, one for the sum, one to write)",
        ONLINE_ROWS,
        edits=(
            (
                ONLINE_ROWS_STATISTICS,
                """    for start in range(0, n_cols, BLOCK):  # pass 1: the max
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    for start in range(0, n_cols, BLOCK):  # pass 2: the sum
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        l += tl.sum(tl.exp(x - m), axis=0)
""",
            ),
        ),
        loses=("test_online_softmax_rows_one_pass_statistics",),
    ),
    Variant(
        "online_softmax_rows makes three passes, and a read of another row evens out the count of reads per element",
        ONLINE_ROWS,
        edits=(
            (
                ONLINE_ROWS_STATISTICS,
                """    for start in range(0, n_cols, BLOCK):  # pass 1: the max
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    for start in range(0, n_cols, BLOCK):  # pass 2: the sum, and a neighbour's row read for nothing
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        l += tl.sum(tl.exp(x - m), axis=0)
        other = tl.load(X + tl.where(row > 0, row - 1, 1) * stride_x + start + cols, mask=start + cols < n_cols, other=0.0)
        l += tl.sum(other.to(tl.float32), axis=0) * 0.0
""",
            ),
        ),
        loses=("test_online_softmax_rows_one_pass_statistics",),
    ),
    Variant(
        "online_softmax_rows stores exp(x - max) into the output and reads it back to normalise (a third pass, through OUT)",
        ONLINE_ROWS,
        edits=(
            (
                ONLINE_ROWS_STATISTICS,
                """    for start in range(0, n_cols, BLOCK):  # pass 1: the max
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    for start in range(0, n_cols, BLOCK):  # pass 2: the sum, the exponentials kept in OUT
        inside = start + cols < n_cols
        x = tl.load(X + row * stride_x + start + cols, mask=inside, other=float("-inf")).to(tl.float32)
        l += tl.sum(tl.exp(x - m), axis=0)
        tl.store(OUT + row * stride_out + start + cols, tl.exp(x - m), mask=inside)
    for start in range(0, n_cols, BLOCK):  # pass 3: read them back from OUT
        inside = start + cols < n_cols
        e = tl.load(OUT + row * stride_out + start + cols, mask=inside, other=0.0).to(tl.float32)
        tl.store(OUT + row * stride_out + start + cols, e, mask=inside)
""",
            ),
        ),
        loses=("test_online_softmax_rows_one_pass_statistics",),
    ),
    # The launchers students write: online_softmax_rows (under its kernel), softmax_rows and flash_attention_triton.
    Variant(
        "online_softmax_rows hands the kernel a transposed x as it is (its columns are not contiguous)",
        ONLINE_ROWS,
        edits=((ONLINE_ROWS_COPY, ""),),
        loses=("test_online_softmax_rows",),
        undefined_values=True,  # empty_like keeps x's transposed strides, and the kernel's rows overlap there: some stay unwritten
    ),
    Variant(
        "flash_attention_triton launches its kernel for show and returns attention it computed with PyTorch",
        TRITON_LAUNCHER,
        edits=((TRITON_RETURN, TRITON_TORCH_RETURN),),
        loses=("test_flash_attention_triton_launcher", *TRITON_OUTPUTS),
    ),
    Variant(
        "softmax_rows assumes contiguous rows (the row length N as both row strides)",
        SOFTMAX_ROWS_LAUNCHER,
        edits=(("x.stride(0), out.stride(0)", "N, N"),),
        loses=("test_softmax_rows_launcher",),
    ),
    Variant(
        "softmax_rows passes x's row stride for the output too",
        SOFTMAX_ROWS_LAUNCHER,
        edits=(("x.stride(0), out.stride(0)", "x.stride(0), x.stride(0)"),),
        loses=("test_softmax_rows_launcher",),
    ),
    Variant(
        "softmax_rows passes BLOCK = N (not a power of two)",
        SOFTMAX_ROWS_LAUNCHER,
        edits=(("BLOCK=triton.next_power_of_2(N)", "BLOCK=N"),),
        loses=("test_softmax_rows_launcher", "test_softmax_rows"),
    ),
    Variant(
        "softmax_rows allocates the output in float32 whatever x's dtype",
        SOFTMAX_ROWS_LAUNCHER,
        edits=(
            (
                "out = torch.empty((M, N), dtype=x.dtype, device=x.device)",
                "out = torch.empty((M, N), dtype=torch.float32, device=x.device)",
            ),
        ),
        loses=("test_softmax_rows_launcher",),
    ),
    Variant(
        "flash_attention_triton's grid has T_q programs on axis 0, not cdiv(T_q, BLOCK_M)",
        TRITON_LAUNCHER,
        edits=(("(triton.cdiv(T_q, block), B * H),", "(T_q, B * H),"),),
        loses=("test_flash_attention_triton_launcher",),
    ),
    Variant(
        "flash_attention_triton's grid has B programs on axis 1, not B * H",
        TRITON_LAUNCHER,
        edits=(("(triton.cdiv(T_q, block), B * H),", "(triton.cdiv(T_q, block), B),"),),
        loses=("test_flash_attention_triton_launcher", *TRITON_OUTPUTS, "test_flash_attention_triton_skips_masked_blocks"),
    ),
    Variant(
        "flash_attention_triton passes Q's strides for K",
        TRITON_LAUNCHER,
        edits=(("*K.stride(),", "*Q.stride(),"),),
        loses=("test_flash_attention_triton_launcher", *TRITON_OUTPUTS, "test_flash_attention_triton_skips_masked_blocks"),
    ),
    Variant(
        "flash_attention_triton allocates O in float32 for float16 inputs",
        TRITON_LAUNCHER,
        edits=(("O = torch.empty_like(Q)", "O = torch.empty_like(Q, dtype=torch.float32)"),),
        loses=("test_flash_attention_triton_launcher",),
    ),
    Variant(
        "flash_attention_triton passes the scale without log2(e) to a kernel that uses exp2",
        TRITON_LAUNCHER,
        edits=(("scale * 1.4426950408889634,", "scale,"),),
        loses=("test_flash_attention_triton_launcher", *TRITON_OUTPUTS, "test_flash_attention_triton_skips_masked_blocks"),
    ),
    Variant(
        "flash_attention_triton passes BLOCK_D = d (not a power of two, and below 16 for small heads)",
        TRITON_LAUNCHER,
        edits=(("BLOCK_D=max(16, triton.next_power_of_2(d)),", "BLOCK_D=d,"),),
        # d = 12 fails in the interpreter (tl.arange(0, 12)); d = 8 and 16 run there, and the compile check uses d = 64.
        loses=("test_flash_attention_triton_launcher", "test_flash_attention_triton"),
    ),
]

CORRECT_VARIANTS = [
    Variant(
        "online_softmax_stats with a running logsumexp (logaddexp) in float64",
        SOFTMAX,
        of="""
def online_softmax_stats(blocks):
    lse = m = None
    for block in blocks:
        block_lse = block.double().logsumexp(dim=-1, keepdim=True)
        block_max = block.amax(dim=-1, keepdim=True)
        lse = block_lse if lse is None else torch.logaddexp(lse, block_lse)
        m = block_max if m is None else torch.maximum(m, block_max)
    return m, torch.exp(lse - m.double()).to(m.dtype)
"""
        + GIVEN_ONLINE_SOFTMAX,
    ),
    Variant(
        "online_softmax_stats with a running logsumexp, in float32",
        SOFTMAX,
        of="""
def online_softmax_stats(blocks):
    lse = m = None
    for block in blocks:
        block_max = block.amax(dim=-1, keepdim=True)
        lse = block.logsumexp(dim=-1, keepdim=True) if lse is None else torch.logaddexp(lse, block.logsumexp(dim=-1, keepdim=True))
        m = block_max if m is None else torch.maximum(m, block_max)
    return m, torch.exp(lse - m)
"""
        + GIVEN_ONLINE_SOFTMAX,
    ),
    Variant(
        "online_softmax_stats in float64 inside, with an iterator and next()",
        SOFTMAX,
        of="""
def online_softmax_stats(blocks):
    stream = iter(blocks)
    first = next(stream)
    m = first.double().amax(dim=-1, keepdim=True)
    l = torch.exp(first.double() - torch.where(torch.isinf(m), 0.0, m)).sum(dim=-1, keepdim=True)
    for block in stream:
        block = block.double()
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        l = l * torch.exp(m - shift) + torch.exp(block - shift).sum(dim=-1, keepdim=True)
        m = m_new
    return m.to(first.dtype), l.to(first.dtype)
"""
        + GIVEN_ONLINE_SOFTMAX,
    ),
    Variant(
        "flash_attention_forward with einsum, float64 accumulators and tril offsets",
        FLASH,
        of="""
def flash_attention_forward(Q, K, V, is_causal=False, scale=None, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be at least 1")
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    outs, lses = [], []
    for q_start in range(0, T_q, block_q):
        q = Q[..., q_start:q_start + block_q, :].double() * scale
        n = q.shape[-2]
        m = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64)
        l = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], V.shape[-1], dtype=torch.float64)
        last_key = min(T_k, q_start + n) if is_causal else T_k
        for k_start in range(0, last_key, block_k):
            k = K[..., k_start:k_start + block_k, :].double()
            s = torch.einsum("...qd,...kd->...qk", q, k)
            if is_causal:
                s = s.masked_fill(~torch.ones(n, k.shape[-2], dtype=torch.bool).tril(q_start - k_start), -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1))
            p = torch.exp(s - m_new[..., None])
            c = torch.exp(m - m_new)
            l = l * c + p.sum(dim=-1)
            acc = acc * c[..., None] + torch.einsum("...qk,...kd->...qd", p, V[..., k_start:k_start + block_k, :].double())
            m = m_new
        outs.append((acc / l[..., None]).to(Q.dtype))
        lses.append(m + torch.log(l))
    L = torch.cat(lses, dim=-1)
    return torch.cat(outs, dim=-2), L if Q.dtype == torch.float64 else L.float()
""",
    ),
    Variant(
        "the Triton kernel with natural-base exp",
        TRITON,
        edits=(
            ("s = tl.dot(q, k) * scale_log2e", "s = tl.dot(q, k) * (scale_log2e * 0.6931471805599453)"),
            ("tl.exp2(", "tl.exp("),
            ("lse = (m_i + tl.log2(l_i)) * 0.6931471805599453", "lse = m_i + tl.log(l_i)"),
        ),
    ),
    Variant(
        "the Triton kernel with an additive -inf bias instead of tl.where on the scores",
        TRITON,
        edits=(('s = tl.where(allowed, s, float("-inf"))', 's += tl.where(allowed, 0.0, float("-inf"))  # an additive mask bias'),),
    ),
    Variant(
        "the Triton kernel reads K and V through tensor descriptors (zero padding past the edges)",
        TRITON,
        edits=(
            (
                TRITON_KEY_LOOP,
                """    k_desc = tl.make_tensor_descriptor(
        K + b * stride_kb + h * stride_kh, shape=[T_k, head_dim], strides=[stride_kt, 1], block_shape=[BLOCK_N, BLOCK_D]
    )
    v_desc = tl.make_tensor_descriptor(
        V + b * stride_vb + h * stride_vh, shape=[T_k, head_dim], strides=[stride_vt, 1], block_shape=[BLOCK_N, BLOCK_D]
    )
"""
                + TRITON_KEY_LOOP,
            ),
            (
                """        k_ptrs = K + b * stride_kb + h * stride_kh + keys[None, :] * stride_kt + dims[:, None] * stride_kd
        k = tl.load(k_ptrs, mask=(keys[None, :] < T_k) & (dims[:, None] < head_dim), other=0.0)  # [BLOCK_D, BLOCK_N]
""",
                "        k = tl.trans(k_desc.load([k_start, 0]))  # [BLOCK_D, BLOCK_N]: zeros past T_k and head_dim\n",
            ),
            (
                """        v_ptrs = V + b * stride_vb + h * stride_vh + keys[:, None] * stride_vt + dims[None, :] * stride_vd
        v = tl.load(v_ptrs, mask=(keys[:, None] < T_k) & (dims[None, :] < head_dim), other=0.0)  # [BLOCK_N, BLOCK_D]
""",
                "        v = v_desc.load([k_start, 0])  # [BLOCK_N, BLOCK_D]\n",
            ),
        ),
    ),
    Variant(
        "flash_attention_triton with 32-row query tiles and 16-key tiles in the interpreter",
        TRITON_LAUNCHER,
        edits=(("block = 64 if Q.is_cuda else 16", "block = 64 if Q.is_cuda else 32"), ("BLOCK_N=block,", "BLOCK_N=block // 2,")),
    ),
    Variant(
        "flash_attention_triton with a grid function of the launch's block sizes (lambda meta: ...)",
        TRITON_LAUNCHER,
        edits=(("(triton.cdiv(T_q, block), B * H),", 'lambda meta: (triton.cdiv(T_q, meta["BLOCK_M"]), B * H),'),),
    ),
    Variant(
        "flash_attention_triton allocating O with torch.empty(Q.shape, dtype=..., device=...) and 32-key tiles",
        TRITON_LAUNCHER,
        edits=(
            ("O = torch.empty_like(Q)", "O = torch.empty(Q.shape, dtype=Q.dtype, device=Q.device)"),
            ("BLOCK_N=block,", "BLOCK_N=2 * block,"),
        ),
    ),
    Variant(
        "softmax_rows copying x to contiguous always, with empty_like and a grid function",
        SOFTMAX_ROWS_LAUNCHER,
        of="""
def softmax_rows(x):
    if x.dim() != 2:
        raise ValueError(f"expected a matrix, got shape {tuple(x.shape)}")
    x = x.contiguous()
    out = torch.empty_like(x)
    grid = lambda meta: (x.shape[0],)
    launch(softmax_row_kernel, grid, x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK=max(16, triton.next_power_of_2(x.shape[1])))
    return out
""",
    ),
    Variant(
        "online_softmax_rows copying x to contiguous always, with torch.empty and a grid function",
        ONLINE_ROWS,
        edits=(
            (
                ONLINE_ROWS_COPY + "    out = torch.empty_like(x)\n",
                "    x = x.contiguous()\n    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n",
            ),
            ("launch(online_softmax_kernel, (x.shape[0],), ", "launch(online_softmax_kernel, lambda meta: (x.shape[0],), "),
        ),
    ),
    Variant(
        "online_softmax_rows starting its kernel with kernel[grid](...) instead of launch(...)",
        ONLINE_ROWS,
        edits=(("launch(online_softmax_kernel, (x.shape[0],), ", "online_softmax_kernel[(x.shape[0],)]("),),
    ),
    Variant(
        "flash_attention_triton starting its kernel with kernel[grid](...), and a do-nothing kernel through launch(...) beside it",
        TRITON_LAUNCHER,
        edits=(
            (
                "    launch(\n        flash_attention_kernel,\n        (triton.cdiv(T_q, block), B * H),\n",
                "    flash_attention_kernel[(triton.cdiv(T_q, block), B * H)](\n",
            ),
            ("    return O, L\n", "    launch(add_kernel, (1,), O, O, O, 0, BLOCK=16)  # starts, adds nothing\n    return O, L\n"),
        ),
    ),
    Variant(
        "the Triton kernel's causal loop runs to its query block's end, past T_k (the masks drop the keys that are not there)",
        TRITON,
        edits=((TRITON_KEY_END, "k_end = (block_m + 1) * BLOCK_M"),),
    ),
    # The warm-up kernels, written differently.
    Variant(
        "row_sums looping over column blocks (one step when BLOCK >= N)",
        ROWS,
        edits=(
            (
                """    values = tl.load(X + row * stride_row + cols * stride_col, mask=cols < n_cols, other=0.0)
    tl.store(OUT + row, tl.sum(values.to(tl.float32), axis=0))""",
                """    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        total += tl.load(X + row * stride_row + c * stride_col, mask=c < n_cols, other=0.0).to(tl.float32)
    tl.store(OUT + row, tl.sum(total, axis=0))""",
            ),
        ),
    ),
    Variant(
        "softmax_rows loading padding as 0 and masking it with tl.where",
        SOFTMAX_ROWS,
        edits=(
            (
                'x = tl.load(X + row * stride_x + cols, mask=inside, other=float("-inf")).to(tl.float32)',
                'x = tl.where(inside, tl.load(X + row * stride_x + cols, mask=inside, other=0.0).to(tl.float32), float("-inf"))',
            ),
        ),
    ),
    Variant("matmul accumulating through tl.dot's acc argument", MATMUL, edits=(("acc += tl.dot(a, b)", "acc = tl.dot(a, b, acc)"),)),
    Variant(
        "online_softmax_rows in base 2 (exp2 with log2(e))",
        ONLINE_ROWS,
        edits=(
            (".to(tl.float32)\n        m_new", " .to(tl.float32) * 1.4426950408889634\n        m_new"),
            (
                "l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)",
                "l = l * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new), axis=0)",
            ),
            (
                "tl.store(OUT + row * stride_out + start + cols, tl.exp(x - m) / l, mask=inside)",
                "tl.store(OUT + row * stride_out + start + cols, tl.exp2(x * 1.4426950408889634 - m) / l, mask=inside)",
            ),
        ),
    ),
]
