"""Tripwires: built-ins that raise while a graded function runs, so that the test sees every call to them."""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, Iterator, Sequence


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
