"""Shared fixtures: one graded synthetic class per test session (grading is the slow part); helpers in helpers.py."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest
from helpers import ASSIGNMENTS, ColabRuns, GradedClass, build_class, tree_digest

from autograder.grading.pipeline import grade
from autograder.settings import REPO_ROOT, SOLUTIONS_DIR

if TYPE_CHECKING:
    pass


# The session fixtures that take minutes, the longest first. Under xdist each is made once: all the
# modules that use one go to the same worker (``pytest_xdist_make_scheduler``), the others module by module.
SHARED_FIXTURES = ("graded_class", "colab_runs", "bad_class")
MODULES_SHARING = {
    "test_grading": "graded_class",
    "test_browser": "colab_runs",
    "test_notebooks_execute": "colab_runs",
    "test_colab_and_selfcheck": "colab_runs",
    "test_bad_submissions": "bad_class",
    "test_class_scale": "bad_class",
}


def _shared_fixture(item: pytest.Item) -> str:
    used = [name for name in SHARED_FIXTURES if name in getattr(item, "fixturenames", ())]
    return used[0] if used else ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of the shared fixtures first, the longest first; a test that uses one from a module
    that is not grouped with it would make it a second time on another worker, so it stops the run."""
    for item in items:
        shared = _shared_fixture(item)
        if shared and MODULES_SHARING.get(item.path.stem) != shared:
            raise pytest.UsageError(f"{item.nodeid} uses {shared}: add its module to MODULES_SHARING in tests/conftest.py")
    rank = {name: i for i, name in enumerate(SHARED_FIXTURES)}
    items.sort(key=lambda item: rank.get(_shared_fixture(item), len(rank)))


def xdist_scope(nodeid: str) -> str:
    """The unit of work one xdist worker takes whole: the shared fixture of its module, else its module."""
    module = Path(nodeid.split("::")[0]).stem
    return MODULES_SHARING.get(module, module)


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN201 - xdist's scheduler type
    from xdist.scheduler import LoadScopeScheduling

    class BySharedFixture(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return BySharedFixture(config, log)


@pytest.fixture(scope="session", autouse=True)
def no_kernel_outlives_the_session() -> Iterator[None]:
    """Every Jupyter kernel a test starts (nbclient, nbgrader, the sealed runs) is shut down by it, and so
    is every compile child of the GPU checks (``stop_the_compile_child``).

    Torn down last, after every other session fixture: a kernel still running then was left behind.
    """
    yield
    import psutil

    def kernels() -> list[psutil.Process]:
        found = []
        for process in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if any("ipykernel" in part or part.endswith("gpu_build.py") for part in process.cmdline()):
                    found.append(process)
        return found

    _, left = psutil.wait_procs(kernels(), timeout=10)  # a shutdown may still be on its way
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    assert not left, f"{len(left)} kernel(s) outlived the tests that started them: {[p.pid for p in left]}"


@pytest.fixture(autouse=True)
def stop_the_compile_child() -> Iterator[None]:
    """A test that compiled for a GPU in this process leaves no compile child running after it."""
    yield
    import sys

    compiler = sys.modules.get("course_utils.gpu_compiler")
    if compiler is not None:
        compiler.close()


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory: pytest.TempPathFactory) -> GradedClass:
    submissions = tmp_path_factory.mktemp("class") / "submissions"
    mistake_students = build_class(submissions)
    before = tree_digest(submissions, REPO_ROOT)
    out = tmp_path_factory.mktemp("grading") / "out"
    report = grade(submissions, out, progress=False, jobs=2)  # two workers: the machine has two cores
    return GradedClass(submissions, out, report, mistake_students, before)


@pytest.fixture(scope="session")
def bad_class(tmp_path_factory: pytest.TempPathFactory) -> GradedClass:
    """The bad submissions of tests/bad_submissions.py, graded with a short cell time limit."""
    from bad_submissions import BAD_CELL_TIMEOUT_S, BAD_MEMORY_LIMIT, build_bad_class, write_bad_class_roster

    from autograder.grading.roster import read_roster

    submissions = tmp_path_factory.mktemp("bad") / "submissions"
    build_bad_class(submissions)
    roster = read_roster(write_bad_class_roster(submissions, tmp_path_factory.mktemp("roster") / "roster.csv")).students
    before = tree_digest(submissions, REPO_ROOT)
    out = tmp_path_factory.mktemp("bad-grading") / "out"
    report = grade(submissions, out, progress=False, jobs=2, cell_timeout=BAD_CELL_TIMEOUT_S, memory_limit=BAD_MEMORY_LIMIT, roster=roster)
    return GradedClass(submissions, out, report, {}, before, roster)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def colab_runs(tmp_path_factory: pytest.TempPathFactory) -> ColabRuns:
    """Every notebook run in a Colab-like runtime, as a student gets it: the handout's notebooks (the first one's
    setup cell installs the students' package from the handout, notebook 07's adds Triton for the notebooks after
    it), and the solutions in the same runtime, with the grader's solution loader alone beside the students'
    package (their self-checks run the handout's visible tests, as check_my_work does)."""
    from colab_like import grader_loader, make_runtime

    from autograder.handout import write_handout
    from course_utils.colab import CourseAddress

    root = tmp_path_factory.mktemp("colab")
    # From the committed notebooks, which tests/test_release.py holds in sync with a fresh generation.
    handout = write_handout(root / "handout", address=CourseAddress(), released=REPO_ROOT / "notebooks").root
    runtime = make_runtime(root / "venv", handout)
    loader = grader_loader(root / "grader")
    student_path = {name: handout / "notebooks" / name / f"{name}.ipynb" for name in ASSIGNMENTS}
    kernels = next((name for name in ASSIGNMENTS if name.startswith("07")), None)
    # One at a time first, the runs whose setup cells pip-install: the first notebook installs the
    # package, notebook 07 adds Triton (and reinstalls the package). Nothing after them installs anything.
    triton_before_07 = False
    student = {}
    for name in dict.fromkeys([ASSIGNMENTS[0], *([kernels] if kernels else [])]):
        if name == kernels:
            triton_before_07 = runtime.has_module("triton")
        student[name] = runtime.execute(student_path[name], allow_errors=True)
    # Then two runs at a time, one per core.
    with ThreadPoolExecutor(max_workers=2) as pool:
        students = {
            name: pool.submit(runtime.execute, student_path[name], allow_errors=True) for name in ASSIGNMENTS if name not in student
        }
        solutions = {
            name: pool.submit(runtime.execute, SOLUTIONS_DIR / name / f"{name}.ipynb", allow_errors=False, path=loader)
            for name in ASSIGNMENTS
        }
        student.update({name: future.result() for name, future in students.items()})
        solution = {name: future.result() for name, future in solutions.items()}
    return ColabRuns(runtime, student, solution, triton_before_07, handout)
