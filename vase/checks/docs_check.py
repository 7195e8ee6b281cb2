"""The documentation site as a reader sees it (``make docs-check``): built, every page opened in headless Chromium,
read after it renders, screenshotted.

    python -m vase.checks.docs_check             # PASS/FAIL per page; logs/docs_check/<time>/

Builds the site (``mkdocs build --strict``) into the check's folder, then opens **every** page in one headless Chromium
(Debian's package; ``make docs-check`` installs it when missing), driven over its DevTools pipe, and reads what the
page shows once its scripts have run. A page fails on markdown left raw in its text (a ``|---|`` row, ``**``, a pair
of backticks: what an HTML block swallowing the text below it leaves), a raw Sphinx role (``:func:``), a doctest shown
as nested quotes, an image that does not load, a table or code block wider than the page without a scroll bar (at
1,400 px and at phone width, 390 px), a code block or table whose content runs past its right edge at 1,400 px
(Material's scroll bars show only on hover: a cut comment or column is what a reader sees), an identifier broken
mid-word, a template placeholder in the text (``<e>``, ``{name}``), no ``##`` heading on a page of more than a
screen, or a blank screenshot; the
home page, the ablation page and the configuration reference must show their tables, the ablation page its plot.
A full-page screenshot of every page, ``docs_check.json`` and ``docs_check.md`` stay in the check's folder.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from vase import markdown as md
from vase.io import atomic_write_json, atomic_write_text
from vase.provenance import machine_stamp
from vase.runs import log_root, run_dir

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"home": "index.html", "ablation": "ablation/index.html", "reference": "reference/configuration/index.html"}
"""Pages whose point is a table: they must show one."""
NEEDS_IMAGE = ("ablation",)  # pages whose point is a plot
WIDTHS = (1400, 390)  # a laptop, a phone
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str | None:
    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


def chromium(exe: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Headless Chromium on ``args`` (a URL and what to do with it: --dump-dom, --screenshot=...)."""
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=timeout)


def screenshot(exe: str, url: str, out: Path, size: str, wait_ms: int | None = None, timeout: float = 120) -> bool:
    """``url`` rendered at ``size`` (``1280,2200``) into ``out``; whether it shows a page (the file exists and is not
    one flat colour). ``wait_ms``: virtual time the page's scripts get first."""
    budget = [f"--virtual-time-budget={wait_ms}"] if wait_ms else []
    chromium(exe, f"--window-size={size}", *budget, f"--screenshot={out}", url, timeout=timeout)
    return out.is_file() and not blank(out)


DEEP_TEXT = """(() => {
  const out = [];
  const walk = (n) => {
    if (!n) return;
    if (n.nodeType === 3) { out.push(n.textContent); return; }
    if (n.nodeType === 1 && ['SCRIPT', 'STYLE', 'TEMPLATE'].includes(n.tagName)) return;
    if (n.shadowRoot) walk(n.shadowRoot);
    if (n.tagName === 'IFRAME') { try { walk(n.contentDocument); } catch (e) {} }
    for (const c of n.childNodes) walk(c);
  };
  walk(document);
  return out.join(' ').replace(/\\s+/g, ' ');
})()"""
"""What a page shows as text once its scripts have rendered it, shadow roots (Polymer, web components) and same-origin
frames included: what ``--dump-dom`` leaves out."""

def _text_walk(shown: str, helpers: str = "") -> str:
    """A page script that returns the page's text (shadow DOM included, hidden elements left out) whose text nodes
    pass ``shown``, a JS expression of the node ``n`` and a range ``g`` holding its text; ``helpers`` are JS lines
    it can call."""
    return """(() => {
  const out = []; const W = window.innerWidth, H = window.innerHeight;
""" + helpers + """
  const walk = (n) => {
    if (!n) return;
    if (n.nodeType === 3) {
      const t = n.textContent.trim(); if (!t) return;
      const g = document.createRange(); g.selectNodeContents(n);
      if (""" + shown + """) out.push(t);
      return;
    }
    if (n.nodeType === 1) {
      if (['SCRIPT', 'STYLE', 'TEMPLATE'].includes(n.tagName)) return;
      const s = getComputedStyle(n); if (s.visibility === 'hidden' || s.display === 'none') return;
    }
    if (n.shadowRoot) walk(n.shadowRoot);
    for (const c of n.childNodes) walk(c);
  };
  walk(document.body || document);
  return out.join(' ').replace(/\\s+/g, ' ');
})()"""


