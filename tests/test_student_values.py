"""Per-student question values (course_utils.student_values): drawn, shown, and graded against the id nbgrader grades."""

from __future__ import annotations

import hashlib
import math
import random
import re
import string
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest

from autograder.grading.pipeline import grade
from autograder.grading.run_report import RunReport
from autograder.mistakes import CORRECT_VARIANTS, MISTAKES
from autograder.settings import SOLUTIONS_DIR
from autograder.solutions import load_solution, solution_cells, solution_module
from autograder.submissions import solved, write_submission
from course_utils.comparisons import CheckFailed
from course_utils.questions import check_answer
from course_utils.student_values import (
    _LEFT_PADDING_DRAWS,
    EXAMPLE_ID,
    LETTERS,
    QUESTIONS,
    check_student_id,
    grading_student,
    notebook_student_id,
    question_values,
    student_id_note,
    with_student_id,
)

# Today's answers, from the notebooks' text before the values were per student: the example (an empty id) keeps them.
EXAMPLE_ANSWERS: dict[tuple[str, str], Any] = {
    ("01_soft_dictionary_lookup", "softmax_worked"): [0.125, 0.25, 0.625],
    ("01_soft_dictionary_lookup", "cold_lookup_tie"): "b",
    ("01_soft_dictionary_lookup", "masked_entropy"): math.log(3),
    ("02_dot_product_attention", "bandwidth_limit"): "b",
    ("02_dot_product_attention", "additive_without_tanh"): "b",
    ("02_dot_product_attention", "shared_embedding_map"): "c",
    ("03_scaled_dot_product_attention", "score_variance"): [64, 1],
    ("03_scaled_dot_product_attention", "saturated_jacobian"): "c",
    ("03_scaled_dot_product_attention", "unscaled_map"): "b",
    ("04_masking", "bottom_right_true_count"): 12,
    ("04_masking", "key_padding_mask_unconverted"): "b",
    ("04_masking", "float_mask_future_weight"): 3 / (math.e + 3),
    ("04_masking", "left_padding_causal_counts"): [9, 5],
    ("05_multi_head_attention", "attention_bug"): "c",
    ("05_multi_head_attention", "lookback_distance"): 5,
    ("05_multi_head_attention", "gqa_cache_bytes"): 1_342_177_280,
    ("06_complexity", "tiled_kernel_bound"): "b",
}
# How each question is graded (its hidden test's kind and tolerance).
GRADED_AS: dict[str, dict[str, Any]] = {
    "softmax_worked": {"kind": "numbers", "atol": 1e-3},
    "masked_entropy": {"kind": "number", "atol": 1e-3},
    "score_variance": {"kind": "numbers", "rtol": 0.01},
    "bottom_right_true_count": {"kind": "integer"},
    "float_mask_future_weight": {"kind": "number", "rtol": 0.01},
    "left_padding_causal_counts": {"kind": "numbers"},
    "lookback_distance": {"kind": "integer"},
    "gqa_cache_bytes": {"kind": "number", "rtol": 0.01},
}
CHOICES = {"cold_lookup_tie", "bandwidth_limit", "additive_without_tanh", "shared_embedding_map", "saturated_jacobian"}
CHOICES |= {"unscaled_map", "key_padding_mask_unconverted", "attention_bug", "tiled_kernel_bound"}


def _right(question: str, v: Any) -> Any:
    """The right answer, worked out here from the values (not by the solution's code)."""
    if question in CHOICES:  # the option that is right in the example, under this student's letter
        return v.letter_of(EXAMPLE_ANSWERS[(v.assignment, question)], LETTERS[: len(v.order)])
    if question == "softmax_worked":
        return [k / sum(v.ks) for k in v.ks]
    if question == "masked_entropy":
        return math.log(v.n - v.masked)
    if question == "score_variance":
        return [v.d_k, 1]
    if question == "bottom_right_true_count":
        return sum(min(i + 1 + v.T_k - v.T_q, v.T_k) for i in range(v.T_q))
    if question == "float_mask_future_weight":
        weights = [math.e if j <= v.query else 1.0 for j in range(v.T)]
        return sum(weights[v.query + 1 :]) / sum(weights)
    if question == "left_padding_causal_counts":
        pairs = sum(1 for L in v.lengths for i in range(v.T) for j in range(i + 1) if j >= v.T - L)
        return [pairs, sum(1 for L in v.lengths for i in range(v.T) if i < v.T - L)]
    if question == "lookback_distance":
        return v.P - 1
    if question == "gqa_cache_bytes":
        return 2 * v.layers * v.H_kv * v.d * v.T * 2
    raise KeyError(question)


