"""Headless Chromium for the tests that read a page as a person would: the site, the class report, feedback.

Debian's ``chromium``, driven by Playwright. Without it those tests skip, except under CI, which
installs it (see the README) and where a skip would hide a broken path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Any, Iterator

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("CI"):
    raise RuntimeError("CI must run the browser tests: install Debian's chromium (see the README's setup)")

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium for the browser tests")


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium, closed at the end of the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


class PageWatch:
    """A page that remembers console errors, uncaught exceptions and any request off this machine (refused)."""

    def __init__(self, browser: Any, base: str = "file://") -> None:
        self.page = browser.new_page(viewport={"width": 1200, "height": 900})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("dialog", lambda d: (self.errors.append(f"dialog: {d.message}"), d.dismiss()))

        def block_network(route: Any) -> None:
            if not route.request.url.startswith((base, "data:")):
                self.errors.append(f"asked the network for {route.request.url}")
                route.abort()
            else:
                route.continue_()

        self.page.route("**/*", block_network)
