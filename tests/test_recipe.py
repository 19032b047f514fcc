"""docs/contributing.md's "Adding a notebook": every notebook in solutions/ has each file the recipe lists."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from autograder.course import list_assignments
from autograder.mistakes import Variant, catalogue_module
from autograder.settings import REPO_ROOT

RECIPE = "docs/contributing.md, 'Adding a notebook'"


def recipe_problems(assignment: str, root: Path = REPO_ROOT) -> list[str]:
    """What ``assignment`` lacks of the recipe, one sentence each (none when it has everything)."""
    module = catalogue_module(assignment)
    problems = []
    if not (root / "notebooks" / assignment / f"{assignment}.ipynb").is_file():
        problems.append(f"no notebooks/{assignment}/{assignment}.ipynb: run `python -m autograder release`")
    for package, names in (("autograder/mistakes", ("MISTAKES", "CORRECT_VARIANTS")), ("tests/held_out", ("HELD_OUT",))):
        path = root / package / f"{module}.py"
        if not path.is_file():
            problems.append(f"no {package}/{module}.py (its {' and '.join(names)})")
            continue
        if root == REPO_ROOT:
            loaded = importlib.import_module(f"{package.replace('tests/', '').replace('/', '.')}.{module}")
            problems += [f"{package}/{module}.py: {name} is empty" for name in names if not getattr(loaded, name, None)]
    readme = (root / "README.md").read_text(encoding="utf-8") if (root / "README.md").is_file() else ""
    if not re.search(rf"^\| {assignment[:2]} \|", readme, re.MULTILINE):
        problems.append(f"no row '| {assignment[:2]} | …' in README.md's course table")
    return problems


def idiom_problems(path: Path, tables: dict[str, list[Variant]]) -> list[str]:
    """How a catalogue module (``tables``: its MISTAKES and CORRECT_VARIANTS, or HELD_OUT's mistakes) strays from
    the one idiom of docs/contributing.md, "The mistakes catalogue": a base (the solution cell, or ``of=`` a text
    written out in the module) and ``(old, new)`` edits. A mistake is its wrong lines, so it always has edits; a
    correct variant without edits is a whole cell given as ``of``. The module holds data only: no function or
    class of its own that builds variants another way."""
    problems = [
        f"{path.name}: {node.name} is defined at module level (write the variant as a base and edits)"
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    for table, variants in tables.items():
        for variant in variants:
            if type(variant) is not Variant:
                problems.append(f"{path.name}: {table} holds {variant!r}, not a Variant")
            elif table != "CORRECT_VARIANTS" and not variant.edits:
                problems.append(f"{path.name}: the mistake {variant.name!r} has no edits (a mistake is its wrong lines)")
            elif not variant.edits and variant.of is None:
                problems.append(f"{path.name}: the correct variant {variant.name!r} is the solution unchanged (no edits, no of=)")
    return problems


@pytest.mark.parametrize("assignment", list_assignments())
def test_every_catalogue_entry_is_a_base_and_edits(assignment: str) -> None:
    module = catalogue_module(assignment)
    catalogue = importlib.import_module(f"autograder.mistakes.{module}")
    held_out = importlib.import_module(f"held_out.{module}")
    problems = idiom_problems(
        REPO_ROOT / "autograder" / "mistakes" / f"{module}.py",
        {"MISTAKES": catalogue.MISTAKES, "CORRECT_VARIANTS": catalogue.CORRECT_VARIANTS},
    )
    problems += idiom_problems(REPO_ROOT / "tests" / "held_out" / f"{module}.py", {"HELD_OUT": [h.mistake for h in held_out.HELD_OUT]})
    assert not problems, "; ".join(problems)


def test_a_catalogue_entry_written_another_way_is_told(tmp_path: Path) -> None:
    path = tmp_path / "sparse_attention.py"
    path.write_text('def _letter(option):\n    return f"letter({option!r})"\n\nMISTAKES = []\n')
    whole = Variant("a whole wrong cell", "topk_mask", of="\ndef topk_mask(scores, k):\n    return scores\n")
    unchanged = Variant("the solution itself", "topk_mask")
    assert idiom_problems(path, {"MISTAKES": [whole], "CORRECT_VARIANTS": [unchanged]}) == [
        "sparse_attention.py: _letter is defined at module level (write the variant as a base and edits)",
        "sparse_attention.py: the mistake 'a whole wrong cell' has no edits (a mistake is its wrong lines)",
        "sparse_attention.py: the correct variant 'the solution itself' is the solution unchanged (no edits, no of=)",
    ]


@pytest.mark.parametrize("assignment", list_assignments())
def test_every_notebook_has_what_the_recipe_lists(assignment: str) -> None:
    problems = recipe_problems(assignment)
    assert not problems, f"{assignment} lacks what {RECIPE} lists: " + "; ".join(problems)


def test_a_new_notebook_is_told_each_file_it_lacks(tmp_path: Path) -> None:
    (tmp_path / "solutions" / "10_sparse_attention").mkdir(parents=True)
    (tmp_path / "README.md").write_text("| 09 | The last one |\n")
    assert recipe_problems("10_sparse_attention", tmp_path) == [
        "no notebooks/10_sparse_attention/10_sparse_attention.ipynb: run `python -m autograder release`",
        "no autograder/mistakes/sparse_attention.py (its MISTAKES and CORRECT_VARIANTS)",
        "no tests/held_out/sparse_attention.py (its HELD_OUT)",
        "no row '| 10 | …' in README.md's course table",
    ]


def test_a_new_notebook_changes_the_count_in_every_title() -> None:
    """Release rewrites "notebook N of M" from the course's size: adding notebook 10 edits no other notebook by hand."""
    import nbformat

    from autograder.authoring import stamp_course_cells

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 03 · Scaling\n\n*The course — notebook 3 of 9.*")])
    assert stamp_course_cells(notebook, "solutions/03_x/03_x.ipynb", student=False, course_size=10)
    assert "notebook 3 of 10." in notebook.cells[0].source
    assert not stamp_course_cells(notebook, "solutions/03_x/03_x.ipynb", student=False, course_size=10)  # stamping twice changes nothing
