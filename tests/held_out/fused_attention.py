"""Notebook 07: bugs the catalogue does not list."""

from __future__ import annotations

from . import HeldOut

HELD_OUT: list[HeldOut] = []
