"""What an instructor reads after grading: an LMS gradebook, and a class summary with a plot.

``gradebook.csv`` has one row per student and one column of points per assignment, the
shape that Canvas, Moodle and most spreadsheets import (map the ``student_id`` column to
the LMS's login or ID column). ``summary.md`` gives, per assignment, the score
distribution, how many pairs could not be graded and why, and the tests most often failed;
``summary.png`` draws the distributions. The class report an instructor opens in a browser
(``class-report.html``: per-question statistics, named misconceptions, similar code, the rows
that could not be graded) is ``autograder.grading.class_report``. Both read their numbers from
``autograder.grading.statistics`` (``NotebookStats``); this module formats them and computes none.

Every file here is written from the class's ``SubmissionResult``s (``models.GradingResults``); models.py maps
how a result flows from the sealed run to these files, and what each type named "report" is.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from .models import AssignmentSpec, GradeRow, GradingResults, Kind, SubmissionResult
from .roster import Roster
from .spreadsheet import write_csv
from .statistics import BIN_EDGES, NotebookStats, notebook_stats

GRADEBOOK_CSV = "gradebook.csv"
SUMMARY_MD = "summary.md"
SUMMARY_PNG = "summary.png"


def write_gradebook(grades: list[GradeRow], specs: dict[str, AssignmentSpec], out: Path) -> Path:
    """Wide CSV: student_id, then points per assignment (empty when never handed in), then the total."""
    names = [n for n in specs if any(r.assignment == n for r in grades)]
    students = list(dict.fromkeys(r.student_id for r in grades if r.assignment in names))
    points = {(r.student_id, r.assignment): r.score for r in grades if r.assignment in names}
    rows = []
    for student in students:
        scores = [points.get((student, n)) for n in names]
        rows.append([student, *(f"{s:g}" if s is not None else "" for s in scores), f"{sum(s or 0 for s in scores):g}"])
    return write_csv(out / GRADEBOOK_CSV, ["student_id", *names, "total"], rows)


LMS_IMPORT_CSV = "lms-import.csv"
# Rows whose zero is the grader's, not the student's: the LMS gets an empty cell, never a 0 to import (unless a
# person has graded the submission in nbgrader's gradebook: then the score is theirs).
GRADER_FAULTS = frozenset({Kind.AUTOGRADE_FAILED, Kind.GRADING_ERROR, Kind.HEALTH_CHECK_FAILED, Kind.INVALID_RESULT})


def write_lms_import(grades: list[GradeRow], specs: dict[str, AssignmentSpec], roster: Roster, out: Path) -> Path:
    """The roster as the LMS exported it (its own columns, each row as it came), plus one column of points per
    assignment ``grades`` hold (``grade`` passes the term's: every assignment OUT holds), after late penalties: the
    file Canvas's or Moodle's gradebook import reads back.

    Only students on the roster are written, since an LMS cannot import one it does not know; a row the
    grader could not finish leaves its cell empty, so no 0 is imported for the grader's fault, until a person grades it.
    """
    names = [n for n in specs if any(r.assignment == n for r in grades)]
    points = {(r.student_id, r.assignment): r for r in grades}
    header = roster.header or ["student"]
    rows = []
    for student in roster.students:
        own = roster.rows.get(student, [student])
        own = [*own, *[""] * (len(header) - len(own))][: len(header)]
        cells = []
        for name in names:
            found = points.get((student, name))
            unscored = found is None or (found.outcome.kind in GRADER_FAULTS and not found.graded_by_person)
            cells.append("" if unscored else f"{found.score:g}")
        rows.append([*own, *cells])
    return write_csv(out / LMS_IMPORT_CSV, [*header, *names], rows)


def format_summary(summaries: list[NotebookStats], unplaced: int = 0) -> str:
    """Markdown: a table of distributions, then the most-failed tests per assignment."""
    lines = [
        "# Class summary",
        "",
        "| assignment | graded | mean % | median % | min % | max % | full marks | not graded |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in summaries:
        stats = (s.mean_percent, s.median_percent, min(s.percents), max(s.percents)) if s.scores else None
        shown = " | ".join(f"{v:.0f}" for v in stats) if stats else "– | – | – | –"
        missing = ", ".join(f"{n} {why}" for why, n in s.not_scored_kinds.most_common()) or "0"
        lines.append(f"| {s.assignment} | {len(s.scores)} | {shown} | {s.full_marks} | {missing} |")
    if unplaced:
        lines += ["", f"{unplaced} file(s) could not be matched to an assignment; see the rows with assignment `?` in grades.csv."]
    for s in summaries:
        lines += [
            "",
            f"## {s.assignment} (max {s.max_score:g} points)",
            "",
            "Scores in bins of 10 %: " + " ".join(str(c) for c in s.histogram),
            "",
        ]
        if not s.most_failed:
            lines.append("No graded submission lost points on any test.")
            continue
        lines.append("Most failed tests:")
        lines += [f"- `{f.test}`: {f.failed} of {f.graded} ({100 * f.share:.0f} %)" for f in s.most_failed[:5]]
    return "\n".join(lines) + "\n"


def plot_summary(summaries: list[NotebookStats], path: Path) -> Path:
    """Histograms of score percentages, one panel per assignment, drawn off-screen."""
    from matplotlib.figure import (
        Figure,  # a bare Figure: no pyplot state, no display, no backend switch
    )

    figure = Figure(figsize=(3.2 * max(len(summaries), 1), 2.8), layout="constrained")
    axes = figure.subplots(1, max(len(summaries), 1), squeeze=False)[0]
    for ax, s in zip(axes, summaries):
        ax.stairs(s.histogram, BIN_EDGES, fill=True)
        ax.set_title(s.assignment, fontsize=8)
        ax.set_xlabel("score (%)")
        ax.set_xlim(0, 100)
    axes[0].set_ylabel("submissions")
    figure.savefig(path, dpi=100)
    return path


def write_summary(results: list[SubmissionResult], specs: dict[str, AssignmentSpec], out: Path) -> str:
    """Write gradebook.csv, summary.md and summary.png under ``out``; return the Markdown."""
    grades = [r.grade for r in results]
    write_gradebook(grades, specs, out)
    summaries = notebook_stats(results, specs)
    text = format_summary(summaries, unplaced=sum(r.assignment not in specs for r in grades))
    (out / SUMMARY_MD).write_text(text, encoding="utf-8")
    plot_summary(summaries, out / SUMMARY_PNG)
    return text


GRADES_CSV = "grades.csv"
TESTS_CSV = "tests.csv"


def write_csvs(report: GradingResults, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    grades = [
        {
            "student_id": r.student_id,
            "assignment": r.assignment,
            "score": r.score,
            "max_score": r.max_score,
            "kind": r.outcome.kind.value,
            "status": r.status,
            "submitted_at": _iso(r.lateness.submitted_at) if r.lateness else "",
            "due": _iso(r.lateness.due) if r.lateness else "",
            "late_penalty": r.lateness.penalty if r.lateness else 0.0,
        }
        for r in report.grades
    ]
    tests = [
        {
            "student_id": r.student_id,
            "assignment": r.assignment,
            "test": r.test,
            "score": r.score,
            "max_score": r.max_score,
            "misconception": r.misconception,
        }
        for r in report.tests
    ]
    for filename, rows in ((GRADES_CSV, grades), (TESTS_CSV, tests)):
        header = list(rows[0]) if rows else ["student_id", "assignment"]
        write_csv(out / filename, header, ([row[name] for name in header] for row in rows))


def _iso(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z") if moment else ""


def format_table(report: GradingResults, status_width: int = 100) -> str:
    """The grades as a fixed-width table for the terminal (long statuses cut at ``status_width``)."""
    header = ("student", "assignment", "score", "status")
    rows = [(r.student_id, r.assignment, f"{r.score:g} / {r.max_score:g}", r.status) for r in report.grades]
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(3)]

    def render(line: tuple[str, ...]) -> str:
        status = line[3] if len(line[3]) <= status_width else line[3][: status_width - 3] + "..."
        return "  ".join([*(cell.ljust(w) for cell, w in zip(line[:3], widths)), status])

    lines = [render(header), "  ".join("-" * w for w in (*widths, min(status_width, max(len(r[3]) for r in (header, *rows)))))]
    return "\n".join(lines + [render(row) for row in rows])