def _typical_wrong(question: str, v: Any) -> list[Any]:
    """The typical wrong answers and those the hints warn of, for these values."""
    if question in CHOICES:
        return [letter for letter in LETTERS[: len(v.order)] if letter != _right(question, v)]
    if question == "softmax_worked":
        ks = v.ks
        return [
            [float(k) for k in ks],
            [math.log(k) / sum(math.log(j) for j in ks) for k in ks],
            [math.exp(k) / sum(math.exp(j) for j in ks) for k in ks],
            [k / sum(ks) for k in reversed(ks)],
            [1 / 3] * 3,
            [math.log(k) for k in ks],
        ]
    if question == "masked_entropy":
        u = v.n - v.masked
        return [math.log(v.n), math.log2(u), -math.log(u), math.log(v.masked), math.log2(v.n), 0.0]
    if question == "score_variance":
        return [[v.d_k, math.sqrt(v.d_k)], [math.sqrt(v.d_k), 1], [v.d_k, v.d_k], [1, 1 / v.d_k]]
    if question == "bottom_right_true_count":
        return [v.T_q * (v.T_q + 1) // 2, v.T_q * v.T_k, v.T_q * (v.T_q - 1) // 2, _right(question, v) - v.T_q]
    if question == "float_mask_future_weight":
        future, allowed = v.T - 1 - v.query, v.query + 1
        return [0.0, future / v.T, allowed * math.e / (allowed * math.e + future), 1 / (allowed * math.e + future)]
    if question == "left_padding_causal_counts":
        pairs, rows = _right(question, v)
        T, lengths = v.T, v.lengths
        return [
            [sum(min(i + 1, L) for L in lengths for i in range(T)), 0],  # right padding
            [sum(i + 1 for L in lengths for i in range(T - L, T)), rows],  # padding on the queries
            [sum(T * L for L in lengths), 0],  # no causal part
            [len(lengths) * T * (T + 1) // 2, 0],  # no padding
            [pairs + rows, 0],  # a pad query sees itself
            [rows, pairs],  # swapped
        ]
    if question == "lookback_distance":
        return [v.P, v.P + 1, 3, 2 * v.P - 1]  # 3: the plot's distance (period 4)
    if question == "gqa_cache_bytes":
        right = _right(question, v)
        return [right * v.H_q // v.H_kv, right / 2, right / v.layers, right / 2**30]
    raise KeyError(question)


def _passes(answer: Any, expected: Any, question: str) -> bool:
    graded = GRADED_AS.get(question, {"kind": "choice", "choices": "abcde"})
    try:
        return check_answer(lambda: answer, expected, hint="", **graded)
    except CheckFailed:
        return False


def _same_answer(first: Any, second: Any, question: str) -> bool:
    """Two answers a grader cannot tell apart: one passes as the other (an answer of the wrong form never does)."""
    try:
        return _passes(first, second, question)
    except (TypeError, ValueError):
        return False


def _ids(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(rng.randint(3, 10))) for _ in range(count)]


def test_seventeen_questions_and_the_empty_id_gives_todays_values() -> None:
    assert set(QUESTIONS) == set(EXAMPLE_ANSWERS) and len(QUESTIONS) == 17
    for (assignment, question), today in EXAMPLE_ANSWERS.items():
        values = question_values(assignment, question, "")
        assert values.is_example and question_values(assignment, question, EXAMPLE_ID) == values
        assert _passes(today, _right(question, values), question), (question, dict(values))
        with grading_student(""):
            assert _passes(getattr(load_solution(assignment), f"answer_{question}")(), today, question), question


def test_the_draw_is_deterministic_and_per_student() -> None:
    for assignment, question in QUESTIONS:
        first = question_values(assignment, question, "jsmith")
        assert question_values(assignment, question, "jsmith") == first
        assert question_values(assignment, question, "  JSmith ").values == first.values, "ids are read without case and spaces"
        drawn = {repr(dict(question_values(assignment, question, s))) for s in _ids(60)}
        assert len(drawn) > 1, f"{question}: every student gets the same values"


def test_two_students_differ_and_each_ones_answer_fails_the_other() -> None:
    differing = 0
    for assignment, question in QUESTIONS:
        solution = getattr(load_solution(assignment), f"answer_{question}")
        with grading_student("cleo"):
            cleo = solution()
        with grading_student("ben"):
            ben = solution()
        assert _passes(cleo, _right(question, question_values(assignment, question, "cleo")), question)
        if not _passes(cleo, ben, question):
            differing += 1
            assert not _passes(ben, cleo, question)
    assert differing >= 12, f"only {differing} of 17 questions differ between two students"


# Captured from the code before the option keys became neutral (commit 64175ef), never from the code under test:
# each student keeps the values drawn for them then, an order as the example positions of what letters a, b, ... show.
ORIGINAL_DRAWS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {  # question: (jsmith's, cleo's)
    "cold_lookup_tie": ({"order": (1, 0, 2, 3)}, {"order": (1, 3, 2, 0)}),
    "masked_entropy": ({"masked": 6, "n": 9}, {"masked": 5, "n": 11}),
    "softmax_worked": ({"ks": (9, 7, 4)}, {"ks": (2, 5, 3)}),
    "additive_without_tanh": ({"order": (1, 0, 2, 3)}, {"order": (2, 0, 3, 1)}),
    "bandwidth_limit": ({"order": (3, 2, 1, 0)}, {"order": (0, 3, 1, 2)}),
    "shared_embedding_map": ({"order": (3, 2, 1, 4, 0)}, {"order": (3, 2, 1, 0, 4)}),
    "saturated_jacobian": ({"order": (2, 1, 0, 3)}, {"order": (0, 3, 1, 2)}),
    "score_variance": ({"d_k": 16}, {"d_k": 1024}),
    "unscaled_map": ({"order": (1, 0, 2)}, {"order": (1, 0, 2)}),
    "bottom_right_true_count": ({"T_k": 4, "T_q": 3}, {"T_k": 5, "T_q": 3}),
    "float_mask_future_weight": ({"T": 6, "query": 1}, {"T": 6, "query": 0}),
    "key_padding_mask_unconverted": ({"order": (3, 2, 1, 0)}, {"order": (1, 2, 0, 3)}),
    "left_padding_causal_counts": ({"T": 5, "lengths": (2, 1)}, {"T": 6, "lengths": (3, 2)}),
    "attention_bug": ({"order": (3, 1, 2, 0)}, {"order": (3, 0, 1, 2)}),
    "gqa_cache_bytes": (
        {"H_kv": 8, "H_q": 64, "T": 2048, "d": 64, "layers": 80},
        {"H_kv": 4, "H_q": 16, "T": 8192, "d": 128, "layers": 60},
    ),
    "lookback_distance": ({"P": 10}, {"P": 9}),
    "tiled_kernel_bound": ({"B_q": 128, "order": (1, 2, 0)}, {"B_q": 64, "order": (2, 1, 0)}),
}
# (T, longer, shorter) of the left-padding question for _ids(60, seed=11): the draw whose rejection loop changed.
ORIGINAL_LEFT_PADDING = (
    "631 653 741 421 421 521 752 731 765 743 521 532 751 421 532 742 521 751 521 721 721 621 421 641 751 621 631 431 743 421 "
    "651 531 532 632 431 632 431 431 421 543 742 641 431 521 743 743 632 721 521 721 651 731 541 721 651 431 543 521 731 431"
)
ORIGINAL_DIGEST = "04356ff45e84372b53592fd4c4fad4ffaaeb739cd771a87685205ee0e0a7198d"  # every question, _ids(1000, seed=7)


def _drawn(assignment: str, question: str, student: str) -> dict[str, Any]:
    """A student's values with an order written as example positions, as they were captured."""
    values = question_values(assignment, question, student)
    example = tuple(question_values(assignment, question, "")["order"]) if "order" in values else ()
    return {k: tuple(example.index(x) for x in v) if k == "order" else v for k, v in sorted(values.items())}


def test_every_student_keeps_the_values_drawn_before_the_keys_became_neutral() -> None:
    for assignment, question in QUESTIONS:
        assert (_drawn(assignment, question, "jsmith"), _drawn(assignment, question, "cleo")) == ORIGINAL_DRAWS[question], question
    padding = (question_values("04_masking", "left_padding_causal_counts", s) for s in _ids(60, seed=11))
    assert " ".join(f"{v.T}{v.lengths[0]}{v.lengths[1]}" for v in padding) == ORIGINAL_LEFT_PADDING
    digest = hashlib.sha256()
    for assignment, question in sorted(QUESTIONS):
        for student in _ids(1000, seed=7):
            digest.update(repr((assignment, question, student, _drawn(assignment, question, student))).encode())
    assert digest.hexdigest() == ORIGINAL_DIGEST


def test_the_left_padding_draws_are_those_the_answers_tell_apart() -> None:
    # The package keeps a table, not the answers: it must be what the right and typical wrong answers decide.
    question = "left_padding_causal_counts"
    admitted = set()
    for T in range(4, 8):  # the draw's ranges: T, then the longer length, then the shorter
        for longer in range(2, T):
            for shorter in range(1, longer):
                values = SimpleNamespace(T=T, lengths=(longer, shorter))
                answers = [_right(question, values), *_typical_wrong(question, values)]
                if len({tuple(a) for a in answers}) == len(answers):
                    admitted.add((T, (longer, shorter)))
    assert admitted == _LEFT_PADDING_DRAWS, sorted(admitted)


def test_nothing_a_student_can_print_names_an_option() -> None:
    # The keys only number the options (or maps) in the example's order: what an option says is its text alone.
    for assignment, question in QUESTIONS:
        values = question_values(assignment, question, "jsmith")
        strings = [x for v in dict(values).values() for x in (v if isinstance(v, tuple) else (v,)) if isinstance(x, str)]
        assert all(re.fullmatch(r"[om][1-9]", x) for x in strings), (question, strings)
        assert values.keys_in_order == tuple(values.get("order", ())), question


@pytest.mark.parametrize(("assignment", "question"), sorted(QUESTIONS), ids=[q for _, q in sorted(QUESTIONS)])
def test_every_variant_tells_the_right_answer_from_the_typical_wrong_ones(assignment: str, question: str) -> None:
    solution = getattr(load_solution(assignment), f"answer_{question}")
    source = nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    cells = solution_cells(source)
    cell = f"answer_{question}"
    mistakes = [m for m in MISTAKES[assignment] if m.cell == cell]
    variants = [v for v in CORRECT_VARIANTS.get(assignment, []) if v.cell == cell]
    modules: list[tuple[Any, bool]] = [
        (solution_module(assignment, {cell: m.apply(cells[cell])}, name=m.name), False) for m in mistakes
    ] + [(solution_module(assignment, {cell: v.apply(cells[cell])}, name=v.name), True) for v in variants]
    for student in ["", *_ids(300, seed=len(question))]:
        values = question_values(assignment, question, student)
        right = _right(question, values)
        with grading_student(student):
            assert _passes(solution(), right, question), (student, dict(values))
            for module, correct in modules:
                assert _passes(getattr(module, cell)(), right, question) == correct, (student, dict(values), module.__name__)
            # Two mistakes that give one answer could not be told apart: the feedback would name both.
            wrong = [(m.name, getattr(module, cell)()) for m, (module, _) in zip(mistakes, modules)]
            for i, (first, answer) in enumerate(wrong):
                for second, other in wrong[i + 1 :]:
                    assert not _same_answer(answer, other, question), (student, dict(values), first, second)
        for wrong in _typical_wrong(question, values):
            assert not _passes(wrong, right, question), (student, dict(values), wrong)
        if values.options or "order" in values:
            assert len(set(values["order"])) == len(values["order"])


def _notebook(student_id: str) -> nbformat.NotebookNode:
    return with_student_id(solved("01_soft_dictionary_lookup"), student_id)


def test_a_notebook_whose_id_is_not_the_graded_students_gets_a_note() -> None:
    assert notebook_student_id(_notebook("cleo")) == "cleo"
    assert student_id_note(_notebook("cleo"), "cleo") == "" and student_id_note(_notebook(" Cleo"), "cleo") == ""
    note = student_id_note(_notebook("x"), "y")
    assert note == "the notebook's STUDENT_ID is 'x', not this submission's student 'y': graded against 'y''s values"
    assert student_id_note(solved("01_soft_dictionary_lookup"), "y") == "", "an id left empty says nothing of whose answers these are"
    assert "not set to a string" in student_id_note(
        nbformat.read(SOLUTIONS_DIR / "01_soft_dictionary_lookup" / "01_soft_dictionary_lookup.ipynb", as_version=4), "y"
    )
    assert student_id_note(solved("07_fused_attention"), "y") == "", "a notebook without questions asks for no id"
    report = RunReport(sealed=True, ended="completed", student_id_note=note)
    assert RunReport.from_json(report.to_json()).student_id_note == note


def test_the_visible_check_asks_for_an_id_but_lets_the_solutions_pass() -> None:
    assert check_student_id(EXAMPLE_ID) and check_student_id("jsmith")
    with pytest.raises(CheckFailed, match=r"set STUDENT_ID in its cell near the top \(just after the imports\)"):
        check_student_id("")
    with grading_student("jsmith"):
        assert check_student_id("")


def _answered_for(student: str) -> dict[str, str]:
    """The question cells of notebook 01 answered with plain numbers and letters worked out for ``student``."""
    assignment = "01_soft_dictionary_lookup"
    cells = {}
    for (a, question), _ in EXAMPLE_ANSWERS.items():
        if a == assignment:
            answer = _right(question, question_values(a, question, student))
            cells[f"answer_{question}"] = f"def answer_{question}():\n    return {answer!r}\n"
    return cells


def _handed_in(notebook_id: str, answers_of: str) -> nbformat.NotebookNode:
    notebook = _notebook(notebook_id)
    answers = _answered_for(answers_of)
    for cell in notebook.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return notebook


@pytest.mark.slow
def test_graded_against_the_graded_students_values(tmp_path: Path) -> None:
    assignment = "01_soft_dictionary_lookup"
    questions = {"test_softmax_worked_example", "test_cold_lookup_with_a_tie", "test_masked_entropy"}
    submissions = tmp_path / "submissions"
    write_submission(submissions, "cleo", assignment, _handed_in("cleo", answers_of="cleo"))
    write_submission(submissions, "ben", assignment, _handed_in("cleo", answers_of="cleo"))  # cleo's notebook, handed in by ben
    report = grade(submissions, tmp_path / "out", assignments=[assignment], feedback=False, progress=False)
    cleo, ben = report.row_of("cleo", assignment), report.row_of("ben", assignment)
    assert cleo.score == cleo.max_score and "STUDENT_ID" not in cleo.status, cleo
    lost = {test for test, score in report.tests_of("ben", assignment).items() if score == 0}
    assert lost == questions, lost
    assert "the notebook's STUDENT_ID is 'cleo', not this submission's student 'ben': graded against 'ben''s values" in ben.outcome.notes


def test_a_cell_the_parser_chokes_on_is_read_as_setting_no_id() -> None:
    """The grader reads STUDENT_ID from the student's text outside the sandbox: no text may crash it."""
    deep = {"cell_type": "code", "source": "STUDENT_ID = " + "(" * 200_000 + "1" + ")" * 200_000}
    null = {"cell_type": "code", "source": 'STUDENT_ID = "x\x00"'}
    notebook = {"cells": [deep, null]}
    assert notebook_student_id(notebook) is None and student_id_note(notebook, "y") == ""
    assert with_student_id(notebook, "y")["cells"] == notebook["cells"]
