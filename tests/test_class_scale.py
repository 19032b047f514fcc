"""Grading a class at scale: reruns that skip what has not changed, and a Dask cluster."""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from bad_submissions import BAD_CELL_TIMEOUT_S, BAD_MEMORY_LIMIT, FIRST
from helpers import GradedClass

from autograder.grading.cache import fingerprint
from autograder.grading.models import GradingOptions
from autograder.grading.pipeline import grade
from autograder.grading.reports import GRADES_CSV, TESTS_CSV
from autograder.settings import SOLUTIONS_DIR, GradingLimits

pytestmark = pytest.mark.slow


def rows(report) -> tuple[list, list]:
    return list(report.grades), list(report.tests)


def test_a_rerun_grades_only_what_changed(bad_class: GradedClass, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(bad_class.out, out)
    options = dict(progress=False, jobs=1, cell_timeout=BAD_CELL_TIMEOUT_S, memory_limit=BAD_MEMORY_LIMIT, roster=bad_class.roster)
    again = grade(bad_class.submissions, out, **options)
    assert again.reused == len(bad_class.report.grades)
    assert rows(again) == rows(bad_class.report)
    assert (out / GRADES_CSV).read_bytes() == (bad_class.out / GRADES_CSV).read_bytes()
    assert (out / "feedback" / "ok student" / f"{FIRST}.html").is_file()  # reused feedback is kept

    # One student hands in again (the solution now): only that submission is graded.
    submissions = tmp_path / "submissions"
    shutil.copytree(bad_class.submissions, submissions, symlinks=True)  # a link stays a link (refused), as handed in
    shutil.copyfile(submissions / "ok student" / f"{FIRST}.ipynb", submissions / "nan-outputs" / f"{FIRST}.ipynb")
    third = grade(submissions, out, **options)
    assert third.reused == len(bad_class.report.grades) - 1
    assert third.row_of("nan-outputs", FIRST).status == "graded"


def test_regrade_or_other_options_reuse_nothing(bad_class: GradedClass, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(bad_class.out, out)
    small = tmp_path / "small"
    shutil.copytree(bad_class.submissions / "ok student", small / "ok student")
    options = dict(progress=False, cell_timeout=BAD_CELL_TIMEOUT_S, memory_limit=BAD_MEMORY_LIMIT)
    assert grade(small, out, **options).reused == 1  # graded before into this OUT, unchanged
    forced = grade(small, out, **options, reuse=False)
    assert forced.reused == 0 and forced.grades == [bad_class.report.row_of("ok student", FIRST)]
    # Any option that can change a grade changes the key of every cached row.
    limits = GradingLimits(cell_timeout=BAD_CELL_TIMEOUT_S, memory_bytes=BAD_MEMORY_LIMIT)
    base = GradingOptions(limits, feedback=True)
    others = [
        replace(base, limits=replace(limits, cell_timeout=BAD_CELL_TIMEOUT_S + 1)),
        replace(base, limits=replace(limits, memory_bytes=None)),
        replace(base, feedback=False),
    ]
    prints = {fingerprint(SOLUTIONS_DIR, o) for o in [base, *others]}
    assert len(prints) == 4


def test_a_dask_cluster_gives_the_same_rows_from_a_zip(bad_class: GradedClass, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    # An LMS-style zip of two students' files, graded on a local cluster of two worker processes.
    students = ["ok student", "not-json"]
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for i, student in enumerate(students):
            lms_name = f"{student}_{1000 + i}_{2000 + i}_{FIRST}.ipynb"
            zipped.write(bad_class.submissions / student / f"{FIRST}.ipynb", f"Assignment 1/{lms_name}")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        report = grade(
            archive,
            tmp_path / "out",
            scheduler=cluster.scheduler_address,
            progress=False,
            cell_timeout=BAD_CELL_TIMEOUT_S,
            memory_limit=BAD_MEMORY_LIMIT,
        )
    # The same rows, but for the hand-in time a zip carries and a folder does not.
    zipped_rows = report.grades
    assert all(r.lateness is not None and r.lateness.source == "zip entry date" for r in zipped_rows if r.outcome.scored)
    assert [replace(r, lateness=None) for r in zipped_rows] == [r for r in bad_class.report.grades if r.student_id in students]
    assert report.tests == [r for r in bad_class.report.tests if r.student_id in students]
    assert (tmp_path / "out" / "feedback" / "ok student" / f"{FIRST}.html").is_file()
    assert (tmp_path / "out" / TESTS_CSV).is_file()


def test_a_broken_grader_writes_no_score_and_a_missing_notebook_stays_missing(tmp_path: Path) -> None:
    # The known solution of notebook 01 no longer scores full marks (it forgets the max subtraction),
    # so the health check fails: every handed-in row says so with no score, and exit code 3 follows.
    # A pair with no notebook is written without a grader, so it stays "missing".
    import csv

    import nbformat

    from autograder.grading.models import HealthCheckFailed, Kind
    from autograder.mistakes import MISTAKES
    from autograder.submissions import solved, write_submission
    from course_utils.notebook_cells import nbgrader_meta

    second = "02_dot_product_attention"
    solutions = tmp_path / "solutions"
    for name in (FIRST, second):
        shutil.copytree(SOLUTIONS_DIR / name, solutions / name)
    mistake = next(m for m in MISTAKES[FIRST] if m.name == "softmax without subtracting the max")
    source = solutions / FIRST / f"{FIRST}.ipynb"
    notebook = nbformat.read(source, as_version=4)
    [cell] = [c for c in notebook.cells if nbgrader_meta(c).get("grade_id") == mistake.cell]
    cell.source = mistake.apply(cell.source)
    nbformat.write(notebook, source)

    submissions, out = tmp_path / "submissions", tmp_path / "out"
    write_submission(submissions, "ada", FIRST, solved(FIRST))
    write_submission(submissions, "ben", second, solved(second))
    with pytest.raises(HealthCheckFailed, match=FIRST):
        grade(submissions, out, solutions_dir=solutions, jobs=1, progress=False, feedback=False)
    with (out / GRADES_CSV).open() as handle:
        kinds = {(r["student_id"], r["assignment"]): (r["kind"], float(r["score"])) for r in csv.DictReader(handle)}
    broken = (Kind.HEALTH_CHECK_FAILED.value, 0.0)
    missing = (Kind.MISSING.value, 0.0)
    assert kinds == {("ada", FIRST): broken, ("ada", second): missing, ("ben", FIRST): missing, ("ben", second): broken}
