"""``grade``: autograde what a class handed in; write grades, per-test scores and feedback.

Each source is a folder of student folders, a flat folder of downloaded files, or a zip
(``autograder.grading.intake`` places each file); several sources are one class, merged by student and
hand-in time. Every (student, assignment) pair gets a row in ``grades.csv`` with a status that says why
when it could not be graded, and the run goes on; ``autograder.grading.reports`` adds the LMS gradebook
and the class summary. Grading runs in scratch nbgrader courses: the sources and the repository are only read.

OUT is the term's record (``cache.TermRecord``): a run enters the pairs it graded and keeps every other pair an
earlier run gave, with its feedback page and graded notebook, so grading one assignment, then another, or an LMS
zip after the exchange, builds up one class. A pair whose notebook is gone from the source it came from, when that
source is read again for its assignment, is kept and marked stale, never deleted.

Submissions travel to the workers as bytes and feedback comes back as bytes, so the same
tasks run in-process, in a local process pool (``jobs``) or on a Dask cluster
(``scheduler``), with the same results.
"""

from __future__ import annotations

import sys
import uuid
from concurrent.futures import as_completed
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Sequence

from ..course import empty_gradebook, list_assignments
from ..settings import CELL_TIMEOUT_S, MEMORY_LIMIT_BYTES, SOLUTIONS_DIR, GradingLimits
from .cache import AUTOGRADED_DIR, CACHE_FILE, FEEDBACK_DIR, RECORD_FILE, GradingCache, Recorded, TermRecord, fingerprint
from .class_report import write_class_report
from .deadlines import Deadlines, apply_deadlines
from .executors import grading_executor
from .gradebook_export import check_gradebook_url, export_to_gradebook, read_gradebook, with_gradebook_grades
from .intake import (
    DEFAULT_STUDENT_PATTERN,
    Handin,
    Intake,
    Received,
    handed_in,
    opened_sources,
    shown_source,
    student_regex,
    take_in_all,
)
from .models import (
    STALE_NOTE,
    AssignmentSpec,
    GradebookExport,
    Graded,
    GradeRow,
    GradingOptions,
    GradingResults,
    HealthCheckFailed,
    Kind,
    Outcome,
    Submission,
    SubmissionResult,
    SubmittedAt,
)
from .reports import write_csvs, write_summary
from .sandbox import sandbox_problem, sandbox_remedy
from .scheduling import ChunkQueue, chunk_size
from .worker import GradingBatch, not_handed_in, snapshot, ungraded


@dataclass(frozen=True)
class GradeSettings:
    """Everything ``grade`` may be told, in one object (the command line's options, as data)."""

    assignments: list[str] | None = None  # None: every assignment handed in
    solutions_dir: Path = SOLUTIONS_DIR
    feedback: bool = True
    progress: bool = True
    jobs: int = 1
    scheduler: str | None = None  # a Dask scheduler's address
    student_pattern: str = DEFAULT_STUDENT_PATTERN
    cell_timeout: int = CELL_TIMEOUT_S
    memory_limit: int | None = MEMORY_LIMIT_BYTES
    reuse: bool = True
    sandbox: bool = True
    gradebook: str | None = None  # an nbgrader gradebook's SQLAlchemy URL
    course_dir: Path | None = None  # whose autograded/ gets the graded notebooks (default: the working folder)
    roster: list[str] | None = None
    deadlines: Deadlines | None = None

    @property
    def options(self) -> GradingOptions:
        """What each worker needs to grade one notebook."""
        limits = GradingLimits(cell_timeout=self.cell_timeout, memory_bytes=self.memory_limit, sealed=self.sandbox)
        return GradingOptions(limits, feedback=self.feedback)


