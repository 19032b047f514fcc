"""The grading contract (CONTRACT.md), checked mechanically on a solution notebook.

``problems(path)`` returns a list of human-readable violations; an empty list
means the notebook follows the contract. The test suite runs it on every notebook
in ``solutions/``, so a new notebook cannot land without following the rules.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from course_utils.notebook_cells import (
    cell_source,
    hidden_part,
    is_carried,
    is_showcase,
    is_solution_cell,
    is_test_cell,
    nbgrader_meta,
    visible_part,
)

from .course import ASSIGNMENT_NAME
from .nbgrader_ext.discussion import discussion_runs, is_discussion

DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
RANDOM_DRAW = re.compile(r"torch\.(randn|rand|randint|randperm)\(")


def _parse(source: str, where: str, found: list[str]) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        found.append(f"{where}: syntax error: {error}")
        return None


def _ends_with_assert(tree: ast.Module, *, may_be_empty: bool) -> bool:
    if not tree.body:
        return may_be_empty  # a student may see an empty cell; the graded cell must test something
    return isinstance(tree.body[-1], ast.Assert)


def problems(path: Path) -> list[str]:
    """Every way the solution notebook at ``path`` breaks the grading contract."""
    found: list[str] = []
    folder = path.parent.name
    if not ASSIGNMENT_NAME.match(folder) or path.name != f"{folder}.ipynb":
        found.append(f"{path}: must be solutions/NN_name/NN_name.ipynb")
    notebook: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    cells = notebook["cells"]

    first = cells[0] if cells else {}
    if first.get("cell_type") != "markdown" or not cell_source(first).startswith(f"# {folder[:2]} "):
        found.append(f"the first cell must be a markdown title starting '# {folder[:2]} '")
    if not any("By the end of this notebook you can" in cell_source(c) for c in cells if c["cell_type"] == "markdown"):
        found.append("no learning goals: a markdown cell must say 'By the end of this notebook you can'")

    grade_ids = [nbgrader_meta(c).get("grade_id") for c in cells if nbgrader_meta(c)]
    duplicates = sorted({g for g in grade_ids if grade_ids.count(g) > 1})
    if duplicates:
        found.append(f"duplicate grade_id(s): {duplicates}")

    for cell in cells:
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count")):
            found.append(f"cell {cell.get('id')}: source notebooks are stored without outputs")

    graded_functions: list[str] = []
    showcased: list[str] = []
    for cell in filter(is_solution_cell, cells):
        if is_showcase(cell):
            found += _showcase_cell_problems(cell, showcased)
        elif is_carried(cell):
            found += _carried_cell_problems(cell, path)
        else:
            found += _solution_cell_problems(cell, graded_functions)

    tests = [c for c in cells if is_test_cell(c)]
    if not tests:
        found.append("no autograder test cells")
    for cell in tests:
        found += _test_cell_problems(cell)

    for name in showcased:  # the student version lacks them (WithholdShowcase), so a test must not need them
        if any(re.search(rf"\b{name}\b", cell_source(c)) for c in tests):
            found.append(f"showcase function {name}: a test uses it, but students never have it")
    for name in graded_functions:
        if not any(re.search(rf"\b{name}\b", visible_part(cell_source(c))) for c in tests):
            found.append(f"graded function {name}: no visible test calls it")
        if not any(re.search(rf"\bref\.{name}\b", hidden_part(cell_source(c))) for c in tests):
            found.append(f"graded function {name}: no hidden test compares it with the solution (ref.{name})")
        if name.startswith("answer_"):
            if not any(re.search(rf"\bcheck_answer_format\(\s*{name}\b", visible_part(cell_source(c))) for c in tests):
                found.append(f"graded question {name}: no visible test checks its form with check_answer_format({name}, ...)")
            if not any(re.search(rf"\bcheck_answer\(\s*{name}\b", hidden_part(cell_source(c))) for c in tests):
                found.append(f"graded question {name}: no hidden test grades it with check_answer({name}, ...)")
    found += _discussion_problems(cells, [n for n in graded_functions if n.startswith("answer_")])
    return found


def _discussion_problems(cells: list[dict[str, Any]], questions: list[str]) -> list[str]:
    """Each graded question's explanation sits in discussion cells right after its (last) test cell,
    which the release withholds and feedback restores; a discussion follows a test cell, nothing else."""
    found: list[str] = []
    for name in questions:
        grading = [i for i, c in enumerate(cells) if is_test_cell(c) and re.search(rf"\bcheck_answer\(\s*{name}\b", cell_source(c))]
        if grading and not (grading[-1] + 1 < len(cells) and is_discussion(cells[grading[-1] + 1])):
            found.append(
                f"graded question {name}: the cell after its test must be a discussion (tag 'discussion') that explains the answer"
            )
    for after, run in discussion_runs(cells):
        where = f"discussion {run[0].get('id')}"
        if after is None or not after.startswith("test_"):
            found.append(f"{where}: must follow a test cell, after which feedback puts it back")
        if any(nbgrader_meta(c) for c in run):
            found.append(f"{where}: a discussion cell is ungraded and carries no nbgrader metadata")
    return found


def _is_kernel(node: ast.FunctionDef | ast.ClassDef) -> bool:
    """A ``@triton.jit`` function: students launch it through a wrapper, never call it directly."""
    return any(ast.unparse(d).split("(")[0] in ("triton.jit", "jit") for d in getattr(node, "decorator_list", []))


def _is_autograd_function(node: ast.FunctionDef | ast.ClassDef) -> bool:
    """A ``torch.autograd.Function``: used through ``.apply``, so tests reach it through the function beside it."""
    bases = ("torch.autograd.Function", "Function", "AttentionFunction")  # AttentionFunction: course_utils.drop_in
    return isinstance(node, ast.ClassDef) and any(ast.unparse(b) in bases for b in node.bases)


def _solution_cell_problems(cell: dict[str, Any], graded_functions: list[str]) -> list[str]:
    found: list[str] = []
    grade_id = nbgrader_meta(cell)["grade_id"]
    source = cell_source(cell)
    where = f"solution cell {grade_id}"
    if "### BEGIN SOLUTION" not in source or "### END SOLUTION" not in source:
        found.append(f"{where}: needs a ### BEGIN SOLUTION / ### END SOLUTION region")
    tree = _parse(source, where, found)
    if tree is None:
        return found
    defined = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    if grade_id not in defined:
        found.append(f"{where}: the grade_id must be the name of the function or class the cell defines ({defined})")
    for node in tree.body:
        is_docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if not isinstance(node, DEFINITIONS) and not is_docstring:
            found.append(f"{where}: holds only definitions, but line {node.lineno} is a {type(node).__name__}")
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if not (_is_kernel(node) or _is_autograd_function(node)):  # tested through the function beside it
                graded_functions.append(node.name)
            docstring = ast.get_docstring(node) or ""
            if isinstance(node, ast.FunctionDef) and "Returns" not in docstring:
                found.append(f"{where}: {node.name} needs a docstring with its shapes and a Returns section")
            if isinstance(node, ast.ClassDef) and not docstring:
                found.append(f"{where}: class {node.name} needs a docstring with its shapes")
    return found


def _carried_cell_problems(cell: dict[str, Any], path: Path) -> list[str]:
    """A carried cell holds one graded function of an earlier notebook, which the student pastes in:
    one function, one autograd Function (its methods), or a Triton kernel and the launcher that calls it
    (the grade id names the launcher).

    It is graded there, not here: tests of the functions that call it stand a PyTorch version in.
    Each name it defines must be defined by a graded solution cell of an earlier notebook, whatever
    that cell's grade id (a kernel and its launcher may be graded in one cell there, or in two).
    """
    grade_id = nbgrader_meta(cell)["grade_id"]
    where = f"carried cell {grade_id}"
    found = [] if nbgrader_meta(cell).get("grade") is False else [f"{where}: is graded in its own notebook, not here"]
    tree = _parse(cell_source(cell), where, found)
    if tree is None:
        return found
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    kernels = [node for node in functions if _is_kernel(node)]
    launchers = [node for node in functions if not _is_kernel(node)]
    one_function = len(tree.body) == 1 and [f.name for f in functions] == [grade_id]
    one_autograd_function = len(tree.body) == 1 and _is_autograd_function(tree.body[0]) and tree.body[0].name == grade_id
    kernel_and_launcher = (
        len(tree.body) == 2
        and len(kernels) == 1
        and [f.name for f in launchers] == [grade_id]
        and _calls_name(launchers[0], kernels[0].name)
    )
    if not (one_function or one_autograd_function or kernel_and_launcher):
        found.append(
            f"{where}: must define the one function {grade_id} (or the autograd Function {grade_id}, or a @triton.jit "
            f"kernel and its launcher {grade_id}, which launches it) and nothing else"
        )
    graded_earlier = _names_graded_before(path)
    for name in [f.name for f in functions] or [grade_id]:
        if name not in graded_earlier:
            found.append(f"{where}: no earlier notebook grades a function {name}")
    return found


def _calls_name(node: ast.FunctionDef, name: str) -> bool:
    """Whether ``name`` appears in the body of ``node`` (a launcher passes its kernel to ``launch``)."""
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _names_graded_before(path: Path) -> set[str]:
    """The functions and classes defined in graded solution cells of the notebooks before ``path``'s.

    Graded: a solution cell that is neither carried nor a showcase (students never have a showcase).
    """
    this = path.parent.name
    names: set[str] = set()
    for other in sorted(path.parent.parent.glob("*/*.ipynb")):
        if not (other.parent.name < this and other.stem == other.parent.name):
            continue
        for c in json.loads(other.read_text(encoding="utf-8"))["cells"]:
            if not is_solution_cell(c) or is_carried(c) or is_showcase(c):
                continue
            try:
                tree = ast.parse(cell_source(c))
            except SyntaxError:
                continue  # that notebook's own check reports it
            names |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


def _showcase_cell_problems(cell: dict[str, Any], showcased: list[str]) -> list[str]:
    """A showcase cell: ungraded, withheld from students whole, so all its code is in the solution region."""
    found: list[str] = []
    where = f"showcase cell {nbgrader_meta(cell)['grade_id']}"
    source = cell_source(cell)
    before, begin, rest = source.partition("### BEGIN SOLUTION")
    _, end, after = rest.partition("### END SOLUTION")
    if not begin or not end:
        return [f"{where}: needs a ### BEGIN SOLUTION / ### END SOLUTION region"]
    if any(line.strip() and not line.lstrip().startswith("#") for line in (before + after).splitlines()):
        found.append(f"{where}: all of its code must be inside the solution region (only comments outside)")
    tree = _parse(source, where, found)
    if tree is None:
        return found
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            showcased.append(node.name)
            if "Returns" not in (ast.get_docstring(node) or ""):
                found.append(f"{where}: {node.name} needs a docstring with its shapes and a Returns section")
    return found


def _test_cell_problems(cell: dict[str, Any]) -> list[str]:
    found: list[str] = []
    meta = nbgrader_meta(cell)
    grade_id = meta["grade_id"]
    source = cell_source(cell)
    where = f"test cell {grade_id}"
    if not grade_id.startswith("test_"):
        found.append(f"{where}: grade_id must start with 'test_' and name what it checks")
    if not meta.get("points", 0) > 0:
        found.append(f"{where}: must be worth points")
    if not meta.get("locked"):
        found.append(f"{where}: must be locked, so students cannot edit the tests")
    if not source.lstrip().startswith("#"):
        found.append(f"{where}: must start with a comment saying what it checks")
    visible, hidden = visible_part(source), hidden_part(source)
    for version, text, may_be_empty in (("as graded", source, False), ("as students see it", visible, True)):
        tree = _parse(text, f"{where} ({version})", found)
        if tree is not None and not _ends_with_assert(tree, may_be_empty=may_be_empty):
            found.append(f"{where} ({version}): the last statement must be an assert")
    for part, text in (("visible", visible), ("hidden", hidden)):
        if RANDOM_DRAW.search(text) and "manual_seed(" not in text:
            found.append(f"{where}: its {part} part draws random inputs without a seed, so submissions would see different inputs")
    if "load_solution" in visible:
        found.append(f"{where}: only hidden tests may load the solution")
    found += [f"{where}: {problem}" for problem in _untrue_labels(source)]
    return found


def _untrue_labels(source: str) -> list[str]:
    """A comparison with the solution (``ref.f(...)`` as the expected value) whose label does not say so."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the parse check reports it
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("check_close", "check_equal", "check_each_close")):
            continue
        label = next((ast.unparse(k.value) for k in node.keywords if k.arg == "label"), "")
        if len(node.args) >= 2 and "ref." in ast.unparse(node.args[1]) and "solution" not in label:
            found.append(f"the label {label or '(none)'} of a comparison with the solution must say so")
    return found


