"""Record and replay: how grading keeps the verdicts out of reach of the code it grades.

A test cell calls student code only through the checks (``call``, ``check_raises``,
``check_no_builtin``), through objects those calls return, and through measurements
(``peak_tensor_bytes``, ``count_flops``). Each of those is an *invocation*, and this module
decides what an invocation does:

* **live** (a student's own notebook): run the student's code, as always.
* **record** (the sealed grading run, where the student's code lives): run it and write its
  outcome (the value, the exception, the forbidden calls, the measurement) to the record,
  with a fingerprint of the inputs. The checks compare nothing here: a verdict reached in
  this process could be forged by the code it judges.
* **replay** (the trusted pass, where no student code exists): each graded name is a
  placeholder; an invocation returns the recorded outcome if its inputs' fingerprint matches
  the record's, and the checks compare it with the solution and PyTorch.

Outcomes cross between the two processes as plain data (tensors, numbers, strings and
containers of them), which the trusted side loads with ``torch.load(weights_only=True)``.
Any other result (a module, a cache object) stays in the sealed run as a *handle*; the test
uses it through attribute reads and calls, which are invocations too.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import io
import os
import struct
import warnings
import zipfile
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch

from .guards import Guards

RECORD_FILE_ENV = "COURSE_RECORD_FILE"  # set in the sealed run: where the record goes
GRADED_NAMES_ENV = "COURSE_GRADED_NAMES"  # comma-separated: the names the tests grade
# The record is what the trusted pass replays: a student line that imports this module or names where
# the record goes is flagged for review (course_utils.guards).
GUARDS = Guards(values=("RECORD_FILE_ENV", "GRADED_NAMES_ENV"), module=True)
FRAME_HEADER = struct.Struct("<Q")

# What one recorded outcome may hold: beyond this it is refused, not truncated.
MAX_ELEMENTS = 1 << 26
MAX_STRING = 100_000
MAX_DEPTH = 12


class Mode(enum.Enum):
    LIVE = "live"
    RECORD = "record"
    REPLAY = "replay"


class NotWritten(AssertionError):
    """The student's function still raises NotImplementedError; ``function`` names it."""

    def __init__(self, message: str, function: str = "") -> None:
        super().__init__(message)
        self.function = function


class ReplayError(AssertionError):
    """The trusted pass asked for an invocation the sealed run did not record."""


class ForgedRecord(ValueError):
    """A record frame ``torch.save`` cannot have written: loading it could cost the trusted side more than it sent."""


@dataclass(frozen=True)
class CallOutcome:
    """What one invocation of student code gave: a value, a handle, or an exception."""

    kind: str  # "value" | "handle" | "raised" | "not_written"
    value: Any = None
    error_type: str = ""
    error_mro: tuple[str, ...] = ()
    message: str = ""
    forbidden_calls: tuple[str, ...] = ()
    answers_ran: tuple[str, ...] = ()  # the course's own answers to the function under test that it reached
    autograd_ran: tuple[str, ...] = ()  # a hand-written gradient's run: the autograd it went through (tripwires.autograd_refused)

    def raised(self, error: type[BaseException]) -> bool:
        return self.kind == "raised" and error.__name__ in self.error_mro


@dataclass
class _State:
    mode: Mode = Mode.LIVE
    namespace: dict[str, Any] | None = None  # record: the notebook's globals
    graded: tuple[str, ...] = ()
    handles: dict[int, Any] = field(default_factory=dict)  # record: handle id -> the real object
    origins: dict[int, str] = field(default_factory=dict)  # record: handle id -> the graded name that made it
    next_handle: int = 1
    cell: str = ""
    sequence: int = 0
    depth: int = 0  # > 0 while student code runs: what it calls is not a test's invocation
    pending: list[dict[str, Any]] = field(default_factory=list)
    path: str = ""
    replay: dict[str, deque] = field(default_factory=dict)  # cell -> recorded events
    stopped_because: dict[str, str] = field(default_factory=dict)  # cell -> why the sealed run ended early
    replayed: dict[str, list[Replayed]] = field(default_factory=dict)  # replay: cell -> what each invocation was given and gave
    submitted: frozenset[str] | None = None  # replay: the submitted notebook's functions, as build jobs write them
    made: dict[str, Any] = field(default_factory=dict)  # record: the object the graded cell bound to each graded name