IN_VIEW_TEXT = _text_walk(
    "[...g.getClientRects()].some((b) => b.width > 0 && b.bottom > 0 && b.right > 0 && b.top < H && b.left < W)")
"""The text a reader sees without scrolling: every text whose box lies (partly) inside the window, shadow DOM
included (a screenshot's words, for checks that assert what is on the first screen)."""

WHOLE_IN_VIEW_TEXT = _text_walk("whole(n, g)", """
  const box = (el) => {  // the window, cut by every ancestor that clips what overflows it (a table cell, a panel)
    let r = {l: 0, t: 0, r: W, b: H};
    for (let a = el; a && a.nodeType === 1; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX !== 'visible' || s.overflowY !== 'visible' || s.textOverflow === 'ellipsis') {
        const b = a.getBoundingClientRect();
        r = {l: Math.max(r.l, b.left), t: Math.max(r.t, b.top), r: Math.min(r.r, b.right), b: Math.min(r.b, b.bottom)};
      }
    }
    return r;
  };
  const whole = (n, g) => {
    const b = g.getBoundingClientRect(); if (b.width <= 0) return false;
    const c = box(n.parentElement);
    return b.left >= c.l - 0.5 && b.right <= c.r + 0.5 && b.top >= c.t - 0.5 && b.bottom <= c.b + 0.5;
  };""")
"""The text a reader sees whole without scrolling: every text whose box lies wholly inside the window and inside
every box around it that clips (a column cut to its width, an ellipsis): a header cut to ``sweep/reward.weights.shap``
or a number one scroll to the right is not in it."""


class BrowserPage:
    """One headless Chromium page driven over its DevTools pipe (no extra package: JSON messages on fds 3 and 4),
    reused for many URLs: ``goto``, ``evaluate``, ``wait``, ``screenshot``, ``resize``. A context manager: Chromium
    and its temporary profile are gone when the block ends."""

    def __init__(self, exe: str, size: tuple[int, int] = (1400, 1000)) -> None:
        self.exe, self.size = exe, size

    def __enter__(self) -> BrowserPage:
        cmd_r, cmd_w = os.pipe()  # vase -> Chromium
        res_r, res_w = os.pipe()  # Chromium -> vase
        self.profile = tempfile.mkdtemp(prefix="vase-chromium-")
        args = [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe",
                "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={self.profile}", f"--window-size={self.size[0]},{self.size[1]}", "about:blank"]

        def child_fds() -> None:  # Chromium reads its commands on fd 3 and writes its answers on fd 4
            a, b = os.dup(cmd_r), os.dup(res_w)  # (either end may itself be fd 3 or 4)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # pass_fds keeps 3 and 4 open across the fd cleanup that follows preexec_fn
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=child_fds,  # noqa: PLW1509
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self.writer, self.reader = os.fdopen(cmd_w, "wb"), os.fdopen(res_r, "rb")
        self.buffer, self.ids = b"", iter(range(1, 1 << 30))
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.send("Page.enable", session=True)
            # the page itself at ``size``: --window-size sets the window, whose frame takes ~87 px of its height in
            # Chromium's headless mode (a 1,400 x 900 window showed a 1,400 x 813 page)
            self.resize(*self.size)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for f in (self.writer, self.reader):
            try:
                f.close()
            except OSError:
                pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        n = next(self.ids)
        msg = {"id": n, "method": method, "params": params or {}, **({"sessionId": self.session} if session else {})}
        self.writer.write(json.dumps(msg).encode() + b"\0")
        self.writer.flush()
        while True:
            while b"\0" not in self.buffer:
                chunk = self.reader.read1(1 << 16)
                if not chunk:
                    raise RuntimeError(f"Chromium closed its DevTools pipe (during {method})")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == n:
                if "error" in reply:
                    raise RuntimeError(f"Chromium: {method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=True)

    def evaluate(self, script: str) -> Any:
        got = self.send("Runtime.evaluate", {"expression": script, "returnByValue": True}, session=True)
        return got.get("result", {}).get("value")

    def wait(self, script: str, until: Any = None, timeout: float = 90, every: float = 1.0) -> Any:
        """Evaluate ``script`` every ``every`` seconds until ``until(value)`` holds (or once, without ``until``) or
        ``timeout`` passes; the last value."""
        deadline = time.time() + timeout
        while True:
            value = self.evaluate(script)
            if until is None or (value is not None and until(value)) or time.time() > deadline:
                return value
            time.sleep(every)

    def resize(self, width: int, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": width < 600}, session=True)

    def screenshot(self, out: Path, full: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full:  # the whole page, not only the window
            box = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": box[0],
                                                            "height": min(box[1], 12000), "scale": 1})
        Path(out).write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params, session=True)["data"]))
        return Path(out)


