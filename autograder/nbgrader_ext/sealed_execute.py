"""``SealedExecute``: nbgrader's Execute step, split between a sandbox and a trusted pass.

nbgrader runs the student's notebook, hidden tests included, in one kernel and scores each
test cell by whether it raised. Here the notebook runs sealed (``grading.sandbox``), where
the checks only record what the student's code returned; then each test cell runs again in
this trusted process against the record (``grading.verdicts``). The cells nbgrader scores
get only that trusted verdict: no error (full points) or the check's failure message (none).
The student's own cells keep their outputs, with any line that reproduces a hidden test or
a solution removed. A short report of the run goes to ``report_dir`` for the grader.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors.base import NbGraderPreprocessor
from traitlets import Bool, Integer, Unicode

from course_utils.notebook_cells import is_test_cell, nbgrader_meta
from course_utils.recording import ForgedRecord
from course_utils.student_values import student_id_note, with_student_id

from ..grading.redaction import Redactor
from ..grading.run_report import RunReport
from ..grading.sandbox import SandboxLimits, SealedRun, compiler_sealing, run_sealed
from ..grading.verdicts import Status, Verdict, decide, graded_names

IDENTIFIER = re.compile(r"^[A-Za-z_][\w.]{0,60}$")
WALL_CAP_S = 900


class SealedExecute(NbGraderPreprocessor):
    solutions_dir = Unicode(help="the source notebooks: the tests and solutions of the trusted pass").tag(config=True)
    report_dir = Unicode(help="where the run report of each submission is written (trusted)").tag(config=True)
    sealed = Bool(True, help="run the notebook in the bubblewrap sandbox").tag(config=True)
    cell_timeout = Integer(60).tag(config=True)
    memory_limit = Integer(0, help="bytes of data per process, 0: none").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        assignment, name, student = info["assignment"], info["notebook"], info["student"]
        source = nbformat.read(Path(self.solutions_dir) / assignment / f"{name}.ipynb", as_version=4)
        code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
        limits = SandboxLimits(
            cell_timeout=self.cell_timeout,
            memory_bytes=self.memory_limit or None,
            wall_seconds=min(WALL_CAP_S, self.cell_timeout * code_cells + 60),
            sealed=self.sealed,
        )
        # The notebook runs as the student nbgrader grades: its STUDENT_ID line is set to that id in the copy
        # that runs (the feedback keeps the student's own line), and a different id the student wrote is noted.
        id_note = student_id_note(nb, student)
        run = run_sealed(with_student_id(nb, student), graded_names(source), limits)
        started = time.perf_counter()
        try:
            verdicts = decide(
                source,
                bytes(run.record),
                stopped_reasons(nb, run),
                assignment,
                submission=nb,
                compiler=compiler_sealing(self.sealed),
                student=student,
            )
        except ForgedRecord as forged:  # nothing of this run is used: the submission's row says why
            run.invalid, verdicts = run.invalid or f"a forged record ({forged})"[:300], {}
        verdict_seconds = time.perf_counter() - started
        redactor = Redactor.for_source(source).sparing(nb)  # the student's own lines are never hidden from them
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if is_test_cell(cell):
                cell.outputs = verdict_outputs(verdicts.get(nbgrader_meta(cell).get("grade_id", "")), redactor)
            else:
                cell.outputs = [redactor.value(o) for o in untrusted_outputs(run.outputs.get(index, []))]
                cell.outputs = [nbformat.from_dict(o) for o in cell.outputs]
            cell.execution_count = None
        self._report(student, assignment, run, verdicts, verdict_seconds, id_note)
        return nb, resources

    def _report(
        self, student: str, assignment: str, run: SealedRun, verdicts: dict[str, Verdict], verdict_seconds: float, id_note: str = ""
    ) -> None:
        if not self.report_dir:
            return
        target = Path(self.report_dir) / student / f"{assignment}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        report = RunReport(
            sealed=run.sealed,
            ended=run.ended,
            invalid=run.invalid,
            leftover_processes=run.leftover_processes,
            process_limit_note=run.process_limit_note,
            seconds=round(run.seconds, 3),
            verdict_seconds=round(verdict_seconds, 3),
            outputs=dict(run.outputs),
            verdicts=tuple(verdicts.values()),
            student_id_note=id_note,
        )
        target.write_text(report.to_json(), encoding="utf-8")


def stopped_reasons(nb: NotebookNode, run: SealedRun) -> dict[str, str]:
    """For each test cell the sealed run did not finish cleanly, why (in words the grader chose)."""
    reasons = {}
    for index, cell in enumerate(nb.cells):
        if not is_test_cell(cell):
            continue
        test = nbgrader_meta(cell).get("grade_id", "")
        errors = [o.get("ename", "") for o in run.outputs.get(index, []) if o.get("output_type") == "error"]
        if index not in run.finished:
            reasons[test] = f"it never finished: {run.ended}" if run.ended != "completed" else "it never ran"
        elif errors:
            name = str(errors[0])
            reasons[test] = (
                "it ran past the time limit"
                if name == "CellTimeoutError"
                else f"it raised {name if IDENTIFIER.match(name) else 'an error'} there"
            )
    return reasons


def verdict_outputs(verdict: Verdict | None, redactor: Redactor) -> list[NotebookNode]:
    if verdict is None:
        verdict = Verdict("?", False, "this test was not graded", Status.ERROR)
    if verdict.passed:
        return []
    message = redactor.text(verdict.message)
    return [nbformat.v4.new_output("error", ename="AssertionError", evalue=message, traceback=[f"AssertionError: {message}"])]


def untrusted_outputs(outputs: list[Any]) -> list[dict[str, Any]]:
    """Rebuild each output the sealed run sent from its expected fields only; drop the rest."""
    clean = []
    for output in outputs:
        if not isinstance(output, dict):
            continue
        kind = output.get("output_type")
        if kind == "stream" and output.get("name") in ("stdout", "stderr"):
            clean.append({"output_type": "stream", "name": output["name"], "text": _text(output.get("text"))})
        elif kind in ("display_data", "execute_result") and isinstance(output.get("data"), dict):
            data = {str(k): v for k, v in output["data"].items() if isinstance(v, (str, list, dict))}
            entry = {
                "output_type": kind,
                "data": data,
                "metadata": output.get("metadata") if isinstance(output.get("metadata"), dict) else {},
            }
            if kind == "execute_result":
                entry["execution_count"] = None
            clean.append(entry)
        elif kind == "error":
            clean.append(
                {
                    "output_type": "error",
                    "ename": _text(output.get("ename"))[:200],
                    "evalue": _text(output.get("evalue"))[:5000],
                    "traceback": [_text(line) for line in output.get("traceback", [])][:200]
                    if isinstance(output.get("traceback"), list)
                    else [],
                }
            )
    return clean


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""
