"""Student HTML through the allow-list: feedback and the formgrader show no script from a notebook."""

from __future__ import annotations

import nbformat
import pytest

from autograder.nbgrader_ext.sanitize import DROPPED_NOTE, clean_markdown, clean_output
from autograder.settings import REPO_ROOT

HOSTILE = [
    "[click](javascript:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=https://example.com></iframe>",
    '<svg onload="alert(1)"></svg>',
    '<b onmouseover="alert(1)">x</b>',
    '<form action="https://example.com"><input name=token></form>',
    '<div style="background:url(javascript:alert(1))">x</div>',
]
EXECUTABLE = ("onerror", "onload", "onmouseover", "javascript:", "<script", "<iframe", "<form", "<svg", "style=")


@pytest.mark.parametrize("payload", HOSTILE)
def test_markdown_html_keeps_nothing_executable(payload: str) -> None:
    cleaned = clean_markdown(f"Some **notes** {payload}").lower()
    assert "<strong>notes</strong>" in cleaned
    assert not any(bad in cleaned for bad in EXECUTABLE), cleaned


def test_markdown_without_html_is_left_alone_and_math_survives() -> None:
    plain = "> **A slip.** $i < j$ and | a | b |"
    assert clean_markdown(plain) == plain
    cleaned = clean_markdown("$i<j$ and <details><summary>Check</summary>fine</details>")
    assert "$i&lt;j$" in cleaned and "<details><summary>Check</summary>" in cleaned


def test_outputs_lose_script_and_keep_plots() -> None:
    output = nbformat.v4.new_output(
        "display_data",
        data={
            "text/html": "<b onmouseover='x()'>hi</b><script>x()</script>",
            "application/javascript": "alert(1)",
            "image/png": "iVBORw0KGgo=",
            "text/plain": "<hi>",
        },
    )
    clean_output(output)
    assert output["data"] == {"text/html": "<b>hi</b>", "image/png": "iVBORw0KGgo=", "text/plain": "<hi>"}
    only_script = nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)"})
    clean_output(only_script)
    assert only_script["data"] == {"text/plain": DROPPED_NOTE}


def test_the_course_configuration_sanitises_what_formgrader_renders(tmp_path) -> None:
    """The formgrader renders with HTMLExporter(config=the course's nbgrader config): no script gets through."""
    from nbconvert import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("Notes " + " ".join(HOSTILE)),
            nbformat.v4.new_code_cell(
                "x = 1",
                outputs=[nbformat.v4.new_output("display_data", data={"text/html": "<img src=x onerror=alert('formgrader-xss')>"})],
            ),
        ]
    )
    html, _ = HTMLExporter(config=config).from_notebook_node(notebook)
    assert "Notes" in html
    assert "formgrader-xss" not in html and "onerror" not in html and "onmouseover" not in html and "javascript:alert" not in html
    unsafe, _ = HTMLExporter().from_notebook_node(notebook)  # nbconvert's default: the door this closes
    assert "onerror" in unsafe


def test_the_feedback_exporter_writes_the_page_html_exporter_writes() -> None:
    # FeedbackHtmlExporter skips HTMLExporter's BeautifulSoup pass and adds the alt text itself:
    # the page must be the same document (attribute order aside), images with and without alt text included.
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter

    from autograder.nbgrader_ext.feedback import MISSING_ALT, FeedbackHtmlExporter

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell('# Notes\n\n<img src="a.png"> <IMG SRC="b.png"> <img alt="kept" src="c.png"> $i < j$'),
            # The allow-list's serialiser leaves < and > unescaped inside attribute values: text there is no tag.
            nbformat.v4.new_markdown_cell('<a title="<img onmouseover=alert(1) src=x>">hover</a>'),
            nbformat.v4.new_code_cell(
                "x = '<img src=q>'\nprint(x)",
                outputs=[
                    nbformat.v4.new_output("stream", name="stdout", text="<img src=q>\n"),
                    nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
                ],
            ),
        ],
        metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}},
    )
    ours, _ = FeedbackHtmlExporter(template_name="classic").from_notebook_node(notebook)
    again, _ = FeedbackHtmlExporter(template_name="classic").from_notebook_node(notebook)  # templates from the cache
    theirs, _ = HTMLExporter(template_name="classic").from_notebook_node(notebook)
    assert ours == again
    assert BeautifulSoup(ours, "html.parser") == BeautifulSoup(theirs, "html.parser")
    assert ours.count(f'alt="{MISSING_ALT}"') == 3  # two in the markdown, the figure; not the escaped text or the title
    [link] = BeautifulSoup(ours, "html.parser").find_all("a", string="hover")
    assert set(link.attrs) <= {"title", "href", "id", "class"}, link.attrs  # nothing of the title became an attribute
