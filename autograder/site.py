"""``site``: the executed solutions as a static web site, for self-learners who only read.

Each solution notebook is run top to bottom (or taken already executed) and converted to one
HTML page with nbconvert: figures embedded as images, math rendered to MathML at build time
(so the pages need no script and no network), and navigation between the notebooks in
course order. ``index.html`` is the table of contents, with each notebook's learning goals.
The pages come from the nbconvert template folder ``templates/solutions_site`` (package data).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
from nbformat.notebooknode import NotebookNode

from course_utils.notebook_cells import assignment_notebook

from .course import list_assignments
from .offline_markdown import latex_to_mathml, offline_markdown
from .settings import SOLUTIONS_DIR

if TYPE_CHECKING:  # nbconvert is imported where it is used: it is slow to import
    from nbconvert import HTMLExporter

TEMPLATES = Path(__file__).with_name("templates")  # nbconvert's "extra template base dir": one folder per template

NOTEBOOK_LINK = re.compile(r"(\d{2}_[a-z0-9_]+)\.ipynb")


@dataclass(frozen=True)
class Page:
    name: str
    title: str
    goals: str  # the "By the end of this notebook you can" list, as HTML
    seconds: float  # how long it took to run


def run_notebook(
    path: Path, *, kernel_manager: Any = None, env: dict[str, str] | None = None, allow_errors: bool = False, timeout: int = 120
) -> NotebookNode:
    """Run the notebook at ``path`` top to bottom in its own folder, as a reader would (not graded).

    ``kernel_manager`` picks another kernel (tests run notebooks in a Colab-like venv);
    ``env`` is the kernel's whole environment (default: this one, less ``NBGRADER_EXECUTION``).
    """
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    client = NotebookClient(
        notebook,
        km=kernel_manager,
        kernel_name="python3",
        timeout=timeout,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute(env=env)
    finally:
        # nbclient shuts down only the kernels it started itself: one handed in is ours to stop.
        if kernel_manager is not None and kernel_manager.has_kernel:
            kernel_manager.shutdown_kernel(now=True)
    return notebook


def _static_markdown(notebook: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
    """nbconvert preprocessor: markdown that works offline (math as MathML, links to the pages, no Colab badge image)."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = NOTEBOOK_LINK.sub(r"\1.html", offline_markdown(cell.source))
    return notebook, resources


def _site_exporter() -> HTMLExporter:
    """nbconvert's HTML exporter with the site's template (``templates/solutions_site``, extending ``basic``)."""
    from nbconvert import HTMLExporter

    # Our folder as the only extra base: the default, the working directory, could shadow template names.
    exporter = HTMLExporter(extra_template_basedirs=[str(TEMPLATES)], template_name="solutions_site")
    exporter.register_preprocessor(_static_markdown, enabled=True)
    return exporter


def _title_and_goals(notebook: NotebookNode) -> tuple[str, str]:
    from nbconvert.filters import markdown2html

    first = notebook.cells[0].source
    title = first.splitlines()[0].lstrip("# ").strip()
    goals = ""
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and "By the end of this notebook you can" in cell.source:
            after = cell.source.split("By the end of this notebook you can", 1)[1]
            items = re.findall(r"^\s*\d+\.\s.*(?:\n {2,}.*)*", after, re.M)
            goals = markdown2html(latex_to_mathml("\n".join(items)))
            break
    return title, goals


def _pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".highlight")


def build_site(out: Path, *, executed: dict[str, NotebookNode] | None = None, solutions_dir: Path = SOLUTIONS_DIR) -> list[Page]:
    """Write ``out/index.html`` and one page per notebook; run the notebooks not given in ``executed``."""
    out.mkdir(parents=True, exist_ok=True)
    names = list_assignments(solutions_dir)
    notebooks, pages = {}, []
    for name in names:
        started = time.perf_counter()
        notebooks[name] = (executed or {}).get(name) or run_notebook(assignment_notebook(solutions_dir, name))
        title, goals = _title_and_goals(notebooks[name])
        pages.append(Page(name, title, goals, time.perf_counter() - started))
    exporter, css = _site_exporter(), _pygments_css()
    for index, page in enumerate(pages):
        site = {
            "page": page,
            "previous": pages[index - 1] if index > 0 else None,
            "following": pages[index + 1] if index + 1 < len(pages) else None,
            "pygments_css": css,
        }
        document, _ = exporter.from_notebook_node(notebooks[page.name], resources={"site": site})
        (out / f"{page.name}.html").write_text(document, encoding="utf-8")
    contents = exporter.environment.get_template("contents.html.j2").render(pages=pages, pygments_css=css)
    (out / "index.html").write_text(contents, encoding="utf-8")
    return pages
