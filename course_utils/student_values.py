"""Per-student values for the graded questions: each student answers a question about their own numbers.

A student sets ``STUDENT_ID`` once, in the cell under a notebook's title. Each question's values
(a d_k, a period, a mask's sizes, the order of a choice's options or of the maps to read) are drawn
from ``(assignment, question, student id)``: a sha256 of the three seeds a ``random.Random``, so the
same student always gets the same values, on any machine, and two students usually different ones.
An empty id gives the notebook's **example values**: the ones the solutions, the site and the
discussion after each question talk about.

    values = question_values("03_scaled_dot_product_attention", "score_variance", STUDENT_ID)
    show_values(values)          # prints "your values": d_k = 128
    values.d_k                   # 128

Without an id, ``question_values(assignment, question)`` gives the values of *this notebook's*
student: the one the grader grades in its trusted pass (``grading_student``), elsewhere the
``STUDENT_ID`` the notebook set. So a solution's ``answer_...()`` computes its answer for whoever
is graded, and a hidden test compares a submission with the answer for the id nbgrader grades,
never with an id the submission chose.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import random
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from .comparisons import _fail
from .runtime import is_grading
from .selfcheck import checked_only_a_format

T = TypeVar("T")
LETTERS = "abcdefghij"
ID_VARIABLE = "STUDENT_ID"
ID_CELL = "student-id"  # the cell id of the cell after the imports that sets STUDENT_ID
STUDENT_ID_LINE = 'STUDENT_ID = ""  # your id exactly as on the course roster, e.g. "jsmith"'


class _ExampleId(str):
    """The solutions' id: "", the example values, and set on purpose (so the visible check lets it pass)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EXAMPLE_ID"


EXAMPLE_ID: str = _ExampleId("")


def normalised_id(student: str) -> str:
    """A roster id as values are drawn for it: without surrounding spaces, in lower case."""
    return str(student).strip().lower()


@dataclass(frozen=True)
class QuestionValues(Mapping[str, Any]):
    """One student's values for one question: read them as ``values.d_k`` or ``values["d_k"]``.

    A choice question also has ``options``: ``(letter, text)`` in this student's order, and
    ``letter(key)`` names the letter an option got. The keys are neutral (``"o1"``, ``"o2"``, ... for options,
    ``"m1"``, ... for maps, numbered in the example's order), so neither they nor this object say which option is
    right or what a map shows: the solutions name them in their own regions (``letter_of``).
    """

    assignment: str
    question: str
    student: str  # as normalised; "" for the example
    values: Mapping[str, Any] = field(default_factory=dict)
    options: tuple[tuple[str, str], ...] = ()
    keys_in_order: tuple[str, ...] = ()  # the option keys, in this student's order

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self.__dict__.get("values", {}):
            raise AttributeError(f"{self.question} has no value {name!r}: it has {sorted(self.__dict__.get('values', {}))}")
        return self.__dict__["values"][name]

    @property
    def is_example(self) -> bool:
        return self.student == ""

    def letter(self, key: str) -> str:
        """The letter this student's question gives the option ``key``."""
        return LETTERS[self.keys_in_order.index(key)]

    def letter_of(self, name: str, names: Sequence[str]) -> str:
        """The letter this student sees for the option (or map) called ``name`` in ``names``, which names the
        options in the example's order: ``letter_of("b", "abcd")`` is this student's letter of the example's (b)."""
        return LETTERS[self.arrange(list(names)).index(name)]

    def arrange(self, items: Sequence[T]) -> list[T]:
        """``items``, given in the example's order of the options (or maps), put in this student's order: what the
        page shows under letter A, B, ... without naming on the page which one is which."""
        example = tuple(QUESTIONS[(self.assignment, self.question)].example["order"])
        if len(items) != len(example):
            raise ValueError(f"{self.question} orders {len(example)} items, not {len(items)}")
        return [items[example.index(key)] for key in self.keys_in_order]


@dataclass(frozen=True)
class _Question:
    example: Mapping[str, Any]
    draw: Callable[[random.Random], dict[str, Any]]
    describe: Callable[[Mapping[str, Any]], str]
    options: Mapping[str, str] = field(default_factory=dict)  # key -> text (markdown), in the example's order


