"""The checks' headless browser shows a page at the size they state (the dashboards check reads "the first screen at
1,400 x 900"): the page's own width and height, and its screenshot's. Needs Chromium (make browser-deps)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from vase.checks.docs_check import BrowserPage, browser


@pytest.mark.skipif(browser() is None, reason="Chromium is not installed (make browser-deps)")
def test_the_page_and_its_screenshot_are_the_size_asked_for(tmp_path: Path) -> None:
    with BrowserPage(browser(), size=(1400, 900)) as page:
        page.goto("data:text/html,<body style='margin:0;background:%23c33'>x</body>")
        page.wait("document.readyState", until=lambda v: v == "complete", timeout=30, every=0.2)
        assert page.evaluate("[window.innerWidth, window.innerHeight]") == [1400, 900]
        shot = page.screenshot(tmp_path / "page.png")
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])  # the PNG's IHDR
    assert (width, height) == (1400, 900)
