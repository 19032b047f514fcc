"""The course's own modules import one another without cycles, imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.settings import REPO_ROOT

PACKAGES = ("autograder", "course_utils")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module, and the course modules it imports anywhere in its code."""
    paths = {module_name(p): p for package in PACKAGES for p in (REPO_ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                targets |= {module, *(f"{module}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert "course_utils.recording" in graph and "autograder.grading.models" in graph, "the graph covers both packages"
    assert cycles(graph) == []


# Who stands above whom: a module may import those of its own layer and the layers below, never one above.
# course_utils is what notebooks import; the grading code uses it; nbgrader's steps (nbgrader_ext) run inside nbgrader
# and use the grading code; the command line and the builders of the course use everything.
LAYERS = (
    ("course_utils",),
    ("autograder.settings", "autograder.offline_markdown", "autograder.authoring", "autograder.solutions"),
    ("autograder.grading", "autograder.course", "autograder.course_config", "autograder.submissions", "autograder.mistakes"),
    ("autograder.nbgrader_ext",),
    # the builders and checkers of the course, and the command line
    ("autograder.release", "autograder.site", "autograder.demo", "autograder.contract", "autograder.given_away", "autograder"),
)


def layer(module: str) -> int:
    """The layer of ``module``: that of the longest prefix named in LAYERS."""
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} is in no layer of LAYERS: place it"
    return max(matches)[1]


def arrows_up(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} -> {target}" for module, targets in graph.items() for target in targets if layer(target) > layer(module))


def test_no_module_imports_one_above_it() -> None:
    assert arrows_up(import_graph()) == []


def test_an_arrow_up_is_seen() -> None:
    assert arrows_up({"autograder.grading.worker": {"autograder.nbgrader_ext.admission"}, "autograder.nbgrader_ext.admission": set()}) == [
        "autograder.grading.worker -> autograder.nbgrader_ext.admission"
    ]