@dataclass
class ClassPlan:
    """What the sources hold, placed: a submission per (student, assignment) pair to grade, the files placed nowhere,
    and what the term's record keeps instead of grading (a pair with nothing here, or a later hand-in elsewhere)."""

    specs: dict[str, AssignmentSpec]  # the assignments graded, in course order
    pairs: list[tuple[str, str]]  # (student, assignment) graded now, in class order
    todo: list[Submission]
    unplaced: list[tuple[str, GradeRow]]  # (source, row)
    handed_in_at: dict[tuple[str, str], SubmittedAt]
    course_specs: dict[str, AssignmentSpec] = field(default_factory=dict)  # every assignment of the course
    sources: dict[tuple[str, str], str] = field(default_factory=dict)  # pair -> the source its notebook came from
    read: list[str] = field(default_factory=list)  # every source read, those found inside the ones given too
    remarks: dict[tuple[str, str], str] = field(default_factory=dict)  # pair -> a remark for its record entry


def grade(submissions: Path | Sequence[Path], out: Path, settings: GradeSettings | None = None, **changes: object) -> GradingResults:
    """Grade everything in ``submissions`` (one source, or several: one class); write CSVs and feedback under ``out``.

    ``settings`` (or its fields, given by name) say how. ``jobs`` > 1 grades in that many local processes,
    each with its own scratch course; ``scheduler`` (a Dask scheduler address) sends the same tasks to a Dask
    cluster. The scores and the order of the rows are the same either way. With ``reuse``, a pair whose
    notebook, solutions, grader code and options are unchanged since the last run into ``out`` keeps its rows
    and feedback and is not graded again. With a ``roster`` (``read_roster``), every student on it gets a row
    for every assignment graded, ``missing`` where nothing came in, and a student who handed in but is not on
    it is graded with a note saying so. With ``deadlines`` (``load_deadlines``), a row handed in after its due
    date loses the late policy's share of its score (the cache keeps the score the tests gave). With
    ``gradebook``, the scores go into that nbgrader gradebook and the graded notebooks into ``course_dir``'s
    ``autograded/`` folder, for formgrader and ``nbgrader generate_feedback``. Local workers are spawned, so a
    script that passes ``jobs`` > 1 needs the ``if __name__ == "__main__":`` guard.

    Several sources are merged by student and hand-in time (``intake.take_in_all``); a source with no notebook of
    the course is an error. ``out`` keeps the term (``cache.TermRecord``): the results returned are this run's
    pairs, and ``GradingResults.term`` every row ``out`` now holds, which the CSVs and reports are written from.

    Each notebook runs sealed in a bubblewrap sandbox; where none can start, grading refuses unless
    ``sandbox`` is False (``--no-sandbox``), and then every row says it was unsealed. A health check grades each
    assignment's known solution before its first submission (once per run), and again on each worker after its
    last grade; if one fails, the rows of that worker say so, score nothing, and ``HealthCheckFailed`` is raised.
    """
    settings = replace(settings or GradeSettings(), **changes)  # type: ignore[arg-type]
    # Now, before grading moves the working folder: relative paths and URLs mean what the instructor meant.
    sources = [Path(source).resolve() for source in ([submissions] if isinstance(submissions, (str, Path)) else submissions)]
    out = out.resolve()
    settings = replace(settings, course_dir=(settings.course_dir or Path.cwd()).resolve())
    settings = _checked(sources, out, settings)
    known = list_assignments(settings.solutions_dir)
    record = TermRecord(out / RECORD_FILE, known)
    with opened_sources(sources, student_pattern=settings.student_pattern, known=known) as received:
        plan = _plan(received, settings, record)
    out.mkdir(parents=True, exist_ok=True)
    cache = GradingCache(out / CACHE_FILE, fingerprint(settings.solutions_dir, settings.options))
    report, fresh = _reused(cache, record, plan.todo, settings.reuse, out)
    files = {pair: record.entries[pair].files for pair in {r.pair for r in report.results}}
    finished, failure = _grade_fresh(fresh, plan, settings, done=report.reused)
    for graded in finished:
        files[graded.result.pair] = _record(graded, report, cache, out)
    cache.save()
    in_class_order(report, plan.pairs, plan.specs)
    _enter(record, report, plan, files, out)
    record.save()
    _hold_to_deadlines(report, record, plan, settings.deadlines or Deadlines())
    if settings.gradebook and failure is None:
        report.gradebook = _export(report, settings, out)
        # Once a person has graded in the gradebook, its score is the truth: grades.csv, the class report and the LMS
        # file say what the student's feedback says.
        truth = read_gradebook(settings.gradebook)
        report.term = [replace(r, grade=g) for r, g in zip(report.term, with_gradebook_grades([r.grade for r in report.term], truth))]
    _write_reports(report, record, plan, out)
    if failure is not None:
        raise failure
    return report


