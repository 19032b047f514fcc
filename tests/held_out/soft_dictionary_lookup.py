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
    HeldOut(
        Variant(
            "hard_lookup returns the value of the last matching key, not the first",
            "hard_lookup",
            edits=(("return values[rows[0]]", "return values[rows[-1]]"),),
            loses=("test_hard_lookup_exact_match",),
        ),
        says=(
            "AssertionError: hard_lookup(table[0], table, values): got tensor([",
            "input table = tensor([[2.0, 0.0, 2.0], [2.0, 0.0, 2.0]]",
        ),
    ),
    HeldOut(
        Variant(
            "hard_lookup indexes the first match without checking for one (IndexError, not KeyError)",
            "hard_lookup",
            edits=(('    if rows.numel() == 0:\n        raise KeyError(f"no key equals the query {query.tolist()}")\n', ""),),
            loses=("test_hard_lookup_missing_key",),
        ),
        says=("hard_lookup([0.5, 0.5, 0.0], toy_keys, toy_values): should raise KeyError, but raised IndexError",),
    ),
    HeldOut(
        Variant(
            "softmax shifts by the max of the raw scores, not of the scores divided by the temperature",
            "softmax",
            edits=(("scaled - scaled.amax(dim=dim, keepdim=True)", "scaled - scores.amax(dim=dim, keepdim=True)"),),
            loses=("test_softmax_stable",),
        ),
        says=(
            "softmax(x, temperature=0.5), rows of 4 equal scores 1000, -1000 and -3e4: 12 of 12 entries are NaN where a number was expected",
        ),
    ),
    HeldOut(
        Variant(
            "soft_lookup sums the weighted values over the first axis (right for one query only)",
            "soft_lookup",
            edits=(("return weights @ values, weights", "return (weights.unsqueeze(-1) * values).sum(0), weights"),),
            loses=("test_soft_lookup_matches_torch", "test_soft_lookup_batched"),
        ),
        says=(
            "AssertionError: output for queries of shape [1, 2]: expected shape [1, 3], got [4, 3]",
            "output shape for queries [2, 3, d]: expected shape [2, 3, 3], got [3, 3, 3]",
        ),
    ),
    HeldOut(
        Variant(
            "attention_entropy without the minus sign (negative entropies)",
            "attention_entropy",
            edits=(("return -terms.sum(dim=dim)", "return terms.sum(dim=dim)"),),
            loses=("test_entropy_in_nats",),
        ),
        says=(
            "attention_entropy([1/4, 1/4, 1/4, 1/4]): 1 of 1 entries differ; largest error 2.77 at index (): got -1.38629, expected 1.38629",
        ),
    ),
    HeldOut(
        Variant(
            "attention_entropy averages the terms instead of summing them",
            "attention_entropy",
            edits=(("return -terms.sum(dim=dim)", "return -terms.mean(dim=dim)"),),
            loses=("test_entropy_in_nats", "test_entropy_zero_weights"),
        ),
        says=(
            "attention_entropy([1/4, 1/4, 1/4, 1/4]): 1 of 1 entries differ; largest error 1.04 at index (): got 0.346574, expected 1.38629",
            "attention_entropy([1/2, 1/2, 0, 0]) vs attention_entropy([1/2, 1/2]): 1 of 1 entries differ",
        ),
    ),
]
