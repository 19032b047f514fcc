"""Notebook 01: bugs the catalogue does not list."""

from __future__ import annotations

from autograder.mistakes import Variant

from . import HeldOut

HELD_OUT = [
    HeldOut(
        Variant(
            "hard_lookup compares keys with a tolerance (torch.isclose)",
            "hard_lookup",
            edits=(("(keys == query).all(dim=-1)", "torch.isclose(keys, query).all(dim=-1)"),),
            loses=("test_hard_lookup_missing_key",),
        ),
        says=("hard_lookup(keys[0] + 1e-6, ...): should raise KeyError",),
    ),
    HeldOut(
        Variant(
            "softmax divides by the sum of every entry, not each slice's",
            "softmax",
            edits=(("exponentials / exponentials.sum(dim=dim, keepdim=True)", "exponentials / exponentials.sum()"),),
            loses=(
                "test_softmax_matches_torch",
                "test_softmax_any_dim",
                "test_softmax_temperature",
                "test_softmax_stable",
                "test_softmax_neg_inf",
                "test_softmax_no_builtin",
            ),
        ),
        says=("softmax(scores) on a [3, 3] batch: 9 of 9 entries differ",),
    ),
    HeldOut(
        Variant(
            "soft_lookup divides by the temperature and passes it on too (T squared)",
            "soft_lookup",
            edits=(("weights = softmax(scores, dim=-1,", "weights = softmax(scores / temperature, dim=-1,"),),
            loses=("test_soft_lookup_matches_torch", "test_soft_lookup_temperature"),
        ),
        says=("AssertionError: weights for queries of shape [1, 2]", "soft_lookup weights at temperature 2.0 vs the solution"),
    ),
    HeldOut(
        Variant(
            "attention_entropy adds 1e-9 inside the log instead of dropping zero weights",
            "attention_entropy",
            edits=(
                (
                    "torch.where(weights > 0, weights * torch.log(weights), torch.zeros_like(weights))",
                    "weights * torch.log(weights + 1e-9)",
                ),
            ),
            loses=("test_entropy_in_nats", "test_entropy_zero_weights"),
        ),
        says=(
            "attention_entropy(w), w of shape [2, 2], torch.float64 vs torch.distributions.Categorical.entropy",
            "AssertionError: entropy of one-hot rows",
        ),
    ),
]