@dataclass(frozen=True)
class Replayed:
    """One invocation the trusted pass answered from the record: what the test gave the student's code,
    and what the record says it returned. A catalogued mistake can be run on the same inputs
    (``autograder.grading.misconceptions``) to see whether it returns the same.

    ``target`` is ``name:softmax``, ``handle:3`` or ``measure:flops``; a measurement keeps its
    function and ``measure``, as ``measured`` got them.
    """

    target: str
    attribute: str | None
    args: tuple
    kwargs: dict[str, Any]
    stand_ins: dict[str, Any] | None
    forbidden_builtins: tuple[str, ...]
    through: tuple[str, Callable[[Any], Callable[..., Any]]] | None
    outcome: CallOutcome
    fn: Any = None
    measure: Callable[[Callable[[], Any]], Any] | None = None
    rng: torch.Tensor | None = None  # the CPU generator's state when the test made the call, as the sealed run had it


_state = _State()


def mode() -> Mode:
    return _state.mode


def grader_bookkeeping() -> bool:
    """The sealed run is between calls of student code (fingerprinting inputs, writing the record): what runs
    now is the course's own, and a measurement of the student's code must not count it."""
    return _state.mode is Mode.RECORD and _state.depth == 0


def submitted_functions() -> frozenset[str] | None:
    """In replay, the submitted notebook's functions (None where the replay was not told them)."""
    return _state.submitted


# --- the sealed run ---------------------------------------------------------------------------------


def start_recording(path: str, graded: Iterable[str], namespace: dict[str, Any]) -> None:
    """Record every invocation from now on into ``path`` (the sealed run calls this first)."""
    global _state
    _state = _State(mode=Mode.RECORD, namespace=namespace, graded=tuple(graded), path=path)
    open(path, "wb").close()


def graded_bindings() -> dict[str, Any]:
    """The objects the notebook binds to the graded names now (the sealed run takes this before a graded cell runs)."""
    namespace = _state.namespace or {}
    return {name: namespace.get(name, _MISSING) for name in _state.graded}


def end_graded_cell(before: dict[str, Any]) -> None:
    """A graded solution cell ran: the objects it bound to graded names (those not bound so before it) are the graded
    ones, whatever a later cell binds to their names. The last run of the cell counts."""
    namespace = _state.namespace or {}
    for name, was in before.items():
        now = namespace.get(name, _MISSING)
        if now is not _MISSING and now is not was:
            _state.made[name] = now


def made_by_graded_cells() -> dict[str, Any]:
    """In the sealed run, each graded name the graded cells bound, and the object they bound to it (empty elsewhere)."""
    return dict(_state.made)


def begin_cell(grade_id: str) -> None:
    """The test cell about to run: its invocations are numbered from 0.

    Under grading each test cell starts from the same random state in both runs, whatever
    the notebook drew before it.
    """
    _state.cell, _state.sequence = grade_id, 0
    if _state.mode is not Mode.LIVE:
        torch.manual_seed(0)


def _write(event: dict[str, Any]) -> None:
    _state.pending.append(event)
    if _state.depth == 0 and not _measuring:
        flush()


def flush() -> None:
    """Append the pending events to the record file, one length-prefixed frame each."""
    if not _state.pending or not _state.path:
        return
    with open(_state.path, "ab") as record:
        for event in _state.pending:
            buffer = io.BytesIO()
            torch.save(event, buffer)
            record.write(FRAME_HEADER.pack(buffer.tell()) + buffer.getvalue())
    _state.pending.clear()


# --- the trusted pass -------------------------------------------------------------------------------


