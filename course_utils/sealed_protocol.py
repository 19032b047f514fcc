"""What crosses the sealed boundary, and in what form: the one module both sides import.

The sealed runner (``autograder/grading/sealed_run.py``, inside the sandbox) writes framed
messages to a pipe; the grader (``autograder/grading/sandbox.py``) reads them. A frame is one
byte of kind, eight of length (little-endian) and the payload:

* ``CELL`` + JSON: one executed cell (``CellFrame``);
* ``RECORD`` + bytes: the record of the test cells' calls (``course_utils.recording``);
* ``END`` + JSON: why the run ended and what it left behind (``EndFrame``).

JSON payloads carry ``SCHEMA_VERSION``. Everything in a frame is untrusted (the student's code
shares the process that writes them), so the grader reads a payload only through
``from_wire``, which accepts exactly the fields below with their types and raises
``InvalidFrame`` otherwise; the run that sent it is then the submission's failure.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1
HEADER = struct.Struct("<cQ")  # kind, payload length
CELL, RECORD, END = b"C", b"R", b"E"  # frames from the sealed run
RUN, DONE = b"R", b"D"  # control messages from the grader to the warm runner
MAX_REASON_CHARS = 300  # why a run ended: one line of a status


class InvalidFrame(ValueError):
    """A frame that does not follow this protocol."""


def frame(kind: bytes, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def _object(payload: bytes, fields: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """The payload's JSON object, with exactly ``fields`` (and the schema version) of those types."""
    try:
        message = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidFrame(f"not JSON: {error}") from None
    if not isinstance(message, dict):
        raise InvalidFrame("not a JSON object")
    if message.get("schema") != SCHEMA_VERSION:
        raise InvalidFrame(f"schema {message.get('schema')!r}, expected {SCHEMA_VERSION}")
    if set(message) != {"schema", *fields}:
        raise InvalidFrame(f"fields {sorted(message)}, expected {sorted(['schema', *fields])}")
    for name, kind in fields.items():
        value = message[name]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise InvalidFrame(f"{name} is {type(value).__name__}, expected {getattr(kind, '__name__', kind)}")
    return message


@dataclass(frozen=True)
class CellFrame:
    """One executed cell: its index in the notebook, its outputs (nbformat dicts), whether it ran to its end."""

    index: int
    outputs: tuple[dict[str, Any], ...]
    finished: bool

    def to_wire(self) -> bytes:
        message = {"schema": SCHEMA_VERSION, "index": self.index, "outputs": list(self.outputs), "finished": self.finished}
        return frame(CELL, json.dumps(message, default=str).encode())

    @classmethod
    def from_wire(cls, payload: bytes) -> CellFrame:
        message = _object(payload, {"index": int, "outputs": list, "finished": bool})
        if message["index"] < 0:
            raise InvalidFrame(f"cell index {message['index']}")
        if not all(isinstance(output, dict) for output in message["outputs"]):
            raise InvalidFrame("an output is not an object")
        return cls(message["index"], tuple(message["outputs"]), message["finished"])


@dataclass(frozen=True)
class EndFrame:
    """The end of a run: ``ended`` is "completed" or why not; processes the notebook left running."""

    ended: str
    leftover_processes: int = 0

    def to_wire(self) -> bytes:
        message = {"schema": SCHEMA_VERSION, "ended": self.ended[:MAX_REASON_CHARS], "leftover_processes": self.leftover_processes}
        return frame(END, json.dumps(message).encode())

    @classmethod
    def from_wire(cls, payload: bytes) -> EndFrame:
        message = _object(payload, {"ended": str, "leftover_processes": int})
        if message["leftover_processes"] < 0:
            raise InvalidFrame(f"leftover_processes {message['leftover_processes']}")
        return cls(message["ended"][:MAX_REASON_CHARS], message["leftover_processes"])
