"""Student HTML through the allow-list: feedback and the formgrader show no script from a notebook."""

from __future__ import annotations

import re

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
# The template renders a cleaned markdown cell as markdown again, where an HTML block ends at a blank
# line: newlines kept in an attribute value or a code block must not let markdown links out.
SECOND_PASS = ['<span title="&#10;&#10;[a](javascript:alert(2)//)">hi</span>', "```\na\n\n[x](javascript:alert(3))\n```"]


def live_script(html: str) -> list[str]:
    """Every event-handler attribute and script URL in ``html``'s elements, as Python's HTML parser builds them."""
    from bs4 import BeautifulSoup

    found = []
    for tag in BeautifulSoup(html, "html.parser").find_all(True):
        for name, value in tag.attrs.items():
            text = " ".join(value) if isinstance(value, list) else str(value)
            if name.lower().startswith("on") or (name.lower() in ("href", "src") and "javascript:" in text.lower()):
                found.append(f"<{tag.name} {name}={text!r}>")
    return found


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
            *(nbformat.v4.new_markdown_cell(payload) for payload in SECOND_PASS),
            nbformat.v4.new_code_cell(
                "x = 1",
                outputs=[
                    nbformat.v4.new_output("display_data", data={"text/html": "<img src=x onerror=alert('formgrader-xss')>"}),
                    # The templates write an image's width unquoted.
                    nbformat.v4.new_output(
                        "display_data", data={"image/png": "x"}, metadata={"image/png": {"width": "1 onerror=alert(4)", "height": 5}}
                    ),
                ],
            ),
        ]
    )
    html, _ = HTMLExporter(config=config).from_notebook_node(notebook)
    assert "Notes" in html and re.search(r"height=\"?5", html)  # the width went, the height stayed
    assert "formgrader-xss" not in html and live_script(html) == []
    unsafe, _ = HTMLExporter().from_notebook_node(notebook)  # nbconvert's default: the door this closes
    assert "onerror" in unsafe and live_script(unsafe)


@pytest.mark.parametrize("payload", HOSTILE + SECOND_PASS)
def test_a_cleaned_markdown_cell_passes_the_second_rendering_unchanged(payload: str) -> None:
    from nbconvert.filters import markdown2html

    cleaned = clean_markdown(payload)
    assert markdown2html(cleaned).strip() == cleaned.strip()
    assert live_script(markdown2html(cleaned)) == []


def test_output_metadata_keeps_only_what_templates_read_with_its_type() -> None:
    output = nbformat.v4.new_output(
        "display_data",
        data={"image/png": "x"},
        metadata={"image/png": {"width": "1 onerror=alert(1)", "height": 5, "alt": "a plot", "unconfined": "yes"}, "filenames": {}},
    )
    clean_output(output)
    assert output["metadata"] == {"image/png": {"height": 5, "alt": "a plot"}}


def test_the_feedback_exporter_writes_the_page_html_exporter_writes() -> None:
    # FeedbackHtmlExporter skips HTMLExporter's BeautifulSoup pass and adds the alt text itself:
    # the page must be the same document (attribute order aside), images with and without alt text included.
    from bs4 import BeautifulSoup, Comment
    from nbconvert import HTMLExporter

    from autograder.nbgrader_ext.feedback import MISSING_ALT, FeedbackHtmlExporter
    from autograder.nbgrader_ext.sanitize import markdown_to_clean_html

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell('# Notes\n\n<img src="a.png"> <IMG SRC="b.png"> <img alt="kept" src="c.png"> $i < j$'),
            # Text that looks like a tag inside an attribute value is no tag: a tokenizer knows, a pattern does not.
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
    # With the course's configuration every HTMLExporter cleans rendered markdown last (markdown_to_clean_html).
    theirs, _ = HTMLExporter(template_name="classic", filters={"markdown2html": markdown_to_clean_html}).from_notebook_node(notebook)
    assert ours == again
    # The same page, less MathJax (a script from a CDN and its configuration): ours draws math as MathML.
    assert "ajax/libs/mathjax" not in ours and "x-mathjax-config" not in ours
    expected = BeautifulSoup(theirs, "html.parser")
    for node in expected.find_all(string=lambda text: isinstance(text, Comment) and "mathjax" in text.lower()):
        node.extract()
    for script in expected.find_all("script", src=re.compile("mathjax")) + expected.find_all("script", type="text/x-mathjax-config"):
        script.decompose()
    page = BeautifulSoup(ours, "html.parser")
    for soup in (page, expected):  # the removed blocks leave line breaks around them
        for blank in soup.find_all(string=lambda text: not text.strip()):
            blank.extract()
    assert page == expected
    assert ours.count(f'alt="{MISSING_ALT}"') == 3  # two in the markdown, the figure; not the escaped text or the title
    [link] = BeautifulSoup(ours, "html.parser").find_all("a", string="hover")
    assert set(link.attrs) <= {"title", "href", "id", "class"}, link.attrs  # nothing of the title became an attribute