def read_record(data: bytes) -> dict[str, list[dict[str, Any]]]:
    """Recorded events by cell, from the bytes of a record file (untrusted: loaded as data only).

    Raises:
        ForgedRecord: a frame holds a compressed entry, or entries that declare more bytes than the frame
            holds. ``torch.save`` stores every entry as it is, so neither comes from the course's code, and
            ``torch.load`` would inflate what the entry declares (gigabytes from a few kilobytes) before any
            check of the result could run.
    """
    events: dict[str, list[dict[str, Any]]] = {}
    offset = 0
    while offset + FRAME_HEADER.size <= len(data):
        (size,) = FRAME_HEADER.unpack_from(data, offset)
        offset += FRAME_HEADER.size
        if size > len(data) - offset:
            break  # a frame cut short by a killed run: the events before it stand
        frame = data[offset : offset + size]
        _refuse_inflation(frame)
        try:
            event = torch.load(io.BytesIO(frame), weights_only=True)
        except Exception:  # noqa: BLE001 - a forged or broken frame ends the record
            break
        offset += size
        if isinstance(event, dict) and isinstance(event.get("cell"), str):
            events.setdefault(event["cell"], []).append(event)
    return events


def _refuse_inflation(frame: bytes) -> None:
    """A frame's archive may only hold stored entries whose declared sizes fit in the frame itself."""
    try:
        entries = zipfile.ZipFile(io.BytesIO(frame)).infolist()
    except (zipfile.BadZipFile, ValueError, EOFError):
        return  # not an archive: torch.load refuses it, and the record ends there
    declared = 0
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED:
            raise ForgedRecord(f"a record frame holds a compressed entry ({entry.filename[:80]!r}), which the course never writes")
        declared += entry.file_size
    if declared > len(frame):
        raise ForgedRecord(f"a record frame of {len(frame)} bytes declares {declared} bytes of contents")


@contextlib.contextmanager
def replaying(
    events: dict[str, list[dict[str, Any]]],
    stopped_because: dict[str, str] | None = None,
    submitted: frozenset[str] | None = None,
) -> Iterator[dict[str, list[Replayed]]]:
    """Replay ``events`` (see ``read_record``) while the block runs; yields, filled as the tests run,
    what each test cell's invocations were given and gave (``Replayed``), by cell.

    ``submitted``: the functions the submitted notebook defines (``build_requests.notebook_functions``),
    which a recorded kernel build job must come from.
    """
    global _state
    saved = _state
    _state = _State(
        mode=Mode.REPLAY,
        replay={cell: deque(found) for cell, found in events.items()},
        stopped_because=dict(stopped_because or {}),
        submitted=submitted,
    )
    try:
        yield _state.replayed
    finally:
        _state = saved


