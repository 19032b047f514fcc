"""Naming a student's misconception: which catalogued mistake gives what their code gave.

When a test fails in the trusted pass, each catalogued mistake that loses that test
(``autograder/mistakes/``) is run, as instructor code, on the very inputs the test gave the
student's code (``course_utils.recording.Replayed``), with the same stand-ins, tripwires and
measurements. A mistake is named when it reproduces every comparable result the record holds
for the failed tests: the same values to the course's tolerance for their dtype, the same
exception type, the same forbidden calls, the same measurement. Nothing of the student's code
runs here; only their recorded results are compared.

One type carries a misconception, ``models.Misconception`` (its name and the section to revisit): named here,
it travels unchanged in the test's ``Verdict``, the sealed run's ``RunReport``, the ``TestRow`` and the class
report's ``MisconceptionCount``, which wraps it with a count (models.py maps the whole flow).
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
import warnings
from typing import Any, Iterator, Sequence

import torch
from nbformat.notebooknode import NotebookNode

from course_utils import recording, student_calls
from course_utils.comparisons import tolerance
from course_utils.memory import tensors_in
from course_utils.notebook_cells import is_solution_cell, nbgrader_meta, solution_cells

from ..mistakes import MISTAKES, Variant
from ..solutions import load_solution, solution_module
from .models import Misconception  # the one type, shared by the verdicts, the test rows and the class report

# Per submission, in CPU seconds of the trusted pass (not wall time, so that a busy machine names what a
# quiet one names): naming is a courtesy, and the grade never waits long for it.
BUDGET_S = 60.0
RIVALS_BUDGET_S = 10.0  # CPU seconds for ruling out the rivals of one error
_modules: dict[tuple[str, str], Any] = {}


class _NotComparable(Exception):
    """This result says nothing about the mistake (an object, a call the mistake cannot make)."""


def section_of(source: NotebookNode | dict[str, Any], grade_id: str) -> str:
    """The section above the cell ``grade_id`` (its ``##`` heading, and the ``###`` one inside it, if any)."""
    section, subsection = "", ""
    for cell in source["cells"]:
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("## "):
                    section, subsection = line[3:].strip(), ""
                elif line.startswith("### "):
                    subsection = line[4:].strip()
        elif is_solution_cell(cell) and nbgrader_meta(cell).get("grade_id") == grade_id:
            return f"{section} › {subsection}" if section and subsection else section or subsection
    return ""


def name_misconceptions(
    assignment: str,
    source: NotebookNode | dict[str, Any],
    failed: set[str],
    replayed: dict[str, list[recording.Replayed]],
    budget_s: float = BUDGET_S,
) -> dict[str, tuple[Misconception, ...]]:
    """For each failed test, the catalogued mistakes that give what the student's code gave there."""
    started = time.process_time()
    named: dict[str, list[Misconception]] = {}
    cells = solution_cells(source)
    # A catalogued mistake loses every test it lists (the test suite grades each one): where one of
    # them passed, that mistake is not what the student made.
    candidates = [m for m in MISTAKES.get(assignment, []) if m.loses and set(m.loses) <= failed and m.cell in cells]
    candidates.sort(key=lambda m: len(failed ^ set(m.loses)))  # the nearest to what failed first
    agreement: dict[str, list[bool]] = {}  # test -> whether the solution gives the student's result, call by call
    for mistake in candidates:
        # Each test is its own evidence: a mistake is named on a test only where that test's recorded calls show
        # its result (one test's match says nothing of another's, where the mistake may give something else).
        for test in [t for t in mistake.loses if t in failed and replayed.get(t)]:
            if time.process_time() - started > budget_s:
                return {test: tuple(found) for test, found in named.items()}
            if test not in agreement:  # the solution's side is the same for every candidate: worked out once per test
                agreement[test] = _solution_agreement(assignment, replayed[test])
            rivals = [m for m in MISTAKES.get(assignment, []) if m is not mistake and test in m.loses and m.cell in cells]
            if _reproduces_safely(assignment, mistake, cells, replayed[test], agreement[test], rivals):
                named.setdefault(test, []).append(Misconception(mistake.name, section_of(source, mistake.cell)))
    return {test: tuple(found) for test, found in named.items()}


def reproduces(
    assignment: str, mistake: Variant, solution_source: str, calls: list[recording.Replayed], rivals: Sequence[Variant] = ()
) -> bool:
    """Whether ``mistake`` (applied to the solution cell ``solution_source``) gives every comparable result of ``calls``,
    and on at least one a result the solution does not give: the rule naming applies, for one mistake (naming also
    turns any error of the comparison into False, so that it never costs a grade; this raises it)."""
    cells = {mistake.cell: solution_source}
    return _reproduces(assignment, mistake, cells, calls, _solution_agreement(assignment, calls), rivals)


def _module(assignment: str, mistake: Variant, solution_source: str) -> Any:
    key = (assignment, mistake.name)
    if key not in _modules:
        _modules[key] = solution_module(assignment, {mistake.cell: mistake.apply(solution_source)}, name=mistake.name)
    return _modules[key]


def _reproduces_safely(
    assignment: str,
    mistake: Variant,
    cells: dict[str, str],
    calls: list[recording.Replayed],
    solution_agrees: list[bool],
    rivals: Sequence[Variant] = (),
) -> bool:
    """``_reproduces``, where any failure of the comparison itself names nothing: naming must never cost a grade."""
    try:
        return _reproduces(assignment, mistake, cells, calls, solution_agrees, rivals)
    except Exception:  # noqa: BLE001 - a result that cannot be compared is no evidence
        return False


def _solution_agreement(assignment: str, calls: list[recording.Replayed]) -> list[bool]:
    """For each call, whether the solution gives the student's result there too (such a call tells no mistake from it).

    A call the solution cannot be compared on counts as agreeing: it cannot be the one that distinguishes.
    """
    try:
        solution = load_solution(assignment)
    except Exception:  # noqa: BLE001 - without the solution no call distinguishes anything
        return [True] * len(calls)
    objects: dict[int, Any] = {}  # handle number in the record -> the solution's object
    return [_solution_gives(solution, objects, call) for call in calls]


def _reproduces(
    assignment: str,
    mistake: Variant,
    cells: dict[str, str],
    calls: list[recording.Replayed],
    solution_agrees: list[bool],
    rivals: Sequence[Variant] = (),
) -> bool:
    """The mistake gives every comparable result of ``calls``, and on at least one of them that result is wrong.

    Only a call where the mistake's result differs from the solution's can tell the mistake from a
    correct answer: where the two agree, the student's matching result is evidence of neither. So a
    mistake is named only when some call distinguishes it (and the student's result there is the mistake's).
    An error distinguishes only when no rival (another catalogued mistake that loses the same test) raises
    the same error there too: an error two bugs share tells neither from the other.

    For a mistake whose wrong values are undefined (``Variant.undefined_values``), a tensor result
    compares by where it is wrong, not by value: the student's wrong entries must all lie where the
    mistake's output is wrong or left undefined (``_same_entries_wrong``), and some entry must be wrong.
    """
    try:
        module = _module(assignment, mistake, cells[mistake.cell])
        solution = load_solution(assignment) if mistake.undefined_values else None
    except Exception:  # noqa: BLE001 - a mistake that cannot even load names nothing
        return False
    objects: dict[int, Any] = {}  # handle number in the record -> the mistake's object
    distinguished = False
    for index, (call, agrees) in enumerate(zip(calls, solution_agrees)):
        try:
            same = _same_result(module, objects, call)
            if not same and solution is not None:
                same = distinguishing = _same_entries_wrong(module, solution, call)
            else:
                distinguishing = same and not agrees
        except _NotComparable:
            continue
        if not same:
            return False
        if distinguishing and call.outcome.kind == "raised" and call.measure is None:
            # Each rival replays the test's calls up to this one: bounded like naming itself, and past the budget a
            # rival is not ruled out (naming nothing is the safe side).
            started = time.process_time()
            distinguishing = not any(
                time.process_time() - started > RIVALS_BUDGET_S or _rival_raises_the_same(assignment, rival, cells, calls, index)
                for rival in rivals
            )
        distinguished = distinguished or distinguishing
    return distinguished


def _rival_raises_the_same(assignment: str, rival: Variant, cells: dict[str, str], calls: list[recording.Replayed], index: int) -> bool:
    """``rival`` raises the student's error on ``calls[index]`` too. The calls before it run first, so that a call on an
    object the test made earlier (a block, a cache) is made on the rival's own object; where the rival cannot be run
    at all (a cell not at hand), it is not ruled out."""
    if rival.cell not in cells:
        return True
    try:
        module = _module(assignment, rival, cells[rival.cell])
        objects: dict[int, Any] = {}
        for call in calls[:index]:
            with contextlib.suppress(_NotComparable):
                _same_result(module, objects, call)  # only to make the objects later calls are made on
        return _same_result(module, objects, calls[index])
    except _NotComparable:
        return False  # the rival never made the object the call is on: it cannot give the same error there
    except Exception:  # noqa: BLE001 - a rival that cannot be run cannot be ruled out
        return True


def _solution_gives(solution: Any, objects: dict[int, Any], call: recording.Replayed) -> bool:
    """The solution gives the student's result on this call too (so the call does not tell a mistake from it)."""
    try:
        return _same_result(solution, objects, call)
    except _NotComparable:
        return True  # no evidence either way: the call cannot be the one that distinguishes


def _target(module: Any, objects: dict[int, Any], call: recording.Replayed) -> Any:
    kind, _, name = call.target.partition(":")
    if kind == "name" and hasattr(module, name):
        return getattr(module, name)
    if kind == "handle" and int(name) in objects:
        return objects[int(name)]
    if kind == "measure" and isinstance(call.fn, recording.Placeholder) and hasattr(module, call.fn.__name__):
        return getattr(module, call.fn.__name__)
    raise _NotComparable(call.target)


def _measured(module: Any, objects: dict[int, Any], call: recording.Replayed) -> tuple[Any, tuple]:
    """What a measurement ran, and on what, with ``module``'s functions in place of the graded ones: ``count_flops(f, ...)``;
    ``count_flops(call, f, ...)`` (through ``call``, as a test measures a function that returns a tuple); or a function of
    the test's own that calls graded ones (``peak_tensor_bytes(stats_of_stream, ...)``)."""
    first = call.args[0] if call.args else None
    if call.fn is student_calls.call and isinstance(first, recording.Placeholder) and hasattr(module, first.__name__):
        graded = getattr(module, first.__name__)
        # the graded function's slot stays (empty), so that a measure that watches inputs by position finds them
        return (lambda _graded, *args, **kwargs: student_calls.call(graded, *args, **kwargs)), (None, *call.args[1:])
    namespace = getattr(call.fn, "__globals__", None)
    if not isinstance(call.fn, recording.Placeholder) and isinstance(namespace, dict):
        return _with_graded_names(call.fn, namespace, module), call.args
    return _target(module, objects, call), call.args


def _with_graded_names(fn: Any, namespace: dict[str, Any], module: Any) -> Any:
    """``fn``, run with each graded name of its namespace (a placeholder in the trusted pass) bound to ``module``'s."""

    def run(*args: Any, **kwargs: Any) -> Any:
        graded = {name: value for name, value in namespace.items() if isinstance(value, recording.Placeholder) and hasattr(module, name)}
        if not graded:
            raise _NotComparable("a measured function that calls no graded function")
        namespace.update({name: getattr(module, name) for name in graded})
        try:
            return fn(*args, **kwargs)
        finally:
            namespace.update(graded)

    return run


def _close_measurement(target: str, mistake: Any, student: Any) -> bool:
    """The same measurement: memory within a quarter (in the sealed run the record's own copy of a result is alive
    too), anything else (FLOPs, a stream's reads) as ``results_match`` compares it."""
    memory = target == "measure:peak_tensor_bytes"
    if memory and isinstance(student, int) and isinstance(mistake, int) and not isinstance(student, bool):
        return abs(mistake - student) <= 0.25 * max(abs(student), abs(mistake), 1)
    return results_match(mistake, student)


def _inputs(value: Any, objects: dict[int, Any]) -> Any:
    """A copy of what the test passed (the mistake may write into it), handles mapped to the mistake's objects."""
    if isinstance(value, recording.Handle):
        number = recording.handle_number(value)
        if number not in objects:
            raise _NotComparable("a handle the mistake never made")
        return objects[number]
    if isinstance(value, (tuple, list)):
        return type(value)(_inputs(v, objects) for v in value)
    if isinstance(value, dict):
        return {k: _inputs(v, objects) for k, v in value.items()}
    if isinstance(value, (recording.Placeholder, recording.Withheld)):
        raise _NotComparable("a graded function passed as an argument")
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device)):
        return value
    try:  # a tensor, or a stream the mistake would read (course_utils.streams): its own copy, left as the test made it
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an input that cannot be copied cannot be handed out twice
        raise _NotComparable(f"an input that cannot be copied: {type(value).__name__}") from None


