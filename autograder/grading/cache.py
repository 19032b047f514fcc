"""The rerun cache: rows of earlier runs into the same OUT, reused only when nothing they depend on changed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from ..settings import REPO_ROOT
from .models import GradeRow, GradingOptions, Outcome, Submission, TestRow

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
