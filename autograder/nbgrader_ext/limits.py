"""A limit on what one graded notebook may print (the memory limit is in ``settings``)."""

from __future__ import annotations

from typing import Any

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import LimitOutput
from traitlets import Integer

TRUNCATED = "\n... Output truncated ..."


class LimitOutputSize(LimitOutput):
    """nbgrader's line limit, plus a limit on characters: one print of a huge tensor is one line."""

    max_chars = Integer(20_000, help="characters of stream output kept per cell (-1: no limit)").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: Any, cell_index: int) -> tuple[NotebookNode, Any]:
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if self.max_chars < 0 or cell.cell_type != "code":
            return cell, resources
        budget = self.max_chars
        kept = []
        for output in cell.outputs:
            if output.output_type == "stream":
                if budget <= 0:
                    continue
                if len(output.text) > budget:
                    output.text = output.text[:budget] + TRUNCATED
                budget -= len(output.text)
            kept.append(output)
        cell.outputs = kept
        return cell, resources
