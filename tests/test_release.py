"""`release`: notebooks/ is generated from solutions/, deterministically, and hides what it must."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat

from autograder.authoring import COURSE_POSITION
from autograder.contract import problems
from autograder.course import list_assignments
from autograder.given_away import given_away
from autograder.nbgrader_ext.discussion import WITHHELD_NOTE, RestoreDiscussions, WithholdDiscussion
from autograder.nbgrader_ext.showcase import is_showcase
from autograder.release import generate, stale_notebooks
from autograder.settings import NOTEBOOKS_DIR, SOLUTIONS_DIR
from course_utils.notebook_cells import cell_source, is_solution_cell


def test_notebooks_are_in_sync_with_solutions(repo_root) -> None:
    # The instructor's command, which CI's check of the checkout is.
    result = subprocess.run([sys.executable, "-m", "autograder", "release", "--check"], cwd=repo_root, capture_output=True, text=True)
    assert result.returncode == 0 and "in sync" in result.stdout, result.stdout + result.stderr


def test_release_is_deterministic(tmp_path) -> None:
    # The committed notebooks came from another process on another day: a fresh release must match them byte for byte.
    generate(SOLUTIONS_DIR, tmp_path)
    for name in list_assignments():
        assert (tmp_path / name / f"{name}.ipynb").read_bytes() == (NOTEBOOKS_DIR / name / f"{name}.ipynb").read_bytes(), name


def one_assignment(tmp_path, folder) -> str:
    """A copy of the first assignment's folder of ``folder`` (solutions/ or notebooks/): one notebook to regenerate, not
    eight. A course of one, so its title says "notebook 1 of 1", as release writes it for such a course."""
    name = list_assignments()[0]
    shutil.copytree(folder / name, tmp_path / folder.name / name)
    copied = tmp_path / folder.name / name / f"{name}.ipynb"
    copied.write_text(COURSE_POSITION.sub(r"\g<1>1", copied.read_text(encoding="utf-8"), count=1), encoding="utf-8")
    return name


def test_release_check_names_each_stale_notebook(tmp_path) -> None:
    solutions, notebooks = tmp_path / "solutions", tmp_path / "notebooks"
    name = one_assignment(tmp_path, SOLUTIONS_DIR)
    one_assignment(tmp_path, NOTEBOOKS_DIR)  # in sync, as test_notebooks_are_in_sync_with_solutions shows
    edited = notebooks / name / f"{name}.ipynb"
    edited.write_text(edited.read_text().replace("soft", "hard", 1))
    (notebooks / "stray.ipynb").write_text("{}")
    assert stale_notebooks(solutions, notebooks) == [
        "not generated from solutions/: notebooks/stray.ipynb",
        f"differs from what solutions/ generates: notebooks/{name}/{name}.ipynb",
    ]


def test_student_notebooks_hold_no_solutions_or_hidden_tests() -> None:
    for name in list_assignments():
        text = (NOTEBOOKS_DIR / name / f"{name}.ipynb").read_text()
        for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "load_solution", "ref."):
            assert secret not in text, f"{name}: the student notebook contains {secret!r}"
        cells = json.loads(text)["cells"]
        stubs = [cell_source(c) for c in cells if is_solution_cell(c)]
        assert stubs and all("raise NotImplementedError()" in s for s in stubs)


def test_release_check_names_a_solution_whose_course_cells_are_missing(tmp_path) -> None:
    solutions = tmp_path / "solutions"
    name = one_assignment(tmp_path, SOLUTIONS_DIR)
    one_assignment(tmp_path, NOTEBOOKS_DIR)
    path = solutions / name / f"{name}.ipynb"
    notebook = json.loads(path.read_text())
    notebook["cells"] = [c for c in notebook["cells"] if c.get("id") != "colab-badge"]
    path.write_text(json.dumps(notebook, indent=1))
    assert stale_notebooks(solutions, tmp_path / "notebooks") == [
        f"course cells (Colab badge, setup, self-check) out of date: solutions/{name}/{name}.ipynb"
    ]


def test_showcase_code_is_withheld_from_students_as_one_note() -> None:
    # Notebook 07's fast kernel (a full FlashAttention kernel) would give away section 5's exercise.
    solution = json.loads((SOLUTIONS_DIR / "07_fused_attention" / "07_fused_attention.ipynb").read_text())
    showcase = [c for c in solution["cells"] if is_showcase(c)]
    assert len(showcase) == 2, "the kernel cell and its check"
    student = json.loads((NOTEBOOKS_DIR / "07_fused_attention" / "07_fused_attention.ipynb").read_text())
    assert not any(is_showcase(c) for c in student["cells"])
    text = json.dumps(student)
    for line in ("def fast_attention_kernel", "FAST_TILES = [", "def heads_per_group", "tl.exp2(qk * qk_scale"):
        assert line in json.dumps(solution) and line not in text, line
    [note] = [c for c in student["cells"] if cell_source(c).startswith("*The solutions notebook has code here")]
    assert note["cell_type"] == "markdown" and "`flash_attention_fast` and a demonstration of it" in cell_source(note)
    assert len(student["cells"]) == len(solution["cells"]) - 1  # two cells became one note; nothing else went


def test_a_showcase_function_may_not_be_used_by_a_test(tmp_path) -> None:
    name = "07_fused_attention"
    notebook = json.loads((SOLUTIONS_DIR / name / f"{name}.ipynb").read_text())
    test_cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_flash_attention_triton")
    test_cell["source"] = "# uses the showcase\nflash_attention_fast\n" + cell_source(test_cell)
    kernel_cell = next(c for c in notebook["cells"] if c.get("id") == "flash-attention-fast")
    kernel_cell["source"] = cell_source(kernel_cell) + "\nprint('outside the region')\n"
    (tmp_path / name).mkdir()
    path = tmp_path / name / f"{name}.ipynb"
    path.write_text(json.dumps(notebook))
    found = problems(path)
    assert "showcase function flash_attention_fast: a test uses it, but students never have it" in found
    assert "showcase cell flash_attention_fast: all of its code must be inside the solution region (only comments outside)" in found


def _question_notebook() -> nbformat.NotebookNode:
    """A question's test cell, its two-cell discussion, and the next section."""
    test = nbformat.v4.new_code_cell("# the answer's form\nassert True", id="test-q")
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "test_answer_q", "locked": True, "points": 1, "solution": False}
    why = nbformat.v4.new_markdown_cell("Because the softmax ignores a constant added to a row.", id="why")
    shown = nbformat.v4.new_code_cell("print(torch.softmax(s + 3, -1))", id="shown")
    for cell in (why, shown):
        cell.metadata["tags"] = ["discussion"]
    return nbformat.v4.new_notebook(cells=[test, why, shown, nbformat.v4.new_markdown_cell("## Next", id="next")])