def _checked(sources: list[Path], out: Path, settings: GradeSettings) -> GradeSettings:
    """``settings`` with a relative gradebook path made absolute, once the inputs and the sandbox are checked."""
    _check_paths(sources, out, settings.solutions_dir)
    student_regex(settings.student_pattern)
    if settings.gradebook:
        settings = replace(settings, gradebook=check_gradebook_url(settings.gradebook))
    if settings.sandbox and settings.scheduler is None and (problem := sandbox_problem()):
        raise ValueError(f"cannot seal the grading runs here: {problem}; {sandbox_remedy(problem)}, or pass --no-sandbox to grade unsealed")
    known = list_assignments(settings.solutions_dir)
    unknown = sorted(set(settings.assignments or []) - set(known))
    if unknown:
        raise ValueError(f"unknown assignment(s) {unknown}; the course has {known}")
    return settings


def _plan(received: list[list[Received]], settings: GradeSettings, record: TermRecord) -> ClassPlan:
    """Place every file received; one submission per (student, assignment) pair to grade, unless the record keeps it."""
    known = list_assignments(settings.solutions_dir)
    all_specs = {name: AssignmentSpec.load(settings.solutions_dir, name) for name in known}
    functions = {name: set(spec.functions) for name, spec in all_specs.items()}
    intake = take_in_all(received, known, functions, settings.student_pattern)
    names = settings.assignments or sorted({a for _, a in intake.chosen} | {a for _, a in intake.refused})
    students = sorted(set(intake.students) | set(settings.roster or ()))
    read = [r.label for given in received for r in given]
    remarks = _stale(record, intake, names, read)
    pairs = []
    for pair in ((s, n) for s in students for n in names):
        kept = _kept_instead(record.entries.get(pair), intake, pair, read)
        if kept is None:
            pairs.append(pair)
        elif kept:
            remarks[pair] = kept
    unplaced = [(h.source, _unplaced_row(h, why, all_specs)) for h, why in intake.unplaced]
    unplaced += [(h.source, _unplaced_row(h, why, all_specs, Kind.REFUSED)) for h, why in intake.unplaced_refused]
    return ClassPlan(
        specs={name: all_specs[name] for name in names},
        pairs=pairs,
        todo=[_submission(intake, student, name, settings.roster) for student, name in pairs],  # refused: content None
        unplaced=unplaced,
        handed_in_at={pair: h.submitted_at for pair, h in intake.chosen.items() if h.submitted_at is not None},
        course_specs=all_specs,
        sources={pair: intake.source_of(pair) for pair in pairs},
        read=read,
        remarks=remarks,
    )


def _stale(record: TermRecord, intake: Intake, names: list[str], read: list[str]) -> dict[tuple[str, str], str]:
    """Pairs an earlier run graded from a source read again now, for an assignment graded now, whose notebook is no
    longer there: kept, with a remark that says so."""
    return {
        pair: f"{STALE_NOTE}graded {entry.graded_on} from {entry.received_as!r} in {shown_source(entry.source)}, which is no "
        "longer there; kept until it is graded again"
        for pair, entry in record.entries.items()
        if entry.handed_in and pair[1] in names and entry.source in read and pair not in intake.chosen and pair not in intake.refused
    }


