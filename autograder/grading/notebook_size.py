"""A handed-in notebook's size against ``NotebookLimits``: past them it is refused, with a row that says why.

nbgrader's feedback page and formgrader's view render every cell a student hands in; 6,000 markdown cells
took ten times as long as the released notebook. So the intake bounds what reaches them: cells, and the
characters of their sources. (Outputs come from the sealed run and are bounded there: ``LimitOutputSize``.)
"""

from __future__ import annotations

from typing import Any

from ..settings import NOTEBOOK_LIMITS, NotebookLimits


def too_large(notebook: Any, limits: NotebookLimits = NOTEBOOK_LIMITS) -> str | None:
    """Why ``notebook`` (nbformat's, as handed in) is too large to grade, or None."""
    cells = notebook.get("cells") or []
    if len(cells) > limits.cells:
        return f"it has {len(cells):,} cells; a notebook may have at most {limits.cells:,}"
    characters = sum(len(_text(cell.get("source", ""))) for cell in cells if isinstance(cell, dict))
    if characters > limits.source_chars:
        return f"its cells hold {characters:,} characters; a notebook may hold at most {limits.source_chars:,}"
    return None


def _text(source: Any) -> str:
    return "".join(map(str, source)) if isinstance(source, list) else str(source)
