"""The result of a graded run as data: the report's wire format, its validation, and what a check's failure carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from autograder.grading.models import Kind, SubmissionProblem
from autograder.grading.run_report import REPORT_SCHEMA, ReportInvalid, RunReport, read_run_report
from autograder.grading.verdicts import Status, Verdict, _run_test
from autograder.grading.worker import _run_report
from course_utils import recording
from course_utils.checks import check_close

REPORT = RunReport(
    sealed=True,
    ended="completed",
    leftover_processes=1,
    process_limit_note="",
    seconds=2.5,
    outputs={3: [{"output_type": "stream", "name": "stdout", "text": "hi"}]},
    verdicts=(
        Verdict("test_a", True),
        Verdict(
            "test_b",
            False,
            "softmax(x): largest error 0.5",
            Status.FAILED,
            "softmax(x)",
            "largest error 0.5",
            (("x", "[2, 3]"),),
            "sum over keys",
        ),
        Verdict("test_c", False, "softmax(x): not written yet", Status.NOT_WRITTEN, function="softmax"),
    ),
)


def test_a_report_survives_its_wire_format() -> None:
    assert RunReport.from_json(REPORT.to_json()) == REPORT
    assert json.loads(REPORT.to_json())["schema"] == REPORT_SCHEMA


def forged(**changes: object) -> str:
    data = json.loads(REPORT.to_json())
    data.update(changes)
    return json.dumps(data)


def verdict_changed(**changes: object) -> str:
    data = json.loads(REPORT.to_json())
    data["verdicts"][1].update(changes)
    return json.dumps(data)


FORGED = {
    "not JSON": "{",
    "a list": "[]",
    "another schema": forged(schema=REPORT_SCHEMA + 1),
    "a field too many": forged(score=100),
    "a wrong type": forged(leftover_processes="0"),
    "a bool for a number": forged(seconds=True),
    "a cell index that is not one": forged(outputs={"x": []}),
    "an unknown status": verdict_changed(status="excellent"),
    "passed with a failed status": verdict_changed(passed=True),
    "inputs that are not pairs": verdict_changed(inputs=[["x"]]),
}


@pytest.mark.parametrize("text", FORGED.values(), ids=list(FORGED))
def test_a_report_that_does_not_validate_is_refused(text: str) -> None:
    with pytest.raises(ReportInvalid):
        RunReport.from_json(text)


class FakeCourse:
    def __init__(self, root: Path) -> None:
        self.root = root


def test_a_forged_report_grades_nothing_and_says_why(tmp_path: Path) -> None:
    report = tmp_path / "sealed-reports" / "ada" / "01_x.json"
    report.parent.mkdir(parents=True)
    report.write_text(forged(verdicts="all passed"))
    with pytest.raises(SubmissionProblem) as problem:
        _run_report(FakeCourse(tmp_path), "ada", "01_x")
    assert problem.value.kind is Kind.INVALID_RESULT and "did not validate" in problem.value.reason
    report.unlink()
    with pytest.raises(SubmissionProblem, match="did not validate"):
        _run_report(FakeCourse(tmp_path), "ada", "01_x")  # missing
    report.write_text(RunReport(sealed=True, ended="completed", invalid="a b'Z' frame: unknown frame kind").to_json())
    with pytest.raises(SubmissionProblem, match="outside the grading protocol"):
        _run_report(FakeCourse(tmp_path), "ada", "01_x")
    report.write_text(REPORT.to_json())
    assert read_run_report(report) == _run_report(FakeCourse(tmp_path), "ada", "01_x") == REPORT


def test_a_failed_check_reaches_the_verdict_as_data() -> None:
    namespace = {"check_close": check_close, "torch": torch}
    code = "x = torch.tensor([1.0, 2.0])\nassert check_close(x + 1, x, label='f(x)', inputs={'x': x}, hint='add nothing')"
    verdict = _run_test("test_f", code, namespace)
    assert (verdict.status, verdict.label, verdict.hint) == (Status.FAILED, "f(x)", "add nothing")
    assert verdict.inputs[0][0] == "x" and "1." in verdict.inputs[0][1]
    assert verdict.problem and verdict.problem in verdict.message and "hint: add nothing" in verdict.message


def test_an_unwritten_function_is_named_by_the_verdict() -> None:
    def softmax(x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    namespace = {"softmax": softmax, "torch": torch, "call": __import__("course_utils.checks", fromlist=["call"]).call}
    verdict = _run_test("test_softmax", "call(softmax, torch.ones(2), label='softmax(ones)')", namespace)
    assert (verdict.status, verdict.function) == (Status.NOT_WRITTEN, "softmax")
    assert isinstance(recording.NotWritten("m", "f"), AssertionError)
    assert _run_test("test_ok", "assert True", {}) == Verdict("test_ok", True)
    assert _run_test("test_bad", "1 / 0", {}).status is Status.ERROR