def test_a_discussion_is_withheld_as_one_note_and_comes_back_in_feedback(tmp_path) -> None:
    source = _question_notebook()
    student, _ = WithholdDiscussion().preprocess(nbformat.from_dict(source), {})
    assert [c.source for c in student.cells] == ["# the answer's form\nassert True", WITHHELD_NOTE, "## Next"]
    assert student.cells[1].id == "why-withheld"

    (tmp_path / "a").mkdir()
    nbformat.write(source, tmp_path / "a" / "a.ipynb")
    resources = {"nbgrader": {"assignment": "a", "notebook": "a", "student": "s"}}
    feedback, _ = RestoreDiscussions(source_dir=str(tmp_path)).preprocess(student, resources)
    assert [c.get("id") for c in feedback.cells] == ["test-q", "why", "shown", "next"]
    assert feedback.cells[2].outputs == []  # the code comes back to read, without outputs of the solution's run


def test_feedback_without_a_source_notebook_is_left_as_it_is(tmp_path) -> None:
    student, _ = WithholdDiscussion().preprocess(_question_notebook(), {})
    before = [c.source for c in student.cells]
    resources = {"nbgrader": {"assignment": "gone", "notebook": "gone", "student": "s"}}
    feedback, _ = RestoreDiscussions(source_dir=str(tmp_path)).preprocess(student, resources)
    assert [c.source for c in feedback.cells] == before


