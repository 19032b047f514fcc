"""What OUT keeps between runs: the rerun cache, and the term's record.

The cache (``GradingCache``) holds the rows of earlier runs keyed by everything they depend on, so a pair whose
notebook, solutions, grader code and options are unchanged is not graded again. The record (``TermRecord``) holds
every pair ever graded into OUT with its files, whatever the grader's code is now, so that results build up over the
term: a pair keeps its rows, feedback page and graded notebook until it is graded again.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..settings import REPO_ROOT
from .admission import SAFE_STUDENT_ID
from .models import GradeRow, GradingOptions, Kind, Outcome, Submission, SubmissionResult, SubmittedAt, TestRow

CACHE_FILE = ".grading-cache.json"


def fingerprint(solutions_dir: Path, options: GradingOptions) -> str:
    """What every grade depends on besides the notebook: grader code, solutions, options."""
    digest = hashlib.sha256(json.dumps(asdict(options), sort_keys=True).encode())
    for folder in (REPO_ROOT / "autograder", REPO_ROOT / "course_utils", solutions_dir):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in {".py", ".ipynb"} and ".ipynb_checkpoints" not in path.parts:
                digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class GradingCache:
    """Rows of earlier runs into the same OUT, keyed by everything that could change them."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.path, self.fingerprint = path, fingerprint
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = {}
        self.entries: dict[str, dict] = saved.get("entries", {}) if saved.get("fingerprint") == fingerprint else {}

    @staticmethod
    def key(submission: Submission) -> str:
        fields = asdict(submission)
        fields["content"] = hashlib.sha256(submission.content).hexdigest() if submission.content is not None else None
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()

    def get(self, submission: Submission) -> tuple[GradeRow, list[TestRow]] | None:
        entry = self.entries.get(self.key(submission))
        if entry is None:
            return None
        fields = dict(entry["grade"])
        fields["outcome"] = Outcome.from_json(fields["outcome"])
        return GradeRow(**fields), [TestRow.from_json(t) for t in entry["tests"]]

    def put(self, submission: Submission, grade_row: GradeRow, test_rows: list[TestRow]) -> None:
        grade = {**asdict(grade_row), "outcome": grade_row.outcome.to_json()}
        self.entries[self.key(submission)] = {"grade": grade, "tests": [t.to_json() for t in test_rows]}

    def save(self) -> None:
        self.path.write_text(json.dumps({"fingerprint": self.fingerprint, "entries": self.entries}, indent=0), encoding="utf-8")


# --- the term's record -------------------------------------------------------------------------------------

RECORD_FILE = ".grading-record.json"
RECORD_SCHEMA = "attention-course/grading-record"
RECORD_VERSION = 1
FEEDBACK_DIR = "feedback"  # OUT/feedback/STUDENT/NAME.html: each student's page
AUTOGRADED_DIR = "autograded"  # OUT/autograded/STUDENT/ASSIGNMENT.ipynb: the graded notebooks, for formgrader
SAFE_FILE_NAME = re.compile(r"^(?!\.)[A-Za-z0-9@._ -]+\.(?:html|ipynb)$")


@dataclass(frozen=True)
class Recorded:
    """One (student, assignment) pair as OUT keeps it across runs, until the pair is graded again."""

    result: SubmissionResult  # its rows as graded, before any late penalty: every run holds them to course.toml's due dates
    key: str = ""  # ``GradingCache.key`` of the submission graded: the rows and files are that notebook's
    source: str = ""  # the source its notebook came from ('' when none came)
    received_as: str = ""
    submitted_at: SubmittedAt | None = None
    files: tuple[str, ...] = ()  # its files in OUT, relative: feedback/STUDENT/NAME.html, autograded/STUDENT/NAME.ipynb
    graded_on: str = ""  # the time of the run that graded it, ISO 8601 in UTC
    remark: str = ""  # why a later run kept it as it was (stale; a later hand-in elsewhere), or what it replaced

    @property
    def handed_in(self) -> bool:
        """Something came in for it (graded, refused or unreadable alike): a row a run with nothing for it must keep."""
        return self.result.grade.outcome.kind is not Kind.MISSING