def _kept_instead(earlier: Recorded | None, intake: Intake, pair: tuple[str, str], read: list[str]) -> str | None:
    """None when the pair is to be graded now; else the record keeps its earlier entry, with this remark ('' keeps
    the remark it had). Kept: a pair with nothing handed in now, once something was; and a pair handed in now whose
    entry came from a source not read now with a later hand-in, not stale (the latest hand-in wins, across runs as
    within one)."""
    if earlier is None or not earlier.handed_in:
        return None
    handin = intake.chosen.get(pair)
    if handin is None and pair not in intake.refused:
        return ""  # nothing came in for it now: its stale remark, if its source was read, comes from _stale
    if earlier.source in read or earlier.remark.startswith(STALE_NOTE):
        return None  # its own source was read again (what is there now is graded), or its notebook is gone from there
    if handin is None:  # a file refused now (a link, too large) does not replace a notebook read before
        if earlier.result.grade.outcome.kind is Kind.REFUSED:
            return None
        return f"also received in {shown_source(intake.source_of(pair))}, not read ({intake.refused[pair]}): this earlier row is kept"
    if earlier.submitted_at is not None and (handin.submitted_at is None or earlier.submitted_at.time > handin.submitted_at.time):
        return (
            f"also handed in as {handin.received_as!r} in {shown_source(handin.source)} ({handed_in(handin.submitted_at)}), not "
            f"graded: the hand-in graded {earlier.graded_on} from {shown_source(earlier.source)} ({handed_in(earlier.submitted_at)}) "
            "is later"
        )
    return None


def _reused(
    cache: GradingCache, record: TermRecord, todo: list[Submission], reuse: bool, out: Path
) -> tuple[GradingResults, list[Submission]]:
    """The rows an earlier run into OUT already gave (nothing they depend on changed, and OUT still holds the pair's
    files), and what is left to grade."""
    report, fresh = GradingResults(), []
    for submission in todo:
        hit = cache.get(submission) if reuse else None
        if hit is None or not record.files_present((submission.student, submission.assignment), cache.key(submission), out):
            fresh.append(submission)
        else:
            report.results.append(SubmissionResult(hit[0], tuple(hit[1])))
            report.reused += 1
    return report, fresh


def _grade_fresh(
    fresh: list[Submission], plan: ClassPlan, settings: GradeSettings, done: int
) -> tuple[list[Graded], HealthCheckFailed | None]:
    """Grade what is new: a pair with no notebook here, the rest on the workers. With a failed health check, the
    rows a broken worker gave, or that no worker gave, are replaced by rows that say so."""
    specs = plan.specs
    finished: list[Graded] = [_not_read(s, specs[s.assignment]) for s in fresh if s.content is None]
    handed_in = [s for s in fresh if s.content is not None]
    names = list(specs)
    batch = GradingBatch(snapshot(settings.solutions_dir, names), settings.options, gradebook=empty_gradebook())
    failure: HealthCheckFailed | None = None
    try:
        run = _run(
            batch, handed_in, jobs=settings.jobs, scheduler=settings.scheduler, progress=settings.progress, done=done + len(finished)
        )
        finished.extend(run)
    except HealthCheckFailed as failed:
        failure = failed
    if failure is None:
        return finished, None
    broken = _broken_workers(failure)
    graded_pairs = {(g.submission.student, g.submission.assignment) for g in finished}
    finished += [_unverified(s, specs[s.assignment], str(failure)) for s in fresh if (s.student, s.assignment) not in graded_pairs]
    vouched = [
        _unverified(g.submission, specs[g.submission.assignment], str(failure))
        if g.submission.content is not None  # a missing notebook's row needs no grader to vouch for it
        and (g.worker in broken or "*" in broken)
        and g.result.grade.outcome.kind is not Kind.HEALTH_CHECK_FAILED
        else g
        for g in finished
    ]
    return vouched, failure


