"""The class report an instructor opens after grading: ``class-report.html``, and the same data as ``class-report.json``.

``ClassReport`` is this page's data (models.py maps the flow of a result up to here, and the other "report" names).

Four sections, from the submissions' results (the rows of ``grades.csv`` and ``tests.csv``) and the notebooks handed in:

* **Scores**: per notebook how many were handed in late and the points that cost, the distribution (a histogram drawn with matplotlib, embedded as a PNG),
  mean and median; per question (test) the mean, the share with full marks and the discrimination,
  the correlation of the question's score with the notebook's total over the scored submissions
  (as PrairieLearn's question statistics give it; "n/a" when fewer than ``statistics.MIN_FOR_DISCRIMINATION``
  submissions were scored or either score does not vary). Every number of this section is
  ``autograder.grading.statistics``'s, the same that ``summary.md`` shows.
* **Misconceptions**: how many students' failures match each catalogued mistake
  (``TestRow.misconceptions``, as the trusted pass named them), most common first, with the tests they came from.
* **Similar code**: pairs of submissions of the same notebook whose code in the solution cells is
  unusually alike, found with copydetect (winnowing, MOSS's algorithm). The released notebook's code
  is given to it as boilerplate, so the given code and the stubs do not count, and variable names do
  not matter (copydetect compares tokens, names replaced). A pair is shown when at least
  ``SIMILARITY_THRESHOLD`` of either student's own code, and at least ``MIN_OVERLAP_TOKENS`` tokens,
  appear in the other's; the overlapping code is shown side by side. A pair is a reason to look,
  not a verdict: short functions written from the same notebook can converge. A submission whose solution
  cells repeat the code of one of the course package's own answers to that notebook (a stand-in or
  reference declared with ``@answers``, ``course_utils.tripwires``) is listed as copied from the course
  package: the grade refuses those answers when they run, but cannot see their text copied.
* **Not graded, or stopped by a limit**: rows that scored nothing from the tests (not handed in,
  unreadable, refused, a failed run...), scored rows whose notes name a limit, and rows an earlier run gave that OUT
  keeps stale (their notebook is gone from its source), with their status.

``grade`` writes the report of the term: every row OUT holds, the rows of earlier runs into it too (``GradingResults.term``);
a pair graded before reads its notebook from OUT's graded copy for the similarity.

The page is one self-contained file: no script at all (a Content-Security-Policy forbids any),
no external resource; it opens from disk. Every string that came from a submission (student ids,
file names, code, statuses) is escaped by the template (Jinja2 autoescape), and copydetect's
highlighted code, the only HTML that is not the template's, goes through nh3's allow-list too.
"""

from __future__ import annotations

import ast
import base64
import inspect
import io
import json
import re
import tempfile
import textwrap
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from course_utils.notebook_cells import assignment_notebook, cell_source, solution_cells

from ..settings import NOTEBOOKS_DIR, SOLUTIONS_DIR
from .admission import repair
from .models import STALE_NOTE, AssignmentSpec, GradeRow, Misconception, Submission, SubmissionResult
from .statistics import BIN_EDGES, BIN_WIDTH, MIN_FOR_DISCRIMINATION, NotebookStats, QuestionStats, notebook_stats

CLASS_REPORT_HTML = "class-report.html"
CLASS_REPORT_JSON = "class-report.json"
SCHEMA = "attention-course/class-report"
SCHEMA_VERSION = 1
TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates" / "class_report"

