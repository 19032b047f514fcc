"""Notebook 01: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

MAX_SHIFT = "scaled - scaled.amax(dim=dim, keepdim=True)"
SCORES = "scores = query @ keys.transpose(-2, -1)"
TERMS = "torch.where(weights > 0, weights * torch.log(weights), torch.zeros_like(weights))"
WORKED = "[k / sum(ks) for k in ks]"  # the weights of the student's scores (ln a, ln b, ln c)
TIE = '.letter_of("tied_average", options)'  # the student's letter of the right option
MASKED = "math.log(row.n - row.masked)"
TIE_LETTER = 'question_values("01_soft_dictionary_lookup", "cold_lookup_tie").letter_of("tied_average", options)'

MISTAKES = [
    # hard_lookup
    Variant(
        "hard_lookup matches a key that agrees in any coordinate",
        "hard_lookup",
        edits=((".all(dim=-1)", ".any(dim=-1)"),),
        loses=("test_hard_lookup_all_coordinates", "test_hard_lookup_exact_match", "test_hard_lookup_missing_key"),
    ),
    Variant(
        "hard_lookup returns None instead of raising KeyError",
        "hard_lookup",
        edits=(('raise KeyError(f"no key equals the query {query.tolist()}")', "return None"),),
        loses=("test_hard_lookup_missing_key",),
    ),
    Variant(
        "hard_lookup returns the boolean-masked rows, shape [1, d_v]",
        "hard_lookup",
        edits=(("return values[rows[0]]", "return values[matches]"),),
        loses=("test_hard_lookup_exact_match", "test_hard_lookup_all_coordinates"),
    ),
    # softmax
    Variant("softmax without subtracting the max", "softmax", edits=((MAX_SHIFT, "scaled"),), loses=("test_softmax_stable",)),
    Variant(
        "softmax subtracts one global max instead of each row's",
        "softmax",
        edits=((MAX_SHIFT, "scaled - scaled.max()"),),
        loses=("test_softmax_stable",),
    ),
    Variant(
        "softmax subtracts the mean instead of the max",
        "softmax",
        edits=((MAX_SHIFT, "scaled - scaled.mean(dim=dim, keepdim=True)"),),
        loses=("test_softmax_neg_inf", "test_softmax_stable"),
    ),
    Variant(
        "softmax multiplies by the temperature",
        "softmax",
        edits=(("scores / temperature", "scores * temperature"),),
        loses=("test_softmax_temperature",),
    ),
    Variant(
        "softmax accepts temperature <= 0",
        "softmax",
        edits=(('raise ValueError(f"temperature must be positive, got {temperature}")', "pass"),),
        loses=("test_softmax_temperature",),
    ),
    Variant("softmax always normalises the last dim", "softmax", edits=(("dim=dim", "dim=-1"),), loses=("test_softmax_any_dim",)),
    Variant(
        "softmax computes in float32 whatever the input dtype",
        "softmax",
        edits=(("scaled = scores / temperature", "scaled = scores.float() / temperature"),),
        loses=("test_softmax_matches_torch",),
    ),
    Variant(
        "softmax calls torch.softmax",
        "softmax",
        edits=(("scaled = scores / temperature", "return torch.softmax(scores / temperature, dim=dim)"),),
        loses=("test_softmax_no_builtin",),
    ),
    Variant(
        "softmax reaches the built-in kernel through torch.ops.aten (no Python name a tripwire could patch)",
        "softmax",
        edits=(("scaled = scores / temperature", "return torch.ops.aten._softmax(scores / temperature, dim, False)"),),
        loses=("test_softmax_no_builtin",),
    ),
    Variant(
        "softmax as the exponential of the built-in log_softmax",
        "softmax",
        edits=(("scaled = scores / temperature", "return torch.nn.functional.log_softmax(scores / temperature, dim=dim).exp()"),),
        loses=("test_softmax_no_builtin",),
    ),
    # soft_lookup
    Variant(
        "soft_lookup divides the scores by sqrt(d)",
        "soft_lookup",
        edits=((SCORES, SCORES + " / query.shape[-1] ** 0.5"),),
        loses=(
            "test_soft_lookup_worked_example",
            "test_soft_lookup_matches_torch",
            "test_soft_lookup_batched",
            "test_soft_lookup_temperature",
        ),
    ),
    Variant(
        "soft_lookup computes keys @ query (one query only)",
        "soft_lookup",
        edits=((SCORES, "scores = keys @ query"),),
        loses=("test_soft_lookup_batched", "test_soft_lookup_matches_torch"),
    ),
    Variant(
        "soft_lookup ignores the temperature",
        "soft_lookup",
        edits=(("temperature=temperature", "temperature=1.0"),),
        loses=("test_soft_lookup_temperature", "test_soft_lookup_matches_torch"),
    ),
    Variant(
        "soft_lookup normalises over the batch instead of the keys",
        "soft_lookup",
        edits=(("softmax(scores, dim=-1,", "softmax(scores, dim=0,"),),
        loses=("test_soft_lookup_matches_torch", "test_soft_lookup_batched"),
    ),
    # attention_entropy
    Variant(
        "attention_entropy gives NaN for zero weights (0 * log 0)",
        "attention_entropy",
        edits=((TERMS, "weights * torch.log(weights)"),),
        loses=("test_entropy_zero_weights",),
    ),
    Variant(
        "attention_entropy in bits (log2) instead of nats",
        "attention_entropy",
        edits=(("torch.log(weights)", "torch.log2(weights)"),),
        loses=("test_entropy_in_nats",),
    ),
    Variant(
        "attention_entropy always sums the last dim",
        "attention_entropy",
        edits=(("-terms.sum(dim=dim)", "-terms.sum(dim=-1)"),),
        loses=("test_entropy_any_dim",),
    ),
    # answer_softmax_worked: the softmax of the student's (ln a, ln b, ln c), by hand
    Variant(
        "worked softmax: the exponentials a, b, c, not normalised",
        "answer_softmax_worked",
        edits=((WORKED, "[float(k) for k in ks]"),),
        loses=("test_softmax_worked_example",),
    ),
    Variant(
        "worked softmax: the scores ln k divided by their sum, no exponential",
        "answer_softmax_worked",
        edits=((WORKED, "[math.log(k) / sum(math.log(j) for j in ks) for k in ks]"),),
        loses=("test_softmax_worked_example",),
    ),
    Variant(
        "worked softmax: the softmax of (a, b, c) instead of (ln a, ln b, ln c)",
        "answer_softmax_worked",
        edits=((WORKED, "[math.exp(k) / sum(math.exp(j) for j in ks) for k in ks]"),),
        loses=("test_softmax_worked_example",),
    ),
    Variant(
        "worked softmax: the right weights in the wrong order",
        "answer_softmax_worked",
        edits=((WORKED, "[k / sum(ks) for k in reversed(ks)]"),),
        loses=("test_softmax_worked_example",),
    ),
    # answer_cold_lookup_tie: the option where the tied keys share the weight (the student's letter for it)
    Variant(
        "cold lookup with a tie: the first tied key, as argmax picks it",
        "answer_cold_lookup_tie",
        edits=((TIE, '.letter_of("first_tied", options)'),),
        loses=("test_cold_lookup_with_a_tie",),
    ),
    Variant(
        "cold lookup with a tie: the mean of all values (that is T -> infinity)",
        "answer_cold_lookup_tie",
        edits=((TIE, '.letter_of("all_average", options)'),),
        loses=("test_cold_lookup_with_a_tie",),
    ),
    Variant(
        "cold lookup with a tie: it fails like hard_lookup",
        "answer_cold_lookup_tie",
        edits=((TIE, '.letter_of("fails", options)'),),
        loses=("test_cold_lookup_with_a_tie",),
    ),
    # answer_masked_entropy: ln(unmasked keys) nats
    Variant(
        "masked entropy: counts the masked keys too, ln n",
        "answer_masked_entropy",
        edits=((MASKED, "math.log(row.n)"),),
        loses=("test_masked_entropy",),
    ),
    Variant(
        "masked entropy: in bits, log2 of the unmasked keys",
        "answer_masked_entropy",
        edits=((MASKED, "math.log2(row.n - row.masked)"),),
        loses=("test_masked_entropy",),
    ),
    Variant(
        "masked entropy: without the minus sign, negative",
        "answer_masked_entropy",
        edits=((MASKED, "-math.log(row.n - row.masked)"),),
        loses=("test_masked_entropy",),
    ),
]

CORRECT_VARIANTS = [
    # Correct, but writes a warning line to stderr on every call: the autograder's IgnorePattern must
    # keep that from zeroing the test cells (nbgrader scores any stderr in a test cell 0).
    Variant(
        "hard_lookup that writes a warning to stderr",
        "hard_lookup",
        of="""
