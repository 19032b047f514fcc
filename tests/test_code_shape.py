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


GRADING = "autograder.grading"


def private_reaches(tests_dir: Path = REPO_ROOT / "tests") -> list[str]:
    """'file:line name' for each private name of a grading module that a test imports or reads off the module."""
    found = []
    for path in sorted(tests_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = set()  # local names bound to a grading module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(GRADING):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.append(f"{path.name}:{node.lineno} {node.module}.{alias.name}")
                    elif node.module == GRADING:
                        modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                modules |= {alias.asname for alias in node.names if alias.name.startswith(GRADING) and alias.asname}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_tests_reach_no_private_name_of_the_grading_modules() -> None:
    assert private_reaches() == [], "give what the test needs a public name, or test it through one"


def test_the_scan_sees_both_ways_of_reaching_in(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "from autograder.grading.pipeline import _in_pool, grade\nfrom autograder.grading import class_report\nclass_report._compare(1)\n",
        encoding="utf-8",
    )
    assert private_reaches(tmp_path) == ["test_x.py:1 autograder.grading.pipeline._in_pool", "test_x.py:3 class_report._compare"]