def test_no_student_notebook_repeats_a_graded_answer() -> None:
    # Given code, carried cells and later notebooks included (release --check reports the same list).
    assert [str(leak) for leak in given_away(SOLUTIONS_DIR, NOTEBOOKS_DIR)] == []


def test_a_later_notebook_that_hands_out_an_answer_is_caught(tmp_path) -> None:
    for folder in (SOLUTIONS_DIR, NOTEBOOKS_DIR):
        for name in ("08_flash_backward", "09_language_model"):
            shutil.copytree(folder / name, tmp_path / folder.name / name)
    page = tmp_path / "notebooks" / "09_language_model" / "09_language_model.ipynb"
    notebook = nbformat.read(page, as_version=4)
    # 08's graded FlashAttention.forward, handed out as given code (reindented, one comment added), and a training
    # step's idiom, which every notebook may show.
    notebook.cells.append(
        nbformat.v4.new_code_cell(
            "def forward(ctx, Q, K, V, is_causal, scale):\n"
            "  O, L = flash_attention_forward(Q, K, V, is_causal=is_causal, scale=scale)  # the passes\n"
            "  ctx.save_for_backward(Q, K, V, O, L)\n"
            "  ctx.is_causal, ctx.scale = is_causal, scale\n"
            "  return O\n",
            id="leak",
        )
    )
    notebook.cells.append(nbformat.v4.new_code_cell("optimizer.zero_grad()\nloss.backward()\noptimizer.step()\n", id="idiom"))
    nbformat.write(notebook, page)
    leaks = given_away(tmp_path / "solutions", tmp_path / "notebooks")
    # Both of 08's Functions save and return as this one does: each answer it repeats is named.
    assert {(leak.answer, leak.page, leak.cell) for leak in leaks} == {
        ("08_flash_backward:FlashAttention", "09_language_model", "leak"),
        ("08_flash_backward:FlashAttentionTriton", "09_language_model", "leak"),
    }


def test_feedback_on_the_solution_itself_shows_each_discussion_once(tmp_path) -> None:
    # Grading the solution file (a check instructors run) printed DuplicateCellId and showed every discussion twice.
    source = _question_notebook()
    (tmp_path / "a").mkdir()
    nbformat.write(source, tmp_path / "a" / "a.ipynb")
    resources = {"nbgrader": {"assignment": "a", "notebook": "a", "student": "s"}}
    feedback, _ = RestoreDiscussions(source_dir=str(tmp_path)).preprocess(nbformat.from_dict(source), resources)
    assert [c.get("id") for c in feedback.cells] == ["test-q", "why", "shown", "next"]


DUPLICATED_DUE = (
    'repository = ""\n\n[due]\n01_soft_dictionary_lookup = 2026-12-01T23:59:00Z\n\n[due]\n02_dot_product_attention = 2026-12-08T23:59:00Z\n'
)


def test_a_course_file_grade_refuses_is_explained_by_release_the_same_way(tmp_path, monkeypatch, capsys) -> None:
    """A `[due]` table declared twice: `grade` says so in one line and exits 2; so does `release`, with or without
    --check, through the same loader, before anything is generated."""
    from pathlib import Path

    import autograder.release
    from autograder.__main__ import main
    from course_utils import colab

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("release went on with a course.toml it could not read")

    (tmp_path / "course.toml").write_text(DUPLICATED_DUE, encoding="utf-8")
    monkeypatch.setattr(colab, "COURSE_FILE", tmp_path / "course.toml")
    monkeypatch.setattr(autograder.release, "_release", never)  # the checkout's notebooks/ is never regenerated here
    monkeypatch.setattr(autograder.release, "generate", never)
    (tmp_path / "class").mkdir()
    assert main(["grade", str(tmp_path / "class"), "--out", str(tmp_path / "graded")]) == 2
    explained = capsys.readouterr().err
    assert explained.count("\n") == 1 and "course.toml" in explained and "line 6" in explained, explained
    assert not Path(tmp_path / "graded").exists()
    for command in (["release"], ["release", "--check"]):
        assert main(command) == 2, command
        assert capsys.readouterr().err == explained, command
