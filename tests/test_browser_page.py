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


@pytest.mark.skipif(browser() is None, reason="Chromium is not installed (make browser-deps)")
def test_the_first_screen_s_text_and_the_text_whole_on_it_are_what_is_drawn(tmp_path: Path) -> None:
    """IN_VIEW_TEXT: a text partly on the first screen counts, one below it or hidden does not; WHOLE_IN_VIEW_TEXT
    also leaves out a text its cell cuts short or the window's right edge cuts (what the dashboards check reads)."""
    from vase.checks.docs_check import IN_VIEW_TEXT, WHOLE_IN_VIEW_TEXT

    page_html = tmp_path / "page.html"
    page_html.write_text(
        "<body style='margin:0;font:16px sans-serif'>"
        "<p>whole-here</p>"
        "<div style='width:60px;overflow:hidden;white-space:nowrap'>cut-by-its-cell-to-sixty-pixels</div>"
        "<div style='position:absolute;left:1350px;top:200px;white-space:nowrap'>cut-by-the-window-edge</div>"
        "<p style='visibility:hidden'>hidden-text</p>"
        "<div style='position:absolute;top:2000px'>below-the-fold</div></body>")
    with BrowserPage(browser(), size=(1400, 900)) as page:
        page.goto(page_html.as_uri())
        page.wait("document.readyState", until=lambda v: v == "complete", timeout=30, every=0.2)
        seen, whole = page.evaluate(IN_VIEW_TEXT).split(), page.evaluate(WHOLE_IN_VIEW_TEXT).split()
    assert seen == ["whole-here", "cut-by-its-cell-to-sixty-pixels", "cut-by-the-window-edge"]
    assert whole == ["whole-here"]
