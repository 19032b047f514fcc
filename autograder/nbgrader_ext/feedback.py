"""Keep hidden tests hidden in the feedback students receive.

nbgrader's feedback shows every cell as it was graded, hidden tests included.
``RedactHiddenTests`` removes the hidden-test region from each test cell and cuts
the traceback of a failure in that region down to its message (a traceback would
quote the hidden code line by line). The message still says what failed and why:
the course's checks write messages meant for students.
"""

from __future__ import annotations

from typing import Any

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests

REDACTED_NOTE = "# (hidden tests ran here; their code is not shown)"


class RedactHiddenTests(ClearHiddenTests):
    """ClearHiddenTests for feedback: also redacts the tracebacks of those cells."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any], cell_index: int) -> tuple[NotebookNode, dict[str, Any]]:
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type != "code" or not self._had_hidden_tests(cell, resources, cell_index):
            return cell, resources
        cell.source = cell.source.rstrip("\n") + "\n" + REDACTED_NOTE
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources

    def _had_hidden_tests(self, cell: NotebookNode, resources: dict[str, Any], cell_index: int) -> bool:
        return cell_index in resources.get("_hidden_test_cells", set())

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        # Remember which cells hold hidden tests before the parent class strips them.
        resources["_hidden_test_cells"] = {
            index for index, cell in enumerate(nb.cells) if cell.cell_type == "code" and self.begin_test_delimeter in cell.source
        }
        return super().preprocess(nb, resources)