class TermRecord:
    """What OUT holds for the term: every pair ever graded into it, with its files, and the files placed nowhere per
    source. Read back on every run; grades.csv, tests.csv and the reports are written from it, so a run over one
    assignment or one source never removes another's rows."""

    def __init__(self, path: Path, known: list[str]) -> None:
        self.path = path
        self.entries: dict[tuple[str, str], Recorded] = {}
        self.unplaced: dict[str, list[GradeRow]] = {}  # source -> the rows of its files placed under no pair
        if path.exists():
            self._load(known)

    def _load(self, known: list[str]) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or (data.get("schema"), data.get("version")) != (RECORD_SCHEMA, RECORD_VERSION):
                raise ValueError(f"not {RECORD_SCHEMA} version {RECORD_VERSION}")
            for item in data["entries"]:
                recorded = _recorded_from_json(item, known)
                self.entries[recorded.result.pair] = recorded
            self.unplaced = {str(source): [_row_from_json(row) for row in rows] for source, rows in data["unplaced"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as problem:
            raise ValueError(
                f"{self.path} is not a grading record this autograder can read ({problem}): move it away to start a new record in this --out"
            ) from None

    def enter(self, recorded: Recorded, out: Path) -> None:
        """``recorded`` in place of the pair's earlier entry, whose files it does not write again are removed."""
        earlier = self.entries.get(recorded.result.pair)
        for name in set(earlier.files if earlier else ()) - set(recorded.files):
            (out / name).unlink(missing_ok=True)
            folder = (out / name).parent
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        self.entries[recorded.result.pair] = recorded

    def files_present(self, pair: tuple[str, str], key: str, out: Path) -> bool:
        """Whether OUT holds the pair's entry for the submission ``key`` with all its files: then its rows can be reused."""
        entry = self.entries.get(pair)
        return entry is not None and entry.key == key and all((out / name).is_file() for name in entry.files)

    def save(self) -> None:
        data = {
            "schema": RECORD_SCHEMA,
            "version": RECORD_VERSION,
            "entries": [_recorded_json(entry) for entry in self.entries.values()],
            "unplaced": {source: [_row_json(row) for row in rows] for source, rows in self.unplaced.items()},
        }
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(data, indent=0, ensure_ascii=False), encoding="utf-8")
        partial.replace(self.path)  # a run stopped while writing leaves the last record whole


def _row_json(row: GradeRow) -> dict:
    return {
        "student_id": row.student_id,
        "assignment": row.assignment,
        "score": row.score,
        "max_score": row.max_score,
        "outcome": row.outcome.to_json(),
    }


def _row_from_json(data: dict) -> GradeRow:
    """A grade row as the record wrote it (no lateness: that is applied on every run), its values checked."""
    if set(data) != {"student_id", "assignment", "score", "max_score", "outcome"}:
        raise ValueError(f"a grade row with fields {sorted(data)}")
    outcome = data["outcome"]
    if not isinstance(outcome.get("reason", ""), str) or not all(isinstance(n, str) for n in outcome.get("notes", ())):
        raise ValueError("an outcome whose reason or notes are not text")
    row = GradeRow(data["student_id"], data["assignment"], data["score"], data["max_score"], Outcome.from_json(outcome))
    _check_points(row.student_id, row.assignment, row.score, row.max_score)
    return row


def _check_points(student: object, assignment: object, score: object, max_score: object) -> None:
    if not isinstance(student, str) or not isinstance(assignment, str):
        raise ValueError("a student or assignment that is not text")
    numbers = (score, max_score)
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) for n in numbers):
        raise ValueError(f"{student}/{assignment}: points that are not numbers")
    if not 0 <= float(score) <= float(max_score):  # type: ignore[arg-type]
        raise ValueError(f"{student}/{assignment}: a score of {score} out of {max_score}")


def _recorded_json(entry: Recorded) -> dict:
    moment = entry.submitted_at
    return {
        "grade": _row_json(entry.result.grade),
        "tests": [t.to_json() for t in entry.result.tests],
        "key": entry.key,
        "source": entry.source,
        "received_as": entry.received_as,
        "submitted_at": {"time": moment.time.isoformat(), "source": moment.source} if moment else None,
        "files": list(entry.files),
        "graded_on": entry.graded_on,
        "remark": entry.remark,
    }


def _recorded_from_json(item: dict, known: list[str]) -> Recorded:
    """One entry of the record, checked: a known assignment, rows of its own pair, files only where this pair's go."""
    grade = _row_from_json(item["grade"])
    if grade.assignment not in known:
        raise ValueError(f"{grade.student_id}/{grade.assignment}: the course has no assignment {grade.assignment!r}")
    tests = tuple(TestRow.from_json(t) for t in item["tests"])
    for test in tests:
        if (test.student_id, test.assignment) != (grade.student_id, grade.assignment) or not isinstance(test.test, str):
            raise ValueError(f"{grade.student_id}/{grade.assignment}: a test row of another pair")
        _check_points(test.student_id, test.assignment, test.score, test.max_score)
    files = tuple(item["files"])
    for name in files:
        parts = name.split("/") if isinstance(name, str) else []
        if not (
            len(parts) == 3
            and parts[0] in (FEEDBACK_DIR, AUTOGRADED_DIR)
            and parts[1] == grade.student_id
            and SAFE_STUDENT_ID.match(parts[1])
            and SAFE_FILE_NAME.match(parts[2])
        ):
            raise ValueError(f"{grade.student_id}/{grade.assignment}: a file {name!r} outside its own feedback/ and autograded/ folders")
    moment = item["submitted_at"]
    submitted_at = SubmittedAt(_utc(moment["time"]), str(moment["source"])) if moment is not None else None
    texts = [item[k] for k in ("key", "source", "received_as", "graded_on", "remark")]
    if not all(isinstance(text, str) for text in texts):
        raise ValueError(f"{grade.student_id}/{grade.assignment}: an entry whose key, source or remark is not text")
    return Recorded(SubmissionResult(grade, tests), *texts[:3], submitted_at, files, *texts[3:])  # type: ignore[arg-type]


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"a hand-in time without its time zone: {text!r}")
    return moment.astimezone(timezone.utc)
