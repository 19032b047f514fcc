"""Limits on what one graded notebook's run may leave in its outputs (the memory limit is in ``settings``).

Every page that shows the graded notebook (feedback, formgrader) renders its outputs, so what a student's code
prints or displays is bounded here, after the sealed run: printed characters, outputs and rich bytes per cell.
"""

from __future__ import annotations

import json
from typing import Any

from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import LimitOutput
from traitlets import Integer

TRUNCATED = "\n... Output truncated ..."


class LimitOutputSize(LimitOutput):
    """nbgrader's line limit, plus limits on characters (one print of a huge tensor is one line), on the number
    of outputs, and on the bytes of rich outputs (plots, HTML) per cell."""

    max_chars = Integer(20_000, help="characters of stream output kept per cell (-1: no limit)").tag(config=True)
    max_outputs = Integer(50, help="outputs kept per cell (-1: no limit)").tag(config=True)
    max_rich_bytes = Integer(4 * 2**20, help="bytes of rich output (display data, results) kept per cell (-1: no limit)").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: Any, cell_index: int) -> tuple[NotebookNode, Any]:
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type != "code":
            return cell, resources
        characters, rich = self.max_chars, self.max_rich_bytes
        kept, dropped = [], 0
        for output in cell.outputs:
            if output.output_type == "stream":
                if self.max_chars >= 0:
                    if characters <= 0:
                        continue
                    if len(output.text) > characters:
                        output.text = output.text[:characters] + TRUNCATED
                    characters -= len(output.text)
            elif output.output_type in ("display_data", "execute_result") and self.max_rich_bytes >= 0:
                size = len(json.dumps(output.get("data", {}))) + len(json.dumps(output.get("metadata", {})))
                if size > rich:
                    dropped += 1
                    continue
                rich -= size
            if 0 <= self.max_outputs <= len(kept) and output.output_type != "error":  # an error is a verdict's evidence
                dropped += 1
                continue
            kept.append(output)
        if dropped:
            kept.append(new_output("stream", name="stdout", text=f"{TRUNCATED} ({dropped} more output(s) not kept)"))
        cell.outputs = kept
        return cell, resources