# Similarity. These are the report's own constants (not course settings): change them here.
# copydetect's "tokens" are characters of the code after tokenizing (names become V/F/O, strings S,
# comments and spaces dropped); 25 of them (its default noise and guarantee threshold) are about one
# line of code, so a match shorter than a line is never counted and every match of a line or more is.
NOISE_TOKENS = 25
# Shown when at least half of either student's own code (what is left after the template's code is
# removed) also appears in the other's. copydetect's default display threshold is 0.33; the functions of
# this course are short and built from the same few tensor idioms, so independent solutions share more
# than in a typical programming class, and a third would flag honest pairs.
SIMILARITY_THRESHOLD = 0.5
# ... and the overlap is at least this many tokens (about four lines): two students who each wrote one
# identical line are 100 % alike and tell nothing.
MIN_OVERLAP_TOKENS = 100
CONTEXT_LINES = 10  # lines of unmatched code kept around each match in the side-by-side view
# copydetect's cost grows with the code it is given (about 10 s per MiB of one student's code here), so each
# student's code is cut at this many times the solution's, and the report names whom it cut.
MAX_CODE_FACTOR = 4
MAX_PAIRS_WITH_CODE = 50  # the most alike pairs show their code side by side; the table and the JSON list all
# A submission repeats one of the course's own answers when this share of the answer's body (the template's code
# left out) appears in its solution cells, at least MIN_OVERLAP_TOKENS of it: a one-line answer (torch_causal_mask),
# which an honest student may well write alike, is never listed.
COURSE_COPY_SHARE = 0.8

# A note that says a run was stopped by, or hit, a limit (time, memory, processes, output), or did not finish.
LIMIT_NOTE = re.compile(r"\blimits?\b|out of memory|did not run to the end|was stopped", re.IGNORECASE)
HIGHLIGHT_CLASSES = {"highlight-red", "highlight-green"}


# --- data ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MisconceptionCount:
    """How many students' failures match one catalogued mistake: the ``Misconception`` the test rows carry, counted."""

    assignment: str
    misconception: Misconception
    students: int  # distinct students whose failures match it
    tests: list[str]  # the tests it came from, in notebook order

    @property
    def name(self) -> str:
        return self.misconception.name

    @property
    def section(self) -> str:
        return self.misconception.section

    def to_json(self) -> dict[str, Any]:
        """As schema 1 has it: the misconception's fields beside the count's."""
        return {"assignment": self.assignment, "name": self.name, "students": self.students, "tests": self.tests, "section": self.section}


@dataclass(frozen=True)
class SimilarPair:
    assignment: str
    first: str  # student ids
    second: str
    first_share: float  # share of the first student's own code found in the second's, 0..1
    second_share: float
    overlap_tokens: int
    first_matches: list[str]  # the overlapping code, as each wrote it
    second_matches: list[str]
    first_html: str = field(default="", repr=False)  # the code with the matches highlighted, sanitised HTML
    second_html: str = field(default="", repr=False)


@dataclass(frozen=True)
class CopiedFromCourse:
    """A submission whose solution cells repeat the code of one of the course package's own answers to its notebook."""

    assignment: str
    student: str
    answer: str  # as the course names it: "torch_rope (course_utils.model_stand_ins)"
    share: float  # share of the answer's code found in the student's, 0..1
    overlap_tokens: int
    matches: list[str]  # the student's code that repeats it


@dataclass(frozen=True)
class Similarity:
    threshold: float = SIMILARITY_THRESHOLD
    min_overlap_tokens: int = MIN_OVERLAP_TOKENS
    noise_tokens: int = NOISE_TOKENS
    compared: dict[str, int] = field(default_factory=dict)  # assignment -> submissions compared
    pairs: list[SimilarPair] = field(default_factory=list)  # most alike first
    notes: list[str] = field(default_factory=list)  # what could not be compared, and why
    copied: list[CopiedFromCourse] = field(default_factory=list)  # repeats of the course package's own answers


@dataclass(frozen=True)
class Problem:
    student_id: str
    assignment: str
    kind: str
    status: str
    scored: bool  # True: scored, but a note names a limit


@dataclass(frozen=True)
class ClassReport:
    notebooks: list[NotebookStats]
    misconceptions: list[MisconceptionCount]
    similarity: Similarity
    problems: list[Problem]


# --- misconceptions and problems ----------------------------------------------------------------------


