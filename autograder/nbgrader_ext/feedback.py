"""Keep hidden tests hidden in the feedback students receive.

nbgrader's feedback shows every cell as it was graded, hidden tests included.
``RedactHiddenTests`` removes the hidden-test region from each test cell and cuts
the traceback of a failure in that region down to its message (a traceback would
quote the hidden code line by line). The message still says what failed and why:
the course's checks write messages meant for students.

``OfflineMarkdown`` turns the math of every markdown cell into MathML, and ``FeedbackHtmlExporter``
writes the page: nbconvert's HTML export, made cheaper for a class, loading nothing from the network
(no MathJax, no badge image), so a page reads the same offline.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor

from ..offline_markdown import offline_markdown
from .sanitize import markdown_to_clean_html

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


# What nbconvert gives an image that has no alt text, so that a screen reader says something.
MISSING_ALT = "No description has been provided for this image"


class _ImagesWithoutAlt(HTMLParser):
    """Where the page's ``<img>`` tags without alt text start, found by a tokenizer, not a pattern.

    ``title="<img ...>"`` is text inside an attribute, not a tag: a tokenizer knows it, a pattern
    does not. Student HTML reaches the page as the allow-list writes it (quoted attributes, ``<``
    escaped), which Python's tokenizer reads as a browser does.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.starts: list[tuple[int, int]] = []  # (line, column) of each such tag's "<"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img" and not any(name == "alt" for name, _ in attrs):
            self.starts.append(self.getpos())

    handle_startendtag = handle_starttag


def with_alt_text(html: str) -> str:
    """``html`` with MISSING_ALT on every image that has no alt text (as HTMLExporter gives it)."""
    if "<img" not in html.lower():
        return html  # most feedback pages: graded notebooks draw no figures
    finder = _ImagesWithoutAlt()
    finder.feed(html)
    finder.close()
    line_starts = [0] + [match.end() for match in re.finditer("\n", html)]
    offsets = [line_starts[line - 1] + column + len("<img") for line, column in finder.starts]
    for offset in reversed(offsets):
        html = f'{html[:offset]} alt="{MISSING_ALT}"{html[offset:]}'
    return html


class OfflineMarkdown(NbGraderPreprocessor):  # enabled by default, as nbconvert's own are not
    """Every markdown cell's math as MathML, through an allow-list (``offline_markdown``); the badge as a label.

    Runs after the student HTML is sanitised: what a student wrote in LaTeX becomes MathML elements
    and layout attributes only."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any], index: int) -> tuple[NotebookNode, dict[str, Any]]:
        if cell.cell_type == "markdown":
            cell.source = offline_markdown(cell.source)
        return cell, resources


# nbconvert's classic page imports its MathJax loader (a script from a CDN) from this template; the page's math is MathML.
NO_MATHJAX = {"mathjax.html.j2": "{%- macro mathjax(url='') -%}{%- endmacro %}"}


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates kept in memory for the life of the process (jinja checks each source's checksum)."""

    def __init__(self) -> None:
        self._store: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if (code := self._store.get(bucket.key)) is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._store[bucket.key] = bucket.bytecode_to_string()


# One per process. Jinja decides at compile time how to call a filter (with the context or not), so
# this is right while every FeedbackHtmlExporter has the same filters: the course's configuration.
_COMPILED = _CompiledTemplates()


class FeedbackHtmlExporter(HTMLExporter):
    """``HTMLExporter`` for feedback pages, about twice as fast: the same document, unserialised by BeautifulSoup.

    nbgrader makes a new exporter for every student, so its templates were compiled again each time;
    here they are compiled once per process. And ``HTMLExporter`` parses its whole page again with
    BeautifulSoup's pure-Python parser, to give images without alt text a placeholder and to make
    JupyterLab cells focusable: about half of a page's time. The feedback template is the classic
    one, which has no JupyterLab cells, so only the alt text remains, and ``with_alt_text`` adds it
    (most pages have no image at all). ``tests/test_sanitize.py`` checks it is the document HTMLExporter writes.
    """

    def default_filters(self) -> Any:
        # Markdown on the page (cells, comments) is cleaned after its last change: see sanitize.markdown_to_clean_html.
        for name, jinja_filter in super().default_filters():
            yield name, markdown_to_clean_html if name == "markdown2html" else jinja_filter

    def _create_environment(self) -> jinja2.Environment:
        environment = super()._create_environment()
        environment.bytecode_cache = _COMPILED
        environment.loader = jinja2.ChoiceLoader([jinja2.DictLoader(NO_MATHJAX), environment.loader])
        return environment

    def from_notebook_node(self, nb: NotebookNode, resources: dict[str, Any] | None = None, **kw: Any) -> tuple[str, dict[str, Any]]:
        # HTMLExporter.from_notebook_node's filters and resources, then the template, without the re-parse.
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name", None))
        self.register_filter("highlight_code", self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter(
            "filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources)
        )
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return with_alt_text(html), resources
