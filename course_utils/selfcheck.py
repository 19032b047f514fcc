"""Check your own work without nbgrader: run the notebook's visible tests and say what passed.

The last cell of every notebook calls ``check_my_work("NN_name")``. It finds the notebook it
runs in, runs the visible part of each test cell in the notebook's own namespace (so it sees
the functions as you last ran them) and prints a report: which tests pass, which fail and the
first lines of why. Hidden tests are not in your copy; they run only when the course grades it.

The report says which points it checked. A test whose visible part ran one of the course's format checks
(``check_answer_format``: a question's answer has the right form; ``check_student_id``: the id is set) checked
a format only: the value is decided when graded. A test with no visible code is decided only when graded.

Where the notebook is read from: Colab's copy of the open notebook; JupyterLab's session path
(``JPY_SESSION_NAME``); else ``NN_name.ipynb`` in the working directory or ``notebooks/NN_name/``.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .notebook_cells import cell_source, is_test_cell, nbgrader_meta, visible_part
from .runtime import is_grading

_format_checks: list[list[str]] = []  # while run_tests runs a test's visible part: the format checks that ran in it


def checked_only_a_format(what: str) -> None:
    """A course check says it checked a format, not a value (so the self-check does not count the test's points)."""
    if _format_checks:
        _format_checks[-1].append(what)


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest class
    test: str
    points: float
    passed: bool
    why: str = ""  # the error's first lines when it failed
    format_only: bool = False  # its visible part ran a format check: the value is decided when graded


@dataclass
class SelfCheck:
    notebook: str
    results: list[TestResult] = field(default_factory=list)
    hidden_only: dict[str, float] = field(default_factory=dict)  # tests with no visible code, and their points

    @property
    def passed(self) -> list[TestResult]:
        return [r for r in self.results if r.passed]

    @property
    def failed(self) -> list[TestResult]:
        return [r for r in self.results if not r.passed]

    def __str__(self) -> str:
        checked = [r for r in self.results if not r.format_only]
        formats = [r for r in self.results if r.format_only]
        lines = [f"Self-check of {self.notebook}: {len(self.passed)} of {len(self.results)} visible tests pass."]
        for r in self.results:
            only = ": format checked here; the value is decided when graded" if r.format_only else ""
            lines.append(f"  {'PASS' if r.passed else 'FAIL'}  {r.test} ({r.points:g} pt){only}")
            lines += [f"        {line}" for line in r.why.splitlines()]
        if self.hidden_only:
            hidden = ", ".join(f"{test} ({points:g} pt)" for test, points in self.hidden_only.items())
            lines.append(f"  Decided only when graded (no visible part): {hidden}")
        earned = sum(r.points for r in checked if r.passed)
        summary = f"Checked here: {earned:g} of {sum(r.points for r in checked):g} points pass."
        undecided = [f"{_count(len(formats), 'answer')} whose format alone is checked here"] if formats else []
        undecided += [f"{_count(len(self.hidden_only), 'test')} with no visible part"] if self.hidden_only else []
        if undecided:
            points = sum(r.points for r in formats) + sum(self.hidden_only.values())
            total = points + sum(r.points for r in checked)
            summary += f" Decided only when graded: {points:g} of the notebook's {total:g} points ({'; '.join(undecided)})."
        lines.append(summary)
        if self.results:
            lines.append("A test may also have a hidden part, run only when graded: one that passes here can still lose points then.")
        if not self.failed:
            lines.append("All visible tests pass. Save the notebook and hand it in under its name.")
        return "\n".join(lines)


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def find_notebook(name: str) -> dict[str, Any]:
    """The running notebook's JSON; FileNotFoundError with what was tried when it cannot be found."""
    if "google.colab" in sys.modules:
        from google.colab import _message  # type: ignore[import-not-found]  # Colab's own bridge to the page

        return _message.blocking_request("get_ipynb", timeout_sec=30)["ipynb"]
    candidates = []
    session = os.environ.get("JPY_SESSION_NAME")
    if session and session.endswith(".ipynb"):
        candidates.append(Path(session))
    candidates += [Path.cwd() / f"{name}.ipynb", Path.cwd() / "notebooks" / name / f"{name}.ipynb"]
    for path in candidates:
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    tried = ", ".join(str(p) for p in candidates)
    raise FileNotFoundError(f"cannot find the notebook {name}.ipynb (tried {tried}); save it and run from its folder")


def run_tests(notebook: dict[str, Any], namespace: dict[str, Any], name: str = "") -> SelfCheck:
    """Run the visible part of each test cell of ``notebook`` in ``namespace``."""
    report = SelfCheck(name or "this notebook")
    for cell in notebook.get("cells", []):
        if not is_test_cell(cell):
            continue
        meta = nbgrader_meta(cell)
        code = compile(visible_part(cell_source(cell)), f"<test {meta['grade_id']}>", "exec", ast.PyCF_ONLY_AST)
        points = float(meta.get("points", 0))
        if not code.body:  # only comments are visible: passing it here would say nothing
            report.hidden_only[meta["grade_id"]] = points
            continue
        ran: list[str] = []  # the format checks this test's visible part runs (checked_only_a_format)
        _format_checks.append(ran)
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                exec(compile(code, f"<test {meta['grade_id']}>", "exec"), namespace)
        except Exception as error:  # noqa: BLE001 - a failing test is the report's content, not a crash
            why = "\n".join(f"{type(error).__name__}: {error}".strip().splitlines()[:6])
            report.results.append(TestResult(meta["grade_id"], points, False, why, format_only=bool(ran)))
        else:
            report.results.append(TestResult(meta["grade_id"], points, True, format_only=bool(ran)))
        finally:
            _format_checks.pop()
    return report


def check_my_work(name: str, namespace: dict[str, Any] | None = None) -> SelfCheck | None:
    """Print and return the self-check report for notebook ``name`` (None while being graded)."""
    if is_grading():
        return None  # the grader runs every test itself, hidden ones included
    if namespace is None:
        namespace = sys._getframe(1).f_globals  # the notebook's globals: the functions as last run
    report = run_tests(find_notebook(name), namespace, name)
    print(report)
    return report