def _shuffled(rng: random.Random, items: tuple[Any, ...]) -> tuple[Any, ...]:
    out = list(items)
    rng.shuffle(out)
    return tuple(out)


def _neutral(prefix: str, count: int) -> tuple[str, ...]:
    """Keys that number the options (or maps) in the example's order and say nothing of what they are."""
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


def _options(*texts: str) -> dict[str, str]:
    return dict(zip(_neutral("o", len(texts)), texts))


def _choice(*texts: str) -> _Question:
    """A question whose options are shuffled per student (the example keeps the order given here)."""
    options = _options(*texts)
    keys = tuple(options)
    return _Question({"order": keys}, lambda rng: {"order": _shuffled(rng, keys)}, lambda v: "", options)


def _maps(count: int, count_word: str) -> _Question:
    """A question about maps shown in a per-student order (``order[i]`` is the map under letter i)."""
    keys = _neutral("m", count)

    def describe(v: Mapping[str, Any]) -> str:
        return f"{count_word} maps, labelled {', '.join(LETTERS[:count].upper())} in your order (drawn above)"

    return _Question({"order": keys}, lambda rng: {"order": _shuffled(rng, keys)}, describe)


# --- the questions of notebooks 01-06 --------------------------------------------------------------


def _softmax_scores(rng: random.Random) -> dict[str, Any]:
    # Three distinct whole numbers with a sum of 8, 10, 16, 20 or 25: worked by hand, the weights are short decimals.
    triples = [
        (a, b, c)
        for a in range(1, 10)
        for b in range(a + 1, 10)
        for c in range(b + 1, 10)
        if a + b + c in (8, 10, 16, 20, 25) and (a, b, c) != (1, 2, 5)
    ]
    return {"ks": _shuffled(rng, rng.choice(triples))}


