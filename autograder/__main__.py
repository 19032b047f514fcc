"""The instructor's command line: ``python -m autograder {release,grade,site,demo}``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .grading.intake import DEFAULT_STUDENT_PATTERN
from .settings import CELL_TIMEOUT_S, MEMORY_LIMIT_BYTES

if TYPE_CHECKING:
    from course_utils.colab import CourseAddress

    from .grading.models import GradingResults
    from .grading.pipeline import GradeSettings
    from .grading.roster import Roster


def _require_instructor_tools() -> None:
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        sys.exit("The autograder needs the instructor tools: pip install -e '.[instructor]'")


def _release(args: argparse.Namespace) -> int:
    if args.check:
        return _release_check()
    from course_utils.colab import COURSE_KEYS, HANDOUT_KEYS, course_address, handout_address

    from .release import release

    for url, branch, keys, flags in (
        (args.repo_url, args.branch, COURSE_KEYS, ("--repo-url", "--branch")),
        (args.handout_url, args.handout_branch, HANDOUT_KEYS, ("--handout-url", "--handout-branch")),
    ):
        refused = _record_address(url, branch, keys, flags)
        if refused:
            return refused
    try:
        names = release()
    except ValueError as error:  # course.toml that cannot be read: the same one line as grade gives
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"released {len(names)} notebook(s) into notebooks/: {', '.join(names)}")
    _say_where(course_address(), "course", "notebooks", "--repo-url")
    if args.handout:
        from .handout import write_handout

        handout = write_handout(Path(args.handout))
        print(
            f"wrote the handout, the students' repository, into {handout.root}: {len(handout.notebooks)} notebooks, "
            "the students' package course_utils, pyproject.toml, README.md, LICENSE"
        )
        _say_where(handout_address(), "handout", "handout's notebooks", "--handout-url")
    return 0


def _record_address(url: str | None, branch: str | None, keys: tuple[str, str], flags: tuple[str, str]) -> int:
    """Write an address given on the command line into course.toml; 2 when it cannot be used."""
    from course_utils.colab import AddressError, parse_address, write_address

    if branch and not url:
        print(f"release: {flags[1]} goes with {flags[0]}", file=sys.stderr)
        return 2
    if url:
        try:
            write_address(parse_address(url, branch or "main"), keys=keys)
        except AddressError as error:
            print(f"release: {error}", file=sys.stderr)
            return 2
    return 0


def _say_where(address: "CourseAddress", whose: str, pages: str, flag: str) -> None:
    if address.is_set:
        print(f"The {pages}' Colab badges and setup cells point at {address.repository} (branch {address.branch}).")
        return
    print(
        f"warning: no {whose} address is set, so the {pages} have no Colab badge and their setup cell cannot install "
        f"the package on Colab. Set it once: python -m autograder release {flag} https://github.com/OWNER/REPO",
        file=sys.stderr,
    )


def _release_check() -> int:
    """notebooks/ in sync with solutions/, and a fresh handout, as written and as pip installs it, holding no answer."""
    from .handout import handout_problems
    from .release import stale_notebooks

    try:
        problems = stale_notebooks()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    if problems:
        print("notebooks/ is stale: run `python -m autograder release` and commit the result.")
    from .settings import NOTEBOOKS_DIR

    leaks = handout_problems(released=None if problems else NOTEBOOKS_DIR)  # in sync: no second generation
    for leak in leaks:
        print(f"handout: {leak}")
    if leaks:
        print("The handout would give answers away: take them out of the students' package (course_utils) or the released notebooks.")
    if problems or leaks:
        return 1
    print("notebooks/ is in sync with solutions/, and the handout (as written and as installed) holds no answer.")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from .grading.models import HealthCheckFailed
    from .grading.pipeline import grade
    from .grading.reports import format_table
    from .grading.roster import read_roster

    started = time.monotonic()
    try:
        roster = read_roster(Path(args.roster), args.roster_column) if args.roster else None
        sources = [Path(source) for source in args.submissions]
        report = grade(sources, Path(args.out), _grade_settings(args, roster.students if roster else None))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except HealthCheckFailed as failure:
        print(
            f"error: the run stopped: {failure}. The rows it could not vouch for say so in {Path(args.out) / 'grades.csv'}.",
            file=sys.stderr,
        )
        return 3
    print(format_table(report))
    _write_lms_import(report, roster, Path(args.out))
    _print_outputs(report, Path(args.out), time.monotonic() - started)
    return 0


def _grade_settings(args: argparse.Namespace, roster: list[str] | None) -> "GradeSettings":
    """The command line's options as ``grade``'s settings, with the due dates of course.toml."""
    from course_utils.colab import COURSE_FILE

    from .course import list_assignments
    from .grading.deadlines import load_deadlines
    from .grading.pipeline import GradeSettings
    from .settings import SOLUTIONS_DIR

    return GradeSettings(
        assignments=[args.assignment] if args.assignment else None,
        feedback=not args.no_feedback,
        jobs=args.jobs,
        scheduler=args.scheduler,
        student_pattern=args.student_pattern,
        cell_timeout=args.cell_timeout,
        memory_limit=int(args.memory_limit * 2**30) if args.memory_limit > 0 else None,
        reuse=not args.regrade,
        sandbox=not args.no_sandbox,
        gradebook=args.gradebook,
        course_dir=Path(args.course_dir),
        roster=roster,
        deadlines=load_deadlines(COURSE_FILE, list_assignments(SOLUTIONS_DIR), roster=roster),
    )


def _write_lms_import(report: "GradingResults", roster: "Roster | None", out: Path) -> None:
    from .course import list_assignments
    from .grading.models import AssignmentSpec
    from .grading.reports import LMS_IMPORT_CSV, write_lms_import
    from .settings import SOLUTIONS_DIR

    if roster is None:
        if (out / LMS_IMPORT_CSV).exists():  # a record: left as it is, never removed, but no longer the term's scores
            print(f"not updated: {out / LMS_IMPORT_CSV} (it is written from the roster): pass --roster to bring it up to this run")
        return
    specs = {name: AssignmentSpec.load(SOLUTIONS_DIR, name) for name in list_assignments(SOLUTIONS_DIR)}
    lms = write_lms_import([r.grade for r in report.term], specs, roster, out)  # every assignment OUT holds
    print(f"for the LMS's gradebook import: {lms} (the roster's own columns, then points per assignment graded into it)")


def _print_outputs(report: "GradingResults", out: Path, seconds: float) -> None:
    from .grading.models import STALE_NOTE

    reused = f" ({report.reused} unchanged since the last run, not graded again)" if report.reused else ""
    print(f"\n{len(report.grades)} grade row(s){reused} in {seconds:.0f} s; written to {out / 'grades.csv'}")
    kept = len(report.term) - len(report.results)
    stale = sum(any(note.startswith(STALE_NOTE) for note in r.grade.outcome.notes) for r in report.term)
    if kept or stale:
        marked = f", {stale} of them stale (its notebook is gone from where it was: see its status)" if stale else ""
        print(f"{out / 'grades.csv'} also keeps {kept} row(s) of earlier runs into it{marked}")
    print(f"for the LMS: {out / 'gradebook.csv'}; class summary: {out / 'summary.md'} and {out / 'summary.png'}")
    if report.gradebook:
        export = report.gradebook
        added = f"; assignments added to it: {', '.join(export.assignments_added)}" if export.assignments_added else ""
        print(
            f"nbgrader gradebook {export.url}: {len(export.written)} graded submission(s), {len(export.not_graded)} handed in but not gradable "
            f"(zeros, with the reason as a comment), {len(export.missing)} missing left out{added}"
        )


def _site(args: argparse.Namespace) -> int:
    from .site import build_site

    out = Path(args.out)
    pages = build_site(out)
    for page in pages:
        print(f"{page.name}.html  ({page.seconds:.0f} s to run)")
    print(f"\nopen {out.resolve() / 'index.html'} in a browser")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import DEMO_ASSIGNMENTS, run_demo

    started = time.monotonic()
    run_demo(Path(args.out) if args.out else None, DEMO_ASSIGNMENTS[:1] if args.quick else DEMO_ASSIGNMENTS)
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s")
    return 0


def _add_release(commands: argparse._SubParsersAction) -> None:
    """``release``: regenerate notebooks/."""
    release = commands.add_parser("release", help="regenerate notebooks/ from solutions/ with nbgrader")
    release.add_argument("--check", action="store_true", help="change nothing; exit 1 and name each stale notebook")
    release.add_argument(
        "--repo-url", help="the course's GitHub address (https://github.com/OWNER/REPO), kept in course.toml for every later release"
    )
    release.add_argument("--branch", help="the branch Colab opens (with --repo-url; default main)")
    release.add_argument(
        "--handout",
        metavar="DIR",
        help="also write the students' repository into DIR: the released notebooks, the students' package, its pyproject, "
        "a students' README and the licence (only those entries are replaced: a clone's .git stays)",
    )
    release.add_argument(
        "--handout-url", help="the handout's GitHub address, kept in course.toml: the handout's Colab badges and setup cells use it"
    )
    release.add_argument("--handout-branch", help="the handout's branch (with --handout-url; default main)")
    release.set_defaults(run=_release)


def _add_grade_sources(grade: argparse.ArgumentParser) -> None:
    """``grade``'s sources and OUT: several sources are one class, and OUT keeps the term."""
    grade.add_argument(
        "submissions",
        nargs="+",
        metavar="SOURCE",
        help="a folder of student folders, a flat folder of downloaded notebooks, or a .zip of either; several are one class, "
        "and where a student handed in the same assignment in two, the latest hand-in is graded",
    )
    grade.add_argument(
        "--out",
        required=True,
        help="where grades.csv, tests.csv and feedback/ are written; it keeps the term: every run adds to it, "
        "each pair's row stays until that pair is graded again",
    )