def rendered(exe: str, url: str, script: str = DEEP_TEXT, until: Any = None, out: Path | None = None,
             size: tuple[int, int] = (1400, 1000), timeout: float = 90) -> Any:
    """Open ``url`` in headless Chromium (`BrowserPage`), evaluate ``script`` in the page every second until
    ``until(value)`` holds or ``timeout`` passes, screenshot the page into ``out`` (PNG) then, and return the script's
    last value."""
    with BrowserPage(exe, size) as page:
        page.goto(url)
        value = page.wait(script, until, timeout)
        if out is not None:
            page.screenshot(out)
        return value


def inspect_dom(dom: str, page: Path, site: Path) -> dict[str, Any]:
    """What a rendered page shows: its tables, whether markdown was left raw, its images and which are missing."""
    main = dom.split('<article', 1)[-1] if "<article" in dom else dom  # the page's content, not the theme's chrome
    text = html.unescape(re.sub(r"<[^>]+>", " ", main))
    images = re.findall(r"<img[^>]*\ssrc=\"([^\"]+)\"", main)
    missing = []
    for src in images:
        if src.startswith(("http://", "https://", "data:")):
            continue
        path = (page.parent / src.split("#")[0].split("?")[0]).resolve()
        if not (path.is_file() and path.stat().st_size > 0 and site.resolve() in path.parents):
            missing.append(src)
    raw = bool(re.search(r"\|\s*-{3,}\s*\|", text))
    return {"tables": main.count("<table"), "raw_markdown_table": raw, "images": len(images), "missing_images": missing}


def blank(png: Path) -> bool:
    """A screenshot of one flat colour (a page that failed to render). The check's own screenshots: a long page's is
    larger than PIL's guard against decompression bombs, and is read all the same: the guard is lifted for this read
    only (a process-wide lift left every later image read in the process unguarded)."""
    limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
    try:
        with Image.open(png) as im:
            return float(np.asarray(im.convert("L"), dtype=np.float32).std()) < 2.0
    finally:
        Image.MAX_IMAGE_PIXELS = limit