def test_a_pasted_image_is_shown_and_a_missing_one_does_not_break_the_page() -> None:
    png = {"image/png": "iVBORw0KGgo="}
    shown = clean_markdown("See ![plot](attachment:plot.png) <b>here</b>", {"plot.png": png})
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in shown and "<b>here</b>" in shown
    missing = clean_markdown("See ![plot](attachment:gone.png) <b>here</b>", {})
    assert "attachment:gone.png" in missing and "<b>" not in missing  # shown as text, not rendered


def test_feedback_math_is_mathml_through_an_allow_list() -> None:
    # What a student writes in LaTeX becomes MathML elements and layout attributes only: latex2mathml turns
    # \\href into an href attribute, which the allow-list drops.
    from autograder.nbgrader_ext.feedback import OfflineMarkdown

    cell = nbformat.v4.new_markdown_cell("Scores $\\frac{QK^\\top}{\\sqrt{d}}$ and $$\\href{javascript:alert(1)}{x}$$, `$kept$` in code")
    notebook, _ = OfflineMarkdown().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    source = notebook.cells[0].source
    assert source.count("<math") == 2 and "<mfrac>" in source and "<msqrt>" in source
    assert "href" not in source and "javascript" not in source
    assert "`$kept$`" in source


def test_display_math_then_a_javascript_link_stays_dead() -> None:
    # The math step runs after the sanitiser and splits its one-line HTML: the template's markdown pass must clean last.
    from nbconvert import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.nbgrader_ext.feedback import FeedbackHtmlExporter, OfflineMarkdown

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    cells = ["$$x^2$$ \\[a\\](javascript:alert(1))", "Text $$y$$ [b](javascript:alert(2)) <img src=x onerror=alert(3)>"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(cell) for cell in cells])
    for exporter in (FeedbackHtmlExporter(config=config, template_name="classic"), HTMLExporter(config=config)):
        exporter.register_preprocessor(OfflineMarkdown, enabled=True)  # after the sanitiser, as generate_feedback runs it
        html, _ = exporter.from_notebook_node(notebook)
        assert html.count("<math") == 2 and "<msup>" in html, type(exporter)  # the math stays MathML
        assert live_script(html) == [], (type(exporter), live_script(html))


def test_rendered_markdown_is_cleaned_last_and_keeps_mathml_and_anchors() -> None:
    # nbgrader's feedback template renders a gradebook comment with this filter: unescaped, it still makes no script.
    from autograder.nbgrader_ext.sanitize import markdown_to_clean_html

    comment = " ".join(HOSTILE) + "\n\n# Heading\n\n<math><mfrac><mi>a</mi><mi>b</mi></mfrac></math>"
    html = markdown_to_clean_html({}, comment)
    assert live_script(html) == [] and not any(bad in html.lower() for bad in EXECUTABLE), html
    assert '<h1 id="Heading">' in html and 'class="anchor-link"' in html and "<mfrac><mi>a</mi>" in html


def test_a_gradebook_comment_is_plain_text_to_markdown() -> None:
    # What grade writes into the gradebook reads as written once nbgrader's feedback renders it as markdown.
    from bs4 import BeautifulSoup
    from nbconvert.filters import markdown2html

    from autograder.grading.gradebook_export import plain_markdown

    lines = [
        "Autograder: invalid student name: '<img src=x onerror=alert(1)>'",
        "NameError: <svg onload=alert(2)> &#106; http://127.0.0.1:9/x www.example.com",
        "    x = a*b*c + __init__[0]  # [l](javascript:alert(3)) ![i](x)",
        "1. # not a heading",
        "- not a list",
        "> not a quote",
    ]
    html = markdown2html(plain_markdown("\n".join(lines) + "\r[z](javascript:alert(4))"))
    soup = BeautifulSoup(html, "html.parser")
    assert {tag.name for tag in soup.find_all(True)} == {"p", "br"}, html  # no link, image, heading, list or code
    shown = [line.replace("\xa0", " ") for line in soup.get_text().splitlines()]
    assert shown == [*lines, "[z](javascript:alert(4))"]
    assert plain_markdown("Autograder: unreadable: not a notebook") == "Autograder: unreadable: not a notebook"