def misconceptions(results: list[SubmissionResult], specs: dict[str, AssignmentSpec]) -> list[MisconceptionCount]:
    """Named misconceptions of scored submissions per (notebook, misconception): most students first."""
    students: dict[tuple[str, Misconception], set[str]] = defaultdict(set)
    from_tests: dict[tuple[str, Misconception], set[str]] = defaultdict(set)
    for t in (t for r in results if r.grade.outcome.scored for t in r.tests):
        for named in t.misconceptions:  # every mistake that gives what the code gave
            students[(t.assignment, named)].add(t.student_id)
            from_tests[(t.assignment, named)].add(t.test)
    order = {name: i for i, name in enumerate(specs)}

    def test_order(assignment: str, test: str) -> tuple[int, str]:
        known = list(specs[assignment].tests) if assignment in specs else []
        return (known.index(test) if test in known else len(known), test)

    found = [
        MisconceptionCount(a, m, len(who), sorted(from_tests[(a, m)], key=lambda t, a=a: test_order(a, t)))
        for (a, m), who in students.items()
    ]
    return sorted(found, key=lambda m: (-m.students, order.get(m.assignment, len(order)), m.assignment, m.name))


def problems(grades: list[GradeRow]) -> list[Problem]:
    """Rows that scored nothing from the tests, scored rows whose notes name a limit, and rows kept stale (their
    notebook is gone from its source), in row order."""
    return [
        Problem(r.student_id, r.assignment, r.outcome.kind.value, r.status, r.outcome.scored)
        for r in grades
        if not r.outcome.scored or any(LIMIT_NOTE.search(note) or note.startswith(STALE_NOTE) for note in r.outcome.notes)
    ]


# --- similarity ------------------------------------------------------------------------------------------


def student_code(notebook: dict) -> str:
    """The code of a notebook's solution cells, in order, each under a comment naming its cell."""
    parts = []
    for grade_id, source in solution_cells(notebook).items():
        label = re.sub(r"[^\w.-]", "_", str(grade_id))[:80]
        parts.append(f"# --- {label}\n{source.rstrip()}\n")
    return "\n".join(parts)


def template_code(notebook: dict) -> str:
    """Every code cell of the released notebook: the given code and the stubs, copydetect's boilerplate."""
    return "\n\n".join(cell_source(c) for c in notebook["cells"] if c.get("cell_type") == "code")


def _read_notebook(content: bytes, released: Any = None) -> dict | None:
    """The notebook as grading read it: with ``released``, repaired as admission repairs it (stripped metadata
    restored), so a copy whose metadata was stripped is compared by the code that was graded."""
    try:
        notebook = json.loads(content.decode("utf-8"))
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            return None
        if released is not None:
            import nbformat

            notebook = repair(nbformat.reads(json.dumps(notebook), as_version=4), released)[0]
        solution_cells(notebook)  # a cell that does not have the expected shape: not comparable
        return notebook
    except Exception:  # noqa: BLE001 - an unreadable notebook is not compared; its grade row says why
        return None


def similar_pairs(
    submissions: Iterable[Submission],
    assignments: Iterable[str],
    notebooks_dir: Path = NOTEBOOKS_DIR,
    *,
    solutions_dir: Path = SOLUTIONS_DIR,
    threshold: float = SIMILARITY_THRESHOLD,
    min_overlap_tokens: int = MIN_OVERLAP_TOKENS,
    noise_tokens: int = NOISE_TOKENS,
) -> Similarity:
    """Pairs of submissions of the same notebook whose solution-cell code is alike, by copydetect.

    The notebooks are read from the submissions' bytes and repaired as grading repairs them; copydetect
    reads files, so each student's code (at most ``MAX_CODE_FACTOR`` times the solution's) and the
    template's are written to a temporary folder, removed when done.
    """
    by_assignment: dict[str, list[Submission]] = defaultdict(list)
    for submission in submissions:
        if submission.content is not None:
            by_assignment[submission.assignment].append(submission)
    result = Similarity(threshold=threshold, min_overlap_tokens=min_overlap_tokens, noise_tokens=noise_tokens)
    for assignment in assignments:
        template_path = assignment_notebook(notebooks_dir, assignment)
        released = _released(template_path)
        template = template_code(released) if released is not None else ""
        cap = _code_cap(solutions_dir, assignment)
        codes: dict[str, str] = {}
        unreadable, cut = 0, []
        for submission in by_assignment.get(assignment, []):
            notebook = _read_notebook(submission.content or b"", released)
            if notebook is None:
                unreadable += 1
                continue
            code = student_code(notebook)
            if cap is not None and len(code) > cap:
                code = code[:cap]
                cut.append(submission.student)
            codes.setdefault(submission.student, code)
        if unreadable:
            result.notes.append(f"{assignment}: {unreadable} notebook(s) could not be read and were not compared")
        if released is None:
            result.notes.append(f"{assignment}: no released notebook at {template_path}, so given code counts as the students' own")
        if cut:
            result.notes.append(
                f"{assignment}: only the first {cap:,} characters of code ({MAX_CODE_FACTOR} times the solution's) were compared "
                f"for {', '.join(sorted(cut))}"
            )
        result.compared[assignment] = len(codes)
        answers = course_answers(assignment)
        if len(codes) < 2 and not (codes and answers):
            continue
        try:
            pairs, copied = compare_code(assignment, codes, template, threshold, min_overlap_tokens, noise_tokens, answers)
            result.pairs.extend(pairs)
            result.copied.extend(copied)
        except ImportError:
            result.notes.append(f"{assignment}: not compared: copydetect is not installed (pip install 'attention-course[instructor]')")
        except Exception as problem:  # noqa: BLE001 - the grades are written; a report without similarity still helps
            result.notes.append(f"{assignment}: not compared: copydetect failed ({type(problem).__name__}: {str(problem)[:200]})")
    result.pairs.sort(key=lambda p: (-max(p.first_share, p.second_share), -p.overlap_tokens, p.assignment, p.first, p.second))
    result.copied.sort(key=lambda c: (c.assignment, c.student, c.answer))
    return result