INSPECT = """(() => {
  const article = document.querySelector('article') || document.body;
  const clone = article.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, .highlight').forEach(e => e.remove());
  const text = clone.innerText || '';
  const edge = article.getBoundingClientRect().right;
  const scrolls = (el) => { for (let n = el; n && n !== document.body; n = n.parentElement) {
      const ox = getComputedStyle(n).overflowX; if (ox === 'auto' || ox === 'scroll') return true; } return false; };
  const cut = [];
  for (const el of article.querySelectorAll('table, pre')) {
    const inner = el.tagName === 'PRE' ? (el.querySelector('code') || el) : el;
    const wide = inner.scrollWidth > inner.clientWidth + 2 || el.getBoundingClientRect().right > edge + 2;
    if (wide && !scrolls(inner)) cut.push(el.tagName.toLowerCase() + ': ' + (el.innerText || '').slice(0, 60));
  }
  // content past a box's right edge, whether or not the box scrolls: Material's scroll bars are transparent until
  // hovered, so a reader sees a comment or a column cut, not a bar
  const hidden = [];
  for (const el of article.querySelectorAll('pre > code, .md-typeset__scrollwrap')) {
    if (el.scrollWidth > el.clientWidth + 2) hidden.push((el.innerText || '').trim().split('\\n')[0].slice(0, 60));
  }
  // an identifier (a code span without spaces, up to 40 characters) drawn on two lines: broken mid-word
  const broken = [...article.querySelectorAll('code')].filter(c => !c.closest('pre') &&
      !/\\s/.test(c.textContent.trim()) && c.textContent.trim().length <= 40 && c.getClientRects().length > 1)
      .map(c => c.textContent.slice(0, 60));
  // an identifier kept on one line (docs/javascripts/identifiers.js) that runs past the page's right edge
  const past = [...article.querySelectorAll('code.vase-identifier')].filter(c => !c.closest('table') &&
      c.getBoundingClientRect().right > edge + 2).map(c => c.textContent.slice(0, 60));
  const scrolled = [...article.querySelectorAll('table')].filter(t => t.scrollWidth > t.clientWidth + 2 ||
      t.getBoundingClientRect().right > edge + 2).length;
  const imgs = [...article.querySelectorAll('img')].map(i => ({src: i.getAttribute('src'),
                                                               ok: i.complete && i.naturalWidth > 0}));
  return {ready: document.readyState === 'complete', text: text.slice(0, 200000),
          tables: article.querySelectorAll('table').length, images: imgs, cut: cut, wide_tables: scrolled,
          hidden: hidden, broken: broken, past: past,
          headings: article.querySelectorAll('h2').length, height: document.documentElement.scrollHeight,
          nested_quotes: article.querySelectorAll('blockquote blockquote').length +
                         (text.includes('>>>') ? 1 : 0)};
})()"""
"""What a rendered page shows, read in the page: its text outside code, tables, images (loaded or not), tables and code
blocks wider than the page with no scroll bar, ``##`` headings, nested quotes."""

RAW = {"raw markdown table": r"\|\s*-{3,}\s*\|", "raw bold": r"\*\*[^*\s][^*\n]*\*\*",
       "raw code span": r"`[^`\n]+`", "raw Sphinx role": r":(?:class|func|meth|mod|data|attr|exc|obj):`?",
       "template placeholder": r"<(?:[a-z_]{1,20}|__\w+__)>|\{[a-z_]{1,20}\}|\(message built at run time\)"}
"""Marks of markdown (or reStructuredText) that was not rendered: what an HTML block swallowing the text leaves."""


def problems(name: str, found: dict[str, Any], narrow: dict[str, Any] | None = None) -> list[str]:
    """What is wrong with a page, from what `INSPECT` read in it (at the wide window, and at phone width).

    >>> problems("x", {"text": "a **b** c", "tables": 0, "images": [], "cut": [], "headings": 1, "height": 900,
    ...                "nested_quotes": 0})
    ['raw bold: **b**']
    """
    out = [f"{what}: {m.group(0)[:60]}" for what, pat in RAW.items() if (m := re.search(pat, found["text"]))]
    out += [f"image not shown: {i['src']}" for i in found["images"] if not i["ok"]]
    out += [f"cut without a scroll bar: {c}" for c in found["cut"]]
    out += [f"cut without a scroll bar at phone width: {c}" for c in (narrow or {}).get("cut", [])]
    out += [f"cut at the right edge at {WIDTHS[0]} px (its scroll bar shows only on hover): {c}"
            for c in found.get("hidden", [])]
    out += [f"identifier broken mid-word: {c}" for c in found.get("broken", [])]
    out += [f"code past the page's right edge: {c}" for c in found.get("past", [])]
    if found["nested_quotes"]:
        out.append("a doctest shown as nested quotes")
    if found["height"] > 1400 and not found["headings"]:
        out.append("no ## heading (no table of contents) on a page of more than a screen")
    if name in PAGES and not found["tables"]:
        out.append("no rendered table")
    if name in NEEDS_IMAGE and not found["images"]:
        out.append("no plot")
    return out


