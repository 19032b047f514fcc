"""``site``: the executed solutions as a static web site, for self-learners who only read.

Each solution notebook is run top to bottom (or taken already executed) and converted to one
HTML page with nbconvert: figures embedded as images, math rendered to MathML at build time
(so the pages need no script and no network), and navigation between the notebooks in
course order. ``index.html`` is the table of contents, with each notebook's learning goals.
"""

from __future__ import annotations

import html
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode

from course_utils.reference import assignment_notebook

from .course import list_assignments
from .settings import SOLUTIONS_DIR

DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)([^$\n]+?)(?<!\\)\$(?!\$)")
CODE_SPAN = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
NOTEBOOK_LINK = re.compile(r"(\d{2}_[a-z0-9_]+)\.ipynb")


@dataclass(frozen=True)
class Page:
    name: str
    title: str
    goals: str  # the "By the end of this notebook you can" list, as HTML
    seconds: float  # how long it took to run


def run_notebook(path: Path, *, kernel_manager: Any = None, env: dict[str, str] | None = None,
                 allow_errors: bool = False, timeout: int = 120) -> NotebookNode:
    """Run the notebook at ``path`` top to bottom in its own folder, as a reader would (not graded).

    ``kernel_manager`` picks another kernel (tests run notebooks in a Colab-like venv);
    ``env`` is the kernel's whole environment (default: this one, less ``NBGRADER_EXECUTION``).
    """
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    client = NotebookClient(notebook, km=kernel_manager, kernel_name="python3", timeout=timeout,
                            allow_errors=allow_errors, resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=env)
    return notebook


def latex_to_mathml(markdown: str) -> str:
    """Replace ``$…$`` and ``$$…$$`` outside code with MathML that browsers draw without scripts."""
    from latex2mathml.converter import convert

    def render(latex: str, display: str) -> str:
        try:
            return convert(latex.strip(), display=display)
        except Exception:  # noqa: BLE001 - show the source rather than lose the sentence
            return f"<code>{html.escape(latex)}</code>"

    pieces = CODE_SPAN.split(markdown)
    for i in range(0, len(pieces), 2):  # even pieces are outside code spans
        text = DISPLAY_MATH.sub(lambda m: "\n\n" + render(m.group(1), "block") + "\n\n", pieces[i])
        pieces[i] = INLINE_MATH.sub(lambda m: render(m.group(1), "inline"), text)
    return "".join(pieces)


def page_body(notebook: NotebookNode) -> str:
    """The notebook as HTML (nbconvert's script-free basic template), math and links made static."""
    from nbconvert import HTMLExporter

    from course_utils.colab import BADGE_IMAGE

    notebook = nbformat.from_dict(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            # The badge image lives on Colab's server; the site stays offline with a plain link.
            cell.source = re.sub(rf'<img src="{re.escape(BADGE_IMAGE)}"[^>]*>', '<span class="colab">Open in Colab</span>', cell.source)
            cell.source = NOTEBOOK_LINK.sub(r"\1.html", latex_to_mathml(cell.source))
    body, _ = HTMLExporter(template_name="basic").from_notebook_node(notebook)
    return body


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


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 0 auto; padding: 0 1rem 4rem; line-height: 1.5; color: #1b1b1b; }
nav.course { display: flex; justify-content: space-between; gap: 1rem; padding: .75rem 0; border-bottom: 1px solid #ddd; margin-bottom: 1rem; }
nav.course.bottom { border-top: 1px solid #ddd; border-bottom: none; margin-top: 2rem; }
a { color: #0b57d0; }
pre { background: #f6f8fa; padding: .6rem .8rem; overflow-x: auto; border-radius: 4px; font-size: .85rem; }
.input_prompt, .prompt { display: none; }
.output_area pre, .output_subarea pre { background: #fff; border-left: 3px solid #ddd; }
.output_stderr pre { background: #fff5f5; }
img { max-width: 100%; height: auto; }
table { border-collapse: collapse; } th, td { border: 1px solid #ccc; padding: .2rem .5rem; }
math[display="block"] { margin: .8rem 0; }
ol.toc > li { margin-bottom: 1.2rem; }
a.anchor-link { opacity: 0; text-decoration: none; margin-left: .3rem; } :hover > a.anchor-link { opacity: .4; }
.colab { display: inline-block; padding: .1rem .5rem; border: 1px solid #f9ab00; border-radius: 4px; background: #fff8e1; font-size: .85rem; }
"""


def _document(title: str, body: str, nav: str = "") -> str:
    bottom = nav.replace('class="course"', 'class="course bottom"')
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(title)}</title><style>{STYLE}{_pygments_css()}</style></head>"
        f"<body>{nav}<main>{body}</main>{bottom}</body></html>\n"
    )


def _nav(names: list[str], index: int, titles: dict[str, str]) -> str:
    previous = f'<a rel="prev" href="{names[index - 1]}.html">← {html.escape(titles[names[index - 1]])}</a>' if index > 0 else "<span></span>"
    following = f'<a rel="next" href="{names[index + 1]}.html">{html.escape(titles[names[index + 1]])} →</a>' if index + 1 < len(names) else "<span></span>"
    return f'<nav class="course">{previous}<a href="index.html">Contents</a>{following}</nav>'


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
    titles = {p.name: p.title for p in pages}
    for index, page in enumerate(pages):
        (out / f"{page.name}.html").write_text(_document(page.title, page_body(notebooks[page.name]), _nav(names, index, titles)), encoding="utf-8")
    toc = "".join(f'<li><a href="{p.name}.html">{html.escape(p.title)}</a>{p.goals}</li>' for p in pages)
    intro = (
        "<h1>Attention, from lookup to kernel: the solutions</h1>"
        "<p>Every notebook of the course, run top to bottom with its solutions, figures and test output. "
        "Read them in order: each builds on the one before.</p>"
    )
    (out / "index.html").write_text(_document("Attention, from lookup to kernel", f'{intro}<ol class="toc">{toc}</ol>'), encoding="utf-8")
    return pages
