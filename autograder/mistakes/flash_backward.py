"""Notebook 08: the mistakes students make in the backward pass, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

SOFTMAX_BW = "softmax_backward"
NAIVE = "attention_backward"
PRE = "flash_backward_preprocess"
FLASH = "flash_attention_backward"
WORKED = "answer_worked_backward"
NAIVE_OUTPUTS = ("test_attention_backward", "test_attention_backward_causal")
FLASH_OUTPUTS = ("test_flash_attention_backward", "test_flash_attention_backward_causal")
FORWARD = "flash_attention_forward"  # notebook 07's, pasted in (carried): PyTorch's stands in in every test here
CARRIED_TRITON = "flash_attention_triton"  # notebook 07's kernel and launcher, pasted in (carried), likewise
FUNCTION = "FlashAttention"
FUNCTION_OUTPUTS = ("test_flash_attention_function", "test_flash_attention_function_gradcheck")
TRITON = "flash_attention_backward_triton"
TRITON_OUTPUTS = ("test_flash_attention_backward_triton", "test_flash_attention_backward_triton_causal")
TILE_FLOPS = ("test_flash_attention_backward_tiles", "test_flash_attention_backward_skips_masked_blocks")
TRITON_SKIPS = "test_flash_attention_backward_triton_skips_masked_blocks"
TRITON_VALUES = TRITON_OUTPUTS + (TRITON_SKIPS,)  # a wrong formula in a kernel: every test that compares its gradients


MISTAKES = [
    Variant(
        "the worked example's dS without the D term (dS = P dP)",
        WORKED,
        edits=(
            (
                "    return [0.25, 0.75, 5.0, -0.75, 0.75, 0.75 * math.log(3)]\n",
                "    return [0.25, 0.75, 5.0, 0.5, 4.5, 4.5 * math.log(3)]\n",
            ),
        ),
        loses=("test_answer_worked_backward",),
    ),
    Variant(
        "softmax_backward forgets the D term (dS = P * dP)",
        SOFTMAX_BW,
        edits=(("return P * (dP - (P * dP).sum(dim=-1, keepdim=True))", "return P * dP"),),
        loses=("test_softmax_backward",),
    ),
    Variant(
        "softmax_backward sums D over the wrong dimension",
        SOFTMAX_BW,
        edits=(("(P * dP).sum(dim=-1, keepdim=True)", "(P * dP).sum(dim=-2, keepdim=True)"),),
        loses=("test_softmax_backward",),
    ),
    Variant("attention_backward drops the scale in dQ", NAIVE, edits=(("dQ = scale * dS @ K", "dQ = dS @ K"),), loses=NAIVE_OUTPUTS),
    Variant(
        "attention_backward computes dK from dS instead of dS^T",
        NAIVE,
        edits=(("dK = scale * dS.transpose(-2, -1) @ Q", "dK = scale * dS @ Q"),),
        loses=NAIVE_OUTPUTS,
    ),
    Variant(
        "attention_backward masks bottom-right instead of top-left",
        NAIVE,
        edits=(
            (
                "future = torch.ones(T_q, T_k, dtype=torch.bool, device=Q.device).triu(1)",
                "future = torch.ones(T_q, T_k, dtype=torch.bool, device=Q.device).triu(T_k - T_q + 1)",
            ),
        ),
        loses=("test_attention_backward_causal",),
    ),
    Variant(
        "flash_backward_preprocess sums in the inputs' dtype",
        PRE,
        edits=(("return (dO.to(acc_dtype) * O.to(acc_dtype)).sum(dim=-1)", "return (dO * O).sum(dim=-1)"),),
        loses=("test_flash_backward_preprocess",),
    ),
    Variant(
        "flash_attention_backward rebuilds P with exp2 (L is in natural-log units)",
        FLASH,
        edits=(
            (
                "p = torch.exp(s - L[..., q_start:q_stop, None].to(acc_dtype))",
                "p = torch.exp2(s - L[..., q_start:q_stop, None].to(acc_dtype))",
            ),
        ),
        loses=FLASH_OUTPUTS,
    ),
    Variant(
        "flash_attention_backward takes D from dO and V instead of dO and O",
        FLASH,
        edits=(("D = flash_backward_preprocess(O, dO)", "D = (dO.to(acc_dtype) @ V.to(acc_dtype).transpose(-2, -1)).sum(dim=-1)"),),
        loses=FLASH_OUTPUTS + TILE_FLOPS,
    ),  # dO V^T is a whole T_q x T_k matrix, and one more product
    Variant(
        "flash_attention_backward forgets the mask on diagonal tiles",
        FLASH,
        edits=(("if is_causal and k_stop - 1 > q_start:", "if False:"),),
        loses=("test_flash_attention_backward_causal",),
    ),
    Variant(
        "flash_attention_backward drops the scale in dK",
        FLASH,
        edits=(("dk += scale * ds.transpose(-2, -1) @ q", "dk += ds.transpose(-2, -1) @ q"),),
        loses=FLASH_OUTPUTS,
    ),
    Variant(
        "flash_attention_backward masks tiles instead of skipping them",
        FLASH,
        edits=(("q_first = k_start if is_causal else 0", "q_first = 0"), ("if is_causal and k_stop - 1 > q_start:", "if is_causal:")),
        loses=("test_flash_attention_backward_skips_masked_blocks",),
    ),
    Variant(
        "flash_attention_backward computes dP = dO V^T twice per tile (six products)",
        FLASH,
        edits=(
            (
                "ds = p * (dp - D[..., q_start:q_stop, None].to(acc_dtype))",
                "ds = p * (do @ v.transpose(-2, -1) - D[..., q_start:q_stop, None].to(acc_dtype))",
            ),
        ),
        loses=TILE_FLOPS,
    ),
    Variant(
        "flash_attention_backward rebuilds S = q k^T a second time for dS (six products per tile)",
        FLASH,
        edits=(
            (
                "ds = p * (dp - D[..., q_start:q_stop, None].to(acc_dtype))",
                'ds = torch.exp(torch.where(p > 0, scale * q @ k.transpose(-2, -1), float("-inf")) - L[..., q_start:q_stop, None].to(acc_dtype))'
                " * (dp - D[..., q_start:q_stop, None].to(acc_dtype))",
            ),
        ),
        loses=TILE_FLOPS,
    ),
    Variant(
        "flash_attention_backward takes dQ in a second pass over the tiles (seven products per tile)",
        FLASH,
        edits=(
            (
                '        raise ValueError(f"block sizes must be at least 1, got block_q={block_q}, block_k={block_k}")\n',
                '        raise ValueError("block sizes must be at least 1")\n',
            ),
            (
                (
                    "    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale\n"
                    "    acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32\n"
                ),
                (
                    "    s = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale\n"
                    "    acc = torch.float64 if Q.dtype == torch.float64 else torch.float32\n"
                ),
            ),
            (
                (
                    "    dQ = torch.zeros(Q.shape, dtype=acc_dtype, device=Q.device)  # added to by every key block\n"
                    "    dK = torch.empty(K.shape, dtype=Q.dtype, device=Q.device)\n"
                    "    dV = torch.empty(V.shape, dtype=Q.dtype, device=Q.device)\n"
                    "    for k_start in range(0, T_k, block_k):  # outer: key blocks\n"
                    "        k_stop = min(k_start + block_k, T_k)\n"
                    "        k = K[..., k_start:k_stop, :].to(acc_dtype)\n"
                    "        v = V[..., k_start:k_stop, :].to(acc_dtype)\n"
                    "        dk = torch.zeros_like(k)  # stays with this key block\n"
                    "        dv = torch.zeros_like(v)\n"
                    "        q_first = k_start if is_causal else 0  # causal: rows above k_start never see it\n"
                    "        for q_start in range(q_first - q_first % block_q, T_q, block_q):\n"
                    "            q_stop = min(q_start + block_q, T_q)\n"
                    "            q = Q[..., q_start:q_stop, :].to(acc_dtype)\n"
                    "            do = dO[..., q_start:q_stop, :].to(acc_dtype)\n"
                    "            s = scale * q @ k.transpose(-2, -1)  # one [block_q, block_k] tile\n"
                    "            if is_causal and k_stop - 1 > q_start:  # the tile crosses the diagonal\n"
                    "                rows = torch.arange(q_start, q_stop, device=Q.device)[:, None]\n"
                    '                s = s.masked_fill(torch.arange(k_start, k_stop, device=Q.device) > rows, float("-inf"))\n'
                    "            p = torch.exp(s - L[..., q_start:q_stop, None].to(acc_dtype))  # the forward's weights, rebuilt\n"
                    "            dv += p.transpose(-2, -1) @ do\n"
                    "            dp = do @ v.transpose(-2, -1)\n"
                    "            ds = p * (dp - D[..., q_start:q_stop, None].to(acc_dtype))\n"
                    "            dQ[..., q_start:q_stop, :] += scale * ds @ k\n"
                    "            dk += scale * ds.transpose(-2, -1) @ q\n"
                    "        dK[..., k_start:k_stop, :] = dk.to(Q.dtype)\n"
                    "        dV[..., k_start:k_stop, :] = dv.to(Q.dtype)\n"
                    "    return dQ.to(Q.dtype), dK, dV\n"
                ),
                (
                    "\n"
                    "    def tile(q0, q1, k0, k1):  # P and dS of one tile, rebuilt from Q, K and L\n"
                    "        q, k = Q[..., q0:q1, :].to(acc), K[..., k0:k1, :].to(acc)\n"
                    "        S = s * q @ k.transpose(-2, -1)\n"
                    "        if is_causal:\n"
                    '            S = S.masked_fill(torch.arange(k0, k1)[None, :] > torch.arange(q0, q1)[:, None], float("-inf"))\n'
                    "        P = torch.exp(S - L[..., q0:q1, None].to(acc))\n"
                    "        dS = P * (dO[..., q0:q1, :].to(acc) @ V[..., k0:k1, :].to(acc).transpose(-2, -1) - D[..., q0:q1, None].to(acc))\n"
                    "        return q, k, P, dS\n"
                    "\n"
                    "    dK, dV = torch.empty(K.shape, dtype=K.dtype), torch.empty(V.shape, dtype=V.dtype)\n"
                    "    for k0 in range(0, T_k, block_k):  # first pass: dK and dV, key blocks outside\n"
                    "        k1 = min(k0 + block_k, T_k)\n"
                    "        dk = torch.zeros(*K.shape[:-2], k1 - k0, K.shape[-1], dtype=acc)\n"
                    "        dv = torch.zeros(*V.shape[:-2], k1 - k0, V.shape[-1], dtype=acc)\n"
                    "        for q0 in range(k0 - k0 % block_q if is_causal else 0, T_q, block_q):\n"
                    "            q1 = min(q0 + block_q, T_q)\n"
                    "            q, k, P, dS = tile(q0, q1, k0, k1)\n"
                    "            dv += P.transpose(-2, -1) @ dO[..., q0:q1, :].to(acc)\n"
                    "            dk += s * dS.transpose(-2, -1) @ q\n"
                    "        dK[..., k0:k1, :], dV[..., k0:k1, :] = dk.to(K.dtype), dv.to(V.dtype)\n"
                    "    dQ = torch.empty(Q.shape, dtype=Q.dtype)\n"
                    "    for q0 in range(0, T_q, block_q):  # second pass: dQ, query blocks outside, S and dP once more\n"
                    "        q1 = min(q0 + block_q, T_q)\n"
                    "        dq = torch.zeros(*Q.shape[:-2], q1 - q0, Q.shape[-1], dtype=acc)\n"
                    "        for k0 in range(0, min(T_k, q1) if is_causal else T_k, block_k):\n"
                    "            q, k, P, dS = tile(q0, q1, k0, min(k0 + block_k, T_k))\n"
                    "            dq += s * dS @ k\n"
                    "        dQ[..., q0:q1, :] = dq.to(Q.dtype)\n"
                    "    return dQ, dK, dV\n"
                ),
            ),
        ),
        loses=TILE_FLOPS,
    ),
    Variant(
        "flash_attention_backward keeps the whole P (the plain backward inside)",
        FLASH,
        edits=(
            (
                (
                    '        raise ValueError(f"block sizes must be at least 1, got block_q={block_q}, block_k={block_k}")\n'
                    "    T_q, T_k = Q.shape[-2], K.shape[-2]\n"
                    "    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale\n"
                    "    acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32\n"
                    "    D = flash_backward_preprocess(O, dO)\n"
                    "    dQ = torch.zeros(Q.shape, dtype=acc_dtype, device=Q.device)  # added to by every key block\n"
                    "    dK = torch.empty(K.shape, dtype=Q.dtype, device=Q.device)\n"
                    "    dV = torch.empty(V.shape, dtype=Q.dtype, device=Q.device)\n"
                    "    for k_start in range(0, T_k, block_k):  # outer: key blocks\n"
                    "        k_stop = min(k_start + block_k, T_k)\n"
                    "        k = K[..., k_start:k_stop, :].to(acc_dtype)\n"
                    "        v = V[..., k_start:k_stop, :].to(acc_dtype)\n"
                    "        dk = torch.zeros_like(k)  # stays with this key block\n"
                    "        dv = torch.zeros_like(v)\n"
                    "        q_first = k_start if is_causal else 0  # causal: rows above k_start never see it\n"
                    "        for q_start in range(q_first - q_first % block_q, T_q, block_q):\n"
                    "            q_stop = min(q_start + block_q, T_q)\n"
                    "            q = Q[..., q_start:q_stop, :].to(acc_dtype)\n"
                    "            do = dO[..., q_start:q_stop, :].to(acc_dtype)\n"
                    "            s = scale * q @ k.transpose(-2, -1)  # one [block_q, block_k] tile\n"
                    "            if is_causal and k_stop - 1 > q_start:  # the tile crosses the diagonal\n"
                    "                rows = torch.arange(q_start, q_stop, device=Q.device)[:, None]\n"
                    '                s = s.masked_fill(torch.arange(k_start, k_stop, device=Q.device) > rows, float("-inf"))\n'
                    "            p = torch.exp(s - L[..., q_start:q_stop, None].to(acc_dtype))  # the forward's weights, rebuilt\n"
                    "            dv += p.transpose(-2, -1) @ do\n"
                    "            dp = do @ v.transpose(-2, -1)\n"
                    "            ds = p * (dp - D[..., q_start:q_stop, None].to(acc_dtype))\n"
                    "            dQ[..., q_start:q_stop, :] += scale * ds @ k\n"
                    "            dk += scale * ds.transpose(-2, -1) @ q\n"
                    "        dK[..., k_start:k_stop, :] = dk.to(Q.dtype)\n"
                    "        dV[..., k_start:k_stop, :] = dv.to(Q.dtype)\n"
                    "    return dQ.to(Q.dtype), dK, dV\n"
                ),
                (
                    '        raise ValueError("block sizes must be at least 1")\n'
                    "    return attention_backward(Q, K, V, dO, is_causal=is_causal, scale=scale)\n"
                ),
            ),
        ),
        loses=("test_flash_attention_backward_tiles", "test_flash_attention_backward_skips_masked_blocks", "test_flash_attention_backward"),
    ),
    Variant(
        "FlashAttention hands [B, T, d] to the tile functions as it is (no heads axis)",
        FUNCTION,
        edits=(("flash_attention_forward(as_heads(Q), as_heads(K), as_heads(V), ", "flash_attention_forward(Q, K, V, "),),
        loses=("test_flash_attention_function",),
    ),
    Variant(
        "FlashAttention saves L with the heads axis, [N, H, T_q], not in Q's leading shape",
        FUNCTION,
        edits=(("O, L = O.reshape(*Q.shape[:-1], V.shape[-1]), L.reshape(Q.shape[:-1])", "O = O.reshape(*Q.shape[:-1], V.shape[-1])"),),
        loses=("test_flash_attention_function_saves_only_L",),
    ),
    Variant(
        "flash_attention reshapes around FlashAttention.apply (the output's node is the reshape's)",
        FUNCTION,
        edits=(
            (
                "    return FlashAttention.apply(Q, K, V, is_causal, scale)",
                "    heads = FlashAttention.apply(as_heads(Q), as_heads(K), as_heads(V), is_causal, scale)\n"
                "    return heads.reshape(*Q.shape[:-1], V.shape[-1])",
            ),
        ),
        loses=("test_flash_attention_function_saves_only_L",),
    ),
    Variant(
        "FlashAttention also saves P for the backward pass",
        FUNCTION,
        edits=(
            (
                "ctx.save_for_backward(Q, K, V, O, L)",
                "P = torch.softmax(Q @ K.transpose(-2, -1), dim=-1)\n        ctx.save_for_backward(Q, K, V, O, L, P)",
            ),
            ("Q, K, V, O, L = ctx.saved_tensors", "Q, K, V, O, L, P = ctx.saved_tensors"),
        ),
        loses=("test_flash_attention_function_saves_only_L",),
    ),
    Variant(
        "FlashAttention.backward returns three gradients for five inputs",
        FUNCTION,
        edits=(
            (
                "return dQ.reshape(Q.shape), dK.reshape(K.shape), dV.reshape(V.shape), None, None",
                "return dQ.reshape(Q.shape), dK.reshape(K.shape), dV.reshape(V.shape)",
            ),
        ),
        loses=FUNCTION_OUTPUTS,
    ),
    Variant(
        "FlashAttention.backward returns dK in dQ's place",
        FUNCTION,
        edits=(("return dQ.reshape(Q.shape), dK.reshape(K.shape)", "return dK.reshape(K.shape), dQ.reshape(Q.shape)"),),
        loses=FUNCTION_OUTPUTS,
    ),
    Variant("the dK/dV kernel forgets the scale on dK", TRITON, edits=(("    dk = dk * scale\n", ""),), loses=TRITON_VALUES),
    Variant(
        "the dQ kernel subtracts L in natural-log units from base-2 scores",
        TRITON,
        edits=(("p = tl.exp2(s - lse_log2e[:, None])", "p = tl.exp2(s - lse[:, None])"),),
        loses=TRITON_VALUES,
    ),
    Variant(
        "the dQ kernel's causal loop stops before the diagonal block",
        TRITON,
        edits=(("k_end = tl.minimum(T_k, (block_m + 1) * BLOCK_M)", "k_end = tl.minimum(T_k, block_m * BLOCK_M)"),),
        loses=("test_flash_attention_backward_triton_causal", TRITON_SKIPS),
    ),
    Variant(
        "the dK/dV kernel walks every query block under causal, masking only",
        TRITON,
        edits=(("q_start = (block_n * BLOCK_N) // BLOCK_M * BLOCK_M", "q_start = 0"),),
        loses=(TRITON_SKIPS,),
    ),
    Variant(
        "the dK/dV kernel walks every query block under causal and zeroes dS with tl.where (no NaN gets through)",
        TRITON,
        edits=(
            ("q_start = (block_n * BLOCK_N) // BLOCK_M * BLOCK_M", "q_start = 0"),
            ("dsT = pT * (dpT - delta[None, :])", "dsT = tl.where(allowed, pT * (dpT - delta[None, :]), 0.0)"),
        ),
        loses=(TRITON_SKIPS,),
    ),
    Variant(
        "the dQ kernel walks every key block under causal, masking only",
        TRITON,
        edits=(("k_end = tl.minimum(T_k, (block_m + 1) * BLOCK_M)", "k_end = T_k"),),
        loses=(TRITON_SKIPS,),
    ),
    Variant(
        "the dQ kernel loads K and V without masks",
        TRITON,
        edits=(
            ("stride_kd, mask=kv_mask, other=0.0\n        )", "stride_kd\n        )"),
            ("stride_vd, mask=kv_mask, other=0.0\n        )", "stride_vd\n        )"),
        ),
        loses=TRITON_OUTPUTS,
    ),
    Variant(
        "the dK/dV kernel loads Q and dO without masks",
        TRITON,
        edits=(
            ("stride_qd, mask=q_mask, other=0.0\n        )", "stride_qd\n        )"),
            ("stride_dod, mask=q_mask, other=0.0\n        )", "stride_dod\n        )"),
        ),
        loses=TRITON_OUTPUTS,  # the skip test's shapes fill every tile, so the missing masks cost only the output tests
    ),
    Variant(
        "the dQ kernel leaves its loop with break (the interpreter runs it, no GPU compiler builds it)",
        TRITON,
        edits=(
            (
                "    for k_start in range(0, k_end, BLOCK_N):\n        keys = k_start + offs_n",
                "    for k_start in range(0, T_k, BLOCK_N):\n        if k_start >= k_end:\n            break\n        keys = k_start + offs_n",
            ),
        ),
        loses=("test_flash_attention_backward_triton",),
    ),
    Variant(
        "FlashAttentionTriton.backward returns dK in dQ's place",
        "FlashAttentionTriton",
        edits=(("return dQ.reshape(Q.shape), dK.reshape(K.shape)", "return dK.reshape(K.shape), dQ.reshape(Q.shape)"),),
        loses=("test_flash_attention_fused",),
    ),
    Variant(
        "FlashAttentionTriton hands [B, T, d] to the kernels as it is (no heads axis)",
        "FlashAttentionTriton",
        edits=(("flash_attention_triton(as_heads(Q), as_heads(K), as_heads(V), ", "flash_attention_triton(Q, K, V, "),),
        loses=("test_flash_attention_fused",),
    ),
    Variant(
        "FlashAttentionTriton also saves P for the backward pass",
        "FlashAttentionTriton",
        edits=(
            (
                "ctx.save_for_backward(Q, K, V, O, L)",
                "P = torch.softmax(Q @ K.transpose(-2, -1), dim=-1)\n        ctx.save_for_backward(Q, K, V, O, L, P)",
            ),
            ("Q, K, V, O, L = ctx.saved_tensors", "Q, K, V, O, L, P = ctx.saved_tensors"),
        ),
        loses=("test_flash_attention_fused",),
    ),
    Variant(
        "flash_attention_backward sums dQ in the inputs' dtype (in bfloat16 every key block's addition rounds)",
        FLASH,
        edits=(
            ("dQ = torch.zeros(Q.shape, dtype=acc_dtype, device=Q.device)", "dQ = torch.zeros(Q.shape, dtype=Q.dtype, device=Q.device)"),
        ),
        loses=("test_flash_attention_backward",),
    ),
]

CORRECT_VARIANTS = [
    Variant(
        "flash_attention_backward accumulates in float64 for every input dtype",
        FLASH,
        edits=(("acc_dtype = torch.float64 if Q.dtype == torch.float64 else torch.float32", "acc_dtype = torch.float64"),),
    ),
    Variant(
        "the pasted forward in base 2 (exp2, L converted back to natural log)",
        FORWARD,
        edits=(
            (
                "q = Q[..., q_start:q_stop, :].to(acc_dtype) * scale",
                "q = Q[..., q_start:q_stop, :].to(acc_dtype) * (scale * 1.4426950408889634)",
            ),
            ("p = torch.exp(s - m_new[..., None])", "p = torch.exp2(s - m_new[..., None])"),
            ("correction = torch.exp(m - m_new)", "correction = torch.exp2(m - m_new)"),
            ("L[..., q_start:q_stop] = m + torch.log(l)", "L[..., q_start:q_stop] = (m + torch.log2(l)) * 0.6931471805599453"),
        ),
    ),
    # Each round of correct variants takes the i-th variant of every cell (tests/conftest.py), so a broken
    # carried forward meets the i-th variant of FlashAttention, which calls it: it must still keep full marks.
    Variant(
        "the carried forward returns L without the running max (notebook 07 grades it; it costs nothing here)",
        FORWARD,
        edits=(("L[..., q_start:q_stop] = m + torch.log(l)", "L[..., q_start:q_stop] = torch.log(l)"),),
    ),
    Variant(
        "the carried forward left as the stub (notebook 07 grades it; PyTorch's stands in here)",
        FORWARD,
        of="""
