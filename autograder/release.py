"""``release``: generate the student notebooks in ``notebooks/`` from ``solutions/``.

First the course's standard cells (the Colab badge and setup cell, the self-check) are
written into each solution notebook (``autograder.authoring.stamp_course_cells``).
nbgrader's generate_assignment then strips solutions and hidden tests. It is run in a
scratch course and the result copied over, so the repository never holds a
gradebook. The output depends only on the solution notebooks: a second run changes
no byte, and ``--check`` compares a fresh generation with what is committed. Both read
``course.toml`` first, as ``grade`` does (``check_course_file``): a mistake in it is one
``ValueError`` naming the file and the line, before anything is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import filecmp
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import nbformat

from course_utils import colab
from course_utils.notebook_cells import assignment_notebook

from .authoring import stamp_course_cells
from .course import list_assignments, scratch_course
from .given_away import given_away
from .grading.deadlines import load_deadlines
from .settings import NOTEBOOKS_DIR, SOLUTIONS_DIR


def generate(solutions_dir: Path, out_dir: Path, assignments: list[str] | None = None) -> list[str]:
    """Write the student version of each assignment to ``out_dir/NAME/``: nbgrader's generate_assignment,
    which also points the course cells at the student version (``nbgrader_ext.course_cells``)."""
    names = assignments or list_assignments(solutions_dir)
    with scratch_course(solutions_dir) as course:
        api = course.api(release_dir=out_dir)
        for name in names:
            course.check(api.generate_assignment(name, force=True, create=True), f"generate_assignment {name}")
    return names


def check_course_file(solutions_dir: Path = SOLUTIONS_DIR) -> None:
    """``course.toml`` read by the loader ``grade`` uses, so a table declared twice or a bad due date is explained
    the same way by every command, never as a traceback from the Colab badge's reading of the address.

    Raises:
        ValueError: what is wrong, with the file's name (and the line, for TOML that does not parse).
    """
    load_deadlines(colab.COURSE_FILE, list_assignments(solutions_dir))


def stamp_solution(solutions_dir: Path, name: str) -> bool:
    """Write the course cells (Colab badge and setup, self-check) into the solution notebook; True when the file changed."""
    path = assignment_notebook(solutions_dir, name)
    notebook = nbformat.read(path, as_version=4)
    changed = stamp_course_cells(
        notebook, f"solutions/{name}/{name}.ipynb", student=False, course_size=len(list_assignments(solutions_dir))
    )
    if changed:
        nbformat.write(notebook, path)
    return changed


@contextlib.contextmanager
def _one_release_at_a_time(notebooks_dir: Path) -> Iterator[None]:
    """Two releases into one folder at once would delete each other's output half-way. The lock is on the folder
    that holds it (it stays while the folder itself is replaced), so no lock file is left anywhere."""
    parent = notebooks_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def release(solutions_dir: Path = SOLUTIONS_DIR, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[str]:
    """Stamp the course cells into ``solutions_dir``, then regenerate ``notebooks_dir`` from it.

    Afterwards ``notebooks_dir`` holds exactly what nbgrader generated, with its own badges.

    Raises:
        ValueError: course.toml cannot be used (``check_course_file``); nothing was written.
    """
    check_course_file(solutions_dir)
    with _one_release_at_a_time(notebooks_dir):
        return _release(solutions_dir, notebooks_dir)


def _release(solutions_dir: Path, notebooks_dir: Path) -> list[str]:
    for name in list_assignments(solutions_dir):
        stamp_solution(solutions_dir, name)
    staging = Path(tempfile.mkdtemp(prefix="release-")) / "notebooks"
    try:
        names = generate(solutions_dir.resolve(), staging)  # fails before notebooks/ is touched
        shutil.rmtree(notebooks_dir, ignore_errors=True)
        shutil.copytree(staging, notebooks_dir)
    finally:
        shutil.rmtree(staging.parent, ignore_errors=True)
    return names


def stale_notebooks(solutions_dir: Path = SOLUTIONS_DIR, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[str]:
    """Files under ``notebooks_dir`` that differ from a fresh release, are missing, or are extra; and any run of a
    graded answer's code that a freshly released student notebook holds (``autograder.given_away``).

    Raises:
        ValueError: course.toml cannot be used (``check_course_file``).
    """
    check_course_file(solutions_dir)
    with tempfile.TemporaryDirectory(prefix="release-check-") as tmp:
        fresh = Path(tmp) / "notebooks"
        generate(solutions_dir.resolve(), fresh)
        expected = _files(fresh)
        actual = _files(notebooks_dir) if notebooks_dir.is_dir() else set()
        problems = [
            f"course cells (Colab badge, setup, self-check) out of date: solutions/{n}/{n}.ipynb"
            for n in list_assignments(solutions_dir)
            if _unstamped(solutions_dir, n)
        ]
        problems += [f"missing: notebooks/{p}" for p in sorted(expected - actual)]
        problems += [f"not generated from solutions/: notebooks/{p}" for p in sorted(actual - expected)]
        problems += [
            f"differs from what solutions/ generates: notebooks/{p}"
            for p in sorted(expected & actual)
            if not filecmp.cmp(fresh / p, notebooks_dir / p, shallow=False)
        ]
        problems += [f"gives a graded answer away: {leak}" for leak in given_away(solutions_dir, fresh)]
    return problems


def _unstamped(solutions_dir: Path, name: str) -> bool:
    notebook = nbformat.read(assignment_notebook(solutions_dir, name), as_version=4)
    return stamp_course_cells(notebook, f"solutions/{name}/{name}.ipynb", student=False, course_size=len(list_assignments(solutions_dir)))


def _files(folder: Path) -> set[str]:
    return {
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and ".ipynb_checkpoints" not in path.parts and "__pycache__" not in path.parts
    }