def _same_result(module: Any, objects: dict[int, Any], call: recording.Replayed) -> bool:
    if call.measure is not None:  # a measurement (FLOPs, peak memory, a stream's reads) of the same call
        fn, args = _measured(module, objects, call)
        args, kwargs = _inputs(args, objects), _inputs(call.kwargs, objects)
        with _live(call.rng):
            value = recording.apply_measure(call.measure, lambda: fn(*args, **kwargs), args, kwargs)
            return _close_measurement(call.target, value, call.outcome.value)
    fn = _target(module, objects, call)
    args, kwargs = _inputs(call.args, objects), _inputs(call.kwargs, objects)
    wrap = call.through[1] if call.through else None
    with _live(call.rng):
        outcome = recording.run_call(fn, call.attribute, args, kwargs, call.stand_ins, call.forbidden_builtins, wrap)
    if call.forbidden_builtins and set(outcome.forbidden_calls) != set(call.outcome.forbidden_calls):
        return False
    if call.outcome.kind == "handle":
        if outcome.kind not in ("value", "handle"):
            return False
        objects[recording.handle_number(call.outcome.value) if isinstance(call.outcome.value, recording.Handle) else -1] = outcome.value
        raise _NotComparable("an object: its methods are compared when the test calls them")
    if call.outcome.kind != outcome.kind:
        return False
    if outcome.kind == "raised":
        # The same error for the same reason: a launch refused for too few programs is not one refused for too many.
        return (outcome.error_type, outcome.message[:2000]) == (call.outcome.error_type, call.outcome.message)
    return results_match(outcome.value, call.outcome.value)


