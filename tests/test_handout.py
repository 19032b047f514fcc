"""The handout: the students' repository that ``release --handout`` writes holds what students need and no answer.

The notebooks' visible tests run from it in the Colab-like runtime (tests/test_notebooks_execute.py); here the
handout's contents, its package as pip installs it, and the scan that would catch a leak.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.handout import LOCAL_SETUP, OWNED, installed_package, write_handout
from autograder.handout_leaks import answer_texts, handout_leaks
from autograder.settings import NOTEBOOKS_DIR, REPO_ROOT, SOLUTIONS_DIR
from course_utils.colab import BADGE_CELL_ID, SETUP_CELL_ID, CourseAddress, course_address, handout_address, write_address

ADDRESS = CourseAddress("https://github.com/example-school/attention-handout", "term1")


@pytest.fixture(scope="module")
def handout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("handout") / "students"
    (out / ".git").mkdir(parents=True)  # a clone the instructor publishes from: its history stays
    (out / ".git" / "HEAD").write_text("ref: refs/heads/term1\n")
    (out / "notebooks").mkdir()
    (out / "notebooks" / "stale.ipynb").write_text("{}")  # what an earlier handout left: replaced whole
    write_handout(out, address=ADDRESS)
    return out


@pytest.fixture(scope="module")
def installed(handout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_package(handout, tmp_path_factory.mktemp("installed"))


def test_the_handout_holds_the_notebooks_the_students_package_and_nothing_of_the_course(handout: Path) -> None:
    assert sorted(p.name for p in handout.iterdir()) == sorted([*OWNED, ".git"])
    assert (handout / ".git" / "HEAD").read_text() == "ref: refs/heads/term1\n"
    assert not (handout / "notebooks" / "stale.ipynb").exists()
    packages = {p.parent.name for p in handout.rglob("__init__.py")}
    assert packages == {"course_utils"}, "the students' package alone: no grader, no catalogue"
    assert sorted(p.name for p in (handout / "course_utils").glob("*.py")) == sorted(
        p.name for p in (REPO_ROOT / "course_utils").glob("*.py")
    )
    assert "MIT License" in (handout / "LICENSE").read_text()
    pyproject = (handout / "pyproject.toml").read_text()
    assert 'packages = ["course_utils"]' in pyproject and "nbgrader" not in pyproject


def test_handout_notebooks_are_the_released_ones_pointing_at_the_handout(handout: Path) -> None:
    names = sorted(p.name for p in NOTEBOOKS_DIR.iterdir() if p.is_dir())
    assert sorted(p.name for p in (handout / "notebooks").iterdir()) == names
    for name in names:
        ours = nbformat.read(handout / "notebooks" / name / f"{name}.ipynb", as_version=4)
        released = nbformat.read(NOTEBOOKS_DIR / name / f"{name}.ipynb", as_version=4)
        stamped = (BADGE_CELL_ID, SETUP_CELL_ID)
        assert [c.source for c in ours.cells if c.get("id") not in stamped] == [
            c.source for c in released.cells if c.get("id") not in stamped
        ]
        badge, setup = (next(c.source for c in ours.cells if c.get("id") == i) for i in stamped)
        path = f"notebooks/{name}/{name}.ipynb"
        assert f"colab.research.google.com/github/example-school/attention-handout/blob/term1/{path}" in badge
        assert "git+https://github.com/example-school/attention-handout@term1" in setup
        course = course_address()
        assert not course.is_set or course.repository not in badge + setup, "students are never sent to the course"
    readme = (handout / "README.md").read_text()
    assert LOCAL_SETUP in readme and LOCAL_SETUP.split(" && ")[1] in (REPO_ROOT / "docs" / "students.md").read_text()
    assert "blob/term1/notebooks/01_soft_dictionary_lookup/01_soft_dictionary_lookup.ipynb" in readme


def test_neither_the_handout_nor_its_installed_package_holds_an_answer(handout: Path, installed: Path) -> None:
    assert [str(leak) for leak in handout_leaks(handout, SOLUTIONS_DIR)] == []
    files = sorted(str(p.relative_to(installed)) for p in installed.rglob("*.py"))
    assert files and all(f.startswith("course_utils/") for f in files), files
    assert [str(leak) for leak in handout_leaks(installed, SOLUTIONS_DIR)] == []
    found = subprocess.run(
        [str(installed.parents[2] / "bin" / "python"), "-c", "import importlib.util as u; print(u.find_spec('autograder'))"],
        capture_output=True,
        text=True,
        cwd=installed.parents[3],
    )
    assert found.stdout.strip() == "None", found.stderr


def test_the_scan_names_each_kind_of_leak(handout: Path, tmp_path: Path) -> None:
    # Today's mistakes, put back: the grader shipped with the package, a solution body in a helper, an answer's
    # formula inside a longer line, a hidden test pasted into a notebook, and a region nbgrader left in.
    tree = tmp_path / "leaky"
    shutil.copytree(handout, tree, ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(REPO_ROOT / "autograder" / "mistakes", tree / "course_utils" / "mistakes")
    texts = {t.answer: t for t in answer_texts(SOLUTIONS_DIR)}
    body = "\n".join(sorted(texts["07_fused_attention:online_softmax"].runs)[0])
    (tree / "course_utils" / "helper.py").write_text(f"def stats(scores):\n    {body}\n")
    (tree / "course_utils" / "values.py").write_text("pairs, rows = sum(L * (L + 1) // 2 for L in lengths), 0\n")
    # A stand-in declared for one graded function may repeat that function's solution (the grade refuses it there),
    # never another's.
    declared = '@answers("07_fused_attention", "{}")\ndef stand_in(scores):\n    {}\n'
    (tree / "course_utils" / "declared.py").write_text(declared.format("online_softmax", body) + declared.format("vector_add", body))
    page = tree / "notebooks" / "04_masking" / "04_masking.ipynb"
    notebook = json.loads(page.read_text())
    hidden = sorted(texts["04_masking:test_padding_mask (hidden test)"].runs)[0]
    notebook["cells"].append(
        {"cell_type": "code", "id": "pasted", "metadata": {}, "source": "\n".join(hidden), "outputs": [], "execution_count": None}
    )
    notebook["cells"].append(
        {"cell_type": "code", "id": "left", "metadata": {}, "source": "### BEGIN SOLUTION\npass", "outputs": [], "execution_count": None}
    )
    page.write_text(json.dumps(notebook))
    leaks = [str(leak) for leak in handout_leaks(tree, SOLUTIONS_DIR)]
    assert any(leak.startswith("course_utils/mistakes:") for leak in leaks), leaks
    assert any(leak.startswith("course_utils/helper.py: repeats 07_fused_attention:online_softmax") for leak in leaks), leaks
    assert [leak.split(": ")[1] for leak in leaks if leak.startswith("course_utils/declared.py")] == [
        "repeats 07_fused_attention:online_softmax"
    ], "declared for vector_add, the copy answers online_softmax: one leak, not two"
    assert (
        "course_utils/values.py: holds the formula of 04_masking:answer_left_padding_causal_counts: sum(L * (L + 1) // 2 for L in lengths)"
        in leaks
    )
    assert any("cell pasted repeats 04_masking:test_padding_mask (hidden test)" in leak for leak in leaks), leaks
    assert "notebooks/04_masking/04_masking.ipynb: holds nbgrader's marker 'BEGIN SOLUTION'" in leaks


def test_the_handout_address_is_kept_beside_the_course_address(tmp_path: Path) -> None:
    path = tmp_path / "course.toml"
    path.write_text(
        'repository = "https://github.com/school/course"\nbranch = "main"\n\n[due]\n"01_soft_dictionary_lookup" = "2026-12-01T09:00:00+00:00"\n'
    )
    write_address(ADDRESS, path, keys=("handout_repository", "handout_branch"))
    assert handout_address(path) == ADDRESS
    assert course_address(path) == CourseAddress("https://github.com/school/course", "main")
    assert "[due]" in path.read_text()
