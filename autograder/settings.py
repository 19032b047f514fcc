"""The course's nbgrader configuration, in one place.

Every nbgrader run of the course (release, autograde, feedback) is configured by
``course_config``; only the folders differ between runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from traitlets.config import Config

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"

# A cell may run this long before nbgrader interrupts it; heavy cells shrink under
# NBGRADER_EXECUTION so that whole notebooks finish in well under a minute.
CELL_TIMEOUT_S = 60
KERNEL_STARTUP_TIMEOUT_S = 60

# stderr lines that must not zero a test cell: Python warnings ("UserWarning: ...")
# and the matplotlib font-cache notice printed on a fresh machine.
IGNORED_STDERR = r"(\w+Warning: |Matplotlib is building the font cache)"


def course_config(
    course_root: Path,
    *,
    db_path: Path,
    source_dir: Path | str = "source",
    release_dir: Path | str = "release",
) -> Config:
    """nbgrader configuration for a course rooted at ``course_root``.

    ``source_dir`` and ``release_dir`` are relative to the root or absolute.
    """
    c = Config()
    c.CourseDirectory.root = str(course_root)
    c.CourseDirectory.source_directory = str(source_dir)
    c.CourseDirectory.release_directory = str(release_dir)
    c.CourseDirectory.db_url = f"sqlite:///{db_path}"
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", ".DS_Store"]

    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.startup_timeout = KERNEL_STARTUP_TIMEOUT_S
    # nbgrader's own default (no history file) plus a quiet kernel log: ipykernel's
    # start-up notices go to the terminal, not to cells, but drown the progress bar.
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
    c.IgnorePattern.enabled = True  # off by default in nbgrader 0.9
    c.IgnorePattern.pattern = IGNORED_STDERR

    # Feedback goes to students: strip hidden-test code and its tracebacks.
    c.GenerateFeedback.preprocessors = [
        "nbgrader.preprocessors.GetGrades",
        "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
        "autograder.feedback.RedactHiddenTests",
    ]
    return c


def put_environment_on_path() -> None:
    """nbgrader shells out to ``alembic``; make sure this interpreter's ``bin/`` is on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + path
