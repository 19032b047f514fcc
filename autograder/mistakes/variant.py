"""One rewrite of a solution cell: a typical mistake or a correct alternative, as a base text and its edits."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    name: str  # a short, student-facing description: "softmax without the max subtraction"
    cell: str  # grade_id of the solution cell it rewrites
    # (old, new) pairs, applied in order to the base: a mistake is its wrong line(s), so it always has some.
    edits: tuple[tuple[str, str], ...] = ()
    # The text the edits start from: None for the solution cell itself, or a whole cell written out in the
    # catalogue module (a correct implementation written differently, given whole with no edits).
    of: str | None = None
    # Exactly the tests that lose points: the one that names the mistake first, then any
    # that the mistake breaks by its nature (a wrong formula fails every test of its function).
    loses: tuple[str, ...] = field(default=())
    # Its wrong values are whatever memory held (an unwritten output, an unmasked read), so no result
    # can equal them: feedback names it when the same entries as the student's differ from the solution.
    undefined_values: bool = False

    def apply(self, solution_source: str) -> str:
        """The rewritten cell: the base (``of``, else ``solution_source``) with each edit replacing every
        occurrence of its text (docstrings too).

        Fails loudly if an edit no longer matches its base, so the table cannot rot.
        """
        text = solution_source if self.of is None else self.of
        for old, new in self.edits:
            if old not in text:
                base = f"the base text of {self.name!r}" if self.of is not None else f"the solution of {self.cell!r}"
                raise ValueError(f"variant {self.name!r}: {old!r} is not in {base}; update the edit")
            text = text.replace(old, new)
        return text