def _optional_parameters(function: ast.FunctionDef) -> list[tuple[str, int | None]]:
    """(name, position) of each parameter with a default; position None for a keyword-only one."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    first = len(positional) - len(arguments.defaults)
    found = [(a.arg, i) for i, a in enumerate(positional) if i >= first]
    found += [(a.arg, None) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    return found


def _spread_keys(tree: ast.AST) -> set[str]:
    """The keys of the dicts a test builds (``{"scale": 0.3}``, ``dict(scale=0.3)``), which a call may spread with ``**``."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            keys.update(k.arg for k in node.keywords if k.arg)
    return keys


def _exercises(call: ast.Call, name: str, parameter: str, position: int | None, offset: int, spread: set[str]) -> bool:
    """``call`` passes ``parameter`` to ``name``: by keyword (or in a dict it spreads with ``**``), or positionally
    (``offset`` arguments before the function's own)."""
    if any(keyword.arg == parameter for keyword in call.keywords):
        return True
    if any(keyword.arg is None for keyword in call.keywords) and parameter in spread:
        return True
    after = len(call.args) - offset
    return position is not None and after > position and not any(isinstance(a, ast.Starred) for a in call.args)


def _graded_definitions(notebook: dict[str, Any]) -> tuple[dict[str, ast.FunctionDef], dict[str, ast.ClassDef], dict[str, str]]:
    """The functions and modules a student writes some of (and the given function that calls a written Function's
    apply), with each one's cell source."""
    functions: dict[str, ast.FunctionDef] = {}
    modules: dict[str, ast.ClassDef] = {}
    sources: dict[str, str] = {}
    for cell in notebook["cells"]:
        if not is_solution_cell(cell) or is_carried(cell) or is_showcase(cell):
            continue
        text = cell_source(cell)
        body = ast.parse(text).body
        written = {
            n.name
            for n in body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and "BEGIN SOLUTION" in (ast.get_source_segment(text, n) or "")
        }
        for node in body:
            if isinstance(node, ast.FunctionDef) and not _is_kernel(node) and (node.name in written or _calls_apply_of(node, written)):
                functions[node.name], sources[node.name] = node, text
            elif isinstance(node, ast.ClassDef) and not _is_autograd_function(node) and node.name in written:
                modules[node.name], sources[node.name] = node, text
    return functions, modules, sources