def course_answers(assignment: str) -> dict[str, str]:
    """The code of each of the course package's own answers to a function ``assignment`` grades, by its course
    name, as copydetect should see it: the body as written after the docstring (the signature is the exercise's own,
    given to the student; copydetect compares tokens, brackets included, so nothing is unparsed)."""
    from course_utils.tripwires import declared_answers

    found = {}
    for fn, declared in declared_answers().items():
        if any(answer.notebook == assignment for answer in declared):
            lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
            node = ast.parse("\n".join(lines)).body[0]
            assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)), fn
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            found[f"{fn.__qualname__} ({fn.__module__})"] = textwrap.dedent("\n".join(lines[body[0].lineno - 1 :])) + "\n"
    return found


def _released(path: Path) -> Any:
    """The released notebook (an nbformat node), or None when there is none."""
    if not path.is_file():
        return None
    import nbformat

    return nbformat.read(path, as_version=4)


def _code_cap(solutions_dir: Path, assignment: str) -> int | None:
    """How much of one student's code similarity reads: ``MAX_CODE_FACTOR`` times the solution's (None: no solution)."""
    path = assignment_notebook(solutions_dir, assignment)
    if not path.is_file():
        return None
    return MAX_CODE_FACTOR * max(len(student_code(json.loads(path.read_text(encoding="utf-8")))), 1)


