"""Keep hidden tests and solutions out of what students get back.

A submission can read the hidden tests while they run beside it (its caller's frames) and
print them later, or raise an exception whose message quotes them. Every text that goes
into feedback passes through ``Redactor``, which removes each line that reproduces a line
of a hidden test or of a solution region (lines the released notebook also shows are not
secret and stay). A line the student wrote in an answer cell of their own is never removed
(``sparing``): it tells them nothing they did not write, and a hole in their own code would
only confuse them. What is removed is replaced by a sentence that says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nbformat.notebooknode import NotebookNode

from course_utils.notebook_cells import (
    cell_source,
    hidden_part,
    is_solution_cell,
    is_test_cell,
)

REDACTED = "[one line is not shown here: it quotes a hidden test or the solution]"
MIN_SECRET_CHARS = 16  # shorter lines ("return out", "### END") are too common to be secrets
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.DOTALL)


def _normal(line: str) -> str:
    return " ".join(line.split())


@dataclass(frozen=True)
class Redactor:
    secrets: frozenset[str]

    @classmethod
    def for_source(cls, source: NotebookNode | dict[str, Any]) -> "Redactor":
        secret, public = set(), set()
        for cell in source["cells"]:
            text = cell_source(cell)
            if is_test_cell(cell):
                secret.update(hidden_part(text).splitlines())
                public.update(text.replace(hidden_part(text), "").splitlines())
            elif is_solution_cell(cell):
                regions = SOLUTION_REGION.findall(text)
                for region in regions:
                    secret.update(region.splitlines())
                public.update(SOLUTION_REGION.sub("", text).splitlines())
            else:
                public.update(text.splitlines())
        public_lines = {_normal(line) for line in public}
        kept = {_normal(line) for line in secret} - public_lines
        return cls(frozenset(line for line in kept if len(line.replace(" ", "")) >= MIN_SECRET_CHARS))

    def sparing(self, submission: NotebookNode | dict[str, Any]) -> "Redactor":
        """This redactor, less every secret that a line of the submission's own answer cells contains."""
        own = [_normal(line) for cell in submission["cells"] if is_solution_cell(cell) for line in cell_source(cell).splitlines()]
        return Redactor(frozenset(secret for secret in self.secrets if not any(secret in line for line in own)))

    def text(self, text: str) -> str:
        if not self.secrets or not text:
            return text
        lines = text.split("\n")
        changed = False
        for index, line in enumerate(lines):
            normal = _normal(line)
            if len(normal) >= MIN_SECRET_CHARS and any(secret in normal for secret in self.secrets):
                lines[index] = REDACTED
                changed = True
        return "\n".join(lines) if changed else text

    def value(self, value: Any) -> Any:
        """Redact strings inside an output's fields (lists of lines, MIME bundles)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value
