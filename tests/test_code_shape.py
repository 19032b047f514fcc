"""The shape a newcomer can read: no function of the course's packages runs past a screen."""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.settings import REPO_ROOT

PACKAGES = ("autograder", "course_utils")
MAX_FUNCTION_LINES = 60  # of code: the docstring is not counted


def long_functions(root: Path = REPO_ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """'path:line name (N lines)' for each function whose body, docstring aside, is longer than ``limit`` lines."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                first = node.body[0]
                docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
                start = node.body[1].lineno if docstring and len(node.body) > 1 else node.body[0].lineno
                lines = (node.end_lineno or node.lineno) - start + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_a_screen() -> None:
    assert long_functions() == [], "split these into named steps"


def test_the_measure_sees_a_long_function(tmp_path: Path) -> None:
    package = tmp_path / "autograder"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (package / "long.py").write_text(f'def short():\n    """Doc."""\n{body}\n\ndef long():\n    y = 0\n{body}', encoding="utf-8")
    (tmp_path / "course_utils").mkdir()
    assert long_functions(tmp_path) == [f"autograder/long.py:{MAX_FUNCTION_LINES + 5} long ({MAX_FUNCTION_LINES + 1} lines)"]
