"""This test process's live children, as the system lists them: how a test sees that a process it caused is gone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def live_children(command_matches: Callable[[list[bytes]], bool]) -> list[int]:
    """The pids of this process's children, zombies aside, whose command line (its NUL-separated parts) matches."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rpartition(")")[2].split()[:2]
            command = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # gone while we looked
        if int(parent) == os.getpid() and state != "Z" and command_matches(command):
            found.append(int(stat.parent.name))
    return sorted(found)
