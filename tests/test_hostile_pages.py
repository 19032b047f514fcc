"""Every page a student's text reaches, built from a hostile notebook and opened in Chromium: no script runs.

The pages: nbgrader's ``generate_feedback`` page (the one ``grade`` sends students, here with the comments
``grade --gradebook`` wrote into the gradebook), the notebook as formgrader renders it (``HTMLExporter`` with
the course's configuration) and the class report. Each payload would set ``window.__xss`` or ask a server on
this machine for a page (``PageWatch`` records any request that is not the page's own file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import nbformat
import pytest
from bad_submissions import FIRST
from browser_page import PageWatch, chromium, needs_chromium

from autograder.grading.models import AssignmentSpec, GradeRow, GradingResults, Kind, Misconception, Outcome, TestRow
from autograder.settings import SOLUTIONS_DIR
from autograder.submissions import solved

pytestmark = [pytest.mark.slow, needs_chromium]

RUN = "window.__xss = (window.__xss || []).concat(['{0}']); fetch('http://127.0.0.1:9/{0}')"
IMG = f'<img src="x" onerror="{RUN.format("img")}">'
SVG = f'<svg onload="{RUN.format("svg")}"></svg>'
SCRIPT = f"<script>{RUN.format('script')}</script>"
# After display math the sanitiser's one-line HTML was split, and the escaped brackets became a link again.
MATH_THEN_LINK = "$$x^2$$ \\[after math\\](javascript:window.__xss=['math-link']) [plain](javascript:window.__xss=['link'])"
# What grade writes into the gradebook: the id's note, an exception message, a quoted line of the student's code.
STATUS = f"invalid student name: '{IMG}'; NameError: {SVG} at line 3:\n    x = {SCRIPT}  # [c](javascript:window.__xss=['quoted'])"
STUDENT = "mallory"


def hostile_notebook() -> nbformat.NotebookNode:
    """The solved notebook with script in markdown, in outputs and in an error's message, as autograde leaves it."""
    notebook = solved(FIRST)
    shows = nbformat.v4.new_code_cell(
        "show()",
        outputs=[
            nbformat.v4.new_output("display_data", data={"text/html": IMG + SCRIPT, "text/plain": "x"}),
            nbformat.v4.new_output("display_data", data={"image/svg+xml": SVG}),
            nbformat.v4.new_output("error", ename="NameError", evalue=IMG, traceback=[f"NameError: {SVG}"]),
        ],
    )
    notebook.cells[1:1] = [
        nbformat.v4.new_markdown_cell(f"My notes {IMG} {SVG} {SCRIPT}"),
        nbformat.v4.new_markdown_cell(MATH_THEN_LINK),
        shows,
    ]
    return notebook


SPEC = AssignmentSpec.load(SOLUTIONS_DIR, FIRST)


def hostile_results() -> list:
    tests = list(SPEC.tests)
    grade = GradeRow(STUDENT, FIRST, 1.0, 10.0, Outcome(Kind.GRADED, f"lost points on: {tests[0]}", (STATUS,)))
    rows = [TestRow(STUDENT, FIRST, t, 0.0, 1.0, (Misconception(f"{IMG} mistake"),)) for t in tests]
    return GradingResults.from_rows([grade], rows).results


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The feedback page generate_feedback writes from the gradebook grade wrote, formgrader's rendering, the class report."""
    from nbconvert import HTMLExporter

    from autograder.course import scratch_course
    from autograder.course_config import course_config
    from autograder.grading.class_report import build_class_report, render_html
    from autograder.grading.gradebook_export import export_to_gradebook

    out = tmp_path_factory.mktemp("hostile-pages")
    graded = out / f"{FIRST}.ipynb"
    nbformat.write(hostile_notebook(), graded)
    results = hostile_results()
    with scratch_course() as course:
        url = f"sqlite:///{course.db_path}"
        export_to_gradebook(url, results, autograded={(STUDENT, FIRST): graded}, course_dir=course.root)
        course.check(course.api().generate_feedback(FIRST, STUDENT), "generate_feedback")
        feedback = (course.root / "feedback" / STUDENT / FIRST / f"{FIRST}.html").read_text(encoding="utf-8")
        config = course_config(course.root, db_url=url)
    (out / "feedback.html").write_text(feedback, encoding="utf-8")
    formgrader, _ = HTMLExporter(config=config).from_notebook_node(hostile_notebook())
    (out / "formgrader.html").write_text(formgrader, encoding="utf-8")
    (out / "report.html").write_text(render_html(build_class_report(results, {FIRST: SPEC})), encoding="utf-8")
    return {name: out / f"{name}.html" for name in ("feedback", "formgrader", "report")}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as launched:
        yield launched


SCRIPT_URLS = """() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
    .filter(a => a.name.startsWith('on') || /^\\s*(javascript|vbscript):/i.test(a.value))
    .map(a => e.tagName + ' ' + a.name + '=' + a.value))"""


SHOWN = {"feedback": f"invalid student name: '{IMG}'", "formgrader": "My notes", "report": f"{IMG} mistake"}


@pytest.mark.parametrize("name", ["feedback", "formgrader", "report"])
def test_no_student_script_runs_in_any_page(pages: dict[str, Path], browser, name: str) -> None:
    watch = PageWatch(browser)
    watch.page.goto(pages[name].as_uri())
    watch.page.wait_for_load_state("load")
    for link in watch.page.locator('a:not([href^="#"])').all():  # a live javascript: link would run when followed
        if link.is_visible():
            link.click(no_wait_after=True, timeout=2_000)
    assert watch.page.evaluate("() => window.__xss") is None
    assert watch.page.evaluate(SCRIPT_URLS) == []
    # The payloads ask 127.0.0.1:9; the page's own scripts (formgrader's MathJax) are not student text.
    assert [e for e in watch.errors if "127.0.0.1:9" in e] == []
    text = watch.page.locator("body").inner_text()
    assert SHOWN[name] in text  # the student's text is on the page, as text


def test_the_gradebook_comment_reads_as_the_student_wrote_it(pages: dict[str, Path], browser) -> None:
    watch = PageWatch(browser)
    watch.page.goto(pages["feedback"].as_uri())
    comments = watch.page.locator(".comment, .panel-body").all_inner_texts()
    shown = "\n".join(comments)
    assert "x = <script>" in shown and "[c](javascript:" in shown, shown  # the quoted line, literally
    assert '<img src="x" onerror=' in shown
    assert watch.page.locator("math").count() >= 1  # the display math stays MathML
