"""The Colab cells every notebook starts with, and the self-check every notebook ends with."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import SELF_CHECK_ID, code, markdown, stamp_course_cells
from autograder.authoring import tests as graded_test_cell
from autograder.course import list_assignments
from autograder.settings import REPO_ROOT
from course_utils import colab, selfcheck
from course_utils.colab import BADGE_CELL_ID, NO_ADDRESS, SETUP_CELL_ID, SOURCE_ENV_VAR, CourseAddress, course_address

NOTEBOOKS = [(folder, name) for folder in ("solutions", "notebooks") for name in list_assignments()]


def read(folder: str, name: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO_ROOT / folder / name / f"{name}.ipynb", as_version=4)


@pytest.mark.parametrize(("folder", "name"), NOTEBOOKS, ids=[f"{f}/{n}" for f, n in NOTEBOOKS])
def test_every_notebook_opens_in_colab_from_its_own_path(folder: str, name: str) -> None:
    cells = read(folder, name).cells
    assert cells[0].source.startswith(f"# {name[:2]} "), "the title stays first"
    badge, setup = cells[1], cells[2]
    assert (badge.get("id"), setup.get("id")) == (BADGE_CELL_ID, SETUP_CELL_ID)
    address = course_address()
    if address.is_set:
        assert colab.colab_url(f"{folder}/{name}/{name}.ipynb", address) in badge.source
        assert "Open In Colab" in badge.source and NO_ADDRESS not in badge.source + setup.source
    else:
        assert "Open In Colab" not in badge.source and NO_ADDRESS in badge.source, "no dead badge while the address is unset"
    if folder == "notebooks":
        assert "Download .ipynb" in badge.source and f"`{name}.ipynb`" in badge.source, "students are told how to hand in"
    assert setup.cell_type == "code" and not any(c.cell_type == "code" for c in cells[:2])
    wants_triton = "[kernels]" in setup.source
    writes_kernels = name[:2] in ("07", "08")  # the notebooks with Triton kernels
    assert wants_triton == writes_kernels, "Triton is installed only where a notebook needs it"
    assert cells[-1].get("id") == SELF_CHECK_ID and f'check_my_work("{name}")' in cells[-1].source


def test_the_repository_address_is_set_in_one_place() -> None:
    address = course_address()
    if not address.is_set:
        pytest.skip("no course address is set in course.toml")
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    holders = [p for p in tracked if not p.endswith(".ipynb") and address.repository in (REPO_ROOT / p).read_text(errors="ignore")]
    assert holders == ["course.toml"]


REAL_FIND_SPEC = importlib.util.find_spec  # before any test patches it (a test may run the cell twice)


ADDRESS = CourseAddress("https://github.com/example-school/attention-course", "spring")


def setup_cell(address: CourseAddress = ADDRESS) -> str:
    """Notebook 07's setup cell, stamped with ``address``."""
    nb = read("notebooks", "07_fused_attention")
    stamp_course_cells(nb, "notebooks/07_fused_attention/07_fused_attention.ipynb", student=True, address=address)
    return nb.cells[2].source


def run_setup_cell(
    monkeypatch: pytest.MonkeyPatch,
    *,
    installed: bool,
    missing: str = "course_utils",
    extras_install: bool = True,
    address: CourseAddress = ADDRESS,
) -> list[list[str]]:
    """The pip commands notebook 07's setup cell runs; ``extras_install=False``: pip fails on ``[kernels]``."""
    calls: list[list[str]] = []

    def fake_run(args, **_):
        calls.append(args)
        return subprocess.CompletedProcess(args, 0 if extras_install or "[kernels]" not in args[-1] else 1)

    monkeypatch.setattr(subprocess, "run", fake_run)
    if not installed:
        monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == missing else REAL_FIND_SPEC(n, *a))
    exec(setup_cell(address), {})
    return calls


def test_setup_cell_does_nothing_where_the_package_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_setup_cell(monkeypatch, installed=True) == []


def test_setup_cell_installs_the_package_where_it_is_missing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SOURCE_ENV_VAR, "file:///somewhere/checkout")
    calls = run_setup_cell(monkeypatch, installed=False)
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", "attention-course[kernels] @ file:///somewhere/checkout"]]
    assert "installing the course package" in capsys.readouterr().out
    monkeypatch.delenv(SOURCE_ENV_VAR)
    assert run_setup_cell(monkeypatch, installed=False)[0][-1] == f"attention-course[kernels] @ git+{ADDRESS.repository}@spring"
    # Notebook 07 also needs Triton: a runtime with the package but not Triton installs the extra.
    assert run_setup_cell(monkeypatch, installed=False, missing="triton")[0][-1].startswith("attention-course[kernels] @ ")


