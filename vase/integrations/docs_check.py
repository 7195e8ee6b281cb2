"""The documentation site as a reader sees it (``make docs-check``): built, opened in headless Chromium, screenshotted.

    python -m vase.integrations.docs_check             # PASS/FAIL per page; logs/docs_check/<time>/

Builds the site (``mkdocs build --strict``) into the check's folder, then for the home page, the ablation page and the
configuration reference: Chromium (Debian's package; ``make docs-check`` installs it when missing) renders the page
and dumps its DOM, and screenshots it. A page fails when its DOM has no rendered table, when markdown was left raw (a
``|---|`` row in the text), when an image it shows does not exist in the site or is empty, or when its screenshot is
blank. The screenshots and ``docs_check.json`` / ``.md`` stay in the check's folder.
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

from vase.io import atomic_write_json, atomic_write_text
from vase.runs import machine_stamp, run_dir

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"home": "index.html", "ablation": "ablation/index.html", "reference": "reference/configuration/index.html"}
NEEDS_IMAGE = ("ablation",)  # pages whose point is a plot
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

SCROLLED_TEXT = DEEP_TEXT.replace("walk(document);", """walk(document);
  // tables that draw only the rows in view: each call scrolls every scrollable box on by a screen, and the text
  // seen at every position so far is kept
  const boxes = [document.scrollingElement];
  const find = (n) => { if (!n) return; if (n.nodeType === 1 && n.scrollHeight > n.clientHeight + 4) boxes.push(n);
    if (n.shadowRoot) find(n.shadowRoot); for (const c of n.children || []) find(c); };
  find(document.body);
  for (const b of boxes) { if (b) b.scrollTop = b.scrollTop + Math.max(b.clientHeight, 200); }
  window.__vaseSeen = (window.__vaseSeen || '') + ' ' + out.join(' ');
  out.length = 0; out.push(window.__vaseSeen);""")
"""`DEEP_TEXT` for pages that draw long tables a screen at a time: scrolls on at each call, returns all text seen."""


def rendered(exe: str, url: str, script: str = DEEP_TEXT, until: Any = None, out: Path | None = None,
             size: tuple[int, int] = (1400, 1000), timeout: float = 90) -> Any:
    """Open ``url`` in headless Chromium driven over its DevTools pipe (no extra package: JSON messages on fds 3 and
    4), evaluate ``script`` in the page every second until ``until(value)`` holds or ``timeout`` passes, screenshot
    the page into ``out`` (PNG) then, and return the script's last value."""
    cmd_r, cmd_w = os.pipe()  # vase -> Chromium
    res_r, res_w = os.pipe()  # Chromium -> vase
    profile = tempfile.mkdtemp(prefix="vase-chromium-")
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe",
            "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}", "about:blank"]

    def child_fds() -> None:  # Chromium reads its commands on fd 3 and writes its answers on fd 4
        a, b = os.dup(cmd_r), os.dup(res_w)  # (either end may itself be fd 3 or 4)
        os.dup2(a, 3)
        os.dup2(b, 4)

    # pass_fds keeps 3 and 4 open across the fd cleanup that follows preexec_fn
    proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=child_fds, stdout=subprocess.DEVNULL,  # noqa: PLW1509
                            stderr=subprocess.DEVNULL)
    os.close(cmd_r)
    os.close(res_w)
    writer, reader = os.fdopen(cmd_w, "wb"), os.fdopen(res_r, "rb")
    buffer, ids = b"", iter(range(1, 1 << 30))

    def send(method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        nonlocal buffer
        n = next(ids)
        msg = {"id": n, "method": method, "params": params or {}, **({"sessionId": session} if session else {})}
        writer.write(json.dumps(msg).encode() + b"\0")
        writer.flush()
        while True:
            while b"\0" not in buffer:
                chunk = reader.read1(1 << 16)
                if not chunk:
                    raise RuntimeError(f"Chromium closed its DevTools pipe while opening {url}")
                buffer += chunk
            raw, buffer = buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == n:
                if "error" in reply:
                    raise RuntimeError(f"Chromium: {method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    try:
        target = send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        send("Page.enable", session=session)
        send("Page.navigate", {"url": url}, session)
        deadline, value = time.time() + timeout, None
        while True:
            got = send("Runtime.evaluate", {"expression": script, "returnByValue": True}, session)
            value = got.get("result", {}).get("value")
            if until is None or (value is not None and until(value)) or time.time() > deadline:
                break
            time.sleep(1.0)
        if out is not None:
            shot = send("Page.captureScreenshot", {"format": "png"}, session)
            Path(out).write_bytes(base64.b64decode(shot["data"]))
        return value
    finally:
        writer.close()
        reader.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


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
    """A screenshot of one flat colour (a page that failed to render)."""
    with Image.open(png) as im:
        return float(np.asarray(im.convert("L"), dtype=np.float32).std()) < 2.0


def check_page(exe: str, site: Path, name: str, rel: str, out: Path) -> dict[str, Any]:
    page = site / rel
    if not page.is_file():
        return {"passed": False, "error": f"{rel} was not built"}
    url = page.resolve().as_uri()
    dump = chromium(exe, "--virtual-time-budget=3000", "--dump-dom", url)
    shot = out / f"{name}.png"
    shown = screenshot(exe, url, shot, "1280,2200")
    found = inspect_dom(dump.stdout, page, site)
    found["screenshot"] = str(shot)
    found["blank_screenshot"] = not shown
    ok = (dump.returncode == 0 and found["tables"] >= 1 and not found["raw_markdown_table"]
          and not found["missing_images"] and not found["blank_screenshot"]
          and (found["images"] >= 1 or name not in NEEDS_IMAGE))
    return {"passed": ok, **found}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.integrations.docs_check", description=__doc__.splitlines()[0])
    ap.add_argument("--site", help="check this built site instead of building one")
    a = ap.parse_args(argv)
    exe = browser()
    if exe is None:
        print("error: no Chromium found; make docs-check installs Debian's chromium", file=sys.stderr)
        return 2
    started = time.time()
    out = Path(run_dir(str(ROOT / "logs" / "docs_check"), "never"))
    site = Path(a.site) if a.site else out / "site"
    if not a.site:
        p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)], cwd=ROOT,
                           capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
        if p.returncode != 0:
            print(f"FAIL: mkdocs build --strict\n{p.stderr[-3000:]}", file=sys.stderr)
            return 1
    results = {name: check_page(exe, site, name, rel, out) for name, rel in PAGES.items()}
    for name, r in results.items():
        print(f"{'PASS' if r['passed'] else 'FAIL'}  {name}  tables={r.get('tables')} images={r.get('images')} "
              f"missing={r.get('missing_images')} raw_markdown={r.get('raw_markdown_table')}  {r.get('screenshot', '')}")
    ok = all(r["passed"] for r in results.values())
    atomic_write_json(out / "docs_check.json", {"machine": machine_stamp(), "browser": exe, "results": results})
    atomic_write_text(out / "docs_check.md", "# Documentation check\n\n| page | result | tables | images | screenshot |\n"
                      "|---|---|---:|---:|---|\n" + "".join(
                          f"| {n} | {'PASS' if r['passed'] else 'FAIL'} | {r.get('tables')} | {r.get('images')} | "
                          f"![{n}]({n}.png) |\n" for n, r in results.items()))
    print(f"{'PASS' if ok else 'FAIL'}: documentation check, {len(results)} pages, {time.time() - started:.0f} s ({out})")
    print(json.dumps({n: r["passed"] for n, r in results.items()}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