def _record(graded: Graded, report: GradingResults, cache: GradingCache, out: Path) -> tuple[str, ...]:
    """One graded pair into the results, its files into OUT and its rows into the cache (unless a health check failed);
    the files written, relative to OUT."""
    grade_row = graded.result.grade
    for stage, seconds in graded.stages.items():
        report.stages[stage] = report.stages.get(stage, 0.0) + seconds
    report.results.append(graded.result)
    files = [(FEEDBACK_DIR, filename, html) for filename, html in graded.feedback.items()]
    if graded.autograded:
        files.append((AUTOGRADED_DIR, f"{grade_row.assignment}.ipynb", graded.autograded))
    for folder, filename, content in files:
        target = out / folder / grade_row.student_id / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    if grade_row.outcome.kind is not Kind.HEALTH_CHECK_FAILED:
        cache.put(graded.submission, grade_row, list(graded.result.tests))
    return tuple(f"{folder}/{grade_row.student_id}/{filename}" for folder, filename, _ in files)


def _enter(record: TermRecord, report: GradingResults, plan: ClassPlan, files: dict[tuple[str, str], tuple[str, ...]], out: Path) -> None:
    """This run's pairs into the term's record (in place of their earlier entries), its remarks on the entries it
    kept, and the files placed nowhere of each source it read in place of those an earlier run found there."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    submissions = {(s.student, s.assignment): s for s in plan.todo}
    for result in report.results:
        submission = submissions[result.pair]
        entry = Recorded(
            result,
            key=GradingCache.key(submission),
            source=plan.sources.get(result.pair, ""),
            received_as=submission.received_as or "",
            submitted_at=plan.handed_in_at.get(result.pair),
            files=files.get(result.pair, ()),
            graded_on=now,
        )
        record.enter(entry, out)
    for pair, remark in plan.remarks.items():
        if pair in record.entries:
            record.entries[pair] = replace(record.entries[pair], remark=remark)
    for source in plan.read:
        record.unplaced[source] = [row for found_in, row in plan.unplaced if found_in == source]
        if not record.unplaced[source]:
            del record.unplaced[source]


def _hold_to_deadlines(report: GradingResults, record: TermRecord, plan: ClassPlan, deadlines: Deadlines) -> None:
    """Every row of the term held to its due date as course.toml has it now, each entry's remark after its notes:
    ``report.term`` in class order, and this run's results the same rows, in theirs."""
    order = {name: i for i, name in enumerate(plan.course_specs)}
    entries = sorted(record.entries.values(), key=lambda e: (e.result.grade.student_id, order.get(e.result.grade.assignment, len(order))))
    times = {pair: e.submitted_at for pair, e in record.entries.items() if e.submitted_at is not None}
    held = apply_deadlines([e.result.grade for e in entries], times, deadlines)
    term = [replace(e.result, grade=_remarked(row, e.remark)) for e, row in zip(entries, held)]
    by_pair = {r.pair: r for r in term}
    unplaced = [SubmissionResult(row) for _, row in plan.unplaced]
    report.results = [by_pair[r.pair] for r in report.results] + unplaced
    kept_unplaced = [SubmissionResult(row) for source, rows in record.unplaced.items() if source not in plan.read for row in rows]
    report.term = term + unplaced + kept_unplaced


def _remarked(row: GradeRow, remark: str) -> GradeRow:
    return replace(row, outcome=replace(row.outcome, notes=(*row.outcome.notes, remark))) if remark else row


def _write_reports(report: GradingResults, record: TermRecord, plan: ClassPlan, out: Path) -> None:
    """grades.csv, tests.csv, the summary and the class report, of the whole term."""
    term = GradingResults(report.term)
    specs = {name: spec for name, spec in plan.course_specs.items() if any(r.assignment == name for r in term.grades)}
    write_csvs(term, out)
    write_summary(term.results, specs, out)
    write_class_report(term.results, specs, out, _notebooks(record, plan, out))  # similarity reads the notebooks handed in