def hard_lookup(query, keys, values):
    import sys
    sys.stderr.write("UserWarning: this lookup is slow, but correct\\n")
    rows = torch.nonzero((keys == query).all(dim=-1)).flatten()
    if rows.numel() == 0:
        raise KeyError(query)
    return values[rows[0]]
""",
    ),
    Variant(
        "hard_lookup as a Python loop with torch.equal",
        "hard_lookup",
        of="""
def hard_lookup(query, keys, values):
    for i in range(keys.shape[0]):
        if torch.equal(keys[i], query):
            return values[i]
    raise KeyError(query)
""",
    ),
    Variant(
        "softmax through logsumexp, in float64 inside",
        "softmax",
        of="""
def softmax(scores, dim=-1, temperature=1.0):
    if not temperature > 0:
        raise ValueError("temperature must be > 0")
    x = scores.double() / temperature
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True)).to(scores.dtype)
""",
    ),
    # The rounding trap: in float32, logsumexp near 1e4 is off by ~1e-3 in the exponent, so this
    # differs from torch.softmax by ~1e-4 there; the tests widen by exp_rounding (CONTRACT.md).
    Variant(
        "softmax as exp(x - logsumexp(x)), in float32",
        "softmax",
        of="""
def softmax(scores, dim=-1, temperature=1.0):
    if not temperature > 0:
        raise ValueError("temperature must be > 0")
    x = scores / temperature
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
""",
    ),
    Variant(
        "soft_lookup with einsum",
        "soft_lookup",
        of="""
