"""Tripwires: built-ins, and the course's own answers, that raise while a graded function runs, so that the test
sees every call to them; autograd watched inside a gradient written by hand; and a function's every run noted by
its code (``runs_noted``), whatever route reached it."""

from __future__ import annotations

import contextlib
import functools
import importlib
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TypeVar

from .guards import Guards

# A student line that names what refuses the course's answers, or the module, is flagged for review (course_utils.guards).
GUARDS = Guards(
    names=("ANSWERS", "_refused", "_set", "unrefused", "answers_refused", "_autograd_paused", "autograd_refused", "HAND_WRITTEN_GRADIENTS"),
    module=True,
)


class ForbiddenCallError(RuntimeError):
    """Raised by a built-in that a graded function must not call."""


def _resolve(path: str) -> tuple[Any, str]:
    """'torch.nn.functional.softmax' -> (the module torch.nn.functional, 'softmax')."""
    owner_path, _, attribute = path.rpartition(".")
    try:
        owner: Any = importlib.import_module(owner_path)
    except ModuleNotFoundError:  # e.g. torch.Tensor.softmax: a class, not a module
        module_path, _, class_name = owner_path.rpartition(".")
        owner = getattr(importlib.import_module(module_path), class_name)
    return owner, attribute


@contextlib.contextmanager
def forbidden(*paths: str, namespaces: Sequence[dict[str, Any]] = ()) -> Iterator[list[str]]:
    """Make the named built-ins raise while the block runs; yields the calls made.

    Besides the attributes themselves (``torch.softmax``), any name in ``namespaces``
    bound to one of them (``from torch import softmax as sm``) is tripped too. The
    list is filled even if student code swallows the ``ForbiddenCallError``.
    """
    calls: list[str] = []
    saved: list[tuple[Any, str, Any]] = []
    saved_names: list[tuple[dict[str, Any], str, Any]] = []

    def tripwire(path: str) -> Callable[..., Any]:
        def refuse(*_args: Any, **_kwargs: Any) -> Any:
            calls.append(path)
            raise ForbiddenCallError(f"{path} is not allowed here")

        return refuse

    try:
        for path in paths:
            owner, attribute = _resolve(path)
            original = getattr(owner, attribute)
            saved.append((owner, attribute, original))
            wire = tripwire(path)
            setattr(owner, attribute, wire)
            for namespace in namespaces:
                for name, value in list(namespace.items()):
                    if value is original:
                        saved_names.append((namespace, name, value))
                        namespace[name] = wire
        yield calls
    finally:
        for namespace, name, value in reversed(saved_names):
            namespace[name] = value
        for owner, attribute, original in reversed(saved):
            setattr(owner, attribute, original)


# --- the course's own answers: refused in the tests of the function they answer ---------------------

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Answers:
    """What a course function answers: graded functions of one notebook (``Answers("04_masking", ("causal_mask",))``).

    Declared next to the function's code (``@answers(...)``). While a test of one of ``functions`` runs the
    student's code, the course function is a tripwire; tests of other functions may still stand it in.
    """

    notebook: str
    functions: tuple[str, ...]


ANSWERS: dict[Callable[..., Any], tuple[Answers, ...]] = {}  # course function -> what it answers
# The modules that declare answers: importing them fills ANSWERS (declared_answers).
ANSWER_MODULES = (
    "course_utils.stand_ins",
    "course_utils.model_stand_ins",
    "course_utils.autograd_refs",
    "course_utils.emulated_kernels",
    "course_utils.backward_steps",
)


def declared_answers() -> dict[Callable[..., Any], tuple[Answers, ...]]:
    """Every declared answer of the package, its declaring modules imported."""
    for module in ANSWER_MODULES:
        importlib.import_module(module)
    return ANSWERS


class CourseAnswerCalled(ForbiddenCallError):
    """Raised by a course function that answers the graded function under test."""


def answers(notebook: str, *functions: str) -> Callable[[F], F]:
    """Declare that the decorated function answers ``functions`` of ``notebook``; returns it unchanged."""

    def declare(fn: F) -> F:
        if getattr(fn, "__closure__", None):  # a tripwire takes its code's place: it has no cells to match a closure's
            raise TypeError(f"{fn.__qualname__}: a declared answer cannot be a closure")
        ANSWERS[fn] = (*ANSWERS.get(fn, ()), Answers(notebook, tuple(functions)))
        return fn

    return declare


def course_name(fn: Callable[..., Any], functions: set[str]) -> str:
    """A declared answer as the course names it, with what it answers among ``functions``:
    ``torch_causal_mask (course_utils.stand_ins), the course's own PyTorch version of causal_mask``."""
    answered = sorted({name for found in ANSWERS.get(fn, ()) for name in found.functions} & functions)
    return f"{fn.__qualname__} ({fn.__module__}), the course's own PyTorch version of {', '.join(answered)}"