def _notebooks(record: TermRecord, plan: ClassPlan, out: Path) -> list[Submission]:
    """The notebook of every pair of the term, for similarity: as handed in now, else the graded one OUT keeps."""
    now = {(s.student, s.assignment) for s in plan.todo}
    kept = [
        Submission(student, assignment, (out / name).read_bytes())
        for (student, assignment), entry in record.entries.items()
        if (student, assignment) not in now
        for name in entry.files
        if name.startswith(f"{AUTOGRADED_DIR}/") and (out / name).is_file()
    ]
    return plan.todo + kept


def _export(report: GradingResults, settings: GradeSettings, out: Path) -> GradebookExport:
    assert settings.gradebook is not None
    autograded = {
        (row.student_id, row.assignment): path
        for row in report.grades
        if (path := out / AUTOGRADED_DIR / row.student_id / f"{row.assignment}.ipynb").is_file()
    }
    return export_to_gradebook(
        settings.gradebook, report.results, settings.solutions_dir, autograded=autograded, course_dir=settings.course_dir
    )


def _broken_workers(failure: HealthCheckFailed | None) -> set[str]:
    """The workers a failed health check names ("*": it could not tell, so all of them)."""
    if failure is None:
        return set()
    worker = getattr(failure, "worker", "")
    return {worker} if worker else {"*"}


def _unverified(submission: Submission, spec: AssignmentSpec, why: str) -> Graded:
    """The row of a pair that a broken grader did not, or must not, grade: zero, and why."""
    outcome = Outcome(Kind.HEALTH_CHECK_FAILED, why.removeprefix(f"{Kind.HEALTH_CHECK_FAILED.value} ")[:300] or "the run stopped")
    return ungraded(submission, spec, outcome)


def _check_paths(sources: list[Path], out: Path, solutions_dir: Path) -> None:
    for submissions in sources:
        if not submissions.exists():
            raise ValueError(f"submissions folder not found: {submissions}")
        if submissions.is_file() and submissions.suffix.lower() != ".zip":
            raise ValueError(f"{submissions} is a file but not a .zip: pass a folder or a zip of the submissions")
        if out == submissions or submissions in out.parents or out in submissions.parents:
            raise ValueError(f"--out ({out}) and the submissions ({submissions}) must not contain each other")
    for first in sources:
        for second in sources:
            if first is not second and (first == second or first in second.parents):
                raise ValueError(f"{second} is given twice, or inside {first}: name each source once")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    if not solutions_dir.is_dir():
        raise ValueError(f"no solutions folder at {solutions_dir}: run the autograder from a checkout of the course repository")


def _submission(intake: Intake, student: str, name: str, roster: list[str] | None = None) -> Submission:
    handin: Handin | None = intake.chosen.get((student, name))
    if handin is None:
        return Submission(student, name, content=None, received_as=None, refused=intake.refused.get((student, name), ""))
    notes = handin.notes + (("not on the roster",) if roster is not None and student not in roster else ())
    return Submission(student, name, content=handin.path.read_bytes(), received_as=handin.received_as, notes=notes)


def _not_read(submission: Submission, spec: AssignmentSpec) -> Graded:
    """The row of a pair with no notebook to grade: refused (with why) when its file was received but not read."""
    if submission.refused:
        return ungraded(submission, spec, Outcome(Kind.REFUSED, submission.refused))
    return not_handed_in(submission, spec)


def _unplaced_row(handin: Handin, why: str, specs: dict[str, AssignmentSpec], kind: Kind = Kind.UNIDENTIFIED) -> GradeRow:
    spec = specs.get(handin.assignment or "")
    outcome = Outcome(kind, why)
    return GradeRow(handin.student or handin.received_as, handin.assignment or "?", 0.0, spec.max_score if spec else 0.0, outcome)


def _run(batch: GradingBatch, todo: list[Submission], *, jobs: int, scheduler: str | None, progress: bool, done: int) -> Iterator:
    """Grade ``todo`` in-process, in a local pool or on a cluster; yield results as they finish."""
    from tqdm import tqdm

    with tqdm(
        total=len(todo) + done, initial=done, desc="grading", unit="notebook", file=sys.stderr, disable=None if progress else True
    ) as bar:
        if not todo:
            return
        with grading_executor(jobs, scheduler) as (executor, workers):
            if executor is None:
                yield from batch(todo, on_graded=lambda: bar.update(1), end_check=True)
                return
            yield from grade_in_pool(executor, workers, batch, todo, bar, local=scheduler is None)


