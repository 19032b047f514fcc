"""What no student page may hold: the code of a graded answer, in its own notebook or any other.

A student notebook gives an answer away when one of its code cells (given code, a carried cell, a
later notebook's helper) repeats ``RUN`` consecutive lines of a graded solution region of any notebook.
Lines are compared without comments, blank lines and indentation, and a run must hold ``MIN_CHARS``
characters, so that a list of arguments (``T_q,`` ``T_k,``) is not a run. Two things are not a leak:
the cell's own given lines in its own notebook (the scaffold the student writes into: a kernel's
given loads), and the idioms every PyTorch program writes (``IDIOMS``).

``release --check`` reports every run it finds (``autograder.release.stale_notebooks``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from course_utils.notebook_cells import cell_source, is_carried, is_showcase, is_solution_cell, nbgrader_meta

from .course import list_assignments

RUN = 3
MIN_CHARS = 40
IDIOMS = {("optimizer.zero_grad()", "loss.backward()", "optimizer.step()")}  # a training step's last lines, everywhere
_PUNCTUATION_ONLY = re.compile(r"^[\s()\[\]{},:]*$")


@dataclass(frozen=True)
class GivenAway:
    """A run of a graded answer's lines found on a student page."""

    answer: str  # "07_fused_attention:flash_attention_triton": the notebook and grade id of the solution cell
    page: str  # "08_flash_backward": the student notebook that holds the run
    cell: str  # the id of the code cell there
    lines: tuple[str, ...]

    def __str__(self) -> str:
        return f"notebooks/{self.page} cell {self.cell} repeats the answer of {self.answer}: {' / '.join(self.lines)}"


def given_away(solutions_dir: Path, notebooks_dir: Path) -> list[GivenAway]:
    """Every run of a graded solution region's lines that a student notebook's code repeats."""
    pages = {name: _code_cells(notebooks_dir / name / f"{name}.ipynb") for name in list_assignments(solutions_dir)}
    found = []
    for name in pages:
        for grade_id, region in _graded_regions(solutions_dir / name / f"{name}.ipynb"):
            runs = runs_of(region)
            for page, cells in pages.items():
                for cell_id, (cell_grade_id, lines) in cells.items():
                    if page == name and cell_grade_id == grade_id:
                        continue  # the exercise's own scaffold
                    text = "\n".join(lines)
                    hit = next((run for run in sorted(runs) if "\n".join(run) in text), None)
                    if hit:
                        found.append(GivenAway(f"{name}:{grade_id}", page, cell_id, hit))
    return found


def runs_of(lines: list[str]) -> set[tuple[str, ...]]:
    """The runs of ``RUN`` consecutive lines that would give ``lines`` away: long enough, and no idiom."""
    runs = {tuple(lines[i : i + RUN]) for i in range(len(lines) - RUN + 1)} - IDIOMS
    return {run for run in runs if sum(map(len, run)) >= MIN_CHARS}


def normalised(source: str) -> list[str]:
    """A text's code lines as compared: no comments, blank lines, indentation or runs of spaces."""
    lines = []
    for line in source.splitlines():
        code = line.strip()
        if not code.startswith(("'", '"')):
            code = code.split("  #")[0].split(" # ")[0]
            code = "" if code.startswith("#") else code
        code = re.sub(r"\s+", " ", code).strip()
        if code and not _PUNCTUATION_ONLY.match(code) and code not in ("else:", "try:", "pass"):
            lines.append(code)
    return lines


def _graded_regions(path: Path) -> list[tuple[str, list[str]]]:
    """(grade id, the normalised lines of one solution region) for each graded solution cell: not carried, not a showcase."""
    regions = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if not is_solution_cell(cell) or is_carried(cell) or is_showcase(cell):
            continue
        region: list[str] | None = None
        for line in cell_source(cell).splitlines():
            if "### BEGIN SOLUTION" in line:
                region = []
            elif "### END SOLUTION" in line and region is not None:
                regions.append((nbgrader_meta(cell)["grade_id"], normalised("\n".join(region))))
                region = None
            elif region is not None:
                region.append(line)
    return regions


def _code_cells(path: Path) -> dict[str, tuple[str | None, list[str]]]:
    """cell id -> (its grade id, if any; its normalised lines) for each code cell of a student notebook."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {
        str(cell.get("id", index)): (nbgrader_meta(cell).get("grade_id"), normalised(cell_source(cell)))
        for index, cell in enumerate(cells)
        if cell.get("cell_type") == "code"
    }
