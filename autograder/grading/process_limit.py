"""A limit on the processes of one sandbox that also holds when the grader runs as root.

``RLIMIT_NPROC`` counts a user's processes, and the kernel never applies it to root: graded as
root (as in many containers), a submission could start processes without end. A ``pids``
control group limits a group of processes whoever owns them. Where the machine lets the grader
make one (root, with the ``pids`` controller mounted: cgroup v2's unified tree, or v1's ``pids``
hierarchy), each warm runner goes into its own group with ``pids.max``; where it cannot, the
grader says so on every row it writes (``ProcessLimit.note``), rather than claim a limit it lacks.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ProcessLimit:
    """How the process limit of a sandbox is enforced here."""

    group: Path | None  # the pids control group each runner joins, or None
    note: str  # '' when the limit holds; else what a grade row must say

    def join(self) -> None:
        """Runs in the runner's child before exec: move it (and so all it starts) into the group."""
        if self.group is not None:
            (self.group / "cgroup.procs").write_text("0")  # 0: the writing process itself

    def release(self) -> None:
        """Kill what is left in the group, then remove it (only an empty group can go)."""
        if self.group is None:
            return
        for _ in range(50):
            try:
                for pid in (self.group / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                self.group.rmdir()
                return
            except OSError:
                time.sleep(0.05)  # the killed processes are still being reaped


def _pids_parent(root: Path) -> Path | None:
    """Where a pids group can be made: cgroup v2's tree when it offers pids, else v1's pids hierarchy."""
    for unified in (root, root / "unified"):
        controllers = unified / "cgroup.controllers"
        if controllers.is_file() and "pids" in controllers.read_text().split():
            try:
                (unified / "cgroup.subtree_control").write_text("+pids")
            except OSError:
                continue
            return unified
    v1 = root / "pids"
    return v1 if (v1 / "cgroup.procs").is_file() else None


def process_limit(max_processes: int, root: Path = CGROUP_ROOT) -> ProcessLimit:
    """A fresh pids group limited to ``max_processes``, or a note saying why there is none."""
    if os.geteuid() != 0:
        return ProcessLimit(None, "")  # RLIMIT_NPROC binds every user but root: no group needed
    parent = _pids_parent(root)
    if parent is None:
        return ProcessLimit(None, "processes not limited: the grader runs as root and this machine offers no pids control group")
    group = parent / f"attention-grader-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(max_processes))
    except OSError as error:
        try:
            group.rmdir()
        except OSError:
            pass
        return ProcessLimit(None, f"processes not limited: the grader runs as root and cannot make a pids control group ({error.strerror})")
    return ProcessLimit(group, "")