def soft_lookup(query, keys, values, temperature=1.0):
    scores = torch.einsum("...d,nd->...n", query, keys)
    weights = softmax(scores, dim=-1, temperature=temperature)
    return torch.einsum("...n,nv->...v", weights, values), weights
""",
    ),
    Variant(
        "attention_entropy with torch.special.entr",
        "attention_entropy",
        of="""
def attention_entropy(weights, dim=-1):
    return torch.special.entr(weights).sum(dim=dim)
""",
    ),  # Graded questions: the same answer written differently.
    Variant(
        "worked softmax as fractions", "answer_softmax_worked", edits=((WORKED, "[ks[0] / sum(ks), ks[1] / sum(ks), ks[2] / sum(ks)]"),)
    ),
    Variant(
        "worked softmax as a tensor, computed",
        "answer_softmax_worked",
        edits=(
            (
                (
                    '    ks = question_values("01_soft_dictionary_lookup", "softmax_worked").ks  # the (a, b, c) of this notebook\'s student\n'
                    "    return [k / sum(ks) for k in ks]  # e^(ln k) = k: the weights are (a, b, c) / (a + b + c)\n"
                ),
                (
                    '    ks = question_values("01_soft_dictionary_lookup", "softmax_worked").ks\n'
                    "    return torch.softmax(torch.log(torch.tensor(ks, dtype=torch.float32)), dim=-1)\n"
                ),
            ),
        ),
    ),
    Variant("worked softmax rounded to 4 decimals", "answer_softmax_worked", edits=((WORKED, "[round(k / sum(ks), 4) for k in ks]"),)),
    Variant(
        "cold lookup with a tie: the letter in upper case, with spaces",
        "answer_cold_lookup_tie",
        edits=((TIE_LETTER, '" " + ' + TIE_LETTER + ".upper() + ' '"),),
    ),
    Variant(
        "masked entropy as a sum over the three weights",
        "answer_masked_entropy",
        edits=((MASKED, "-sum(p * math.log(p) for p in [1 / (row.n - row.masked)] * (row.n - row.masked))"),),
    ),
    Variant("masked entropy to 4 decimals", "answer_masked_entropy", edits=((MASKED, "round(math.log(row.n - row.masked), 4)"),)),
    Variant(
        "masked entropy with torch, as a 0-d tensor",
        "answer_masked_entropy",
        edits=((MASKED, "torch.special.entr(torch.full((row.n - row.masked,), 1 / (row.n - row.masked), dtype=torch.float64)).sum()"),),
    ),
]