class Placeholder:
    """A graded name in the trusted pass: no code behind it, only the record."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _direct_call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<graded {self.__name__}>"


class Handle:
    """An object student code returned that is not plain data (a module, a cache)."""

    def __init__(self, number: int, obj: Any = None) -> None:
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_obj", obj)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._read(name)

    def _read(self, name: str) -> Any:
        outcome = invoke(self, (), {}, attribute=name)
        if outcome.kind == "raised":
            raise AttributeError(f"{outcome.error_type}: {outcome.message}")
        return _result(outcome, f"reading .{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("a test may not assign attributes of an object from student code")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _direct_call(self, args, kwargs)

    def __len__(self) -> int:
        return self._read("__len__")()

    def __getitem__(self, key: Any) -> Any:
        return self._read("__getitem__")(key)

    def __repr__(self) -> str:
        return f"<object from student code #{self._number}>"


def _direct_call(fn: Any, args: tuple, kwargs: dict) -> Any:
    outcome = invoke(fn, args, kwargs)
    return _result(outcome, f"{getattr(fn, '__name__', 'the object')}(...)")


def _result(outcome: CallOutcome, label: str) -> Any:
    found = tripped(outcome)
    if found and _state.mode is Mode.REPLAY:
        problem, hint = found
        raise AssertionError(f"{label}: {problem}\n  hint: {hint}")
    if outcome.kind == "not_written":
        raise NotWritten(f"{label}: not written yet (it raises NotImplementedError).", label.partition("(")[0])
    if outcome.kind == "raised":
        raise AssertionError(f"{label}: raised {outcome.error_type}: {outcome.message}")
    return outcome.value


class Withheld:
    """What ``load_solution`` gives in the sealed run, which never sees the solutions.

    Hidden tests use the solution only for expected values, and the sealed run compares
    nothing, so any use of it yields another Withheld and any comparison holds.
    """

    def __init__(self, name: str = "the solution") -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name: str) -> "Withheld":
        return Withheld(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> "Withheld":
        return Withheld(f"{self._name}(...)")

    def __getitem__(self, key: Any) -> "Withheld":
        return self

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<withheld in the sealed run: {self._name}>"

    def _absorb(self, *args: Any) -> "Withheld":
        return self

    def _holds(self, *args: Any) -> bool:
        return True

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _absorb
    __matmul__ = __rmatmul__ = __pow__ = __rpow__ = __neg__ = __abs__ = __floordiv__ = __mod__ = _absorb
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _holds  # type: ignore[assignment]
    __hash__ = object.__hash__


# --- invocations ------------------------------------------------------------------------------------


def student_target(fn: Any) -> str | None:
    """Which student object ``fn`` is (``name:softmax``, ``handle:3``), or None for test code."""
    if isinstance(fn, Handle):
        return f"handle:{fn._number}"
    if _state.mode is Mode.REPLAY:
        return f"name:{fn.__name__}" if isinstance(fn, Placeholder) else None
    if _state.mode is Mode.RECORD and _state.depth == 0 and _state.namespace is not None:
        for name in _state.graded:
            if _state.namespace.get(name, _MISSING) is fn:
                return f"name:{name}"
    return None


_MISSING = object()
_measuring = 0


def _under_test(target: str) -> tuple[str, ...]:
    """The graded name a test invocation tests: its own, or the one whose call made the object it is on."""
    kind, _, rest = target.partition(":")
    if kind == "name":
        return (rest,)
    origin = _state.origins.get(int(rest)) if kind == "handle" and rest.isdigit() else None
    return (origin,) if origin else ()


def tripped(outcome: CallOutcome) -> tuple[str, str] | None:
    """The problem and hint of an invocation whose run reached what the test under way refuses: the course's
    answer to the function under test, or autograd inside a gradient written by hand. None if it reached neither."""
    from .tripwires import answered_here, autograd_here

    if outcome.answers_ran:
        return answered_here(outcome.answers_ran)
    if outcome.autograd_ran:
        return autograd_here(outcome.autograd_ran)
    return None


def runtime_evidence(replayed: Iterable[Replayed]) -> tuple[str, ...]:
    """What the tripwires saw one test's invocations run, for a person to read beside the review flags of the
    source text: the course's answers to the function under test, and autograd inside a hand-written gradient.
    (A forbidden built-in is an ordinary mistake, graded and named by its own check.)"""
    lines = (f"ran {name}" for call in replayed for name in (*call.outcome.answers_ran, *call.outcome.autograd_ran))
    return tuple(dict.fromkeys(lines))


def invoke(
    fn: Any,
    args: tuple,
    kwargs: dict[str, Any],
    *,
    attribute: str | None = None,
    stand_ins: dict[str, Any] | None = None,
    forbidden_builtins: tuple[str, ...] = (),
    through: tuple[str, Callable[[Any], Callable[..., Any]]] | None = None,
    label: str = "",
) -> CallOutcome:
    """Run (live, record) or look up (replay) one call of student code, or one attribute read.

    ``through=(name, wrap)`` runs ``wrap(fn)`` instead of ``fn`` (a gradient, say), so that what
    crosses to the trusted side is what ``wrap`` computes from the student's code.
    """
    target = student_target(fn)
    operation = f"getattr:{attribute}" if attribute is not None else f"call{':' + through[0] if through else ''}"
    wrap = through[1] if through else None
    if target is None or _state.mode is Mode.LIVE:
        return _run(_real(fn), attribute, args, kwargs, stand_ins, forbidden_builtins, wrap, wrap_objects=False)
    fingerprint = _fingerprint((operation, target, args, kwargs, sorted(stand_ins or {}), forbidden_builtins))
    if _state.mode is Mode.REPLAY:
        outcome = _replayed(operation, target, fingerprint, label)
        _state.replayed.setdefault(_state.cell, []).append(
            Replayed(target, attribute, args, kwargs, stand_ins, forbidden_builtins, through, outcome, rng=torch.random.get_rng_state())
        )
        return outcome
    under_test = _under_test(target)
    outcome = _run(
        _real(fn), attribute, _unwrap(args), _unwrap(kwargs), stand_ins, forbidden_builtins, wrap, wrap_objects=True, refused=under_test
    )
    if outcome.kind == "handle" and under_test:  # calls on what it made are tests of the same graded name
        _state.origins[outcome.value._number] = under_test[0]
    _write(
        {
            "cell": _state.cell,
            "seq": _state.sequence,
            "op": operation,
            "target": target,
            "fingerprint": fingerprint,
            "outcome": _outcome_to_wire(outcome),
        }
    )
    _state.sequence += 1
    return _outcome_from_wire(_outcome_to_wire(outcome))


def apply_measure(measure: Callable[..., Any], thunk: Callable[[], Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``measure(thunk)``; or ``measure(thunk, args, kwargs)`` for a measure that looks at the inputs themselves
    (``takes_inputs``: which tensors it watches), so that it can be run again on copies of them."""
    return measure(thunk, args, kwargs) if getattr(measure, "takes_inputs", False) else measure(thunk)


