"""The grading pipeline's small parts on hand-made rows: the rerun cache, the order of the results, which
submissions a free worker takes next, and the empty gradebook every worker starts from."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autograder.course import empty_gradebook
from autograder.grading.cache import GradingCache
from autograder.grading.models import (
    AssignmentSpec,
    Graded,
    GradeRow,
    GradingResults,
    HealthCheckFailed,
    Kind,
    Misconception,
    Outcome,
    Submission,
    SubmissionResult,
    TestRow,
)
from autograder.grading.pipeline import grade_in_pool, in_class_order
from autograder.grading.scheduling import ChunkQueue, chunk_size
from autograder.settings import put_environment_on_path

SUBMISSION = Submission("ann", "01_a", b'{"cells": []}')
ROW = GradeRow("ann", "01_a", 1.0, 3.0, Outcome(Kind.GRADED, "lost points on: test_y", ("a note",)))
TESTS = [
    TestRow("ann", "01_a", "test_x", 1.0, 1.0),
    TestRow("ann", "01_a", "test_y", 0.0, 2.0, (Misconception("forgets the scale", "2 › Scale"),)),
]


def test_the_cache_gives_back_what_it_was_given_across_runs(tmp_path: Path) -> None:
    cache = GradingCache(tmp_path / "cache.json", "f1")
    assert cache.get(SUBMISSION) is None
    cache.put(SUBMISSION, ROW, TESTS)
    cache.save()
    assert GradingCache(tmp_path / "cache.json", "f1").get(SUBMISSION) == (ROW, TESTS)


def test_the_cache_forgets_everything_when_what_grades_depend_on_changed(tmp_path: Path) -> None:
    cache = GradingCache(tmp_path / "cache.json", "f1")
    cache.put(SUBMISSION, ROW, TESTS)
    cache.save()
    assert GradingCache(tmp_path / "cache.json", "f2").get(SUBMISSION) is None, "grader code, solutions or options changed"
    edited = Submission("ann", "01_a", b'{"cells": [1]}')
    assert GradingCache(tmp_path / "cache.json", "f1").get(edited) is None, "the notebook changed"
    assert GradingCache(tmp_path / "cache.json", "f1").get(Submission("bob", "01_a", SUBMISSION.content)) is None


def test_a_broken_cache_file_is_an_empty_cache(tmp_path: Path) -> None:
    (tmp_path / "cache.json").write_text("{not json")
    assert GradingCache(tmp_path / "cache.json", "f1").get(SUBMISSION) is None
    (tmp_path / "cache.json").write_text('{"fingerprint": "f1"}')
    assert GradingCache(tmp_path / "cache.json", "f1").entries == {}


def test_results_come_out_in_class_order_whatever_order_they_finished_in() -> None:
    specs = {"01_a": AssignmentSpec("01_a", {"test_x": 1.0, "test_y": 2.0}), "02_b": AssignmentSpec("02_b", {"test_z": 1.0})}
    pairs = [(s, a) for s in ("ann", "bob", "cy") for a in specs]
    grades = [GradeRow(s, a, 0.0, 1.0, Outcome(Kind.GRADED)) for s, a in pairs]
    tests = [TestRow(s, a, t, 0.0, 1.0) for s, a in pairs for t in specs[a].tests]
    for seed in range(5):
        report = GradingResults.from_rows(
            random.Random(seed).sample(grades, len(grades)), random.Random(seed + 9).sample(tests, len(tests))
        )
        in_class_order(report, pairs, specs)
        assert report.grades == grades and report.tests == tests


def _class(sizes: dict[str, int]) -> list[Submission]:
    return [Submission(f"s{i:02d}", name, b"{}") for name, size in sizes.items() for i in range(size)]


def test_every_submission_goes_out_once_in_chunks_of_one_assignment() -> None:
    todo = _class({"01_a": 7, "02_b": 3, "03_c": 10})
    queue = ChunkQueue.of(todo, 3)
    chunks = []
    pick = random.Random(0)
    while chunk := queue.take(pick.choice([None, "01_a", "03_c"]), {"02_b"}):
        chunks.append(chunk)
    assert sorted((s.student, s.assignment) for c in chunks for s in c) == sorted((s.student, s.assignment) for s in todo)
    assert all(len({s.assignment for s in c}) == 1 and 1 <= len(c) <= 3 for c in chunks)
    assert queue.take() is None


def test_a_free_worker_keeps_to_the_assignments_it_has_set_up() -> None:
    queue = ChunkQueue.of(_class({"01_a": 8, "02_b": 8, "03_c": 2}), 2)
    first, second = queue.take(), queue.take()
    assert (first[0].assignment, second[0].assignment) == ("01_a", "02_b"), "two workers start on two assignments"
    queue.done("01_a")
    assert queue.take("01_a", {"01_a"})[0].assignment == "01_a", "more of the one it graded last"
    for _ in range(2):
        queue.take("01_a", {"01_a"})
    # 01_a is used up: a worker that has set up 02_b goes on with it rather than starting 03_c.
    assert queue.take("01_a", {"01_a", "02_b"})[0].assignment == "02_b"
    # One that has set up nothing that is left goes where the most chunks are left per worker already on it:
    # 02_b has 2 chunks left and 2 workers, 03_c 1 chunk and none.
    assert queue.take("01_a", {"01_a"})[0].assignment == "03_c"


def test_chunks_are_small_enough_to_keep_every_worker_busy() -> None:
    # A cluster: few network round trips, yet four tasks per worker at least.
    cluster = dict(local=False)
    assert chunk_size(12, 2, **cluster) == 1 and chunk_size(40, 2, **cluster) == 4 and chunk_size(1000, 2, **cluster) == 4
    assert chunk_size(1, 8, **cluster) == 1
    # This machine's pool: a task costs little, so one submission each and no tail.
    assert chunk_size(40, 2, local=True) == chunk_size(1000, 2, local=True) == 1


def _schema(path: Path) -> list[tuple]:
    with closing(sqlite3.connect(path)) as db:
        tables = sorted(db.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
        return tables + db.execute("SELECT version_num FROM alembic_version").fetchall()


def test_the_empty_gradebook_is_the_one_nbgrader_makes_itself(tmp_path: Path) -> None:
    """Stamped with the version read through alembic's API rather than by the ``alembic`` command,
    it has the same tables and the same version as a gradebook nbgrader makes from nothing."""
    from nbgrader.api import Gradebook

    put_environment_on_path()
    with Gradebook(f"sqlite:///{tmp_path / 'nbgrader.db'}"):
        pass
    (tmp_path / "ours.db").write_bytes(empty_gradebook())
    assert _schema(tmp_path / "ours.db") == _schema(tmp_path / "nbgrader.db")
    with closing(sqlite3.connect(tmp_path / "ours.db")) as db:
        assert db.execute("SELECT COUNT(*) FROM student").fetchone() == (0,), "nothing but the schema"


@dataclass(frozen=True)
class _Batch:
    """Stands in for GradingBatch: records which worker (thread) grades what and when it is checked."""

    log: list = field(compare=False)
    run_id: str | None = None
    check_fails: bool = False

    def __call__(self, chunk: list[Submission], start_check: bool = True) -> list[Graded]:
        worker = threading.current_thread().name
        if start_check:
            self.log.append(("start check", worker, chunk[0].assignment))
        self.log.append(("graded", worker, chunk[0].assignment))
        return [
            Graded(s, SubmissionResult(GradeRow(s.student, s.assignment, 1.0, 1.0, Outcome(Kind.GRADED))), worker=worker) for s in chunk
        ]

    def check_health(self) -> str:
        worker = threading.current_thread().name
        time.sleep(0.02)  # a real check grades the known solution (seconds): a free worker takes the next task meanwhile
        self.log.append(("checked", worker, ""))
        if self.check_fails:
            raise HealthCheckFailed(f"{Kind.HEALTH_CHECK_FAILED.value} on {worker}")
        return worker


class _Bar:
    def update(self, n: int) -> None:
        pass


def test_every_worker_is_checked_after_its_last_grade_and_every_submission_graded_once() -> None:
    todo = _class({"01_a": 9, "02_b": 5, "03_c": 6})
    with ThreadPoolExecutor(2) as executor:
        batch = _Batch([])
        results = list(grade_in_pool(executor, 2, batch, todo, _Bar(), local=True))
    assert sorted((r.submission.student, r.submission.assignment) for r in results) == sorted((s.student, s.assignment) for s in todo)
    for worker in {w for kind, w, _ in batch.log if kind == "graded"}:
        last_grade = max(i for i, (kind, w, _) in enumerate(batch.log) if kind == "graded" and w == worker)
        assert any(kind == "checked" and w == worker for kind, w, _ in batch.log[last_grade:]), (worker, batch.log)


def test_each_assignment_is_checked_once_per_run_before_grading() -> None:
    todo = _class({"01_a": 9, "02_b": 5, "03_c": 6})
    with ThreadPoolExecutor(2) as executor:
        batch = _Batch([])
        list(grade_in_pool(executor, 2, batch, todo, _Bar(), local=True))
    starts = [assignment for kind, _, assignment in batch.log if kind == "start check"]
    assert sorted(starts) == ["01_a", "02_b", "03_c"], batch.log  # once each, not once per worker


def test_a_failed_end_check_stops_the_pool_run() -> None:
    with ThreadPoolExecutor(2) as executor, pytest.raises(HealthCheckFailed):
        list(grade_in_pool(executor, 2, _Batch([], check_fails=True), _class({"01_a": 3}), _Bar(), local=True))


def test_a_tls_scheduler_without_certificates_is_refused_with_what_to_give() -> None:
    # The documented cluster across machines is TLS-only; a grader without the certificates says which settings it lacks.
    import dask

    from autograder.grading.executors import grading_executor

    names = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert", "distributed.comm.tls.client.key")
    with dask.config.set(dict.fromkeys(names)), pytest.raises(ValueError, match="TLS scheduler: give its certificates"):
        with grading_executor(jobs=1, scheduler="tls://127.0.0.1:1"):
            pass


def test_a_relative_sqlite_gradebook_is_made_absolute_where_grade_was_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Grading works in scratch folders: `--gradebook sqlite:///gradebook.db`, as the docs write it, must still mean
    # the file beside the instructor, not one in whatever folder the export runs from.
    from autograder.grading.gradebook_export import check_gradebook_url

    monkeypatch.chdir(tmp_path)
    assert check_gradebook_url("sqlite:///gradebook.db") == f"sqlite:///{tmp_path / 'gradebook.db'}"
    assert check_gradebook_url("sqlite:///course/gb.db") == f"sqlite:///{tmp_path / 'course' / 'gb.db'}"
    assert check_gradebook_url(f"sqlite:///{tmp_path}/x.db") == f"sqlite:///{tmp_path}/x.db"  # absolute: as given
    assert check_gradebook_url("postgresql://u:p@host/db") == "postgresql://u:p@host/db"
    with pytest.raises(ValueError, match="not an SQLAlchemy URL"):
        check_gradebook_url("gradebook.db")