def answered_here(ran: Sequence[str]) -> tuple[str, str]:
    """A failed check's problem and hint for a graded function whose run reached the course's answers ``ran``."""
    return (
        f"ran {'; '.join(dict.fromkeys(ran))}, while this test called it",
        "write it yourself: the course's version is there for the later notebooks that carry this function, "
        "not as an answer in the notebook that grades it",
    )


def _refusal(*_args: Any, course_refusal: Callable[[], Any] = lambda: None, **_kwargs: Any) -> Any:
    """The code a refused answer runs instead of its own; what it reports comes in ``course_refusal``."""
    return course_refusal()


_Code = tuple[Any, Any, Any]  # a function's __code__, __defaults__, __kwdefaults__
_refused: dict[Callable[..., Any], tuple[_Code, _Code]] = {}  # refused answer -> (its own code, its tripwire)


def _set(fn: Any, code: _Code) -> None:
    fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code


def _own_code(fn: Any) -> Any:
    return _refused[fn][0][0] if fn in _refused else fn.__code__


def _codes_of(graded: Any) -> set[Any]:
    """The code objects a graded object runs as itself: a function's, a method's, a module's ``forward``."""
    owners = (graded, getattr(graded, "__func__", None), *(getattr(type(graded), name, None) for name in ("forward", "__call__")))
    return {owner.__code__ for owner in owners if hasattr(owner, "__code__")}


@contextlib.contextmanager
def answers_refused(functions: Sequence[str], graded: Any = None) -> Iterator[list[str]]:
    """While the block runs, every course function declared to answer one of ``functions`` raises
    ``CourseAnswerCalled``; yields the course names of those that were reached (filled even if student code
    swallows the error). So an alias, a name built at run time, a module's ``__getattr__``, a wrapper or a bound
    method all trip it: what counts is that the course's function object ran. ``graded`` (the object under test)
    that is itself a copy of an answer's code (``types.FunctionType(f.__code__, ...)``) is listed at once.
    """
    ran: list[str] = []
    wanted = set(functions)
    declared = [fn for fn, found in ANSWERS.items() if any(wanted.intersection(a.functions) for a in found)]
    own = _codes_of(graded) if graded is not None else set()
    ran += [course_name(fn, wanted) for fn in declared if _own_code(fn) in own]
    mine = [fn for fn in declared if fn not in _refused]  # one refused already stays with the block that refused it

    def tripwire(fn: Callable[..., Any]) -> _Code:
        def refuse() -> Any:
            if course_name(fn, wanted) not in ran:  # once each: a loop over a refused answer records one line
                ran.append(course_name(fn, wanted))
            raise CourseAnswerCalled(f"{fn.__qualname__} is the course's answer to the function under test")

        return (_refusal.__code__, None, {"course_refusal": refuse})

    try:
        for fn in mine:
            _refused[fn] = ((fn.__code__, fn.__defaults__, fn.__kwdefaults__), tripwire(fn))
            _set(fn, _refused[fn][1])
        yield ran
    finally:
        for fn in mine:
            _set(fn, _refused.pop(fn)[0])


def unrefused(fn: F) -> F:
    """``fn`` run with every refused answer its own again, and autograd unwatched (``autograd_refused``): a stand-in a test passes on purpose, for another
    function than the one under test, may run the course's code (``tile_function_stand_ins`` runs
    ``sdpa_gradients`` inside 08's ``flash_attention``; a launcher's test launches 07's emulated kernel).
    A stand-in launched like a kernel (``kernel[grid](...)``) stays subscriptable, its launches unrefused too."""
    if callable(fn) and not isinstance(fn, type) and hasattr(type(fn), "__getitem__"):
        return _UnrefusedKernel(fn)  # type: ignore[return-value]

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        paused = list(_refused)
        for answer in paused:
            _set(answer, _refused[answer][0])
        _autograd_paused[0] += 1  # its autograd (``sdpa_gradients``) is the test's too
        try:
            return fn(*args, **kwargs)
        finally:
            _autograd_paused[0] -= 1
            for answer in paused:
                if answer in _refused:
                    _set(answer, _refused[answer][1])

    return run  # type: ignore[return-value]


