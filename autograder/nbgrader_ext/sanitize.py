"""Student HTML reaches an instructor's browser only through an allow-list.

Feedback and the formgrader show a submitted notebook as HTML, inside the instructor's Jupyter
session. nbconvert passes raw HTML in markdown cells and ``text/html`` outputs through as is
(``HTMLExporter.sanitize_html`` is off by default), so a student's ``<img onerror=...>`` or
``<script>`` would run there, with the instructor's token. ``SanitizeStudentHtml`` closes that door:

* a markdown cell is rendered to HTML the way nbconvert renders it (math kept for MathJax), then
  cleaned by nh3, the binding to Ammonia, an allow-list sanitiser: formatting, tables, links and
  images stay; scripts, event handlers, ``javascript:`` URLs, forms and frames go;
* a ``text/html`` or ``text/markdown`` output is cleaned the same way; an output that is script by
  nature (``application/javascript``, SVG, widget views) is dropped, with a note in its place.
  PNG and JPEG plots stay.

The course's nbgrader configuration runs it in every ``HTMLExporter`` (feedback and formgrader).

Steps after it change markdown again (``OfflineMarkdown`` puts MathML in a cell, which breaks the one-line
HTML block above it), and nbgrader's feedback template renders gradebook comments as markdown. So the
template's own ``markdown2html`` filter is replaced too (``markdown_to_clean_html``): whatever markdown a
page shows, a cell, a markdown output or a comment, is cleaned last, after every transformation, by an
allow-list that also keeps MathML and the headings' anchors.
"""

from __future__ import annotations

import re
from typing import Any

import jinja2
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode

from ..offline_markdown import MATHML_ATTRIBUTES, MATHML_TAGS

# What can make markdown carry script: a tag, a link or image (its URL), an entity (an encoded URL), a script scheme.
MAY_CARRY_SCRIPT = re.compile(r"<[A-Za-z!/?]|\]\(|\]:|&#|&[A-Za-z]|javascript|vbscript|data:", re.IGNORECASE)
URL_SCHEMES = {"http", "https", "mailto", "data", "attachment"}  # data: and attachment: carry a student's images
KEPT_OUTPUTS = {"text/plain", "image/png", "image/jpeg", "image/gif", "text/latex", "application/json"}
DROPPED_NOTE = "(an output that could run script in the reader's browser was removed)"
# The output metadata nbconvert's templates read, with the type each may have: the templates write
# width and height unquoted, so "1 onerror=alert(1)" there would become an attribute.
OUTPUT_METADATA = {"width": int, "height": int, "alt": str, "unconfined": bool, "isolated": bool}


def clean_html(html: str) -> str:
    """``html`` with only what nh3's allow-list keeps: no script, handler, javascript: URL or frame."""
    import nh3

    return nh3.clean(html, url_schemes=URL_SCHEMES)


def _page_allow_list() -> tuple[set[str], dict[str, set[str]]]:
    """nh3's default allow-list, with MathML (drawn without script), heading anchors and the wrapper's class."""
    import nh3

    tags = set(nh3.ALLOWED_TAGS) | MATHML_TAGS
    attributes = {tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()}
    attributes |= {tag: set(MATHML_ATTRIBUTES) for tag in MATHML_TAGS}
    attributes |= {f"h{level}": {"id"} for level in range(1, 7)}  # the anchor a heading's link points to
    attributes["a"] = attributes.get("a", set()) | {"class"}  # nbconvert's "anchor-link"
    attributes["div"] = {"class"}  # "sanitized-markdown"
    return tags, attributes


def clean_page_html(html: str) -> str:
    """Rendered markdown as a page shows it: the allow-list of ``clean_html`` plus MathML and heading anchors."""
    import nh3

    tags, attributes = _page_allow_list()
    return nh3.clean(html, tags=tags, attributes=attributes, url_schemes=URL_SCHEMES, link_rel=None)


@jinja2.pass_context  # as HTMLExporter.markdown2html, which the compiled templates call with the context
def markdown_to_clean_html(context: Any, source: str) -> str:
    """The templates' ``markdown2html``, cleaned after it rendered: the last step any markdown on a page passes."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    cell = context.get("cell", {}) or {}
    path = (context.get("resources", {}) or {}).get("metadata", {}).get("path", "")
    renderer = IPythonRenderer(escape=False, attachments=dict(cell.get("attachments", {}) or {}), path=path)
    return clean_page_html(MarkdownWithMath(renderer=renderer).render(source))


def clean_markdown(source: str, attachments: dict[str, Any] | None = None) -> str:
    """A markdown cell as sanitised HTML, which nbconvert passes through as an HTML block.

    ``attachments``: the cell's pasted images, which ``![](attachment:name)`` shows.
    """
    if not MAY_CARRY_SCRIPT.search(source):  # plain markdown: nothing in it can become script
        return source
    # The template renders the cell as markdown again. There an HTML block ends at a blank line, and
    # what follows is markdown once more: a newline kept inside an attribute value or a code block
    # would turn "[x](javascript:...)" into a live link. On one line the block passes through as is.
    one_line = clean_html(_markdown_html(source, attachments)).replace("\r", "&#13;").replace("\n", "&#10;")
    return f'<div class="sanitized-markdown">{one_line}</div>\n'


def _markdown_html(source: str, attachments: dict[str, Any] | None) -> str:
    """nbconvert's rendering of a markdown cell; one that names an attachment it lacks is shown as text."""
    from html import escape

    from nbconvert.filters.markdown_mistune import InvalidNotebook, IPythonRenderer, MarkdownWithMath

    try:
        return MarkdownWithMath(renderer=IPythonRenderer(escape=False, attachments=dict(attachments or {}))).render(source)
    except InvalidNotebook:
        return f"<pre>{escape(source)}</pre>"


def clean_output(output: NotebookNode) -> None:
    """Clean an output's HTML and markdown; drop its script-like representations."""
    data = output.get("data")
    if not isinstance(data, dict):
        return
    cleaned: dict[str, Any] = {}
    dropped = False
    for mime, value in data.items():
        text = "".join(value) if isinstance(value, list) else value
        if mime == "text/html" and isinstance(text, str):
            cleaned[mime] = clean_html(text)
        elif mime == "text/markdown" and isinstance(text, str):
            cleaned[mime] = clean_markdown(text)
        elif mime in KEPT_OUTPUTS:
            cleaned[mime] = value
        else:
            dropped = True
    if dropped and not cleaned:
        cleaned["text/plain"] = DROPPED_NOTE
    output["data"] = cleaned
    if "metadata" in output:
        output["metadata"] = {mime: _typed(value) for mime, value in output["metadata"].items() if mime in cleaned}


def _typed(metadata: Any) -> dict[str, Any]:
    """What a template may read of one representation's metadata, and only with the right type."""
    if not isinstance(metadata, dict):
        return {}
    return {
        key: value
        for key, value in metadata.items()
        if key in OUTPUT_METADATA and type(value) is OUTPUT_METADATA[key]  # exact: True is not a width
    }


class SanitizeStudentHtml(Preprocessor):
    """Clean every markdown cell and every output of the notebook before it becomes HTML."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any], index: int) -> tuple[NotebookNode, dict[str, Any]]:
        if cell.cell_type == "markdown":
            cell.source = clean_markdown(cell.source, cell.get("attachments"))
        elif cell.cell_type == "raw":
            cell.metadata.pop("format", None)  # a raw cell marked text/html would be pasted in as is
            cell.metadata.pop("raw_mimetype", None)
        for output in cell.get("outputs", []):
            clean_output(output)
        return cell, resources
