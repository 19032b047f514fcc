"""What student code must not touch, declared by the modules that own it.

A course module whose internals a submission could reach to fool a check declares them next to
the code, as ``GUARDS = Guards(...)``. The grader's review (``autograder.grading.admission``)
builds its pattern from every declaration listed in ``OWNERS``, so a line a student added that
names one is flagged for a person to read. Every field holds attribute names of the module
itself, and ``missing_names`` lists those that no longer exist: renaming a guarded name without
its declaration fails ``tests/test_guards.py`` instead of quietly opening a hole.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Guards:
    """What a module guards. Each field names attributes of the declaring module."""

    names: tuple[str, ...] = ()  # internals: a line that names one at all is flagged
    rebinding: tuple[str, ...] = ()  # functions a notebook may call: flagged only when rebound
    values: tuple[str, ...] = ()  # string constants the module keys on (a profiler range): their text is flagged
    module: bool = False  # importing the module, or naming it, is flagged


# The modules that declare ``GUARDS``.
OWNERS = (
    "course_utils.checks",
    "course_utils.kernels",
    "course_utils.model_stand_ins",
    "course_utils.operators",
    "course_utils.recording",
    "autograder.solutions",
    "course_utils.stand_ins",
    "course_utils.tripwires",
)


def declared() -> dict[str, Guards]:
    """Every declaration, by the full name of the module it guards, read afresh (importing the owners)."""
    return {owner: importlib.import_module(owner).GUARDS for owner in OWNERS}


def missing_names(declarations: dict[str, Guards] | None = None) -> list[str]:
    """'module.name' for each declared name its module does not have, and for each value that is not a string."""
    missing = []
    for owner, guards in (declared() if declarations is None else declarations).items():
        module = importlib.import_module(owner)
        for name in dict.fromkeys((*guards.names, *guards.rebinding, *guards.values)):  # each once, in order
            if not hasattr(module, name):
                missing.append(f"{owner}.{name}")
        missing += [f"{owner}.{name} (not a string)" for name in guards.values if not isinstance(getattr(module, name, ""), str)]
    return missing