def measured(kind: str, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], measure: Callable[..., Any]) -> Any:
    """``measure(thunk)`` around ``fn(*args, **kwargs)``; in replay the recorded measurement.

    In replay the thunk still runs, so that the invocations inside it are consumed in order,
    but what it measures there is the replay, not the student's code.
    """
    global _measuring
    thunk = lambda: fn(*args, **kwargs)  # noqa: E731
    if _state.mode is Mode.LIVE or _state.depth > 0:
        return apply_measure(measure, thunk, args, kwargs)
    if _state.mode is Mode.REPLAY:
        rng = torch.random.get_rng_state()
        thunk()
        event = _next_event(f"measure:{kind}", f"measure:{kind}", "", f"{kind} measurement")
        value = event["outcome"]["value"]
        _state.replayed.setdefault(_state.cell, []).append(
            Replayed(f"measure:{kind}", None, args, kwargs, None, (), None, CallOutcome("value", value=value), fn, measure, rng)
        )
        return value
    _measuring += 1
    try:
        value = apply_measure(measure, thunk, args, kwargs)
    finally:
        _measuring -= 1
    _write(
        {
            "cell": _state.cell,
            "seq": _state.sequence,
            "op": f"measure:{kind}",
            "target": f"measure:{kind}",
            "fingerprint": "",
            "outcome": {"kind": "value", "value": value},
        }
    )
    _state.sequence += 1
    return value


def _replayed(operation: str, target: str, fingerprint: str, label: str) -> CallOutcome:
    event = _next_event(operation, target, fingerprint, label or target.split(":", 1)[1])
    return _outcome_from_wire(event["outcome"])


def _next_event(operation: str, target: str, fingerprint: str, label: str) -> dict[str, Any]:
    queue = _state.replay.get(_state.cell, deque())
    if not queue:
        why = _state.stopped_because.get(_state.cell, "")
        raise ReplayError(f"{label}: the graded run stopped before this call" + (f" ({why})" if why else ""))
    event = queue.popleft()
    if (event.get("op"), event.get("target"), event.get("fingerprint")) != (operation, target, fingerprint):
        raise ReplayError(f"{label}: the graded run made a different call here (its inputs were changed while the test ran)")
    return event