def compare_code(
    assignment: str,
    codes: dict[str, str],
    template: str,
    threshold: float,
    min_overlap: int,
    noise: int,
    answers: dict[str, str] | None = None,
) -> tuple[list[SimilarPair], list[CopiedFromCourse]]:
    """copydetect over one notebook's ``codes`` (student -> code), ``template`` as boilerplate: the pairs above the
    thresholds, and the students whose code repeats one of the course's ``answers`` (name -> code, references only:
    compared with each student, not with each other)."""
    import numpy as np
    from copydetect import CopyDetector
    from copydetect.utils import highlight_overlap

    students = list(codes)
    with tempfile.TemporaryDirectory(prefix="class-report-") as tmp:
        folder = Path(tmp)
        detector = CopyDetector(
            noise_t=noise,
            guarantee_t=noise,  # window 1: every fingerprint is kept, so every match of NOISE_TOKENS is found
            display_t=threshold,
            force_language="python",
            autoopen=False,
            silent=True,
            out_file=str(folder / "unused.html"),
        )
        paths = []
        for i, student in enumerate(students):  # file names by position: a student id never becomes a path
            path = folder / f"submission-{i:05d}.py"
            path.write_text(codes[student], encoding="utf-8")
            detector.add_file(str(path))
            paths.append(str(path))
        references = _add_references(detector, folder, answers or {})  # after the students: ref_files starts as test_files
        if template.strip():
            boilerplate = folder / "template.py"
            boilerplate.write_text(template, encoding="utf-8")
            detector.add_file(str(boilerplate), type="boilerplate")
        detector.run()
        index = {path: i for i, path in enumerate(detector.test_files)}
        pairs = []
        for a in range(len(students)):
            for b in range(a + 1, len(students)):
                i, j = index[paths[a]], index[paths[b]]
                share_a, share_b = (float(s) for s in detector.similarity_matrix[i, j])
                overlap = int(detector.token_overlap_matrix[i, j])
                if overlap <= 0 or max(share_a, share_b) < threshold or overlap < min_overlap:
                    continue
                if (paths[a], paths[b]) in detector.slice_matrix:
                    slices_a, slices_b = detector.slice_matrix[(paths[a], paths[b])]
                else:
                    slices_b, slices_a = detector.slice_matrix[(paths[b], paths[a])]
                code_a, code_b = detector.file_data[paths[a]].raw_code, detector.file_data[paths[b]].raw_code
                html_a, _ = highlight_overlap(code_a, slices_a, "<span class='highlight-red'>", "</span>", CONTEXT_LINES, True)
                html_b, _ = highlight_overlap(code_b, slices_b, "<span class='highlight-green'>", "</span>", CONTEXT_LINES, True)
                pairs.append(
                    SimilarPair(
                        assignment,
                        students[a],
                        students[b],
                        share_a,
                        share_b,
                        overlap,
                        [code_a[int(s) : int(e)] for s, e in np.asarray(slices_a).T],
                        [code_b[int(s) : int(e)] for s, e in np.asarray(slices_b).T],
                        clean_code_html(html_a),
                        clean_code_html(html_b),
                    )
                )
        copied = _repeats_of_answers(detector, assignment, dict(zip(students, paths)), dict(zip(answers or {}, references)), min_overlap)
    return pairs, copied


def _add_references(detector: Any, folder: Path, answers: dict[str, str]) -> list[str]:
    """Give ``detector`` each of the course's answers (name -> code) as a reference only: compared with each student,
    not with each other. Returns their files, in order."""
    paths = []
    for i, code in enumerate(answers.values()):
        path = folder / f"course-{i:03d}.py"
        path.write_text(code, encoding="utf-8")
        detector.add_file(str(path), type="ref")
        paths.append(str(path))
    return paths


def _repeats_of_answers(
    detector: Any, assignment: str, students: dict[str, str], answers: dict[str, str], min_overlap: int
) -> list[CopiedFromCourse]:
    """From a run copydetect ``detector``: the students (id -> file) whose code holds one of the course's answers
    (name -> reference file), at least ``COURSE_COPY_SHARE`` of it and ``min_overlap`` tokens."""
    import numpy as np

    tests = {path: i for i, path in enumerate(detector.test_files)}
    refs = {path: j for j, path in enumerate(detector.ref_files)}
    copied = []
    for student, path in students.items():
        for answer, reference in answers.items():
            i, j = tests[path], refs[reference]
            share = float(detector.similarity_matrix[i, j][1])  # of the answer's code, found in the student's
            overlap = int(detector.token_overlap_matrix[i, j])
            if share < COURSE_COPY_SHARE or overlap < min_overlap or (path, reference) not in detector.slice_matrix:
                continue
            code = detector.file_data[path].raw_code
            matches = [code[int(s) : int(e)] for s, e in np.asarray(detector.slice_matrix[(path, reference)][0]).T]
            copied.append(CopiedFromCourse(assignment, student, answer, share, overlap, matches))
    return copied


def clean_code_html(html: str) -> str:
    """copydetect's highlighted code through nh3: only the highlight spans survive, everything else is text."""
    import nh3

    return nh3.clean(html, tags={"span"}, attributes={}, allowed_classes={"span": HIGHLIGHT_CLASSES}, strip_comments=True)


# --- the report ------------------------------------------------------------------------------------------


