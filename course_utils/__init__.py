"""Helpers that the course notebooks import: setup, checks, plots, and the solution loader.

Light by design (torch, numpy, matplotlib), so a Colab notebook can pip-install it. The names
below load on first use: a part that needs no torch (the sealed runs' wire format, which the
sandbox probe reads) imports without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_FROM = {
    "init": "runtime",
    "is_grading": "runtime",
    "needs": "runtime",
    "pick_device": "runtime",
    "seed_everything": "runtime",
    "single_thread": "runtime",
    "check_my_work": "selfcheck",
}

__all__ = sorted(_FROM)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_FROM[name]}", __name__), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_FROM])