def flash_attention_forward(Q, K, V, is_causal=False, scale=None, block_q=64, block_k=64):
    # YOUR CODE HERE
    raise NotImplementedError()
""",
    ),
    Variant(
        "the carried forward left as the stub, and PyTorch's takes its name, as the text offers",
        FORWARD,
        of="""
def flash_attention_forward(Q, K, V, is_causal=False, scale=None, block_q=64, block_k=64):
    # YOUR CODE HERE
    raise NotImplementedError()


from course_utils.stand_ins import torch_flash_forward as flash_attention_forward
""",
    ),
    Variant(
        "the carried 07 kernel writes L in base 2 (notebook 07 grades it; it costs nothing here)",
        CARRIED_TRITON,
        edits=(("lse = (m_i + tl.log2(l_i)) * 0.6931471805599453", "lse = m_i + tl.log2(l_i)"),),
    ),
    Variant(
        "the carried 07 kernel left as the stub (notebook 07 grades it; PyTorch's stands in here)",
        CARRIED_TRITON,
        edits=(
            ("    ### BEGIN SOLUTION\n    m_i = tl.full(", "    raise NotImplementedError()\n    ### BEGIN SOLUTION\n    m_i = tl.full("),
        ),
    ),
    Variant(
        "the carried 07 kernel is wrong, and PyTorch's forward takes the launcher's name, as the text offers",
        CARRIED_TRITON,
        edits=(
            ("lse = (m_i + tl.log2(l_i)) * 0.6931471805599453", "lse = m_i + tl.log2(l_i)"),
            (
                "\n    return O, L\n    ### END SOLUTION",
                "\n    return O, L\n    ### END SOLUTION\n\n\nfrom course_utils.stand_ins import torch_flash_attention_triton as flash_attention_triton\n",
            ),
        ),
    ),
    Variant(
        "the carried 07 launcher left as the stub (notebook 07 grades it; PyTorch's stands in here)",
        CARRIED_TRITON,
        edits=(
            (
                "    ### BEGIN SOLUTION\n    T_k = K.shape[2]",
                "    # YOUR CODE HERE\n    raise NotImplementedError()\n    ### BEGIN SOLUTION\n    T_k = K.shape[2]",
            ),
        ),
    ),
    Variant(
        "FlashAttention runs its tiles at 16 x 16",
        FUNCTION,
        edits=(
            ("is_causal=is_causal, scale=scale)", "is_causal=is_causal, scale=scale, block_q=16, block_k=16)"),
            ("is_causal=ctx.is_causal, scale=ctx.scale\n", "is_causal=ctx.is_causal, scale=ctx.scale, block_q=16, block_k=16\n"),
        ),
    ),
    Variant(
        "the backward kernels mask the scores with -inf before exp2 (instead of zeroing P)",
        TRITON,
        edits=(
            ("        pT = tl.exp2(sT - lse[None, :] * 1.4426950408889634)  # the forward's softmax, recomputed from L\n", ""),
            (
                "        pT = tl.where(allowed, pT, 0.0)\n",
                '        pT = tl.exp2(tl.where(allowed, sT, float("-inf")) - lse[None, :] * 1.4426950408889634)\n',
            ),
            ("        p = tl.exp2(s - lse_log2e[:, None])  # the forward's softmax, recomputed from L\n", ""),
            ("        p = tl.where(allowed, p, 0.0)\n", '        p = tl.exp2(tl.where(allowed, s, float("-inf")) - lse_log2e[:, None])\n'),
        ),
    ),
    Variant(
        "the backward kernels use exp with L in natural-log units",
        TRITON,
        edits=(
            ("pT = tl.exp2(sT - lse[None, :] * 1.4426950408889634)", "pT = tl.exp(sT * 0.6931471805599453 - lse[None, :])"),
            ("p = tl.exp2(s - lse_log2e[:, None])", "p = tl.exp(s * 0.6931471805599453 - lse[:, None])"),
        ),
    ),
    Variant(
        "the backward launcher uses blocks of 32 in the interpreter",
        TRITON,
        edits=(
            ("block = 64 if Q.is_cuda else 16  # the interpreter is slow: small tiles, small grids", "block = 64 if Q.is_cuda else 32"),
        ),
    ),
    Variant(
        "FlashAttention saves L first (another order, unpacked to match)",
        FUNCTION,
        edits=(
            ("ctx.save_for_backward(Q, K, V, O, L)", "ctx.save_for_backward(L, O, Q, K, V)"),
            ("Q, K, V, O, L = ctx.saved_tensors", "L, O, Q, K, V = ctx.saved_tensors"),
        ),
    ),
    Variant(
        "the worked example in fractions",
        WORKED,
        edits=(
            (
                "    return [0.25, 0.75, 5.0, -0.75, 0.75, 0.75 * math.log(3)]\n",
                "    return [1 / 4, 3 / 4, 5, -3 / 4, 3 / 4, 3 / 4 * math.log(3)]\n",
            ),
        ),
    ),
    Variant(
        "softmax_backward with einsum and a Jacobian-free form",
        SOFTMAX_BW,
        of="""