def unexercised_options(notebook: dict[str, Any], hidden_only: bool = True) -> list[str]:
    """Every optional argument of a graded function, or of a graded module's ``__init__`` and ``forward``, that no
    test cell passes (only their hidden parts, by default): "function(argument)" for each. Graded: what a student
    writes some of (its definition holds a solution region); given helpers beside it are not.

    A function is called directly (``f(x, scale=2)``), or handed to a check or a measurement (``call(f, x, scale=2)``,
    ``gradients(f, ...)``, ``trace_kernels(call, f, ...)``): the arguments after it are its own. A module's
    ``forward`` argument counts when a test that uses the module passes it by keyword. An autograd Function is
    graded through the function that calls its ``apply``, whose arguments are checked as any function's.
    """
    functions, modules, sources = _graded_definitions(notebook)
    tests = []
    for cell in notebook["cells"]:
        if is_test_cell(cell):
            text = cell_source(cell)
            tests.append(ast.parse(hidden_part(text) if hidden_only else text))
    calls = [(node, _spread_keys(tree)) for tree in tests for node in ast.walk(tree) if isinstance(node, ast.Call)]
    missing = []
    for name, function in functions.items():
        for parameter, position in _optional_parameters(function):
            if not _students(function, parameter, sources[name]):
                continue
            if not any(_passes(call, name, parameter, position, keys) for call, keys in calls):
                missing.append(f"{name}({parameter})")
    for name, module in modules.items():
        methods = {node.name: node for node in module.body if isinstance(node, ast.FunctionDef)}
        users = [tree for tree in tests if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree))]
        for method in ("__init__", "forward"):
            if method not in methods:
                continue
            for parameter, position in _optional_parameters(methods[method]):
                if not _students(methods[method], parameter, sources[name]):
                    continue
                if method == "__init__":
                    passed = any(_passes(call, name, parameter, None if position is None else position - 1, keys) for call, keys in calls)
                else:
                    passed = any(
                        (isinstance(k, ast.keyword) and k.arg == parameter) or parameter in _spread_keys(tree)
                        for tree in users
                        for k in ast.walk(tree)
                    )
                if not passed:
                    missing.append(f"{name}.{method}({parameter})")
    return missing


def _students(function: ast.FunctionDef, parameter: str, text: str) -> bool:
    """The student's code decides what ``parameter`` does: it is read inside a solution region of ``function``
    (a given wrapper of a Function, which holds none, passes every argument on to the student's code)."""
    segment = ast.get_source_segment(text, function) or ""
    regions = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", segment, re.DOTALL)
    return not regions or any(re.search(rf"\b{re.escape(parameter)}\b", region) for region in regions)


def _calls_apply_of(function: ast.FunctionDef, classes: set[str]) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == "apply" and isinstance(n.value, ast.Name) and n.value.id in classes
        for n in ast.walk(function)
    )


def _passes(call: ast.Call, name: str, parameter: str, position: int | None, spread: set[str]) -> bool:
    if isinstance(call.func, ast.Name) and call.func.id == name:
        return _exercises(call, name, parameter, position, 0, spread)
    for index, argument in enumerate(call.args):
        if isinstance(argument, ast.Name) and argument.id == name:
            return _exercises(call, name, parameter, position, index + 1, spread)
    return False
