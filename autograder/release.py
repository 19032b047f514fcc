"""``release``: generate the student notebooks in ``notebooks/`` from ``solutions/``.

nbgrader's generate_assignment strips solutions and hidden tests. It is run in a
scratch course and the result copied over, so the repository never holds a
gradebook. The output depends only on the solution notebooks: a second run changes
no byte, and ``--check`` compares a fresh generation with what is committed.
"""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from pathlib import Path

from .course import list_assignments, scratch_course
from .settings import NOTEBOOKS_DIR, SOLUTIONS_DIR


def generate(solutions_dir: Path, out_dir: Path, assignments: list[str] | None = None) -> list[str]:
    """Write the student version of each assignment to ``out_dir/NAME/``."""
    names = assignments or list_assignments(solutions_dir)
    with scratch_course(solutions_dir) as course:
        api = course.api(release_dir=out_dir)
        for name in names:
            course.check(api.generate_assignment(name, force=True, create=True), f"generate_assignment {name}")
    return names


def release(solutions_dir: Path = SOLUTIONS_DIR, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[str]:
    """Regenerate ``notebooks_dir`` from ``solutions_dir``: afterwards it holds exactly what nbgrader generated."""
    staging = Path(tempfile.mkdtemp(prefix="release-")) / "notebooks"
    try:
        names = generate(solutions_dir.resolve(), staging)  # fails before notebooks/ is touched
        shutil.rmtree(notebooks_dir, ignore_errors=True)
        shutil.copytree(staging, notebooks_dir)
    finally:
        shutil.rmtree(staging.parent, ignore_errors=True)
    return names


def stale_notebooks(solutions_dir: Path = SOLUTIONS_DIR, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[str]:
    """Files under ``notebooks_dir`` that differ from a fresh release, are missing, or are extra."""
    with tempfile.TemporaryDirectory(prefix="release-check-") as tmp:
        fresh = Path(tmp) / "notebooks"
        generate(solutions_dir.resolve(), fresh)
        expected = _files(fresh)
        actual = _files(notebooks_dir) if notebooks_dir.is_dir() else set()
        problems = [f"missing: notebooks/{p}" for p in sorted(expected - actual)]
        problems += [f"not generated from solutions/: notebooks/{p}" for p in sorted(actual - expected)]
        problems += [
            f"differs from what solutions/ generates: notebooks/{p}"
            for p in sorted(expected & actual)
            if not filecmp.cmp(fresh / p, notebooks_dir / p, shallow=False)
        ]
    return problems


def _files(folder: Path) -> set[str]:
    return {
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and ".ipynb_checkpoints" not in path.parts and "__pycache__" not in path.parts
    }