def softmax_backward(P, dP):
    D = torch.einsum("...k,...k->...", P, dP)
    return P * dP - P * D[..., None]
""",
    ),
    Variant(
        "attention_backward in float64 inside, with einsum",
        NAIVE,
        of="""
def attention_backward(Q, K, V, dO, is_causal=False, scale=None):
    s = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    q, k, v, do = (t.double() for t in (Q, K, V, dO))
    S = s * torch.einsum("...qd,...kd->...qk", q, k)
    if is_causal:
        S = S.masked_fill(torch.ones(S.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    P = torch.softmax(S, dim=-1)
    dP = torch.einsum("...qe,...ke->...qk", do, v)
    dS = P * (dP - (P * dP).sum(-1, keepdim=True))
    return ((s * dS @ k).to(Q.dtype), (s * dS.transpose(-2, -1) @ q).to(K.dtype), (P.transpose(-2, -1) @ do).to(V.dtype))
""",
    ),
    Variant(
        "flash_attention_backward with query blocks outside (dK, dV summed across the loop)",
        FLASH,
        of="""
def flash_attention_backward(Q, K, V, O, dO, L, is_causal=False, scale=None, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be at least 1")
    s = 1.0 / math.sqrt(Q.shape[-1]) if scale is None else scale
    acc = torch.float64 if Q.dtype == torch.float64 else torch.float32
    D = (dO.to(acc) * O.to(acc)).sum(-1)
    dQ = torch.empty(Q.shape, dtype=Q.dtype)
    dK, dV = torch.zeros(K.shape, dtype=acc), torch.zeros(V.shape, dtype=acc)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        q, do = Q[..., q0:q1, :].to(acc), dO[..., q0:q1, :].to(acc)
        dq = torch.zeros_like(q)
        for k0 in range(0, min(T_k, q1) if is_causal else T_k, block_k):
            k1 = min(k0 + block_k, T_k)
            k, v = K[..., k0:k1, :].to(acc), V[..., k0:k1, :].to(acc)
            S = s * q @ k.transpose(-2, -1)
            if is_causal:
                S = S.masked_fill(torch.arange(k0, k1)[None, :] > torch.arange(q0, q1)[:, None], float("-inf"))
            P = torch.exp(S - L[..., q0:q1, None].to(acc))
            dS = P * (do @ v.transpose(-2, -1) - D[..., q0:q1, None])
            dq += s * dS @ k
            dK[..., k0:k1, :] += s * dS.transpose(-2, -1) @ q
            dV[..., k0:k1, :] += P.transpose(-2, -1) @ do
        dQ[..., q0:q1, :] = dq.to(Q.dtype)
    return dQ, dK.to(K.dtype), dV.to(V.dtype)
""",
    ),
]
