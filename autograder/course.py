"""A scratch nbgrader course: the one place that talks to nbgrader's API.

Release and grading both run nbgrader inside a throw-away course folder, so that
nbgrader's gradebook, logs and working folders never touch the repository or the
instructor's submissions folder.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from course_utils.notebook_cells import assignment_notebook

from .course_config import course_config
from .settings import (
    SOLUTIONS_DIR,
    GradingLimits,
    put_environment_on_path,
)

ASSIGNMENT_NAME = re.compile(r"^\d{2}_[a-z0-9_]+$")


def list_assignments(solutions_dir: Path = SOLUTIONS_DIR) -> list[str]:
    """Assignment names in course order: folders ``NN_name`` holding ``NN_name.ipynb``."""
    return sorted(
        folder.name
        for folder in solutions_dir.iterdir()
        if folder.is_dir() and ASSIGNMENT_NAME.match(folder.name) and assignment_notebook(solutions_dir, folder.name).is_file()
    )


class NbgraderError(RuntimeError):
    """An nbgrader step failed; the message carries the useful part of its log."""


@dataclass
class ScratchCourse:
    """An nbgrader course in a temporary folder, with the solutions as its source."""

    root: Path
    solutions_dir: Path
    limits: GradingLimits = GradingLimits()
    db_url: str | None = None  # the gradebook nbgrader writes; None: gradebook.db in the root

    @property
    def db_path(self) -> Path:
        return self.root / "gradebook.db"

    def api(self, release_dir: Path | str = "release") -> Any:
        # Imported lazily: course_utils users never need nbgrader installed.
        from nbgrader.apps import NbGraderAPI
        from nbgrader.auth import Authenticator
        from nbgrader.coursedir import CourseDirectory

        config = course_config(
            self.root,
            db_url=self.db_url or f"sqlite:///{self.db_path}",
            source_dir=self.solutions_dir,
            release_dir=release_dir,
            limits=self.limits,
        )
        coursedir = CourseDirectory(config=config)
        api = NbGraderAPI(coursedir, Authenticator(config=config), config=config)
        api.log.setLevel(logging.ERROR)
        return api

    def check(self, result: dict[str, Any], step: str) -> str:
        """Check an NbGraderAPI result; return its log, or raise with the error."""
        if not result.get("success"):
            raise NbgraderError(f"{step} failed: {failure_reason(result)}")
        return result.get("log", "")


# What nbgrader's log says when a submission breaks the run, and what to tell the instructor.
KNOWN_FAILURES = (
    ("DeadKernelError", "the kernel died while running the notebook (a cell crashed Python or exited it)"),
    ("CellTimeoutError", "a cell ran longer than the per-cell time limit"),
    ("UnresponsiveKernelError", "the kernel stopped responding"),
    ("MemoryError", "the notebook ran out of memory"),
)


def failure_reason(result: dict[str, Any]) -> str:
    """Why an NbGraderAPI call failed, in one line, from its log and traceback."""
    return summarize_log((result.get("log") or "") + (result.get("error") or ""))


def summarize_log(log: str, limit: int = 300) -> str:
    """The cause of a failed nbgrader step, in one line: a known cause, else the last error line."""
    for marker, reason in KNOWN_FAILURES:
        if marker in log:
            return reason
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"(Error|Exception)\b", line) and "Please see the" not in line]
    text = (errors or lines or ["no log"])[-1]
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.lru_cache(maxsize=1)
def empty_gradebook() -> bytes:
    """A gradebook with nbgrader's tables and alembic version and nothing else, made by nbgrader.

    nbgrader stamps a new gradebook with the version the ``alembic`` command prints (3 s here,
    in every process that grades); the version is read here with alembic's own API instead, and
    written first, so that nbgrader creates its tables and finds the gradebook already stamped.
    """
    import sqlite3

    from nbgrader.api import Gradebook

    with tempfile.TemporaryDirectory(prefix="attention-gradebook-") as folder:
        path = Path(folder) / "gradebook.db"
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
            db.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (gradebook_schema_version(),))
        with Gradebook(f"sqlite:///{path}"):
            pass
        return path.read_bytes()


def gradebook_schema_version() -> str:
    """The newest revision among nbgrader's gradebook migrations: what ``alembic heads`` prints."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    return ScriptDirectory(ALEMBIC_DIR).get_current_head()


@contextlib.contextmanager
def scratch_course(
    solutions_dir: Path = SOLUTIONS_DIR,
    keep: Path | None = None,
    *,
    limits: GradingLimits = GradingLimits(),
    gradebook: bytes | None = None,
) -> Iterator[ScratchCourse]:
    """A fresh nbgrader course whose source folder is (a copy of) the solutions.

    The solutions are copied so that a later edit of the repository cannot change
    a grading run half-way. ``COURSE_SOLUTIONS_DIR`` points hidden tests at the copy.
    ``gradebook``: an ``empty_gradebook()`` to start from, which saves each worker the
    ``alembic`` command nbgrader runs to create one (3 s here).
    """
    put_environment_on_path()
    root = Path(tempfile.mkdtemp(prefix="attention-course-")) if keep is None else keep
    source = root / "source"
    shutil.copytree(solutions_dir, source, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    if gradebook and not (root / "gradebook.db").exists():
        (root / "gradebook.db").write_bytes(gradebook)
    saved = os.environ.get("COURSE_SOLUTIONS_DIR")
    os.environ["COURSE_SOLUTIONS_DIR"] = str(source)
    previous_cwd = Path.cwd()
    os.chdir(root)  # nbgrader writes its log file into the working directory
    try:
        with warnings.catch_warnings():
            # nbgrader 0.9 trips SQLAlchemy 2's autoflush warnings on every autograde; they are harmless.
            warnings.filterwarnings("ignore", message=r".*not in session.*")
            yield ScratchCourse(root=root, solutions_dir=source, limits=limits)
    finally:
        os.chdir(previous_cwd)
        if saved is None:
            os.environ.pop("COURSE_SOLUTIONS_DIR", None)
        else:
            os.environ["COURSE_SOLUTIONS_DIR"] = saved
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