def _masked_row(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(7, 12)
    # never all keys, never as many masked as not, and never 2 or 4 kept: section 4's table gives ln 2 and ln 4 outright
    unmasked = rng.choice([u for u in range(3, n - 1) if u != n - u and u != 4])
    return {"n": n, "masked": n - unmasked}


def _bottom_right(rng: random.Random) -> dict[str, Any]:
    while True:
        T_q = rng.randint(2, 5)
        T_k = rng.randint(T_q + 1, T_q + 4)
        if (T_q, T_k) != (2, 4):  # a visible test writes that mask out in full
            return {"T_q": T_q, "T_k": T_k}


def _future_weight(rng: random.Random) -> dict[str, Any]:
    T = rng.randint(3, 8)
    return {"T": T, "query": rng.randint(0, T - 3)}  # at least two future keys: one key's weight is not the total


# The (T, lengths) a left-padding question may get: those whose right answer differs from each typical wrong one,
# so that a wrong answer says which idea was missing. The grader's formulas decide it; tests/test_student_values.py
# checks this table against them (the answers themselves stay with the grader).
_LEFT_PADDING_DRAWS = frozenset(
    {
        (4, (2, 1)), (4, (3, 1)),
        (5, (2, 1)), (5, (3, 1)), (5, (3, 2)), (5, (4, 1)), (5, (4, 3)),
        (6, (2, 1)), (6, (3, 1)), (6, (3, 2)), (6, (4, 1)), (6, (4, 2)), (6, (5, 1)), (6, (5, 3)), (6, (5, 4)),
        (7, (2, 1)), (7, (3, 1)), (7, (4, 1)), (7, (4, 2)), (7, (4, 3)), (7, (5, 1)), (7, (5, 2)), (7, (5, 4)),
        (7, (6, 1)), (7, (6, 3)), (7, (6, 4)), (7, (6, 5)),
    }
)  # fmt: skip


def _left_padding(rng: random.Random) -> dict[str, Any]:
    while True:
        T = rng.randint(4, 7)
        longer = rng.randint(2, T - 1)
        lengths = (longer, rng.randint(1, longer - 1))
        if (T, lengths) in _LEFT_PADDING_DRAWS:
            return {"lengths": lengths, "T": T}


def _gqa(rng: random.Random) -> dict[str, Any]:
    H_kv = rng.choice((2, 4, 8))
    return {
        "layers": rng.choice((24, 32, 40, 48, 60, 80)),
        "H_q": H_kv * rng.choice((4, 8)),
        "H_kv": H_kv,
        "d": rng.choice((64, 128)),
        "T": rng.choice((2048, 4096, 8192)),
    }


QUESTIONS: dict[tuple[str, str], _Question] = {
    ("01_soft_dictionary_lookup", "softmax_worked"): _Question(
        {"ks": (1, 2, 5)},
        _softmax_scores,
        lambda v: "scores $s = (" + ", ".join(f"\\ln {k}" for k in v["ks"]) + ")$",
    ),
    ("01_soft_dictionary_lookup", "cold_lookup_tie"): _choice(
        "the value of cat, $(0.2, 0.8, 0.1)$: the first key with the largest score, as `argmax` picks it;",
        "the average of the cat and dog values, $(0.25, 0.75, 0.15)$;",
        "the average of all three values, $(0.2, 0.533, 0.4)$;",
        "nothing: as $T \\to 0$ the lookup fails like `hard_lookup`, since no key equals the query.",
    ),
    ("01_soft_dictionary_lookup", "masked_entropy"): _Question(
        {"n": 8, "masked": 5},
        _masked_row,
        lambda v: f"$n = {v['n']}$ keys, of which {v['masked']} are masked",
    ),
    ("02_dot_product_attention", "bandwidth_limit"): _choice(
        "the average of all training targets, the same number for every $x$;",
        "the target $y_i$ of the training input nearest to $x$: the curve becomes a staircase that copies the noise;",
        "the true value $f(x)$;",
        "zero, because every weight goes to zero.",
    ),
    ("02_dot_product_attention", "additive_without_tanh"): _choice(
        "nothing changes: the tanh only keeps the scores bounded;",
        "every query gets the same weights: the query's share of the score is the same for every key, "
        "and the softmax over the keys removes it;",
        "the weights become uniform, $1/T_k$ for every key;",
        "the scores become symmetric, so query $i$ weighs key $j$ as much as query $j$ weighs key $i$.",
    ),
    ("02_dot_product_attention", "shared_embedding_map"): _maps(5, "five"),
    ("03_scaled_dot_product_attention", "score_variance"): _Question(
        {"d_k": 64},
        lambda rng: {"d_k": rng.choice((16, 32, 128, 256, 512, 1024))},
        lambda v: f"$d_k = {v['d_k']}$",
    ),
    ("03_scaled_dot_product_attention", "saturated_jacobian"): _choice(
        "it falls from its value at $x = 0$ towards 0, roughly like $1/x$;",
        "it falls from its value at $x = 0$ towards 0, exponentially fast in $x$;",
        "it first grows, peaks, then falls towards 0, exponentially fast in $x$;",
        "it first grows, peaks, then falls towards 0, roughly like $1/x$.",
    ),
    ("03_scaled_dot_product_attention", "unscaled_map"): _maps(3, "three"),
    ("04_masking", "bottom_right_true_count"): _Question(
        {"T_q": 3, "T_k": 5}, _bottom_right, lambda v: f"$T_q = {v['T_q']}$ queries and $T_k = {v['T_k']}$ keys"
    ),
    ("04_masking", "key_padding_mask_unconverted"): _choice(
        "only the real tokens, as intended",
        "only the padding positions",
        "every position, real and padding, as if there were no mask",
        "none: PyTorch raises an error about the mask's convention",
    ),
    ("04_masking", "float_mask_future_weight"): _Question(
        {"T": 4, "query": 0},
        _future_weight,
        lambda v: (
            f"$T = {v['T']}$, and query {v['query']}, whose future keys are "
            + (f"{v['query'] + 1} to {v['T'] - 1}" if v["query"] + 1 < v["T"] - 1 else f"key {v['T'] - 1}")
        ),
    ),
    ("04_masking", "left_padding_causal_counts"): _Question(
        {"lengths": (3, 2), "T": 5},
        _left_padding,
        lambda v: f"two sequences of lengths {v['lengths'][0]} and {v['lengths'][1]}, left-padded to $T = {v['T']}$",
    ),
    ("05_multi_head_attention", "attention_bug"): _choice(
        "the line marked `[projection]`: the projection and its split into `q`, `k`, `v`;",
        "the line marked `[split]`: the split into heads;",
        "the line marked `[softmax]`: the softmax;",
        "the line marked `[merge]`: the merge of the heads.",
    ),
    ("05_multi_head_attention", "lookback_distance"): _Question(
        # never 4 nor 3: the numbers the notebook's own plot shows
        {"P": 6},
        lambda rng: {"P": rng.choice((5, 7, 8, 9, 10, 12))},
        lambda v: f"period $P = {v['P']}$",
    ),
    ("05_multi_head_attention", "gqa_cache_bytes"): _Question(
        {"layers": 80, "H_q": 64, "H_kv": 8, "d": 128, "T": 4096},
        _gqa,
        lambda v: (
            f"**{v['layers']} layers**, head size $d = {v['d']}$, **{v['H_q']} query heads** sharing "
            f"**{v['H_kv']} K/V heads** (GQA), {v['T']} tokens, bf16"
        ),
    ),
    ("06_complexity", "tiled_kernel_bound"): _Question(
        {"B_q": 128, "order": _neutral("o", 3)},
        lambda rng: {"B_q": rng.choice((64, 128, 256)), "order": _shuffled(rng, _neutral("o", 3))},
        lambda v: f"query blocks of $B_q = {v['B_q']}$ rows",
        _options(
            "compute-bound: its intensity is above the ridge point;",
            "memory-bound: its intensity is below the ridge point;",
            "memory-bound for short sequences and compute-bound for long ones, because its intensity grows with $T$.",
        ),
    ),
}


# --- whose values --------------------------------------------------------------------------------

_graded: list[str] = []  # the trusted pass's student, innermost last


@contextlib.contextmanager
def grading_student(student: str) -> Iterator[None]:
    """While the trusted pass grades ``student``: ``question_values`` without an id gives theirs.

    Only the grader calls this (``autograder.grading.verdicts.decide``, with the id nbgrader grades);
    no student code runs in that process.
    """
    _graded.append(str(student))
    try:
        yield
    finally:
        _graded.pop()


def graded_student() -> str:
    """The id whose values count here: the graded student's in the trusted pass, else the notebook's ``STUDENT_ID``."""
    if _graded:
        return _graded[-1]
    main = sys.modules.get("__main__")
    notebook_id = getattr(main, ID_VARIABLE, "") if main is not None else ""
    return notebook_id if isinstance(notebook_id, str) else ""


def _seeded(assignment: str, question: str, student: str) -> random.Random:
    digest = hashlib.sha256(f"{assignment}\x1f{question}\x1f{student}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def question_values(assignment: str, question: str, student: str | None = None) -> QuestionValues:
    """The values of ``question`` in ``assignment`` for ``student`` (the example values for "").

    ``student`` left out: this notebook's student (``graded_student()``).
    """
    try:
        spec = QUESTIONS[(assignment, question)]
    except KeyError:
        known = sorted(q for a, q in QUESTIONS if a == assignment)
        raise KeyError(f"no question {question!r} in {assignment!r}: {known}") from None
    who = normalised_id(graded_student() if student is None else student)
    values = dict(spec.example) if who == "" else spec.draw(_seeded(assignment, question, who))
    order = tuple(values.get("order", ()))  # a choice's options, or the maps, in this student's order
    options = tuple((LETTERS[i], spec.options[key]) for i, key in enumerate(order)) if spec.options else ()
    return QuestionValues(assignment, question, who, MappingProxyType(values), options, order)


def _shown(value: Any) -> str:
    return f"({', '.join(map(str, value))})" if isinstance(value, tuple) else str(value)


def values_text(values: QuestionValues) -> str:
    """What ``show_values`` prints, as markdown."""
    whose = f"your values (STUDENT_ID {values.student!r})" if values.student else "the example values (STUDENT_ID is empty)"
    lines = []
    described = QUESTIONS[(values.assignment, values.question)].describe(values.values)
    if described:
        lines.append(f"**{whose[0].upper()}{whose[1:]}:** {described}.")
    elif not values.options:
        lines.append(f"**{whose[0].upper()}{whose[1:]}:** " + ", ".join(f"{k} = {_shown(v)}" for k, v in values.items()))
    if values.options:
        if not described:
            lines.append(f"**The options, in {'your' if values.student else 'the example'} order:**")
        else:
            lines.append("The options:")
        lines += [f"- ({letter}) {text}" for letter, text in values.options]
    return "\n".join(lines)


def show_values(values: QuestionValues) -> None:
    """Show a student their values (and a choice's options with their letters), as markdown where it renders."""
    text = values_text(values)
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # pragma: no cover - the course always has IPython
        print(text)


def check_student_id(student: Any) -> bool:
    """The visible check that the notebook says whose it is: fails while ``STUDENT_ID`` is still empty.

    The solutions set ``EXAMPLE_ID`` (the example values, on purpose) and pass; under grading it always
    passes, since the grader checks every answer against the id it grades, whatever the notebook says.
    A format check: the self-check does not count it as checking a value.
    """
    checked_only_a_format(ID_VARIABLE)
    if is_grading() or _graded or student is EXAMPLE_ID:
        return True
    if not isinstance(student, str) or not student.strip():
        _fail(
            "STUDENT_ID",
            f"is {student!r}, so your questions show the example values, not yours",
            inputs=None,
            hint='set STUDENT_ID in its cell near the top (just after the imports) to your id as on the roster (e.g. STUDENT_ID = "jsmith"), '
            "run the notebook again from the top, and answer for the values printed then",
        )
    return True


# --- the STUDENT_ID of a notebook, read and set without running it --------------------------------


def _code_cells(notebook: Mapping[str, Any]) -> Iterator[Any]:
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            yield cell


def _id_assignment(source: str) -> ast.Assign | None:
    if ID_VARIABLE not in source:
        return None  # most cells: no parse of the student's code at all
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the student's text: any of these, never a crash
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == ID_VARIABLE for t in node.targets):
            return node
    return None


def declares_student_id(notebook: Mapping[str, Any]) -> bool:
    """Whether the notebook has a cell that sets ``STUDENT_ID`` (notebooks 01-06)."""
    return any(_id_assignment(_source(c)) is not None for c in _code_cells(notebook))


def _source(cell: Any) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def notebook_student_id(notebook: Mapping[str, Any]) -> str | None:
    """The ``STUDENT_ID`` a notebook sets, read from its source: its last top-level ``STUDENT_ID = "..."``.

    None when no cell sets it to a string literal (absent, or computed).
    """
    found: str | None = None
    for cell in _code_cells(notebook):
        node = _id_assignment(_source(cell))
        if node is not None:
            value = node.value
            found = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
    return found


def with_student_id(notebook: Any, student: str) -> Any:
    """A copy of ``notebook`` whose ``STUDENT_ID`` cells set ``student``, as the grader runs a submission."""
    out = copy.deepcopy(notebook)
    for cell in _code_cells(out):
        node = _id_assignment(_source(cell))
        if node is not None:  # only the assignment's own lines change: the rest of the cell runs as written
            lines = _source(cell).split("\n")
            first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
            lines[first : last + 1] = [f"{ID_VARIABLE} = {student!r}  # the id this notebook is graded as"]
            cell["source"] = "\n".join(lines)
    return out


def student_id_note(notebook: Mapping[str, Any], student: str) -> str:
    """The note for a submission whose ``STUDENT_ID`` is not the graded student's ('' when it is, or none is asked)."""
    if not declares_student_id(notebook):
        return ""
    found = notebook_student_id(notebook)
    if found is not None and normalised_id(found) in ("", normalised_id(student)):
        return ""  # the graded id or none at all: an empty id says nothing of whose answers these are
    said = "not set to a string" if found is None else repr(found[:60])
    return f"the notebook's STUDENT_ID is {said}, not this submission's student {student!r}: graded against {student!r}'s values"
