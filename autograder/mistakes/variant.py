"""One rewrite of a solution cell: a typical mistake or a correct alternative."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    name: str  # a short, student-facing description: "softmax without the max subtraction"
    cell: str  # grade_id of the solution cell it rewrites
    edits: tuple[tuple[str, str], ...] = ()  # (solution text, replacement) pairs
    source: str | None = None  # or the whole new cell
    # Exactly the tests that lose points: the one that names the mistake first, then any
    # that the mistake breaks by its nature (a wrong formula fails every test of its function).
    loses: tuple[str, ...] = field(default=())
    # Its wrong values are whatever memory held (an unwritten output, an unmasked read), so no result
    # can equal them: feedback names it when the same entries as the student's differ from the solution.
    undefined_values: bool = False

    def apply(self, solution_source: str) -> str:
        """The rewritten cell: each edit replaces every occurrence of its text (docstrings too).

        Fails loudly if an edit no longer matches the solution, so the table cannot rot.
        """
        if self.source is not None:
            return self.source
        text = solution_source
        for old, new in self.edits:
            if old not in text:
                raise ValueError(f"variant {self.name!r}: {old!r} is not in the solution of {self.cell!r}; update the edit")
            text = text.replace(old, new)
        return text


def answered(name: str, question: str, answer: str, *, loses: tuple[str, ...] = ()) -> Variant:
    """A graded question answered with ``answer`` (Python source): ``answered("bits", "answer_x", "8 * 2**30")``."""
    return Variant(name, question, source=f"\ndef {question}():\n    return {answer}\n", loses=loses)