def site_pages(site: Path) -> dict[str, str]:
    """Every page of a built site: name (its path, or "home") -> its file, relative to the site."""
    out = {}
    for page in sorted(site.rglob("index.html")):
        rel = page.relative_to(site).as_posix()
        if rel.startswith(("search/", "assets/")):
            continue
        name = "home" if rel == "index.html" else rel.removesuffix("/index.html")
        out[{"reference/configuration": "reference"}.get(name, name)] = rel
    return out


def check_site(exe: str, site: Path, out: Path) -> dict[str, dict[str, Any]]:
    """Every page opened in one headless Chromium, read after it renders at both widths, screenshotted whole."""
    results: dict[str, dict[str, Any]] = {}
    with BrowserPage(exe, (WIDTHS[0], 1000)) as browser_page:
        for name, rel in site_pages(site).items():
            url = (site / rel).resolve().as_uri()
            try:
                browser_page.resize(WIDTHS[0], 1000)
                browser_page.goto(url)
                wide = browser_page.wait(INSPECT, until=lambda f: f.get("ready"), timeout=30)
                shot = browser_page.screenshot(out / f"{name.replace('/', '__')}.png", full=True)
                browser_page.resize(WIDTHS[1], 844)
                narrow = browser_page.wait(INSPECT, until=lambda f: f.get("ready"), timeout=30)
            except RuntimeError as e:
                results[name] = {"passed": False, "problems": [f"could not render: {e}"], "page": rel}
                continue
            found = problems(name, wide, narrow)
            if blank(shot):
                found.append("blank screenshot")
            results[name] = {"passed": not found, "problems": found, "page": rel, "tables": wide["tables"],
                             "tables_that_scroll": wide.get("wide_tables", 0),
                             "images": len(wide["images"]), "headings": wide["headings"], "screenshot": str(shot)}
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.checks.docs_check", description=__doc__.splitlines()[0])
    ap.add_argument("--site", help="check this built site instead of building one")
    a = ap.parse_args(argv)
    exe = browser()
    if exe is None:
        print("error: no Chromium found; make docs-check installs Debian's chromium", file=sys.stderr)
        return 2
    started = time.time()
    out = Path(run_dir(str(log_root(ROOT) / "docs_check"), "never"))
    site = Path(a.site) if a.site else out / "site"
    if not a.site:
        p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)], cwd=ROOT,
                           capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
        if p.returncode != 0:
            print(f"FAIL: mkdocs build --strict\n{p.stderr[-3000:]}", file=sys.stderr)
            return 1
    results = check_site(exe, site, out)
    for name, r in results.items():
        print(f"{'PASS' if r['passed'] else 'FAIL'}  {name}  tables={r.get('tables')} images={r.get('images')} "
              f"headings={r.get('headings')}  {'; '.join(r['problems'])[:400]}")
    ok = bool(results) and all(r["passed"] for r in results.values())
    atomic_write_json(out / "docs_check.json", {"machine": machine_stamp(), "browser": exe, "results": results})
    atomic_write_text(out / "docs_check.md", "# Documentation check\n\n" + md.table_text(
        ["page", "result", "problems", "screenshot"],
        [[n, "PASS" if r["passed"] else "FAIL", "; ".join(r["problems"])[:200], f"![{n}]({n.replace('/', '__')}.png)"]
         for n, r in results.items()]))
    print(f"{'PASS' if ok else 'FAIL'}: documentation check, {len(results)} pages, {time.time() - started:.0f} s ({out})")
    print(json.dumps({n: r["passed"] for n, r in results.items()}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
