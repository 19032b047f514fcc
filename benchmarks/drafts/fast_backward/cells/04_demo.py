# The tuned backward against autograd of SDPA and section 7's kernels: ragged, causal, T_q != T_k, [B, T, d] inputs.
fast_device, fast_dtype = ("cuda", torch.float16) if ON_GPU else ("cpu", torch.float32)
print(f"{'T_q':>5}{'T_k':>5}{'causal':>8}{'max |grad - SDPA autograd|':>28}{'max |grad - section 7|':>24}")
for T_q, T_k, causal in [(64, 64, False), (60, 45, True), (45, 60, True)]:  # T <= 64: few tiles to autotune on a GPU
    Q, K, V, dO = (torch.randn(1, 2, T, 16, device=fast_device, dtype=fast_dtype) for T in (T_q, T_k, T_k, T_q))
    O, L = flash_attention_triton(Q, K, V, is_causal=causal)
    fast = flash_attention_backward_fast(Q, K, V, O, dO, L, is_causal=causal)
    plain = flash_attention_backward_triton(Q, K, V, O, dO, L, is_causal=causal)
    leaves = [t.detach().float().requires_grad_() for t in (Q, K, V)]
    reference = torch.autograd.grad(F.scaled_dot_product_attention(*leaves, is_causal=causal), leaves, dO.float())
    to_sdpa = max((g.float() - r).abs().max().item() for g, r in zip(fast, reference))
    to_plain = max((g - p).float().abs().max().item() for g, p in zip(fast, plain))
    print(f"{T_q:>5}{T_k:>5}{causal!s:>8}{to_sdpa:>28.1e}{to_plain:>24.1e}")
q, k, v = (torch.randn(2, 40, 16, device=fast_device, dtype=fast_dtype, requires_grad=True) for _ in range(3))  # [B, T, d]: one head
out = FlashAttentionFast.apply(q, k, v, True)
grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), torch.ones_like(out))
error = max((g - e).abs().max().item() for g, e in zip(grads, expected))
print(f"FlashAttentionFast on [2, 40, 16], causal: max |grad - SDPA autograd| = {error:.1e}")