def _same_entries_wrong(module: Any, solution: Any, call: recording.Replayed) -> bool:
    """The student's tensor is wrong somewhere, and only where the mistake's is wrong or left undefined.

    What an unwritten entry holds depends on what memory held before, so the mistake runs with
    uninitialised memory filled with NaN (or the largest integer): every entry it leaves undefined
    counts as wrong. The student's garbage may happen to equal the right value at some of those
    entries, so their wrong entries need only fall inside the mistake's, not match them; and the mistake must
    leave some entries right, or any wrong answer would fall inside.
    """
    student = call.outcome.value
    if call.outcome.kind != "value" or call.measure is not None or call.attribute is not None or call.target.startswith("handle:"):
        return False
    results = []
    for source in (module, solution):
        fn = _target(source, {}, call)
        with _live(call.rng), _undefined_is_nan():
            outcome = recording.run_call(fn, None, _inputs(call.args, {}), _inputs(call.kwargs, {}), call.stand_ins)
        if outcome.kind != "value":
            return False
        results.append(outcome.value)
    mistake, expected = results
    pieces = [(s, m, e) for s, m, e in zip(*(list(tensors_in(v)) for v in (student, mistake, expected)))]
    if not pieces or any(s.shape != e.shape or m.shape != e.shape for s, m, e in pieces):
        return False
    wrong = [(_wrong_entries(s, e), _wrong_entries(m, e)) for s, m, e in pieces]
    # A mistake wrong everywhere would "match" any wrong answer: only one that leaves some entries right, where the
    # student is right too, tells its bug from another's.
    informative = any((~wm).any() for _, wm in wrong)
    return informative and any(ws.any() for ws, _ in wrong) and not any((ws & ~wm).any() for ws, wm in wrong)


