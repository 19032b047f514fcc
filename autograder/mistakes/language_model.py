"""Notebook 09: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

HALVES = "x1, x2 = x[..., : d // 2], x[..., d // 2 :]"
ROTATED = "return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)"
THETA = "torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d"
POSITIONS = "positions.to(torch.float64)[:, None]"
ATTEND = "out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)"
CACHE_K = "k = torch.cat([self.cache_k, k], dim=-2)"
CACHE_V = "v = torch.cat([self.cache_v, v], dim=-2)"
OFFSET = "start_pos=tokens.shape[1] - 1"
SHIFTED_LOSS = "F.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1))"

BLOCK_TESTS = ("test_decoder_block_matches_reference", "test_decoder_block_kv_cache")
TRAINING = "test_copy_task_learned"  # a reference block stands in for the student's: only the training step is tested

MISTAKES = [
    Variant(
        "rope pairs neighbours (x[2i], x[2i + 1]: the interleaved convention) where the notebook states halves",
        "rope",
        edits=(
            (HALVES, "x1, x2 = x[..., 0::2], x[..., 1::2]"),
            (ROTATED, ROTATED.replace("torch.cat", "torch.stack").replace("dim=-1)", "dim=-1).flatten(-2)")),
        ),
        loses=("test_rope_halves_convention",),
    ),
    Variant(
        "rope frequencies base ** (-i / d): the 2 is missing",
        "rope",
        edits=((THETA, "torch.arange(d // 2, dtype=torch.float64, device=x.device) / d"),),
        loses=("test_rope_halves_convention",),
    ),
    Variant(
        "rope ignores the positions it is given (row t turns by t)",
        "rope",
        edits=((POSITIONS, "torch.arange(x.shape[-2], dtype=torch.float64, device=x.device)[:, None]"),),
        loses=("test_rope_halves_convention", "test_rope_relative_positions"),
    ),
    Variant(
        "the block drops the causal mask",
        "DecoderBlock",
        edits=((ATTEND, "out, weights = scaled_dot_product_attention(q, k, v)"),),
        loses=("test_decoder_block_causal", *BLOCK_TESTS),
    ),
    Variant(
        "post-norm: the block normalises the sum, x = norm(x + sublayer(x)), instead of the sublayer's input",
        "DecoderBlock",
        edits=(
            ("self.qkv(self.norm1(x))", "self.qkv(x)"),
            ("x = x + self.out_proj(merge_heads(out))", "x = self.norm1(x + self.out_proj(merge_heads(out)))"),
            ("return x + self.mlp(self.norm2(x))", "return self.norm2(x + self.mlp(x))"),
        ),
        loses=("test_decoder_block_matches_reference",),  # consistent with itself: its cache matches its own full pass
    ),
    Variant(
        "the cache grows along the heads axis (dim 1), not time",
        "DecoderBlock",
        edits=((CACHE_K, CACHE_K.replace("dim=-2", "dim=1")), (CACHE_V, CACHE_V.replace("dim=-2", "dim=1"))),
        loses=("test_decoder_block_kv_cache",),
    ),
    Variant(
        "cached step with a top-left mask: the new query sees only the first keys",
        "DecoderBlock",
        edits=(("bottom_right=True", "bottom_right=False"),),
        loses=("test_decoder_block_kv_cache",),
    ),
    Variant(
        "rope takes its angles in x's dtype (in float16 the angle at position 3001 is off by radians)",
        "rope",
        edits=((THETA, THETA.replace("torch.float64", "x.dtype")), (POSITIONS, "positions.to(x.dtype)[:, None]")),
        loses=("test_rope_halves_convention",),
    ),
    Variant(
        "generate recomputes the whole sequence at every step, cache or not (the same tokens; the cache is never read)",
        "generate",
        edits=(
            ("            if not use_cache:\n                logits = model(tokens)", "            logits = model(tokens)"),
            ("            if use_cache and step < n_new - 1:", "            if False:"),
        ),
        loses=("test_generate_with_cache",),
    ),
    Variant(
        "generate makes the cached calls for show and takes its logits from model.forward on the whole sequence",
        "generate",
        edits=(("            if not use_cache:\n                logits = model(tokens)", "            logits = model.forward(tokens)"),),
        loses=("test_generate_with_cache",),
    ),
    Variant(
        "generate feeds each cached step at position 0 (positions not offset)",
        "generate",
        edits=((OFFSET, "start_pos=0"),),
        loses=("test_generate_with_cache",),
    ),
    Variant(
        "the training loss is not shifted: the logits at t are scored against token t",
        "train_copy_model",
        edits=((SHIFTED_LOSS, "F.cross_entropy(logits.reshape(-1, vocab), tokens.reshape(-1))"),),
        loses=(TRAINING,),
    ),
    Variant(
        "the offset taken the wrong way round: the key turned by m - n instead of n - m",
        "answer_rope_score",
        edits=(
            (
                "    return math.sin(3.0)  # q^T R(n - m) k with n - m = -3: R(-3) k = (sin 3, cos 3), and q picks its first entry\n",
                "    return -math.sin(3.0)\n",
            ),
        ),
        loses=("test_answer_rope_score",),
    ),
    Variant(
        "the rotations ignored: the score taken as the plain dot product q . k",
        "answer_rope_score",
        edits=(
            (
                "    return math.sin(3.0)  # q^T R(n - m) k with n - m = -3: R(-3) k = (sin 3, cos 3), and q picks its first entry\n",
                "    return 0.0\n",
            ),
        ),
        loses=("test_answer_rope_score",),
    ),
    Variant(
        "the causal mask taken for the leak (the query's own token is its input; its target is the next one)",
        "answer_leaky_mask",
        edits=(
            (
                '    return "c"  # key i + 1 is the target of query i: a mask that shows it lets the model copy its answer\n',
                '    return "a"\n',
            ),
        ),
        loses=("test_answer_leaky_mask",),
    ),
    Variant(
        "a window of earlier tokens taken for a leak (only a key at the target's position can leak it)",
        "answer_leaky_mask",
        edits=(
            (
                '    return "c"  # key i + 1 is the target of query i: a mask that shows it lets the model copy its answer\n',
                '    return "d"\n',
            ),
        ),
        loses=("test_answer_leaky_mask",),
    ),
]

ROPE_COMPLEX = """
def rope(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = 1.0 / base ** (torch.arange(d // 2, dtype=torch.float64) * 2 / d)
    angles = torch.outer(positions.to(torch.float64), theta)  # [T, d/2]
    pairs = torch.stack([x[..., : d // 2], x[..., d // 2 :]], dim=-1).to(torch.float64).contiguous()
    turned = torch.view_as_real(torch.view_as_complex(pairs) * torch.polar(torch.ones_like(angles), angles))
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)
"""

ROPE_EINSUM = """
def rope(x, positions, base=10000.0):
    d = x.shape[-1]
    angles = positions.double()[:, None] * base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    c, s = angles.cos(), angles.sin()
    rotation = torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)  # [T, d/2, 2, 2]
    pairs = torch.stack([x[..., : d // 2], x[..., d // 2 :]], dim=-1).double()  # [..., T, d/2, 2]
    turned = torch.einsum("tiab,...tib->...tia", rotation, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)
"""

ROPE_ROTATE_HALF = """
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(positions.double(), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)  # the angles of pair i in both halves
    return (x.double() * emb.cos() + rotate_half(x.double()) * emb.sin()).to(x.dtype)
"""

CORRECT_VARIANTS = [
    Variant("rope with complex numbers (view_as_complex, halves as real and imaginary parts)", "rope", of=ROPE_COMPLEX),
    Variant("rope with 2 x 2 rotation matrices and einsum", "rope", of=ROPE_EINSUM),
    Variant("rope as x cos + rotate_half(x) sin, in float64", "rope", of=ROPE_ROTATE_HALF),
    Variant(
        "the block builds its bottom-right mask with tril instead of causal_mask",
        "DecoderBlock",
        edits=(
            (
                "causal_mask(T, k.shape[-2], bottom_right=True, device=x.device)",
                "torch.ones(T, k.shape[-2], dtype=torch.bool, device=x.device).tril(k.shape[-2] - T)",
            ),
        ),
    ),
    # Carried cells are graded in their own notebooks: the stub and a broken paste cost nothing here.
    Variant(
        "causal_mask not pasted (the stub)",
        "causal_mask",
        of="\ndef causal_mask(T_q, T_k, bottom_right=False, device=None):\n    raise NotImplementedError()\n",
    ),
    Variant(
        "a broken paste of scaled_dot_product_attention (no scale)",
        "scaled_dot_product_attention",
        edits=(("scale = 1.0 / math.sqrt(Q.shape[-1])", "scale = 1.0"),),
    ),
    Variant(
        "a broken paste of split_heads (reshape straight to [B, H, T, d])",
        "split_heads",
        edits=(("x.view(B, T, num_heads, D // num_heads).transpose(1, 2)", "x.reshape(B, num_heads, T, D // num_heads)"),),
    ),
    Variant(
        "FlashAttention not pasted (the stub)",
        "FlashAttention",
        of=(
            "\nclass FlashAttention(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, Q, K, V, is_causal=False, scale=None):\n"
            "        raise NotImplementedError()\n\n    @staticmethod\n    def backward(ctx, dO):\n        raise NotImplementedError()\n"
        ),
    ),
    Variant(
        "flash_attention_backward not pasted (the stub)",
        "flash_attention_backward",
        of="\ndef flash_attention_backward(Q, K, V, O, dO, L, is_causal=False, scale=None, block_q=64, block_k=64):\n    raise NotImplementedError()\n",
    ),
]
