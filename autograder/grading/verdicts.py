"""The trusted pass: decide every test's verdict where no student code has ever run.

Each test cell of the *source* notebook runs here, with the real solutions and PyTorch, and
with every graded name bound to a placeholder that answers from the sealed run's record
(``course_utils.recording``). A check passes only if the student's recorded outputs pass it
here; nothing the sealed run printed or decided counts.
"""

from __future__ import annotations

import enum
import os
import sys
from dataclasses import dataclass, replace
from typing import Any

import torch
from nbformat.notebooknode import NotebookNode

from course_utils import gpu_compiler, recording
from course_utils.build_requests import notebook_functions
from course_utils.comparisons import CheckFailed
from course_utils.notebook_cells import (
    cell_source,
    defined_names,
    is_test_cell,
    nbgrader_meta,
    solution_cells,
)
from course_utils.student_values import ID_VARIABLE, grading_student

from ..solutions import top_level_imports
from .models import Misconception

# What test cells may use besides the notebook's imports: grading runs on the CPU, sealed.
GRADING_FACTS = "device = torch.device('cpu')\nON_GPU = False\n"


class Status(str, enum.Enum):
    """How a test cell ended in the trusted pass."""

    PASSED = "passed"
    FAILED = "failed"  # a check failed: its fields say what, on which input, and the hint
    NOT_WRITTEN = "not written"  # the graded function still raises NotImplementedError
    ERROR = "error"  # the test could not finish (an error that is not a check's)


@dataclass(frozen=True)
class Verdict:
    """One test cell's verdict, as data; ``message`` is its text for the student (never a traceback)."""

    test: str
    passed: bool
    message: str = ""
    status: Status = Status.PASSED
    label: str = ""  # what the failing check called, e.g. "softmax(x [2, 3])"
    problem: str = ""  # what was wrong, with the largest error where there is one
    inputs: tuple[tuple[str, str], ...] = ()  # (name, description) of the inputs it was given
    hint: str = ""
    function: str = ""  # NOT_WRITTEN: the function that still raises NotImplementedError
    misconceptions: tuple[Misconception, ...] = ()  # the catalogued mistakes that give what the student's code gave
    # What the tripwires saw the student's code run in this test (the course's answers, autograd in a hand-written
    # gradient): runtime evidence for review, whatever the source text says (``recording.runtime_evidence``).
    evidence: tuple[str, ...] = ()


def graded_names(source: NotebookNode | dict[str, Any]) -> list[str]:
    """The functions and classes the solution cells define: what tests call by name."""
    return sorted(set().union(*(defined_names(code) for code in solution_cells(source).values())))


def trusted_namespace(source: NotebookNode | dict[str, Any], student: str = "") -> dict[str, Any]:
    """The names a test cell runs with here: the notebook's imports, the grading facts, a placeholder per
    graded name, and ``STUDENT_ID``: the id nbgrader grades (never the one the submission's notebook set)."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(top_level_imports(source) + "\n" + GRADING_FACTS, "<grading imports>", "exec"), namespace)  # noqa: S102 - the instructor's imports
    namespace[ID_VARIABLE] = student
    for name in graded_names(source):
        namespace[name] = recording.Placeholder(name)
    return namespace


def decide(
    source: NotebookNode | dict[str, Any],
    record: bytes,
    stopped_because: dict[str, str],
    assignment: str = "",
    submission: NotebookNode | dict[str, Any] | None = None,
    compiler: gpu_compiler.Sealing | None = None,
    student: str = "",
) -> dict[str, Verdict]:
    """A verdict for every test cell of ``source``, from the sealed run's ``record``.

    ``stopped_because`` says, for a test cell the sealed run did not finish, why not; it is
    quoted when the replay needs a call the record lacks. With ``assignment``, a failed test
    also names the catalogued mistakes that give what the student's code gave there.
    ``submission``: the notebook the sealed run ran, whose kernels alone may be compiled for a GPU
    here, in a compile child sealed as ``compiler`` says (``sandbox.compiler_sealing``).
    ``student``: the id nbgrader grades; each question's expected answer is for that student's values
    (``course_utils.student_values``), whatever ``STUDENT_ID`` the submission set.
    """
    # Kernels are graded in Triton's interpreter, in the sealed run and here alike.
    os.environ["TRITON_INTERPRET"] = "1"
    events = recording.read_record(record)
    namespace = trusted_namespace(source, student)
    if "triton" in sys.modules:  # the notebook's imports brought it: its kernels (and the mistakes') run interpreted here
        from course_utils.kernels import skip_unasserted_overflow_checks

        skip_unasserted_overflow_checks()
    verdicts = {}
    submitted = None
    if submission is not None:
        submitted = notebook_functions(cell_source(cell) for cell in submission["cells"] if cell.get("cell_type") == "code")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the sealed run: the same inputs, bit for bit
    try:
        with (
            grading_student(student),
            gpu_compiler.sealed_children(compiler),
            recording.replaying(events, stopped_because, submitted) as replayed,
        ):
            for cell in source["cells"]:
                if not is_test_cell(cell):
                    continue
                test = nbgrader_meta(cell)["grade_id"]
                recording.begin_cell(test)
                verdicts[test] = run_test(test, cell_source(cell), namespace)
                if found := recording.runtime_evidence(replayed.get(test, ())):
                    verdicts[test] = replace(verdicts[test], evidence=found)
            if assignment:
                verdicts = _with_misconceptions(assignment, source, verdicts, replayed)
    finally:
        torch.set_num_threads(threads)
    return verdicts


def run_test(test: str, code: str, namespace: dict[str, Any]) -> Verdict:
    try:
        exec(compile(code, f"<test {test}>", "exec"), namespace)  # noqa: S102 - the instructor's test, no student code
    except recording.NotWritten as unwritten:
        return Verdict(test, False, str(unwritten), Status.NOT_WRITTEN, function=unwritten.function)
    except CheckFailed as failure:
        return Verdict(test, False, str(failure), Status.FAILED, failure.label, failure.problem, failure.inputs, failure.hint)
    except AssertionError as failure:
        return Verdict(test, False, str(failure) or "an assertion failed", Status.FAILED)
    except BaseException as error:  # noqa: BLE001 - a test that cannot finish fails, and grading goes on
        if isinstance(error, KeyboardInterrupt):
            raise
        return Verdict(test, False, f"{type(error).__name__}: {error}", Status.ERROR)
    return Verdict(test, True)


def _with_misconceptions(
    assignment: str, source: NotebookNode | dict[str, Any], verdicts: dict[str, Verdict], replayed: dict[str, list[recording.Replayed]]
) -> dict[str, Verdict]:
    from .misconceptions import name_misconceptions  # the catalogue, loaded only when a test failed

    failed = {test for test, v in verdicts.items() if v.status in (Status.FAILED, Status.ERROR)}
    if not failed:
        return verdicts
    named = name_misconceptions(assignment, source, failed, replayed)
    for test, found in named.items():
        lines = [f"  this is what a known mistake gives: {m.name}" + (f" (revisit: {m.section})" if m.section else "") for m in found]
        verdicts[test] = replace(verdicts[test], message="\n".join([verdicts[test].message, *lines]), misconceptions=found)
    return verdicts
