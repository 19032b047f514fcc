"""One linter and one formatter: ruff, configured in pyproject.toml, over the packages, tests, benchmarks
and the code cells of solutions/ (notebooks/ is generated from them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autograder.settings import REPO_ROOT

RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_is_clean(command: list[str]) -> None:
    result = subprocess.run([str(RUFF), *command, "."], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (
        f"ruff {' '.join(command)} found:\n{result.stdout[-4000:]}{result.stderr[-2000:]}\nFix with: ruff check --fix . && ruff format ."
    )


def test_ruff_covers_the_solution_notebooks() -> None:
    """The notebooks' code cells are linted (a notebook ruff skipped would pass silently)."""
    result = subprocess.run([str(RUFF), "check", "--show-files", "."], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    files = {Path(line).relative_to(REPO_ROOT).as_posix() for line in result.stdout.splitlines() if line.startswith(str(REPO_ROOT))}
    solutions = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "solutions").glob("*/*.ipynb")}
    assert solutions and solutions <= files, sorted(solutions - files)
    assert {"autograder/settings.py", "course_utils/checks.py", "benchmarks/fused_attention.py", "tests/test_lint.py"} <= files
    assert not any(f.startswith("notebooks/") for f in files)