def test_where_triton_cannot_be_installed_the_setup_cell_installs_the_package_without_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SOURCE_ENV_VAR, "file:///checkout")
    # Linux where pip cannot get Triton (no wheel for the machine): a second install, without the extra.
    calls = run_setup_cell(monkeypatch, installed=False, extras_install=False)
    assert [c[-1] for c in calls] == ["attention-course[kernels] @ file:///checkout", "attention-course @ file:///checkout"]
    assert "triton could not be installed" in capsys.readouterr().out
    # macOS or Windows: no Triton wheels, so the cell asks only for the package, and only when it is missing.
    monkeypatch.setattr(sys, "platform", "darwin")
    assert [c[-1] for c in run_setup_cell(monkeypatch, installed=False)] == ["attention-course @ file:///checkout"]
    assert run_setup_cell(monkeypatch, installed=False, missing="triton") == []  # no reinstall on every run


def test_stamping_is_idempotent_and_moves_nothing_else() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [markdown("# 99 · Title"), code("x = 1"), graded_test_cell("test_x", 1, "# checks x\nassert x == 1")]
    assert stamp_course_cells(nb, "solutions/99_t/99_t.ipynb", student=False)
    ids = [c.get("id") for c in nb.cells]
    assert not stamp_course_cells(nb, "solutions/99_t/99_t.ipynb", student=False)
    assert [c.get("id") for c in nb.cells] == ids and [c.source for c in nb.cells][3:5] == ["x = 1", "# checks x\nassert x == 1"]


SMALL = {
    "cells": [
        code("def double(x):\n    return 2 * x"),
        graded_test_cell("test_double", 2, "# double doubles\nassert double(2) == 4, 'double(2) should be 4'"),
        graded_test_cell(
            "test_triple", 1, "# a test this notebook fails\nassert double(3) == 9, 'double(3) gave 6, wanted 9: multiply by 3'"
        ),
        graded_test_cell(
            "test_hidden", 1, "# visible part passes\nassert True\n### BEGIN HIDDEN TESTS\nassert False, 'hidden'\n### END HIDDEN TESTS"
        ),
        graded_test_cell("test_all_hidden", 1, "# nothing visible\n### BEGIN HIDDEN TESTS\nassert False, 'hidden'\n### END HIDDEN TESTS"),
    ]
}


def test_self_check_runs_visible_tests_and_says_why_one_fails() -> None:
    namespace: dict = {}
    exec(SMALL["cells"][0].source, namespace)
    report = selfcheck.run_tests(SMALL, namespace, "99_small")
    assert [(r.test, r.passed) for r in report.results] == [("test_double", True), ("test_triple", False), ("test_hidden", True)]
    assert report.hidden_only == {"test_all_hidden": 1.0}
    assert "multiply by 3" in report.failed[0].why
    text = str(report)
    assert "2 of 3 visible tests pass." in text and "FAIL  test_triple" in text
    assert "Checked here: 3 of 4 points pass. Decided only when graded: 1 of the notebook's 5 points (1 test with no visible part)." in text
    assert "Decided only when graded (no visible part): test_all_hidden (1 pt)" in text
    assert "one that passes here can still lose points then" in text


def test_self_check_counts_no_points_for_a_test_that_ran_only_a_format_check() -> None:
    # Decided by what ran: a format check reached through a helper counts; one named on a line that never runs does not.
    from course_utils.checks import check_answer_format
    from course_utils.student_values import EXAMPLE_ID, check_student_id

    def answer_x() -> int:
        return 3

    def looks_right() -> bool:
        return check_answer_format(answer_x, "integer") and check_student_id(EXAMPLE_ID)

    namespace = {"answer_x": answer_x, "looks_right": looks_right, "check_answer_format": check_answer_format}
    cells = [
        graded_test_cell("test_x_format", 2, "# the form of the answer\nassert looks_right()"),
        graded_test_cell(
            "test_x_value", 1, "# the value, checked here\nif False:\n    check_answer_format(answer_x, 'integer')\nassert answer_x() == 3"
        ),
        graded_test_cell("test_x_wrong_form", 1, "# a form that fails\nassert check_answer_format(answer_x, 'choice', choices='ab')"),
    ]
    report = selfcheck.run_tests({"cells": cells}, namespace, "99_q")
    assert [(r.test, r.passed, r.format_only) for r in report.results] == [
        ("test_x_format", True, True),
        ("test_x_value", True, False),
        ("test_x_wrong_form", False, True),
    ]
    text = str(report)
    assert "PASS  test_x_format (2 pt): format checked here; the value is decided when graded" in text
    assert "Checked here: 1 of 1 points pass. Decided only when graded: 3 of the notebook's 4 points (2 answers whose format alone" in text
    assert selfcheck._format_checks == [], "no test's record outlives its run"


