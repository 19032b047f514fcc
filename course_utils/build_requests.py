"""Kernel build jobs from a sealed run, checked before the grader compiles them.

Under grading, a check that a kernel builds for a GPU records what to compile (the kernel's source,
its argument types and constexprs: ``kernels.build_jobs``), and the trusted pass compiles it, in a
compile child of its own. The jobs come from the submission's process, so they are untrusted data:

* each function in a job's source must be one the submitted notebook defines, as written there
  (decorators aside), so a job cannot stand in a kernel the notebook does not hold;
* the rest of a job's source may only bind a name to ``tl.constexpr(<a number>)``;
* a function's defaults must be literals and its annotations plain names or ``tl.constexpr``:
  defining the function then runs no code, in the compile child or anywhere;
* types, options and sizes must be ones a launch can produce.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

from .gpu_build import ARCHES

MAX_SOURCE_CHARS = 200_000
MAX_JOBS = 64
TYPE = re.compile(r"^(\*?(fp16|bf16|fp32|fp64|i1|i8|i16|i32|i64|u8|u1)|constexpr)$")
WARPS, STAGES = {1, 2, 4, 8, 16, 32}, range(1, 9)


class ForgedBuild(ValueError):
    """A build job the course's code cannot have made from this notebook."""


def _as_jitted(function: ast.FunctionDef) -> str:
    copy = ast.FunctionDef(
        name=function.name,
        args=function.args,
        body=function.body,
        decorator_list=[ast.parse("triton.jit").body[0].value],  # type: ignore[attr-defined]
        returns=function.returns,
        type_params=getattr(function, "type_params", []),
    )
    return ast.unparse(ast.fix_missing_locations(copy))


def notebook_functions(code_cells: Iterable[str]) -> frozenset[str]:
    """Every function the notebook's code defines, as a job's source writes it (``@triton.jit`` on each)."""
    found: set[str] = set()
    for code in code_cells:
        text = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        found.update(_as_jitted(node) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))
    return frozenset(found)


def _plain_signature(function: ast.FunctionDef) -> bool:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    defaults = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
    annotations = [a.annotation for a in every if a.annotation is not None]
    plain_annotation = all(
        isinstance(a, (ast.Name, ast.Constant)) or (isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)) for a in annotations
    )
    return (
        arguments.vararg is None
        and arguments.kwarg is None
        and function.returns is None
        and plain_annotation
        and all(isinstance(d, ast.Constant) for d in defaults)
    )


def _checked_source(source: Any, functions: frozenset[str] | None) -> str:
    if not isinstance(source, str) or len(source) > MAX_SOURCE_CHARS:
        raise ForgedBuild("a job's source is not text of a kernel's size")
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ForgedBuild(f"a job's source does not parse: {error.msg}") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if not _plain_signature(node):
                raise ForgedBuild(f"{node.name}: defaults must be literals and annotations plain names")
            if functions is not None and _as_jitted(node) not in functions:
                raise ForgedBuild(f"{node.name} is not a function of the submitted notebook, as written there")
        elif not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "tl.constexpr"
            and len(node.value.args) == 1
            and not node.value.keywords
            and isinstance(node.value.args[0], ast.Constant)
            and isinstance(node.value.args[0].value, (int, float, bool))
        ):
            raise ForgedBuild(f"a job's source holds a statement that is neither a kernel nor a constant: {ast.unparse(node)[:80]}")
    return source


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, bool)) or value is None


def checked_jobs(data: Any, functions: frozenset[str] | None) -> list[dict[str, Any]]:
    """The jobs in ``data``, each checked (see the module's docstring), rebuilt from checked parts only.

    ``functions``: the submitted notebook's functions (``notebook_functions``); None checks the form only.

    Raises:
        ForgedBuild: naming the first thing no launch in this notebook can have produced.
    """
    if not isinstance(data, list) or len(data) > MAX_JOBS:
        raise ForgedBuild("the build jobs are not a list of at most 64 jobs")
    jobs = []
    for job in data:
        if not isinstance(job, dict):
            raise ForgedBuild("a build job is not a record")
        name, arch = job.get("name"), job.get("arch")
        signature, constexprs, options = job.get("signature"), job.get("constexprs"), job.get("options")
        attrs, config = job.get("attrs"), job.get("config")
        if not (isinstance(name, str) and name.isidentifier() and arch in ARCHES):
            raise ForgedBuild("a build job names no kernel, or a GPU the course does not build for")
        if not (
            isinstance(signature, dict) and all(isinstance(k, str) and isinstance(v, str) and TYPE.match(v) for k, v in signature.items())
        ):
            raise ForgedBuild(f"{name}: argument types that no tensor or number gives")
        if not (isinstance(constexprs, dict) and all(isinstance(k, str) and _number(v) for k, v in constexprs.items())):
            raise ForgedBuild(f"{name}: constexprs that are not numbers")
        if not (
            isinstance(options, dict)
            and set(options) == {"num_warps", "num_stages", "enable_fp_fusion"}
            and options["num_warps"] in WARPS
            and options["num_stages"] in STAGES
            and isinstance(options["enable_fp_fusion"], bool)
        ):
            raise ForgedBuild(f"{name}: launch options a launch cannot have")
        if not (isinstance(config, dict) and all(isinstance(k, str) and isinstance(v, int) for k, v in config.items())):
            raise ForgedBuild(f"{name}: an autotuning config that is not numbers")
        if not (
            isinstance(attrs, list)
            and all(
                isinstance(a, list) and len(a) == 2 and all(isinstance(i, int) for i in a[0]) and a[1] == [["tt.divisibility", 16]]
                for a in attrs
            )
        ):
            raise ForgedBuild(f"{name}: argument hints a launch does not give")
        source = _checked_source(job.get("source"), functions)
        jobs.append(
            {
                "name": name,
                "arch": arch,
                "source": source,
                "signature": dict(signature),
                "constexprs": dict(constexprs),
                "attrs": [[list(a[0]), [["tt.divisibility", 16]]] for a in attrs],
                "options": dict(options),
                "config": dict(config),
            }
        )
    return jobs