def _add_grade(commands: argparse._SubParsersAction) -> None:
    """``grade``: its options, as in the instructors' guide."""
    grade = commands.add_parser("grade", help="autograde what a class handed in: folders of student folders, LMS zips")
    _add_grade_sources(grade)
    grade.add_argument("--assignment", help="grade only this assignment (default: every one handed in)")
    grade.add_argument("--no-feedback", action="store_true", help="skip the HTML feedback")
    grade.add_argument("--jobs", type=int, default=1, help="grade this many submissions at a time (default 1)")
    grade.add_argument("--scheduler", help="grade on a Dask cluster instead: the scheduler's address, e.g. tcp://10.0.0.5:8786")
    grade.add_argument(
        "--student-pattern",
        default=DEFAULT_STUDENT_PATTERN,
        help="regular expression with a (?P<student>...) group that reads the student from a file or folder name "
        "(default: LMS names like smith_12345_67890_…)",
    )
    grade.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT_S, help=f"seconds a cell may run (default {CELL_TIMEOUT_S})")
    grade.add_argument(
        "--memory-limit",
        type=float,
        default=MEMORY_LIMIT_BYTES / 2**30,
        help="GiB of data per notebook kernel; 0: no limit (default %(default)g)",
    )
    grade.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without bubblewrap where it cannot run: submissions then run with your rights, and every row says so",
    )
    grade.add_argument(
        "--regrade", action="store_true", help="grade everything again, even submissions unchanged since the last run into --out"
    )
    grade.add_argument(
        "--gradebook",
        metavar="URL",
        help="also write the scores into this nbgrader gradebook (SQLAlchemy URL, e.g. sqlite:///gradebook.db) for review in formgrader",
    )
    grade.add_argument(
        "--course-dir",
        default=".",
        metavar="DIR",
        help="with --gradebook: the nbgrader course whose autograded/ folder gets the graded notebooks (default: here)",
    )
    grade.add_argument(
        "--roster",
        metavar="FILE",
        help="the class list (a CSV with a student column, or one student per line): each gets a row for every assignment, "
        "'missing' where nothing came in",
    )
    grade.add_argument(
        "--roster-column",
        metavar="NAME",
        help="the roster's column that holds the ids submissions are named by (default: student, student_id, id, username, "
        "login or email, the first found)",
    )
    grade.set_defaults(run=_grade)


def _add_site_and_demo(commands: argparse._SubParsersAction) -> None:
    """``site`` and ``demo``."""
    site = commands.add_parser("site", help="run the solution notebooks and build a static web site of them for self-learners")
    site.add_argument("--out", default="site", help="where index.html and one page per notebook go (default: site/)")
    site.set_defaults(run=_site)

    demo = commands.add_parser("demo", help="grade a small synthetic class and print the score table")
    demo.add_argument("--out", help="keep grades.csv, tests.csv and feedback/ here")
    demo.add_argument("--quick", action="store_true", help="notebook 01 only (about 10 s instead of 50 s: no Triton kernels)")
    demo.set_defaults(run=_demo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_release(commands)
    _add_grade(commands)
    _add_site_and_demo(commands)
    args = parser.parse_args(argv)
    _require_instructor_tools()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