def grade_in_pool(executor, workers: int, batch: GradingBatch, todo: list[Submission], bar, *, local: bool) -> Iterator[Graded]:
    """Grade ``todo`` on ``workers`` pool (``local``) or cluster workers; then each must pass its end-of-run health check."""
    batch = replace(batch, run_id=uuid.uuid4().hex)  # each worker keeps one course for all its tasks
    queue = ChunkQueue.of(todo, chunk_size(len(todo), workers, local=local))
    # One task per worker at a time: the worker that finishes is the one free to take the next,
    # so it gets more of what it has already set up (autograder.grading.scheduling).
    futures: dict = {}  # future -> the assignment of its chunk, or None for an end-of-run health check
    started: set[str] = set()  # assignments whose known solution a worker grades before its first chunk

    def submit(chunk: list[Submission]) -> None:
        # The start check fails fast, so once per assignment is enough; each worker's own rows are
        # vouched for by its end-of-run check, which comes after its last grade.
        assignment = chunk[0].assignment
        futures[executor.submit(batch, chunk, start_check=assignment not in started)] = assignment
        started.add(assignment)

    while len(futures) < workers and (chunk := queue.take()):
        submit(chunk)
    seen: dict[str, set[str]] = {}  # worker -> the assignments it has set up
    checked: set[str] = set()
    while futures:
        future = next(as_completed(futures))
        assignment = futures.pop(future)
        if assignment is None:
            checked.add(future.result())
            continue
        queue.done(assignment)
        results = future.result()
        bar.update(len(results))
        for result in results:
            seen.setdefault(result.worker, set()).add(assignment)
        worker = results[0].worker if results else ""
        if chunk := queue.take(assignment, seen.get(worker, set())):
            submit(chunk)
        elif worker not in checked:
            # Nothing left to hand out: the worker that is free now checks itself while the others finish.
            futures[executor.submit(batch.check_health)] = None
        yield from results
    _end_checks(executor, batch, set(seen) - checked, workers)


def _end_checks(executor, batch: GradingBatch, workers_seen: set[str], workers: int) -> None:
    """Ask each worker that graded something, and has not been checked since, to grade the known solution once more.

    A pool hands tasks to whichever worker is free, so checks are sent until every worker
    seen has answered (or too many tries went to others: then that, too, is a failure). The first
    round sends one check per worker missing; a later one sends one per worker of the pool, so
    that every idle worker takes one and none is passed over by another that answers first.
    """
    checked: set[str] = set()
    for attempt in range(4 * max(workers, 1)):
        if workers_seen <= checked:
            return
        count = len(workers_seen - checked) if attempt == 0 else max(workers, len(workers_seen - checked))
        futures = [executor.submit(batch.check_health) for _ in range(max(1, count))]
        for future in futures:
            checked.add(future.result())
    missing = sorted(workers_seen - checked)
    if missing:
        failure = HealthCheckFailed(f"{Kind.HEALTH_CHECK_FAILED.value}: no end-of-run check could reach {', '.join(missing)}")
        failure.worker = missing[0]
        raise failure


def in_class_order(report: GradingResults, pairs: list[tuple[str, str]], specs: dict[str, AssignmentSpec]) -> None:
    """The same order whatever ran where, and whenever it finished: ``pairs`` (students, then
    assignments in course order), and each pair's tests in notebook order."""
    order = {pair: i for i, pair in enumerate(pairs)}
    report.results.sort(key=lambda r: order[r.pair])
    report.results = [
        replace(r, tests=tuple(sorted(r.tests, key=lambda t: list(specs[t.assignment].tests).index(t.test)))) for r in report.results
    ]
