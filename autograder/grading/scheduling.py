"""Which submissions a free worker grades next.

A worker pays for each assignment it meets: it generates the assignment in its scratch course
and grades the known solution after its last submission (and, the first worker to meet it,
before the first). So work goes out in small chunks of one assignment (one submission on this
machine's pool, where a task costs little and a chunk of four left a tail of up to four with
one worker idle; up to four on a cluster, where each task crosses the network), and a worker that comes
back for more gets the assignment it graded last while any is left, then one it has already
set up, and only then a new one: the one with the most chunks left per worker already on it.
Small chunks keep the workers busy to the end; keeping to few assignments saves the set-up.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from .models import Submission

CHUNK_MAX = 4  # submissions per task on a cluster: small, so that no worker is left alone with a long tail


def chunk_size(submissions: int, workers: int, *, local: bool) -> int:
    """One submission per task in a local pool; on a cluster four tasks per worker at least, and at most ``CHUNK_MAX`` in one."""
    if local:
        return 1
    return max(1, min(CHUNK_MAX, submissions // (workers * 4)))


@dataclass
class ChunkQueue:
    """The chunks still to hand out, by assignment, in the order the submissions came."""

    pending: dict[str, deque[list[Submission]]]
    busy: Counter[str] = field(default_factory=Counter)  # chunks of each assignment out with a worker now

    @classmethod
    def of(cls, submissions: list[Submission], size: int) -> "ChunkQueue":
        by_assignment: dict[str, list[Submission]] = {}
        for submission in submissions:
            by_assignment.setdefault(submission.assignment, []).append(submission)
        return cls({name: deque(group[i : i + size] for i in range(0, len(group), size)) for name, group in by_assignment.items()})

    def take(self, last: str | None = None, known: frozenset[str] | set[str] = frozenset()) -> list[Submission] | None:
        """The next chunk for a worker that graded ``last`` and has set up ``known``; None when all are out."""
        left = {name: chunks for name, chunks in self.pending.items() if chunks}
        if not left:
            return None
        if last in left:
            name = last
        elif mine := [name for name in left if name in known]:
            name = max(mine, key=lambda n: len(left[n]))
        else:
            name = max(left, key=lambda n: len(left[n]) / (1 + self.busy[n]))
        self.busy[name] += 1
        return left[name].popleft()

    def done(self, assignment: str) -> None:
        """A chunk of ``assignment`` came back."""
        self.busy[assignment] -= 1
