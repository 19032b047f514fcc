"""The grading pipeline's small parts on hand-made rows: the rerun cache and the order of the results."""

from __future__ import annotations

import random
from pathlib import Path

from autograder.grading.cache import GradingCache
from autograder.grading.models import AssignmentSpec, GradeRow, GradingReport, Kind, Outcome, Submission, TestRow
from autograder.grading.pipeline import in_class_order

SUBMISSION = Submission("ann", "01_a", b'{"cells": []}')
ROW = GradeRow("ann", "01_a", 1.0, 3.0, Outcome(Kind.GRADED, "lost points on: test_y", ("a note",)))
TESTS = [TestRow("ann", "01_a", "test_x", 1.0, 1.0), TestRow("ann", "01_a", "test_y", 0.0, 2.0, "forgets the scale")]


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
        report = GradingReport(random.Random(seed).sample(grades, len(grades)), random.Random(seed + 9).sample(tests, len(tests)))
        in_class_order(report, pairs, specs)
        assert report.grades == grades and report.tests == tests