def _real(fn: Any) -> Any:
    return _state.handles.get(fn._number) if isinstance(fn, Handle) else fn


def _unwrap(value: Any) -> Any:
    if isinstance(value, Handle):
        return _real(value)
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


@contextlib.contextmanager
def _standing_in(fn: Any, stand_ins: dict[str, Any] | None) -> Iterator[None]:
    """Temporarily replace names in the namespace ``fn`` was defined in (the notebook's).

    For an ``nn.Module`` (or any callable object) that is the namespace of its class's
    ``forward`` or ``__call__``.
    """
    namespace = getattr(fn, "__globals__", None)
    for method in ("forward", "__call__"):
        if namespace is None:
            namespace = getattr(getattr(type(fn), method, None), "__globals__", None)
    if not stand_ins or not isinstance(namespace, dict):
        yield
        return
    from .operators import shielded  # its kernels are the course's: no built-in check holds them against the student
    from .tripwires import unrefused  # a stand-in the test chose may run the course's answers: it is the test's code

    def standing_in(stand_in: Any) -> Any:
        return shielded(unrefused(stand_in))  # an emulated kernel stays subscriptable through both

    saved = {name: namespace.get(name, _MISSING) for name in stand_ins}
    namespace.update({name: standing_in(stand_in) for name, stand_in in stand_ins.items()})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def _run(
    fn: Any,
    attribute: str | None,
    args: tuple,
    kwargs: dict[str, Any],
    stand_ins: dict[str, Any] | None,
    forbidden_builtins: tuple[str, ...],
    wrap: Callable[[Any], Callable[..., Any]] | None,
    *,
    wrap_objects: bool,
    refused: tuple[str, ...] = (),
) -> CallOutcome:
    """Run student code with warnings silenced and the test's random numbers left untouched.

    ``refused``: the graded names under test, whose course answers (``tripwires.answers_refused``) may not run;
    for a gradient written by hand (``tripwires.HAND_WRITTEN_GRADIENTS``), autograd may not run inside it either.
    """
    from .operators import builtin_kernels_run
    from .tripwires import HAND_WRITTEN_GRADIENTS, ForbiddenCallError, answers_refused, autograd_refused, forbidden

    _state.depth += 1
    calls: list[str] = []
    kernels: list[str] = []  # the same built-ins, seen at the dispatcher: every route to them
    ran: list[str] = []
    student, autograd = fn, []  # the student's own call, watched for autograd where the gradient is the skill
    if attribute is None and HAND_WRITTEN_GRADIENTS.intersection(refused):
        student, autograd = autograd_refused(fn)  # only the student's call: a wrap's own backward pass is the test's

    def seen() -> dict[str, tuple[str, ...]]:
        return {"forbidden_calls": tuple(calls + kernels), "answers_ran": tuple(ran), "autograd_ran": tuple(autograd)}

    try:
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]), contextlib.ExitStack() as stack:
            warnings.simplefilter("ignore")
            if refused:
                ran = stack.enter_context(answers_refused(refused, fn))
            if attribute is not None:
                value = getattr(fn, attribute)
            else:
                stack.enter_context(_standing_in(fn, stand_ins))
                if forbidden_builtins:
                    namespaces = [fn.__globals__] if isinstance(getattr(fn, "__globals__", None), dict) else []
                    kernels = stack.enter_context(builtin_kernels_run(forbidden_builtins))  # filled when the stack closes
                    calls = stack.enter_context(forbidden(*forbidden_builtins, namespaces=namespaces))
                try:
                    value = (wrap(student) if wrap else student)(*args, **kwargs)
                except ForbiddenCallError:
                    value = None
    except NotImplementedError:
        return CallOutcome("not_written", **seen())
    except Exception as error:  # noqa: BLE001 - any failure of student code is an outcome
        mro = tuple(c.__name__ for c in type(error).__mro__)
        return CallOutcome("raised", error_type=type(error).__name__, error_mro=mro, message=str(error)[:2000], **seen())
    finally:
        _state.depth -= 1
    if wrap_objects and not _is_data(value):
        number = _state.next_handle
        _state.next_handle += 1
        _state.handles[number] = value
        return CallOutcome("handle", value=Handle(number, value), **seen())
    return CallOutcome("value", value=value, **seen())


