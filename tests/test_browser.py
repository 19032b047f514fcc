"""In a real browser: the solutions site as self-learners read it, and a student notebook in JupyterLab.

Headless Chromium (``tests/browser_page.py``); without it these tests skip, except under CI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import nbformat
import pytest
from browser_page import PageWatch, chromium, needs_chromium
from helpers import ASSIGNMENTS, ColabRuns
from local_server import jupyter_server

from autograder.site import build_site
from autograder.submissions import released, solved
from course_utils.colab import BADGE_IMAGE

pytestmark = [pytest.mark.slow, needs_chromium]

FIRST = ASSIGNMENTS[0]


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def site(colab_runs: ColabRuns, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build_site(out, executed={name: run.notebook for name, run in colab_runs.solution.items()})
    return out


def test_site_has_a_contents_page_in_course_order(site: Path, browser) -> None:
    watch = PageWatch(browser)
    watch.page.goto((site / "index.html").as_uri())
    links = watch.page.eval_on_selector_all("ol.toc > li > a", "as => as.map(a => a.getAttribute('href'))")
    assert links == [f"{name}.html" for name in ASSIGNMENTS]
    assert watch.page.locator("ol.toc").inner_text().count("By the end") == 0, "goals are listed, not introduced"
    assert watch.page.locator("ol.toc li li").count() >= 3 * len(ASSIGNMENTS), "each entry lists its learning goals"
    assert watch.errors == []


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_page_loads_with_its_figures_and_no_errors(site: Path, browser, colab_runs: ColabRuns, name: str, tmp_path: Path) -> None:
    watch = PageWatch(browser)
    watch.page.goto((site / f"{name}.html").as_uri())
    watch.page.wait_for_load_state("load")
    images = watch.page.eval_on_selector_all("main img", "imgs => imgs.map(i => [i.complete, i.naturalWidth])")
    executed = colab_runs.solution[name]
    expected = executed.figures()
    assert len(images) == expected >= 3, f"{len(images)} images on the page, {expected} figures in the notebook"
    assert all(complete and width > 0 for complete, width in images), f"figures that did not render: {images}"
    assert watch.page.locator("math").count() > 0, "the math is rendered as MathML"
    assert watch.page.locator("h1").first.inner_text().startswith(name[:2])
    assert watch.errors == [], watch.errors
    shot = tmp_path / f"{name}.png"
    watch.page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_pages_link_to_each_other(site: Path, browser) -> None:
    watch = PageWatch(browser)
    watch.page.goto((site / f"{FIRST}.html").as_uri())
    watch.page.locator('nav.course a[rel="next"]').first.click()
    assert watch.page.url.endswith(f"{ASSIGNMENTS[1]}.html")
    watch.page.locator("nav.course a", has_text="Contents").first.click()
    assert watch.page.url.endswith("index.html") and watch.errors == []


def test_pages_have_no_script_and_navigation_above_and_below(site: Path, browser) -> None:
    watch = PageWatch(browser)
    for name in ["index", *ASSIGNMENTS]:
        watch.page.goto((site / f"{name}.html").as_uri())
        assert watch.page.locator("script").count() == 0, f"{name}.html has a script"
        assert watch.page.locator("body > nav.course").count() == (0 if name == "index" else 2), name
    assert watch.errors == []


# --- JupyterLab -------------------------------------------------------------------------------------


IN_VIEW = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook tab in front


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """JupyterLab on localhost, in the course environment, serving a folder with a student's notebooks."""
    root = tmp_path_factory.mktemp("lab")
    nbformat.write(released(FIRST), root / f"{FIRST}.ipynb")
    (root / "solved").mkdir()
    nbformat.write(solved(FIRST), root / "solved" / f"{FIRST}.ipynb")
    settings = root.parent / "lab-settings"  # no windowing: every cell's output is in the page
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTER_RUNTIME_DIR": str(root.parent / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root.parent / "workspaces"),
    }  # no tabs restored from an earlier run
    env.pop("NBGRADER_EXECUTION", None)
    with jupyter_server(root, env, "--LabApp.expose_app_in_browser=True") as (base, token):
        yield base, token, root


def open_notebook(browser, base: str, token: str, path: str) -> PageWatch:
    watch = PageWatch(browser, base=base)
    watch.page.goto(f"{base}/lab/tree/{path}?reset&token={token}")  # reset: no tabs restored from the last page
    watch.page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget && "
        "window.jupyterapp.shell.currentWidget.sessionContext && "
        "window.jupyterapp.shell.currentWidget.sessionContext.session",
        timeout=60_000,
    )
    return watch


def wait_until_idle(watch: PageWatch, timeout_ms: int = 90_000) -> None:
    watch.page.wait_for_function(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " return w.sessionContext.kernelDisplayStatus === 'idle' && !w.content.widgets.some(c => c.model.type === 'code' && c.promptNode && c.promptNode.textContent.includes('*')); }",
        timeout=timeout_ms,
    )


def test_student_notebook_runs_in_jupyterlab(jupyterlab, browser, tmp_path: Path) -> None:
    base, token, _ = jupyterlab
    watch = open_notebook(browser, base, token, f"{FIRST}.ipynb")
    wait_until_idle(watch)
    # Run All stops at the first cell that raises: in an untouched notebook, the first stub.
    watch.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    watch.page.locator(
        f"{IN_VIEW} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", has_text="NotImplementedError"
    ).first.wait_for(timeout=90_000)
    wait_until_idle(watch)
    text = watch.page.locator(f"{IN_VIEW} .jp-Notebook").inner_text()
    assert "device: cpu" in text, "the first cell ran and reported the device"
    # The student runs the self-check cell at the end, as the notebook tells them to.
    watch.page.evaluate(
        "() => { const nb = window.jupyterapp.shell.currentWidget.content;"
        " nb.activeCellIndex = nb.widgets.length - 1; return window.jupyterapp.commands.execute('notebook:run-cell'); }"
    )
    report = watch.page.locator(f"{IN_VIEW} .jp-OutputArea-output", has_text=f"Self-check of {FIRST}")
    report.wait_for(timeout=60_000)
    assert "0 of " in report.inner_text() and "not written yet" in report.inner_text()
    watch.page.screenshot(path=str(tmp_path / "jupyterlab.png"))
    offline = [e for e in watch.errors if "Failed to load resource" not in e and BADGE_IMAGE not in e]
    assert offline == [], offline  # the Colab badge's image is on the internet, which this machine cannot reach


def test_nbgrader_validate_passes_a_solved_notebook_in_jupyterlab(jupyterlab, browser, tmp_path: Path) -> None:
    base, token, _ = jupyterlab
    watch = open_notebook(browser, base, token, f"solved/{FIRST}.ipynb")
    watch.page.locator(f"{IN_VIEW} .validate-button").click()
    success = watch.page.get_by_text("Success! Your notebook passes all the tests.")
    try:
        success.wait_for(timeout=120_000)
    finally:
        watch.page.screenshot(path=str(tmp_path / "validate.png"))  # what the page showed, pass or fail
    assert success.is_visible()
