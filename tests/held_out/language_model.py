"""Notebook 09: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

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
]
