"""The result of one graded run, as the grader keeps it: typed, versioned, validated when read.

``SealedExecute`` (inside nbgrader's autograde) writes one ``RunReport`` per submission: how the
sealed run ended, the limits it met, the outputs of the student's cells, and every test's
``Verdict`` from the trusted pass (its status, and for a failed check the input, the problem with
the largest error, and the hint). The worker reads it back with ``read_run_report``, which
accepts exactly this schema; anything else is ``ReportInvalid``, and the submission gets the
status ``Kind.INVALID_RESULT`` rather than a grade made from something unchecked. A validated report is read once,
into the submission's ``SubmissionResult`` (``worker.grade_one``); models.py maps what follows.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .models import Misconception
from .verdicts import Status, Verdict

REPORT_SCHEMA = 1


class ReportInvalid(ValueError):
    """A run report that is missing, unreadable, or not this schema."""


@dataclass(frozen=True)
class RunReport:
    sealed: bool
    ended: str  # "completed", or why the run stopped
    invalid: str = ""  # '' when every frame of the sealed run followed the protocol; else why not
    leftover_processes: int = 0
    process_limit_note: str = ""  # '' when the process limit held; else why it could not be enforced
    seconds: float = 0.0  # the sealed run
    verdict_seconds: float = 0.0  # the trusted replay of the tests
    outputs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # the student's cells, by index
    verdicts: tuple[Verdict, ...] = ()
    student_id_note: str = ""  # '' when the notebook's STUDENT_ID is the graded student's (or none is asked); else what it was

    def to_json(self) -> str:
        data = asdict(self)
        data["outputs"] = {str(index): outputs for index, outputs in self.outputs.items()}
        data["verdicts"] = [
            {
                **asdict(v),
                "status": v.status.value,
                "inputs": [list(p) for p in v.inputs],
                "misconceptions": [[m.name, m.section] for m in v.misconceptions],  # on the wire as string pairs
            }
            for v in self.verdicts
        ]
        return json.dumps({"schema": REPORT_SCHEMA, **data}, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunReport:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ReportInvalid(f"not JSON: {error}") from None
        _fields(data, {"schema", *cls.__dataclass_fields__}, "the report")
        if data["schema"] != REPORT_SCHEMA:
            raise ReportInvalid(f"schema {data['schema']!r}, expected {REPORT_SCHEMA}")
        names = (
            ("sealed", bool),
            ("ended", str),
            ("invalid", str),
            ("process_limit_note", str),
            ("outputs", dict),
            ("student_id_note", str),
        )
        for name, kind in names:
            _typed(data[name], kind, name)
        _typed(data["leftover_processes"], int, "leftover_processes")
        _typed(data["seconds"], (int, float), "seconds")
        _typed(data["verdict_seconds"], (int, float), "verdict_seconds")
        _typed(data["verdicts"], list, "verdicts")
        outputs = {}
        for index, cell in data["outputs"].items():
            if not index.isdigit() or not isinstance(cell, list) or not all(isinstance(o, dict) for o in cell):
                raise ReportInvalid(f"outputs of cell {index!r} are not a list of objects")
            outputs[int(index)] = cell
        return cls(
            data["sealed"],
            data["ended"],
            data["invalid"],
            data["leftover_processes"],
            data["process_limit_note"],
            float(data["seconds"]),
            float(data["verdict_seconds"]),
            outputs,
            tuple(_verdict(v) for v in data["verdicts"]),
            data["student_id_note"],
        )


def _fields(data: Any, names: set[str], what: str) -> None:
    if not isinstance(data, dict) or set(data) != names:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ReportInvalid(f"{what} has {keys}, expected {sorted(names)}")


def _typed(value: Any, kind: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise ReportInvalid(f"{name} is {type(value).__name__}")


def _verdict(data: Any) -> Verdict:
    _fields(data, set(Verdict.__dataclass_fields__), "a verdict")
    for name in ("test", "message", "label", "problem", "hint", "function"):
        _typed(data[name], str, f"verdict.{name}")
    _typed(data["passed"], bool, "verdict.passed")
    try:
        status = Status(data["status"])
    except ValueError:
        raise ReportInvalid(f"verdict.status {data['status']!r}") from None
    inputs, misconceptions = _pairs(data["inputs"], "verdict.inputs"), _pairs(data["misconceptions"], "verdict.misconceptions")
    if not isinstance(data["evidence"], list) or not all(isinstance(line, str) for line in data["evidence"]):
        raise ReportInvalid("verdict.evidence is not a list of strings")
    if data["passed"] != (status is Status.PASSED):
        raise ReportInvalid(f"verdict of {data['test']!r}: passed={data['passed']} with status {status.value!r}")
    return Verdict(
        data["test"],
        data["passed"],
        data["message"],
        status,
        data["label"],
        data["problem"],
        inputs,
        data["hint"],
        data["function"],
        tuple(Misconception(name, section) for name, section in misconceptions),
        tuple(data["evidence"]),
    )


def _pairs(value: Any, name: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value):
        raise ReportInvalid(f"{name} is not a list of string pairs")
    return tuple((first, second) for first, second in value)


def read_run_report(path: Path) -> RunReport:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ReportInvalid(f"no readable report: {type(error).__name__}") from None
    return RunReport.from_json(text)