def build_class_report(
    results: list[SubmissionResult],
    specs: dict[str, AssignmentSpec],
    submissions: Iterable[Submission] = (),
    notebooks_dir: Path = NOTEBOOKS_DIR,
) -> ClassReport:
    return ClassReport(
        notebooks=notebook_stats(results, specs),
        misconceptions=misconceptions(results, specs),
        similarity=similar_pairs(submissions, list(specs), notebooks_dir),
        problems=problems([r.grade for r in results]),
    )


def report_json(report: ClassReport) -> dict:
    """The report's data, no HTML: what the page shows, for a script or a spreadsheet."""
    notebooks = [
        {
            "assignment": n.assignment,
            "max_score": n.max_score,
            "scored": len(n.scores),
            "not_scored": n.not_scored,
            "late": n.late,
            "late_points": n.late_points,
            "mean": n.mean,
            "median": n.median,
            "scores": n.scores,
            "histogram": {"bin_width_percent": BIN_WIDTH, "counts": n.histogram},
            "questions": [question_json(q) for q in n.questions],
        }
        for n in report.notebooks
    ]
    similarity = report.similarity
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "notebooks": notebooks,
        "misconceptions": [m.to_json() for m in report.misconceptions],
        "similarity": {
            "method": "copydetect (winnowing), the released notebook's code as boilerplate",
            "threshold": similarity.threshold,
            "min_overlap_tokens": similarity.min_overlap_tokens,
            "noise_tokens": similarity.noise_tokens,
            "compared": similarity.compared,
            "notes": similarity.notes,
            "pairs": [{k: v for k, v in asdict(p).items() if k not in {"first_html", "second_html"}} for p in similarity.pairs],
            "copied_from_course": [asdict(c) for c in similarity.copied],
        },
        "problems": [asdict(p) for p in report.problems],
    }


def question_json(q: QuestionStats) -> dict[str, Any]:
    """One question as schema 1 has it (the share with full marks, not the count)."""
    keys = ("test", "points", "scored", "mean", "full_marks", "discrimination")
    return {key: getattr(q, key) for key in keys}


def _plot(stats: NotebookStats) -> str:
    """The score histogram, as a data: URL of a PNG (the page loads nothing from elsewhere)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4.4, 3.0), layout="constrained")
    ax = figure.subplots()
    ax.stairs(stats.histogram, BIN_EDGES, fill=True, color="#4c72b0")
    ax.set(xlim=(0, 100), xlabel="score (%)", ylabel="submissions", title=f"{stats.assignment}: score distribution")
    ax.title.set_fontsize(9)
    ax.yaxis.get_major_locator().set_params(integer=True)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def render_html(report: ClassReport) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined
    from markupsafe import Markup

    environment = Environment(loader=FileSystemLoader(TEMPLATE_DIR), autoescape=True, undefined=StrictUndefined)
    environment.filters["num"] = lambda v, digits=2: "n/a" if v is None else f"{v:.{digits}f}"
    environment.filters["pct"] = lambda v: "n/a" if v is None else f"{100 * v:.0f} %"
    plots = {n.assignment: _plot(n) for n in report.notebooks}
    # The only HTML not built by the template: copydetect's highlighting, already through nh3.
    shown = report.similarity.pairs[:MAX_PAIRS_WITH_CODE]
    code = [(Markup(clean_code_html(p.first_html)), Markup(clean_code_html(p.second_html))) for p in shown]
    return environment.get_template("report.html.j2").render(
        report=report,
        plots=plots,
        code=code,
        shown=shown,
        schema_version=SCHEMA_VERSION,
        min_for_discrimination=MIN_FOR_DISCRIMINATION,
        course_copy_share=COURSE_COPY_SHARE,
    )


def write_class_report(
    results: list[SubmissionResult],
    specs: dict[str, AssignmentSpec],
    out: Path,
    submissions: Iterable[Submission] = (),
    notebooks_dir: Path = NOTEBOOKS_DIR,
) -> Path:
    """Write class-report.html and class-report.json under ``out``; return the HTML's path."""
    report = build_class_report(results, specs, submissions, notebooks_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / CLASS_REPORT_JSON).write_text(json.dumps(report_json(report), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    path = out / CLASS_REPORT_HTML
    path.write_text(render_html(report), encoding="utf-8")
    return path
