"""How long autograding takes, and how much ``--jobs`` saves, on the machine at hand.

Two measurements, each in one run so that the machine's mood affects both sides alike:

* ``parallel`` (the default): a class of SUBMISSIONS notebooks of one assignment, graded with
  ``jobs=1`` and then with ``jobs=JOBS``; prints seconds per notebook and the ratio of the wall
  times. The course asks for a ratio of at most 0.6 with 40 submissions and 2 jobs on 2 cores.
* ``per-notebook``: seconds per submission for every notebook, with and without feedback.

    .venv/bin/python benchmarks/grading.py [parallel] [--submissions 40] [--jobs 2] [--clean] [--json out.json]
    .venv/bin/python benchmarks/grading.py per-notebook [--copies 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from autograder.course import list_assignments
from autograder.grading.models import STAGES
from autograder.grading.pipeline import grade
from autograder.mistakes import MISTAKES
from autograder.submissions import released, solved, write_submission

PARALLEL_ASSIGNMENT = "03_scaled_dot_product_attention"
TARGET_RATIO = 0.6


def machine() -> dict[str, object]:
    return {
        "device": "cpu",
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def write_class(folder: Path, assignment: str, size: int, mixed: bool) -> None:
    """``size`` students; ``mixed``: like a real class, some untouched and some with a mistake."""
    kinds = [solved(assignment)]
    if mixed:
        kinds += [released(assignment)] + [solved(assignment, [m]) for m in MISTAKES.get(assignment, [])[:2]]
    for i in range(size):
        write_submission(folder, f"student-{i:03d}", assignment, kinds[i % len(kinds)])


def timed_grade(submissions: Path, out: Path, assignment: str, **options) -> tuple[float, list, dict[str, float]]:
    """Wall seconds, the grade rows, and the seconds spent in each grading stage (summed over workers).

    Each grading runs in a fresh process, as ``python -m autograder grade`` does: what a process
    does once (probing the sandbox, making the empty gradebook) counts for every run, not only the first.
    """
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
        return fresh.submit(_timed_grade, submissions, out, assignment, options).result()


def _timed_grade(submissions: Path, out: Path, assignment: str, options: dict) -> tuple[float, list, dict[str, float]]:
    started = time.perf_counter()
    report = grade(submissions, out, assignments=[assignment], progress=False, reuse=False, **options)
    return time.perf_counter() - started, report.grades, {stage: round(report.stages.get(stage, 0.0), 2) for stage in STAGES}


def parallel(assignment: str, size: int, jobs: int, mixed: bool = True) -> dict[str, object]:
    """Wall time of one class graded with 1 job and with ``jobs``; their rows must agree."""
    with tempfile.TemporaryDirectory() as tmp:
        submissions = Path(tmp) / "submissions"
        write_class(submissions, assignment, size, mixed=mixed)
        serial, serial_rows, serial_stages = timed_grade(submissions, Path(tmp) / "out-1", assignment, jobs=1)
        pooled, pooled_rows, pooled_stages = timed_grade(submissions, Path(tmp) / f"out-{jobs}", assignment, jobs=jobs)
    if serial_rows != pooled_rows:
        changed = [(a, b) for a, b in zip(serial_rows, pooled_rows) if a != b][:3]
        raise AssertionError(f"grading with more jobs changed the grade rows, e.g. {changed}")
    return {
        "assignment": assignment,
        "submissions": size,
        "class": "mixed" if mixed else "clean",
        "jobs": jobs,
        "seconds_jobs_1": round(serial, 2),
        f"seconds_jobs_{jobs}": round(pooled, 2),
        "seconds_per_notebook_jobs_1": round(serial / size, 3),
        f"seconds_per_notebook_jobs_{jobs}": round(pooled / size, 3),
        "ratio": round(pooled / serial, 3),
        # Where the time goes, summed over the workers: the serial part is what is not divided by jobs.
        "stages_jobs_1": serial_stages,
        f"stages_jobs_{jobs}": pooled_stages,
    }


def per_notebook(copies: int) -> list[dict[str, object]]:
    rows = []
    for assignment in list_assignments():
        row: dict[str, object] = {"assignment": assignment}
        for feedback in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                write_class(Path(tmp) / "submissions", assignment, copies, mixed=False)
                seconds, grades, _ = timed_grade(Path(tmp) / "submissions", Path(tmp) / "out", assignment, feedback=feedback)
            assert all(r.score == r.max_score for r in grades), "the solution should score full marks"
            row["seconds_per_submission" + ("_with_feedback" if feedback else "")] = round(seconds / copies, 2)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=("parallel", "per-notebook"), default="parallel")
    parser.add_argument("--submissions", type=int, default=40, help="class size for `parallel` (default 40)")
    parser.add_argument("--jobs", type=int, default=2, help="jobs to compare with one (default 2)")
    parser.add_argument("--clean", action="store_true", help="for `parallel`: every submission the solution (default: a mixed class)")
    parser.add_argument("--assignment", default=PARALLEL_ASSIGNMENT, help=f"for `parallel` (default {PARALLEL_ASSIGNMENT})")
    parser.add_argument("--copies", type=int, default=3, help="submissions per notebook for `per-notebook` (default 3)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    figures: dict[str, object] = {"machine": machine()}
    print(f"machine: {figures['machine']}")
    if args.mode == "parallel":
        result = parallel(args.assignment, args.submissions, args.jobs, mixed=not args.clean)
        figures["parallel"] = result
        verdict = "meets" if result["ratio"] <= TARGET_RATIO else "MISSES"
        print(
            f"{result['submissions']} submissions of {result['assignment']} ({result['class']} class): "
            f"jobs=1 {result['seconds_jobs_1']:.1f} s ({result['seconds_per_notebook_jobs_1']:.2f} s/notebook), "
            f"jobs={args.jobs} {result[f'seconds_jobs_{args.jobs}']:.1f} s ({result[f'seconds_per_notebook_jobs_{args.jobs}']:.2f} s/notebook); "
            f"ratio {result['ratio']:.2f} ({verdict} the target of {TARGET_RATIO})"
        )
        print(f"{'stage':<20}{'jobs=1 s':>10}{f'jobs={args.jobs} s':>10}   (summed over workers)")
        for stage in STAGES:
            print(f"{stage:<20}{result['stages_jobs_1'][stage]:>10.2f}{result[f'stages_jobs_{args.jobs}'][stage]:>10.2f}")
    else:
        figures["per_notebook"] = rows = per_notebook(args.copies)
        print(f"{'assignment':<32}{'s/submission':>14}{'with feedback':>15}")
        for row in rows:
            print(f"{row['assignment']:<32}{row['seconds_per_submission']:>14.2f}{row['seconds_per_submission_with_feedback']:>15.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
