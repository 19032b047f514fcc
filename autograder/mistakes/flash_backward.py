"""Notebook 08: the mistakes students make in the backward pass, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant, answered

SOFTMAX_BW = "softmax_backward"
NAIVE = "attention_backward"
PRE = "flash_backward_preprocess"
FLASH = "flash_attention_backward"
WORKED = "answer_worked_backward"
NAIVE_OUTPUTS = ("test_attention_backward", "test_attention_backward_causal")
FLASH_OUTPUTS = ("test_flash_attention_backward", "test_flash_attention_backward_causal")
FORWARD = "flash_attention_forward"
FUNCTION = "FlashAttention"
FUNCTION_OUTPUTS = ("test_flash_attention_function", "test_flash_attention_function_gradcheck")
TRITON = "flash_attention_backward_triton"
TRITON_OUTPUTS = ("test_flash_attention_backward_triton", "test_flash_attention_backward_triton_causal")

MISTAKES = [
    answered(
        "the worked example's dS without the D term (dS = P dP)",
        WORKED,
        "[0.25, 0.75, 5.0, 0.5, 4.5, 4.5 * math.log(3)]",
        loses=("test_answer_worked_backward",),
    ),
    Variant(
        "softmax_backward forgets the D term (dS = P * dP)",
        SOFTMAX_BW,
        edits=(("return P * (dP - (P * dP).sum(dim=-1, keepdim=True))", "return P * dP"),),
        loses=("test_softmax_backward",) + NAIVE_OUTPUTS,
    ),
    Variant(
        "softmax_backward sums D over the wrong dimension",
        SOFTMAX_BW,
        edits=(("(P * dP).sum(dim=-1, keepdim=True)", "(P * dP).sum(dim=-2, keepdim=True)"),),
        loses=("test_softmax_backward",) + NAIVE_OUTPUTS,
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
        loses=FLASH_OUTPUTS + ("test_flash_attention_backward_tiles",),
    ),  # dO V^T is a whole T_q x T_k matrix
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
        "flash_attention_backward keeps the whole P (the plain backward inside)",
        FLASH,
        source="""
def flash_attention_backward(Q, K, V, O, dO, L, is_causal=False, scale=None, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be at least 1")
    return attention_backward(Q, K, V, dO, is_causal=is_causal, scale=scale)
""",
        loses=("test_flash_attention_backward_tiles", "test_flash_attention_backward_skips_masked_blocks"),
    ),
    Variant(
        "the pasted forward returns L without the running max (L = log l)",
        FORWARD,
        edits=(("L[..., q_start:q_stop] = m + torch.log(l)", "L[..., q_start:q_stop] = torch.log(l)"),),
        loses=("test_flash_attention_forward_from_07",),
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
        edits=(("return dQ, dK, dV, None, None", "return dQ, dK, dV"),),
        loses=FUNCTION_OUTPUTS,
    ),
    Variant(
        "FlashAttention.backward returns dK in dQ's place",
        FUNCTION,
        edits=(("return dQ, dK, dV, None, None", "return dK, dQ, dV, None, None"),),
        loses=FUNCTION_OUTPUTS,
    ),
    Variant("the dK/dV kernel forgets the scale on dK", TRITON, edits=(("    dk = dk * scale\n", ""),), loses=TRITON_OUTPUTS),
    Variant(
        "the dQ kernel subtracts L in natural-log units from base-2 scores",
        TRITON,
        edits=(("p = tl.exp2(s - lse_log2e[:, None])", "p = tl.exp2(s - lse[:, None])"),),
        loses=TRITON_OUTPUTS,
    ),
    Variant(
        "the dQ kernel's causal loop stops before the diagonal block",
        TRITON,
        edits=(("k_end = tl.minimum(T_k, (block_m + 1) * BLOCK_M)", "k_end = tl.minimum(T_k, block_m * BLOCK_M)"),),
        loses=("test_flash_attention_backward_triton_causal",),
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
        "the pasted 07 kernel writes L in base 2",
        "flash_attention_triton",
        edits=(("lse = (m_i + tl.log2(l_i)) * 0.6931471805599453", "lse = m_i + tl.log2(l_i)"),),
        loses=("test_flash_attention_triton_from_07",),
    ),
    Variant(
        "FlashAttentionTriton.backward returns dK in dQ's place",
        "FlashAttentionTriton",
        edits=(("return dQ, dK, dV, None, None", "return dK, dQ, dV, None, None"),),
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
]

CORRECT_VARIANTS = [
    Variant(
        "FlashAttention saves L first (another order, unpacked to match)",
        FUNCTION,
        edits=(
            ("ctx.save_for_backward(Q, K, V, O, L)", "ctx.save_for_backward(L, O, Q, K, V)"),
            ("Q, K, V, O, L = ctx.saved_tensors", "L, O, Q, K, V = ctx.saved_tensors"),
        ),
    ),
    answered("the worked example in fractions", WORKED, "[1 / 4, 3 / 4, 5, -3 / 4, 3 / 4, 3 / 4 * math.log(3)]"),
    Variant(
        "softmax_backward with einsum and a Jacobian-free form",
        SOFTMAX_BW,
        source="""
def softmax_backward(P, dP):
    D = torch.einsum("...k,...k->...", P, dP)
    return P * dP - P * D[..., None]
""",
    ),
    Variant(
        "attention_backward in float64 inside, with einsum",
        NAIVE,
        source="""
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
        source="""
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
