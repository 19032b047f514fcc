"""The result of a graded run as data: the report's wire format, its validation, and what a check's failure carries."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
import torch

from autograder.grading.models import Kind, Misconception, SubmissionProblem
from autograder.grading.run_report import REPORT_SCHEMA, ReportInvalid, RunReport, read_run_report
from autograder.grading.verdicts import Status, Verdict, run_test
from autograder.grading.worker import checked_run_report
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
            misconceptions=(Misconception("the softmax runs over the queries", "2 › Softmax"), Misconception("no section")),
        ),
        Verdict("test_c", False, "softmax(x): not written yet", Status.NOT_WRITTEN, function="softmax"),
    ),
)


def test_a_report_survives_its_wire_format() -> None:
    assert RunReport.from_json(REPORT.to_json()) == REPORT
    assert json.loads(REPORT.to_json())["schema"] == REPORT_SCHEMA
    # A verdict's misconceptions travel as [name, section] pairs and come back as the one Misconception type.
    assert json.loads(REPORT.to_json())["verdicts"][1]["misconceptions"] == [
        ["the softmax runs over the queries", "2 › Softmax"],
        ["no section", ""],
    ]
    assert all(type(m) is Misconception for m in RunReport.from_json(REPORT.to_json()).verdicts[1].misconceptions)


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
    "a misconception that is not a pair": verdict_changed(misconceptions=[["a name"]]),
    "a misconception's section that is not text": verdict_changed(misconceptions=[["a name", 2]]),
    "a misconception as an object": verdict_changed(misconceptions=[{"name": "a", "section": ""}]),
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
        checked_run_report(FakeCourse(tmp_path), "ada", "01_x")
    assert problem.value.kind is Kind.INVALID_RESULT and "did not validate" in problem.value.reason
    report.unlink()
    with pytest.raises(SubmissionProblem, match="did not validate"):
        checked_run_report(FakeCourse(tmp_path), "ada", "01_x")  # missing
    report.write_text(RunReport(sealed=True, ended="completed", invalid="a b'Z' frame: unknown frame kind").to_json())
    with pytest.raises(SubmissionProblem, match="outside the grading protocol"):
        checked_run_report(FakeCourse(tmp_path), "ada", "01_x")
    report.write_text(REPORT.to_json())
    assert read_run_report(report) == checked_run_report(FakeCourse(tmp_path), "ada", "01_x") == REPORT


def test_a_failed_check_reaches_the_verdict_as_data() -> None:
    namespace = {"check_close": check_close, "torch": torch}
    code = "x = torch.tensor([1.0, 2.0])\nassert check_close(x + 1, x, label='f(x)', inputs={'x': x}, hint='add nothing')"
    verdict = run_test("test_f", code, namespace)
    assert (verdict.status, verdict.label, verdict.hint) == (Status.FAILED, "f(x)", "add nothing")
    assert verdict.inputs[0][0] == "x" and "1." in verdict.inputs[0][1]
    assert verdict.problem and verdict.problem in verdict.message and "hint: add nothing" in verdict.message


def test_an_unwritten_function_is_named_by_the_verdict() -> None:
    def softmax(x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    namespace = {"softmax": softmax, "torch": torch, "call": __import__("course_utils.checks", fromlist=["call"]).call}
    verdict = run_test("test_softmax", "call(softmax, torch.ones(2), label='softmax(ones)')", namespace)
    assert (verdict.status, verdict.function) == (Status.NOT_WRITTEN, "softmax")
    assert isinstance(recording.NotWritten("m", "f"), AssertionError)
    assert run_test("test_ok", "assert True", {}) == Verdict("test_ok", True)
    assert run_test("test_bad", "1 / 0", {}).status is Status.ERROR


def _frame(payload: bytes) -> bytes:
    return recording.FRAME_HEADER.pack(len(payload)) + payload


def _deflated_like_torch_save(event: dict) -> bytes:
    """What a hostile run can append to its record: ``torch.save``'s archive, every entry deflated."""
    saved = io.BytesIO()
    torch.save(event, saved)
    source, packed = zipfile.ZipFile(io.BytesIO(saved.getvalue())), io.BytesIO()
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for entry in source.infolist():
            out.writestr(entry.filename, source.read(entry.filename))
    return packed.getvalue()


def test_a_record_bomb_is_refused_before_anything_is_inflated(monkeypatch: pytest.MonkeyPatch) -> None:
    # 64 MiB of zeros, deflated to well under a megabyte: torch.load would inflate every byte of it.
    bomb = _deflated_like_torch_save({"cell": "test_a", "outcome": {"kind": "value", "value": torch.zeros(16 * 2**20)}})
    assert len(bomb) < 2**20
    saved = io.BytesIO()
    torch.save({"cell": "test_a", "seq": 0}, saved)
    honest = _frame(saved.getvalue())
    assert recording.read_record(honest) == {"test_a": [{"cell": "test_a", "seq": 0}]}
    loads = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(1))
    with pytest.raises(recording.ForgedRecord, match="compressed entry"):
        recording.read_record(honest + _frame(bomb))
    assert loads == [1], "only the honest frame before it was loaded"


def test_a_stored_entry_that_declares_more_than_its_frame_holds_is_refused() -> None:
    saved = io.BytesIO()
    torch.save({"cell": "test_a", "seq": 0}, saved)
    frame = bytearray(saved.getvalue())
    entry = zipfile.ZipFile(io.BytesIO(bytes(frame))).infolist()[0]
    # Patch the central directory's uncompressed size of the first entry to 1 GiB.
    directory = frame.rfind(b"PK\x01\x02", 0, len(frame))
    while directory != -1:
        name_length = int.from_bytes(frame[directory + 28 : directory + 30], "little")
        if frame[directory + 46 : directory + 46 + name_length].decode() == entry.filename:
            frame[directory + 24 : directory + 28] = (2**30).to_bytes(4, "little")
            break
        directory = frame.rfind(b"PK\x01\x02", 0, directory)
    with pytest.raises(recording.ForgedRecord, match="declares"):
        recording.read_record(_frame(bytes(frame)))