# --- running code again in the trusted pass (autograder.grading.misconceptions) -------------------------


@contextlib.contextmanager
def running_live() -> Iterator[None]:
    """While the block runs, invocations run the code they are given, as in a student's own notebook: nothing
    is recorded or looked up in a record. The trusted pass runs a catalogued mistake this way, inside a replay;
    the mode before is restored after."""
    state = _state  # the state the block began in, even if a replay inside it swaps the module's
    saved = state.mode
    state.mode = Mode.LIVE
    try:
        yield
    finally:
        state.mode = saved


def run_call(
    fn: Any,
    attribute: str | None,
    args: tuple,
    kwargs: dict[str, Any],
    stand_ins: dict[str, Any] | None = None,
    forbidden_builtins: tuple[str, ...] = (),
    wrap: Callable[[Any], Callable[..., Any]] | None = None,
) -> CallOutcome:
    """Run ``fn(*args, **kwargs)`` (or read ``fn.attribute``) as a live invocation runs it: warnings silenced,
    the caller's random state untouched, the test's stand-ins in place, ``forbidden_builtins`` watched, through
    ``wrap`` if given. Returns its outcome: a value (an object too, never a handle) or the exception it raised.
    A ``Replayed`` call's fields are these arguments, so instructor code can run another function on its inputs."""
    return _run(fn, attribute, args, kwargs, stand_ins, forbidden_builtins, wrap, wrap_objects=False)


def handle_number(handle: Handle) -> int:
    """The number that names a recorded object (``Handle``) across one test's calls: a later call on ``handle:N``
    is a call on the object that ``handle_number`` gives N for."""
    return handle._number


# --- plain data on the wire -------------------------------------------------------------------------


