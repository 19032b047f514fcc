"""The course's settings: its folders and the limits a graded notebook runs under.

Plain values that any module may import; the nbgrader configuration built from them is in
``course_config``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"

# A cell may run this long before nbgrader interrupts it; heavy cells shrink under
# NBGRADER_EXECUTION so that whole notebooks finish in well under a minute.
CELL_TIMEOUT_S = 60

# Data a grading kernel may allocate (torch and the notebooks need well under 1 GiB); past
# it, the student's cell gets a MemoryError and grading goes on.
MEMORY_LIMIT_BYTES = 4 * 2**30


@dataclass(frozen=True)
class GradingLimits:
    """What one graded notebook may take, and whether it runs sealed: the one object every route that grades
    seals with. ``grade`` builds it from its command line; stock ``nbgrader autograde`` and formgrader's
    autograde get the defaults through nbgrader_config.py and ``course_config``. A new limit is a field here
    and its use in ``SealedExecute`` (plus its test and its line in docs/threat-model.md)."""

    cell_timeout: int = CELL_TIMEOUT_S  # seconds a cell may run
    memory_bytes: int | None = MEMORY_LIMIT_BYTES  # data per process of the sandbox; None: no limit
    sealed: bool = True  # False only with --no-sandbox: every row then says so


@dataclass(frozen=True)
class ArchiveLimits:
    """What a class zip (and the zips inside it) may inflate to: a zip bomb stops here, not the run."""

    entry_bytes: int = 100 * 2**20  # one file: a notebook with its plots is a few MiB
    total_bytes: int = 4 * 2**30  # everything, across nested zips
    entries: int = 50_000  # files in all


ARCHIVE_LIMITS = ArchiveLimits()

# Stream output kept per cell: a printed giant tensor must not bloat the gradebook and feedback.
MAX_OUTPUT_CHARS = 20_000
# Outputs kept per cell, and bytes of rich output (plots, HTML) per cell: every page that shows the graded
# notebook (feedback, formgrader) renders them, so what a student's code displays must not set that page's cost.
MAX_OUTPUTS_PER_CELL = 50
MAX_RICH_OUTPUT_BYTES = 4 * 2**20


@dataclass(frozen=True)
class NotebookLimits:
    """What one handed-in notebook may hold, checked before it is read further: every page that shows it costs
    time in proportion to its cells and text. The released notebooks hold under 100 cells and 200,000 characters."""

    cells: int = 1_000
    source_chars: int = 2_000_000


NOTEBOOK_LIMITS = NotebookLimits()

# stderr lines that must not zero a test cell: Python warnings ("UserWarning: ...")
# and the matplotlib font-cache notice printed on a fresh machine.
IGNORED_STDERR = r"(\w+Warning: |Matplotlib is building the font cache)"


def put_environment_on_path() -> None:
    """nbgrader shells out to ``alembic``; make sure this interpreter's ``bin/`` is on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + path
