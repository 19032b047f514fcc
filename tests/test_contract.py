"""Every solution notebook follows the grading contract (autograder/CONTRACT.md)."""

from __future__ import annotations

import json

import pytest

from autograder.contract import problems, unexercised_options
from autograder.course import list_assignments
from autograder.mistakes import CHARGED_THROUGH, MISTAKES
from autograder.settings import SOLUTIONS_DIR
from course_utils.notebook_cells import cells_tested_by


@pytest.mark.parametrize("assignment", list_assignments())
def test_solution_notebook_follows_the_contract(assignment: str) -> None:
    assert problems(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb") == []


def test_the_contract_catches_a_test_cell_without_a_final_assert(tmp_path) -> None:
    name = list_assignments()[0]
    notebook = json.loads((SOLUTIONS_DIR / name / f"{name}.ipynb").read_text())
    test_cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade"))
    test_cell["source"] = "# checks nothing\nx = 1\n"
    solution_cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    solution_cell["source"] = "print('side effect')\n" + "".join(solution_cell["source"])
    (tmp_path / name).mkdir()
    path = tmp_path / name / f"{name}.ipynb"
    path.write_text(json.dumps(notebook))
    found = problems(path)
    grade_id = test_cell["metadata"]["nbgrader"]["grade_id"]
    assert f"test cell {grade_id} (as graded): the last statement must be an assert" in found
    assert any("holds only definitions, but line 1 is a Expr" in p for p in found)


def test_the_contract_rejects_a_graded_cell_that_tests_nothing(tmp_path) -> None:
    name = list_assignments()[0]
    notebook = json.loads((SOLUTIONS_DIR / name / f"{name}.ipynb").read_text())
    test_cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade"))
    test_cell["source"] = "# only a comment: free points\n"
    test_cell["metadata"]["nbgrader"]["locked"] = False
    (tmp_path / name).mkdir()
    path = tmp_path / name / f"{name}.ipynb"
    path.write_text(json.dumps(notebook))
    grade_id = test_cell["metadata"]["nbgrader"]["grade_id"]
    found = problems(path)
    assert f"test cell {grade_id} (as graded): the last statement must be an assert" in found
    assert f"test cell {grade_id}: must be locked, so students cannot edit the tests" in found


def _carried_cell(name: str, code: str) -> dict:
    return {
        "cell_type": "code",
        "id": f"carried-{name}",
        "metadata": {"tags": ["carried"], "nbgrader": {"grade": False, "grade_id": name, "locked": False, "solution": True}},
        "source": code,
        "outputs": [],
        "execution_count": None,
    }


def test_a_carried_cell_must_hold_a_function_an_earlier_notebook_grades(tmp_path) -> None:
    first, second = list_assignments()[:2]
    for name in (first, second):
        (tmp_path / name).mkdir()
    (tmp_path / first / f"{first}.ipynb").write_text((SOLUTIONS_DIR / first / f"{first}.ipynb").read_text())
    notebook = json.loads((SOLUTIONS_DIR / second / f"{second}.ipynb").read_text())
    body = '    """Returns: the weights."""\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n'
    notebook["cells"][1:1] = [
        _carried_cell("softmax", "def softmax(x):\n" + body),  # graded in notebook 01: fine
        _carried_cell("softmax_typo", "def softmax_typo(x):\n" + body),
        _carried_cell("attention_entropy", "def attention_entropy(x):\n" + body + "\ndef extra():\n    pass\n"),
    ]
    path = tmp_path / second / f"{second}.ipynb"
    path.write_text(json.dumps(notebook))
    found = problems(path)
    assert not [p for p in found if "carried cell softmax:" in p]
    assert "carried cell softmax_typo: no earlier notebook grades a function softmax_typo" in found
    assert "carried cell attention_entropy: must define the one function attention_entropy" in " ".join(found)
    assert not [p for p in found if "graded function softmax" in p]  # graded in 01, not tested again here
    (tmp_path / first / f"{first}.ipynb").unlink()  # without the earlier notebook, nothing grades it
    assert "carried cell softmax: no earlier notebook grades a function softmax" in problems(path)


KERNEL = '@triton.jit\ndef {kernel}(X, N, BLOCK: tl.constexpr):\n    """Returns: nothing."""\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION\n'
LAUNCHER = 'def {launcher}(x):\n    """Returns: x."""\n    launch({kernel}, (1,), x, x.numel(), BLOCK=16)\n    return x\n'


def test_a_carried_cell_may_hold_a_kernel_and_its_launcher_graded_earlier(tmp_path) -> None:
    # A carried Triton cell defines the kernel and the launcher that launches it; an earlier notebook grades
    # both names, in one cell or in two (the kernel's cell and the launcher's), whatever their grade ids.
    first, second, third = list_assignments()[:3]
    for name in (first, second, third):
        (tmp_path / name).mkdir()
    earlier = json.loads((SOLUTIONS_DIR / first / f"{first}.ipynb").read_text())
    solution = {"grade": False, "locked": False, "solution": True}
    together = KERNEL.format(kernel="k_one") + "\n\n" + LAUNCHER.format(launcher="run_one", kernel="k_one")
    earlier["cells"] += [
        {**_carried_cell("run_one", together), "id": "one-cell", "metadata": {"nbgrader": {**solution, "grade_id": "run_one"}}},
        {
            **_carried_cell("k_two", KERNEL.format(kernel="k_two")),
            "id": "kernel-cell",
            "metadata": {"nbgrader": {**solution, "grade_id": "k_two"}},
        },
        {
            **_carried_cell("run_two", LAUNCHER.format(launcher="run_two", kernel="k_two")),
            "id": "launcher-cell",
            "metadata": {"nbgrader": {**solution, "grade_id": "run_two"}},
        },
    ]
    (tmp_path / first / f"{first}.ipynb").write_text(json.dumps(earlier))
    (tmp_path / second / f"{second}.ipynb").write_text((SOLUTIONS_DIR / second / f"{second}.ipynb").read_text())
    notebook = json.loads((SOLUTIONS_DIR / third / f"{third}.ipynb").read_text())
    notebook["cells"][1:1] = [
        _carried_cell("run_one", together),  # graded in one cell earlier: fine
        _carried_cell("run_two", KERNEL.format(kernel="k_two") + "\n\n" + LAUNCHER.format(launcher="run_two", kernel="k_two")),  # two cells
        _carried_cell("run_three", KERNEL.format(kernel="k_one") + "\n\n" + LAUNCHER.format(launcher="run_three", kernel="k_one")),
        _carried_cell("k_one", together),  # the grade id must name the launcher
        _carried_cell("run_one_alone", KERNEL.format(kernel="k_one") + "\n\n" + LAUNCHER.format(launcher="run_one_alone", kernel="k_two")),
        _carried_cell(
            "run_two_twice",
            together + "\n\n" + KERNEL.format(kernel="k_two") + "\n\n" + LAUNCHER.format(launcher="run_two_twice", kernel="k_two"),
        ),
    ]
    path = tmp_path / third / f"{third}.ipynb"
    path.write_text(json.dumps(notebook))
    found = problems(path)
    assert not [p for p in found if "carried cell run_one:" in p or "carried cell run_two:" in p], found
    assert "carried cell run_three: no earlier notebook grades a function run_three" in found
    assert not [p for p in found if "carried cell run_three:" in p and "must define" in p]  # the shape is fine
    for grade_id in ("k_one", "run_one_alone", "run_two_twice"):  # not the launcher's name; a kernel it never launches; two pairs
        assert f"carried cell {grade_id}: must define the one function {grade_id}" in " ".join(found), grade_id
    assert not [p for p in found if "graded function run_" in p or "graded function k_" in p]  # graded earlier, not here


def test_a_mistake_costs_points_only_on_the_tests_of_its_own_function() -> None:
    # One bug, one charge: every other graded piece a test reaches is stood in by a reference, so a catalogued
    # mistake may lose only the tests that use its cell's names, or those CHARGED_THROUGH declares (with a reason).
    found = []
    for assignment, mistakes in MISTAKES.items():
        tested = cells_tested_by(json.loads((SOLUTIONS_DIR / assignment / f"{assignment}.ipynb").read_text()))
        for mistake in mistakes:
            allowed = {mistake.cell, CHARGED_THROUGH.get((assignment, mistake.cell), ("",))[0]}
            found += [(assignment, mistake.name, test) for test in mistake.loses if not tested.get(test, set()) & allowed]
    assert not found, f"mistakes charged on another function's tests (stand a reference in there): {found}"


def test_the_charge_check_sees_a_test_that_runs_another_graded_function() -> None:
    notebook = json.loads((SOLUTIONS_DIR / "09_language_model" / "09_language_model.ipynb").read_text())
    tested = cells_tested_by(notebook)
    assert tested["test_copy_task_learned"] == {"train_copy_model"}, "the training test reaches the block only through a stand-in"
    assert tested["test_decoder_block_kv_cache"] == {"DecoderBlock"}
    # Had the training test still built the student's TinyLM (the DecoderBlock cell), the block's mistakes could cost it.
    [cell] = [c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_copy_task_learned"]
    cell["source"] = "".join(cell["source"]) + "\nlm = call(TinyLM, 20)\nassert lm is not None\n"
    assert cells_tested_by(notebook)["test_copy_task_learned"] == {"train_copy_model", "DecoderBlock"}


def test_the_contract_catches_a_comparison_with_the_solution_that_its_label_hides(tmp_path) -> None:
    name = "01_soft_dictionary_lookup"
    notebook = json.loads((SOLUTIONS_DIR / name / f"{name}.ipynb").read_text())
    test_cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_soft_lookup_temperature")
    source = "".join(test_cell["source"])
    test_cell["source"] = source.replace('label="soft_lookup output at T=10 vs the solution"', 'label="soft_lookup output at T=10"')
    assert test_cell["source"] != source
    (tmp_path / name).mkdir()
    path = tmp_path / name / f"{name}.ipynb"
    path.write_text(json.dumps(notebook))
    assert problems(path) == [
        "test cell test_soft_lookup_temperature: the label 'soft_lookup output at T=10' of a comparison with the solution must say so"
    ]


@pytest.mark.parametrize("assignment", list_assignments())
def test_every_optional_argument_is_exercised_by_a_hidden_test(assignment: str) -> None:
    notebook = json.loads((SOLUTIONS_DIR / assignment / f"{assignment}.ipynb").read_text())
    assert unexercised_options(notebook) == [], "pass each of these in a hidden test, so that what it does is graded"


def test_the_walk_finds_an_optional_argument_no_test_passes() -> None:
    def cell(kind: str, source: str, grade_id: str) -> dict:
        meta = {"grade_id": grade_id, "solution": kind == "solution", "grade": kind == "test", "locked": kind == "test"}
        return {"cell_type": "code", "metadata": {"nbgrader": meta}, "source": source}

    solution = "def f(x, scale=None, *, mask=None):\n    ### BEGIN SOLUTION\n    return x * (scale or 1) if mask is None else x\n    ### END SOLUTION\n"
    hidden = "### BEGIN HIDDEN TESTS\n{}\n### END HIDDEN TESTS\n"
    for test, missing in (
        ("assert call(f, 1, scale=2)", ["f(mask)"]),
        ("options = {'mask': 1}\nassert call(f, 1, 2, **options)", []),
        ("assert f(1, mask=0)", ["f(scale)"]),
        ("call(f, 1)", ["f(scale)", "f(mask)"]),
    ):
        notebook = {
            "cells": [cell("solution", solution, "f"), cell("test", "assert call(f, 1, scale=2, mask=0)\n" + hidden.format(test), "t")]
        }
        assert unexercised_options(notebook) == missing, test  # the visible part's arguments do not count
