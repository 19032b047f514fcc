"""Notebook 09: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

QKV = "q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))  # [B, H, T, d]"

HELD_OUT = [
    HeldOut(
        Variant(
            "the block turns the values with RoPE too",
            "DecoderBlock",
            edits=(
                ("q, k = rope(q, positions), rope(k, positions)", "q, k, v = rope(q, positions), rope(k, positions), rope(v, positions)"),
            ),
            loses=("test_decoder_block_matches_reference",),
        ),
        says=(
            "the first of the block's intermediate results that differs from the reference block's is q, k and v as given to scaled_dot_product_attention",
        ),
    ),
    HeldOut(
        Variant(
            "the MLP reads norm1 of the residual stream",
            "DecoderBlock",
            edits=(("return x + self.mlp(self.norm2(x))", "return x + self.mlp(self.norm1(x))"),),
            loses=("test_decoder_block_matches_reference",),
        ),
        says=("is what the MLP reads (the input of mlp)", "the steps before it match"),
    ),
    HeldOut(
        Variant(
            "generate keeps the cache of its previous call",
            "generate",
            edits=(("            model.clear_cache()\n", ""),),
            loses=("test_generate_with_cache",),
        ),
        says=("a second generate",),
    ),
    HeldOut(
        Variant(
            "rope's frequencies grow with i: base ** (+2i / d)",
            "rope",
            edits=(
                (
                    "torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d",
                    "-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d",
                ),
            ),
            loses=("test_rope_halves_convention",),
        ),
        says=("rope of [1, 2, 3, 4] at positions 0, 1, 2, 1000, 4096",),
    ),
    HeldOut(
        Variant(
            "the training step never zeroes the gradients",
            "train_copy_model",
            edits=(("            optimizer.zero_grad()\n", ""),),
            loses=("test_copy_task_learned",),
        ),
        says=("train_copy_model",),
    ),
    HeldOut(
        Variant(
            "a cached decode step projects the new token by qkv's weight alone (its bias left out)",
            "DecoderBlock",
            edits=(
                (
                    QKV,
                    "h = self.norm1(x)\n"
                    "        projected = h @ self.qkv.weight.T if use_cache and self.cache_k is not None else self.qkv(h)  # a decode step\n"
                    "        q, k, v = (split_heads(t, self.num_heads) for t in projected.chunk(3, dim=-1))  # [B, H, T, d]",
                ),
            ),
            loses=("test_decoder_block_kv_cache",),
        ),
        says=(
            "cached decoding (4 tokens, then 1 at a time) vs the block's own full pass: 96 of 224 entries differ",
            "the first position whose values differ is position 4",
            "in the cached call for position 4, the first of the block's intermediate results that differs from the reference "
            "block's is q and k as given to rope",
        ),
    ),
    HeldOut(
        Variant(
            "generate feeds each cached step one position too far (start_pos = the length with the new token)",
            "generate",
            edits=(("start_pos=tokens.shape[1] - 1", "start_pos=tokens.shape[1]"),),
            loses=("test_generate_with_cache",),
        ),
        says=("logits each new token was chosen from vs full recomputation", "the first new token whose values differ is new token 1"),
    ),
    HeldOut(
        Variant(
            "generate samples the next token from the softmax instead of taking the argmax",
            "generate",
            edits=(("next_token = last.argmax(dim=-1, keepdim=True)", "next_token = torch.multinomial(last.softmax(dim=-1), 1)"),),
            loses=("test_generate_with_cache", "test_generate_without_cache"),
        ),
        says=("logits each new token was chosen from vs full recomputation", "logits without the cache vs recomputation"),
    ),
    HeldOut(
        Variant(
            "rope turns the other way (x1 cos + x2 sin, x2 cos - x1 sin)",
            "rope",
            edits=(
                (
                    "return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)",
                    "return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)",
                ),
            ),
            loses=("test_rope_halves_convention",),
        ),
        says=("rope of [1, 2, 3, 4] at positions 0, 1, 2, 1000, 4096 (halves convention): 16 of 20 entries differ",),
    ),
    HeldOut(
        Variant(
            "rope keeps cos and sin in float64, so float32 or half-precision x comes back as float64",
            "rope",
            edits=(("cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)", "cos, sin = angles.cos(), angles.sin()"),),
            loses=("test_rope_halves_convention",),
        ),
        says=("rope(x [2, 4]) (torch.float32) vs PyTorch reference: returned dtype torch.float64 but torch.float32 was expected",),
    ),
    HeldOut(
        Variant(
            "the training loss shifted the wrong way: the logits at t + 1 scored against token t",
            "train_copy_model",
            edits=(
                (
                    "F.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1))",
                    "F.cross_entropy(logits[:, 1:].reshape(-1, vocab), tokens[:, :-1].reshape(-1))",
                ),
            ),
            loses=("test_copy_task_learned",),
        ),
        says=("after 300 steps the accuracy on the predictable tokens of a held-out batch is 0.",),
    ),
    HeldOut(
        Variant(
            "the training step updates and zeroes the gradients before loss.backward() (step, zero_grad, backward)",
            "train_copy_model",
            edits=(
                (
                    "            optimizer.zero_grad()\n            loss.backward()\n            optimizer.step()\n",
                    "            optimizer.step()\n            optimizer.zero_grad()\n            loss.backward()\n",
                ),
            ),
            loses=("test_copy_task_learned",),
        ),
        says=("train_copy_model(300, seed=0): raised RuntimeError: one of the variables needed for gradient computation",),
    ),
]