def test_self_check_reports_unwritten_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    from course_utils.checks import call

    def stub(x):
        raise NotImplementedError()

    namespace = {"double": stub, "call": call}
    cell = graded_test_cell("test_double", 1, "# double doubles\nassert call(double, 2, label='double(2)') == 4")
    report = selfcheck.run_tests({"cells": [cell]}, namespace)
    assert not report.results[0].passed and "not written yet" in report.results[0].why


def test_self_check_finds_the_notebook_and_stays_quiet_while_grading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with pytest.raises(FileNotFoundError, match="cannot find the notebook 99_small.ipynb"):
        selfcheck.find_notebook("99_small")
    small = nbformat.v4.new_notebook()
    small.cells = SMALL["cells"]
    nbformat.write(small, tmp_path / "99_small.ipynb")
    report = selfcheck.check_my_work("99_small", {"double": lambda x: 2 * x})
    assert report is not None and len(report.passed) == 2 and "FAIL  test_triple" in capsys.readouterr().out
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert selfcheck.check_my_work("99_small") is None


@pytest.mark.slow
def test_colab_setup_installs_the_package_once_and_triton_only_for_notebook_07(colab_runs) -> None:
    first = colab_runs.student[list(colab_runs.student)[0]]
    assert "installing the course package from file://" in first.text(), "the first notebook's setup cell installs"
    later = [run for name, run in colab_runs.student.items() if not name.startswith(("01", "07"))]  # 08 finds Triton from 07
    assert all("installing the course package" not in run.text() for run in later), "later notebooks find it installed"
    assert not colab_runs.triton_before_07, "Triton came in before a notebook needed it"
    assert "installing the course package" in colab_runs.student["07_fused_attention"].text()
    assert colab_runs.runtime.has_module("triton") and colab_runs.runtime.has_module("course_utils")
    assert not colab_runs.runtime.has_module("nbgrader"), "the instructor tools stay off a student's runtime"
    for course_only in ("autograder", "autograder.solutions"):
        assert not colab_runs.runtime.has_module(course_only), "the handout installs the students' package alone: no grader"


def test_on_colab_the_first_cell_tells_students_how_to_hand_in(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import types

    import course_utils

    course_utils.init(seed=0)
    assert "on Colab" not in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    course_utils.init(seed=0)
    out = capsys.readouterr().out
    assert "on Colab" in out and "Download .ipynb, and keep the notebook's file name" in out


def test_an_address_set_once_reaches_every_badge_and_setup_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.release import release

    monkeypatch.setattr(colab, "COURSE_FILE", tmp_path / "course.toml")
    colab.write_address(colab.parse_address("https://github.com/example-school/attention-course.git/", "spring"))
    assert course_address() == ADDRESS
    name = list_assignments()[0]
    shutil.copytree(REPO_ROOT / "solutions" / name, tmp_path / "solutions" / name)
    release(tmp_path / "solutions", tmp_path / "notebooks")
    for folder in ("solutions", "notebooks"):
        text = (tmp_path / folder / name / f"{name}.ipynb").read_text()
        assert NO_ADDRESS not in text, f"{folder}: the unset-address note stayed after an address was set"
        url = colab.colab_url(f"{folder}/{name}/{name}.ipynb", ADDRESS)
        assert url in text and f"git+{ADDRESS.repository}@spring" in text, f"{folder}: the badge or setup cell misses the address"


@pytest.mark.parametrize(
    ("url", "branch"),
    [
        ("https://gitlab.com/a/b", "main"),  # Colab opens GitHub only
        ("http://github.com/a/b", "main"),
        ('https://github.com/a/b"><script>alert(1)</script>', "main"),  # written into markdown and code as is
        ("https://github.com/a/b", 'main" + __import__("os").system("x") + "'),
        ("https://github.com/a/b/tree/main", "main"),
        ("https://github.com/a/b", "../../etc"),
        ("https://github.com/OWNER/REPO", "main"),  # the docs' placeholder, copied as it is
    ],
)
def test_an_address_that_colab_cannot_open_or_that_would_break_a_cell_is_refused(url: str, branch: str) -> None:
    with pytest.raises(colab.AddressError):
        colab.parse_address(url, branch)


def test_release_without_an_address_warns_and_with_a_bad_one_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import autograder.release
    from autograder.__main__ import main

    monkeypatch.setattr(colab, "COURSE_FILE", tmp_path / "course.toml")
    monkeypatch.setattr(autograder.release, "release", lambda: ["01_x"])  # the stamping itself is tested above
    assert main(["release"]) == 0
    assert "no course address is set" in capsys.readouterr().err
    assert main(["release", "--repo-url", "https://example.com/a/b"]) == 2
    assert "not a GitHub repository address" in capsys.readouterr().err and not (tmp_path / "course.toml").exists()
    assert main(["release", "--repo-url", "https://github.com/example-school/attention-course", "--branch", "spring"]) == 0
    out = capsys.readouterr()
    assert "point at https://github.com/example-school/attention-course" in out.out and "warning" not in out.err
    assert course_address() == ADDRESS