def _is_data(value: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH:
        return False
    if value is None or isinstance(value, (bool, int, float, complex, torch.Tensor, torch.dtype, torch.device)):
        return True
    if isinstance(value, (str, bytes)):
        return len(value) <= MAX_STRING
    if isinstance(value, (tuple, list)):
        return len(value) <= 10_000 and all(_is_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= 10_000 and all(isinstance(k, (str, int)) and _is_data(v, depth + 1) for k, v in value.items())
    return False


def _to_wire(value: Any) -> Any:
    """Plain data that ``torch.load(weights_only=True)`` reads back: tags for dtypes and devices."""
    if isinstance(value, torch.Tensor):
        plain = value.detach()
        if type(plain) is not torch.Tensor:
            plain = plain.as_subclass(torch.Tensor)
        return plain
    if isinstance(value, torch.dtype):
        return {"__wire__": "dtype", "name": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"__wire__": "device", "name": str(value)}
    if isinstance(value, complex):
        return {"__wire__": "complex", "real": value.real, "imag": value.imag}
    if isinstance(value, Handle):
        return {"__wire__": "handle", "number": value._number}
    if isinstance(value, tuple):  # named tuples too: plain tuples on the other side
        return tuple(_to_wire(v) for v in value)
    if isinstance(value, list):
        return [_to_wire(v) for v in value]
    if isinstance(value, dict):
        return {"__wire__": "dict", "items": [(k, _to_wire(v)) for k, v in value.items()]}
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    raise TypeError(f"not plain data: {type(value).__name__}")


def _from_wire(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_from_wire(v) for v in value)
    if isinstance(value, list):
        return [_from_wire(v) for v in value]
    if isinstance(value, dict):
        tag = value.get("__wire__")
        if tag == "dtype" and isinstance(getattr(torch, str(value.get("name")), None), torch.dtype):
            return getattr(torch, value["name"])
        if tag == "device":
            return torch.device(str(value.get("name")))
        if tag == "complex":
            return complex(float(value["real"]), float(value["imag"]))
        if tag == "handle":
            number = int(value.get("number", 0))
            return Handle(number, _state.handles.get(number))
        if tag == "dict":
            return {k: _from_wire(v) for k, v in value.get("items", [])}
        raise ValueError("malformed record")
    return value


def _outcome_to_wire(outcome: CallOutcome) -> dict[str, Any]:
    value = outcome.value
    if outcome.kind in ("value", "handle"):
        if _elements(value) > MAX_ELEMENTS:
            return {
                "kind": "raised",
                "error_type": "RecordLimit",
                "error_mro": ["RecordLimit"],
                "message": "the result is too large to grade",
                "forbidden_calls": list(outcome.forbidden_calls),
                "answers_ran": list(outcome.answers_ran),
                "autograd_ran": list(outcome.autograd_ran),
            }
        value = _to_wire(value)
    return {
        "kind": outcome.kind,
        "value": value,
        "error_type": outcome.error_type,
        "error_mro": list(outcome.error_mro),
        "message": outcome.message,
        "forbidden_calls": list(outcome.forbidden_calls),
        "answers_ran": list(outcome.answers_ran),
        "autograd_ran": list(outcome.autograd_ran),
    }


def _outcome_from_wire(wire: Any) -> CallOutcome:
    if not isinstance(wire, dict) or wire.get("kind") not in ("value", "handle", "raised", "not_written"):
        raise ReplayError("the graded run left a malformed record for this call")
    return CallOutcome(
        kind=str(wire["kind"]),
        value=_from_wire(wire.get("value")),
        error_type=str(wire.get("error_type", ""))[:200],
        error_mro=tuple(str(name) for name in wire.get("error_mro", ()))[:50],
        message=str(wire.get("message", ""))[:2000],
        forbidden_calls=tuple(str(call) for call in wire.get("forbidden_calls", ()))[:50],
        answers_ran=tuple(str(name) for name in wire.get("answers_ran", ()))[:50],
        autograd_ran=tuple(str(name) for name in wire.get("autograd_ran", ()))[:50],
    )


def _elements(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (tuple, list)):
        return sum(_elements(v) for v in value)
    if isinstance(value, dict):
        return sum(_elements(v) for v in value.values())
    return 1


def _fingerprint(value: Any) -> str:
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        plain = value.detach().cpu().contiguous()
        digest.update(f"T{plain.dtype}{list(plain.shape)}".encode())
        digest.update(plain.view(torch.uint8).numpy().tobytes() if plain.numel() else b"")
    elif isinstance(value, Handle):
        digest.update(f"H{value._number}".encode())
    elif isinstance(value, Placeholder):
        digest.update(f"P{value.__name__}".encode())
    elif isinstance(value, (tuple, list)):
        digest.update(f"L{len(value)}(".encode())
        for item in value:
            _feed(digest, item)
        digest.update(b")")
    elif isinstance(value, dict):
        digest.update(f"D{len(value)}(".encode())
        for key, item in value.items():
            _feed(digest, key)
            _feed(digest, item)
        digest.update(b")")
    elif value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device)):
        digest.update(f"V{type(value).__name__}:{value!r}".encode())
    else:  # a callable or another object of the test's own: its kind, never its address
        digest.update(f"O{type(value).__qualname__}".encode())


def recording_from_environment(namespace: dict[str, Any]) -> bool:
    """Start recording if the sealed run asked for it (``$COURSE_RECORD_FILE``)."""
    path = os.environ.get(RECORD_FILE_ENV)
    if not path:
        return False
    start_recording(path, [n for n in os.environ.get(GRADED_NAMES_ENV, "").split(",") if n], namespace)
    return True