@contextlib.contextmanager
def _undefined_is_nan() -> Iterator[None]:
    """``torch.empty`` and its kin fill their memory (NaN for floats) while deterministic algorithms are on."""
    enabled, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an op with no deterministic version warns: nothing to print in grading
            yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def _wrong_entries(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    limits = tolerance(expected.dtype) if expected.is_floating_point() else tolerance(torch.float64)
    return ~torch.isclose(actual.cpu().to(expected.dtype), expected.cpu(), rtol=limits.rtol, atol=limits.atol, equal_nan=True)


@contextlib.contextmanager
def _live(rng: torch.Tensor | None) -> Iterator[None]:
    """Run the mistake as plain code, from the random state the student's call had: no record to read
    from while it runs, and the trusted pass's own random state untouched after."""
    saved = torch.random.get_rng_state()
    with recording.running_live():
        try:
            if rng is not None:
                torch.random.set_rng_state(rng)
            yield
        finally:
            torch.random.set_rng_state(saved)


def results_match(mistake: Any, student: Any) -> bool:
    """The same result, to the course's tolerance for the dtype: how a mistake's result is held to a student's."""
    if isinstance(student, torch.Tensor) or isinstance(mistake, torch.Tensor):
        if not (isinstance(student, torch.Tensor) and isinstance(mistake, torch.Tensor)) or student.shape != mistake.shape:
            return False
        if student.dtype != mistake.dtype or student.device != mistake.device:
            return False
        if student.is_meta:  # no values to compare (a tensor made on the meta device): shape, dtype and device are all
            return True
        if not (student.is_floating_point() or student.is_complex()):
            return bool(torch.equal(student.cpu(), mistake.cpu()))
        limits = tolerance(student.dtype)
        return bool(torch.allclose(mistake.cpu(), student.cpu(), rtol=limits.rtol, atol=limits.atol, equal_nan=True))
    if isinstance(student, (tuple, list)):
        return isinstance(mistake, (tuple, list)) and len(mistake) == len(student) and all(map(results_match, mistake, student))
    if isinstance(student, dict):
        return (
            isinstance(mistake, dict) and mistake.keys() == student.keys() and all(results_match(mistake[k], student[k]) for k in student)
        )
    if isinstance(student, float) and isinstance(mistake, (int, float)) and not isinstance(mistake, bool):
        return math.isclose(mistake, student, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(mistake) and math.isnan(student))
    return type(mistake) is type(student) and mistake == student