class _UnrefusedKernel:
    """A stand-in kernel whose calls and launches run with the refused answers their own again."""

    def __init__(self, kernel: Any) -> None:
        self.__wrapped__ = kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return unrefused(self.__wrapped__.__call__)(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return unrefused(self.__wrapped__[grid])


# --- gradients written by hand: autograd may not run inside them ------------------------------------

# Graded functions whose skill is a gradient written by hand. While a test of one of them runs the student's
# code, autograd is watched (``autograd_refused``): its backward pass, or one of PyTorch's own backward formulas,
# run inside the call is what ran instead of the student's.
HAND_WRITTEN_GRADIENTS = frozenset(
    {"softmax_backward", "attention_backward", "flash_backward_preprocess", "flash_attention_backward", "flash_attention_backward_triton"}
)
_autograd_paused = [0]  # > 0 while a stand-in the test passed runs: its autograd is the test's own


def autograd_here(ran: Sequence[str]) -> tuple[str, str]:
    """A failed check's problem and hint for a hand-written gradient whose run went through autograd ``ran``."""
    return (
        f"ran {'; '.join(dict.fromkeys(ran))} inside the function, while this test called it",
        "write the gradient with your own tensor operations (the steps of the backward pass, in reverse): "
        "autograd's backward pass and PyTorch's backward functions are what this exercise asks you to replace",
    )


def _autograd_calls(found: list[str]) -> Any:
    """A TorchFunctionMode that lists the entries to autograd's backward pass (``torch.autograd.grad``,
    ``Tensor.backward``, and so ``torch.autograd.functional``) and the backward formulas (``torch._softmax_backward_data``,
    ``torch.ops.aten.*_backward*``) that the code in it called, by the function objects torch hands the mode."""
    import torch
    from torch.overrides import TorchFunctionMode

    engine = ((torch.autograd.grad, "torch.autograd.grad"), (torch.autograd.backward, "torch.autograd.backward"))
    engine += ((torch.Tensor.backward, "Tensor.backward"),)

    class AutogradCalls(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = str(getattr(func, "__name__", ""))
            entry = next((called for function, called in engine if func is function), "")  # by identity: any object may come
            if _autograd_paused[0]:
                pass
            elif entry:
                found.append(f"autograd's backward pass ({entry})")
            elif "backward" in name:
                found.append(f"PyTorch's backward formula {name}")
            return func(*args, **(kwargs or {}))

    return AutogradCalls()


def autograd_refused(fn: F) -> tuple[F, list[str]]:
    """``fn`` run with autograd watched, and the list it fills (each line once): the entries to autograd's
    backward pass it called, PyTorch's backward formulas it called, and any backward node that ran on what the
    call itself saved for backward (``saved_tensors_hooks``: the engine reached by another name, a Function's
    backward). A backward pass the test runs after the call, on what the call built, is the test's."""
    import torch

    found: list[str] = []
    open_ = [False]

    def unpacked(tensor: Any) -> Any:
        if open_[0] and not _autograd_paused[0]:
            found.append("autograd's backward pass (a backward node ran on what the call saved)")
        return tensor

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        open_[0] = True
        try:
            with torch.autograd.graph.saved_tensors_hooks(lambda tensor: tensor, unpacked), _autograd_calls(found):
                return fn(*args, **kwargs)
        except RuntimeError as error:  # torch.func's transforms refuse to run under the hooks: that is autograd too
            if "saved tensor hooks" in str(error):
                found.append("autograd's backward pass (a torch.func transform)")
            raise
        finally:
            open_[0] = False
            found[:] = list(dict.fromkeys(found))

    return run, found  # type: ignore[return-value]


# --- a function's every run, by whatever route: the course's own function objects, noted as they run -------


def _noted(*args: Any, course_noted: Callable[..., Any] = lambda *_a, **_k: None, **kwargs: Any) -> Any:
    """The code a noted function runs instead of its own: ``course_noted`` notes the call and runs the original."""
    return course_noted(*args, **kwargs)


@contextlib.contextmanager
def runs_noted(fn: Callable[..., Any], around: Callable[..., Any]) -> Iterator[None]:
    """While the block runs, every run of the function ``fn`` is ``around(run, args, kwargs)``, where ``run`` is
    ``fn`` as it was (``around`` notes the call and returns ``run(*args, **kwargs)``). Its code is swapped, as
    ``answers_refused`` swaps an answer's: a bound method, the class's attribute (``type(model).forward(model, x)``),
    a name built at run time, ``nn.Module.__call__`` all run it. A function with a closure cannot take the
    swapped code: TypeError.
    """
    if getattr(fn, "__closure__", None):
        raise TypeError(f"{getattr(fn, '__qualname__', fn)}: a function with a closure cannot be noted by its code")
    own: _Code = (fn.__code__, fn.__defaults__, fn.__kwdefaults__)  # type: ignore[attr-defined]
    original = types.FunctionType(own[0], fn.__globals__, fn.__name__, own[1])  # type: ignore[attr-defined]
    original.__kwdefaults__ = own[2]

    def noted(*args: Any, **kwargs: Any) -> Any:
        return around(original, args, kwargs)

    _set(fn, (_noted.__code__, None, {"course_noted": noted}))
    try:
        yield
    finally:
        _set(fn, own)
