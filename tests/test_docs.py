"""The documentation site (issue 38): it builds with --strict, its configuration reference is what the code generates,
the README fits on a screen and links into it, and the tables that come from runs are written into its pages."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strict_and_a_broken_link_fails_it(tmp_path: Path) -> None:
    p = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert p.returncode == 0, p.stderr[-3000:]
    for page in ("index.html", "reference/configuration/index.html", "ablation/index.html", "api/rewards/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # the API pages come from the docstrings (mkdocstrings), not from hand-written text
    assert "normalized_weights" in (tmp_path / "site" / "api" / "rewards" / "index.html").read_text()
    # the same site with one link to a page that does not exist: --strict refuses it
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "vase", copy / "vase", ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "docs" / "training.md", "a") as f:
        f.write("\nSee [the missing page](no-such-page.md).\n")
    p = _mkdocs(copy / "mkdocs.yml", tmp_path / "site2")
    assert p.returncode != 0 and "no-such-page.md" in p.stderr


def test_the_configuration_reference_is_what_the_code_generates() -> None:
    from vase.reports.config_reference import PAGE, generate

    assert PAGE.read_text() == generate(), "run python -m vase.reports.config_reference"


def test_every_group_option_and_key_is_in_the_reference(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from vase.reports.config_reference import generate

    page = generate()
    for group in (p for p in (ROOT / "conf").iterdir() if p.is_dir()):
        for option in group.glob("*.yaml"):
            assert f"#### `{group.name}={option.stem}`" in page, (group.name, option.stem)
    # a key of a group option, with its type, default and the doc its YAML comment gives
    assert "| `stage.module.beta` | float | `0.001` | KL weight against the reference" in page
    assert "| `trainer.max_time` | null | `null` | a training-time budget per stage" in page
    # the schema's annotation, where vase.config validates the section
    assert re.search(r"\| `stage\.epochs` \| int \| `1` \|", page)
    assert OmegaConf.load(ROOT / "conf" / "train.yaml")  # the page came from files that load


def test_a_keys_doc_is_its_own_comment_wrapped_or_above_never_the_files_header(tmp_path: Path) -> None:
    from vase.reports.config_reference import key_docs

    f = tmp_path / "x.yaml"
    f.write_text("# the file's own description\nfirst: 1\nblock:\n  # what inner is\n  inner: 2\n"
                 "  wrapped: 3   # a comment that goes on\n               # onto the next line\n"
                 "quoted: 'a # not a comment'  # the real one\nplain: 4\n")
    docs = key_docs(f)
    assert "first" not in docs  # the header describes the file, not its first key
    assert docs["block.inner"] == "what inner is"
    assert docs["block.wrapped"] == "a comment that goes on onto the next line"
    assert docs["quoted"] == "the real one" and "plain" not in docs


def test_the_readme_fits_on_a_screen_and_every_docs_link_resolves() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert len(links) >= 10 and all((ROOT / link).is_file() for link in links), links
    assert "make demo" in text and "make test" in text


def test_the_demo_table_is_written_into_its_docs_page_from_the_newest_demo(tmp_path: Path) -> None:
    from vase.readme_tables import main

    logs = tmp_path / "logs"
    metric = {"n": 24, "start": 0.4, "run": 0.42, "diff": 0.02, "lo": -0.01, "hi": 0.05, "sd": 0.05}
    for name, overrides, run in (("2026-11-28_08-00-00", "- experiment=demo\n", "GRPO-A"),
                                 ("2026-11-28_09-00-00", "- experiment=demo\n- seed=3\n", "GRPO-B")):  # a probe
        run_dir = logs / "demo" / "runs" / name
        (run_dir / ".hydra").mkdir(parents=True)
        (run_dir / ".hydra" / "overrides.yaml").write_text(overrides)
        metrics = {m: metric for m in ("fid_score", "clip_score", "r_at_1", "r_at_5", "r_at_10",
                                       "lexical_similarity", "overall_score")}
        (run_dir / "paired_captions.json").write_text(json.dumps({"run": run, "start": "SFT", "metrics": metrics}))
    page = tmp_path / "docs" / "getting-started.md"
    page.parent.mkdir()
    page.write_text("text\n<!-- vase:table demo -->\nold\n<!-- vase:end -->\nmore\n")
    assert main(["--readme", str(page), "--logs", str(logs)]) == 0
    out = page.read_text()
    assert "| lexical_similarity | 0.400 | 0.420 | +0.020 [-0.010, +0.050]" in out and "GRPO-A" in out
    assert "GRPO-B" not in out and "old" not in out and out.endswith("more\n")


def test_the_page_check_finds_raw_markdown_a_missing_image_and_a_blank_screenshot(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from vase.integrations.docs_check import blank, inspect_dom

    site = tmp_path / "site"
    (site / "p" / "img").mkdir(parents=True)
    (site / "p" / "img" / "plot.png").write_bytes(b"\x89PNG...")
    page = site / "p" / "index.html"
    good = '<nav>menu</nav><article><table><tr><td>1</td></tr></table><img alt="x" src="img/plot.png"></article>'
    assert inspect_dom(good, page, site) == {"tables": 1, "raw_markdown_table": False, "images": 1,
                                             "missing_images": []}
    raw = '<article><p>| run | x |\n|---|---|\n| a | 1 |</p><img src="img/gone.png"></article>'
    found = inspect_dom(raw, page, site)
    assert found["tables"] == 0 and found["raw_markdown_table"] and found["missing_images"] == ["img/gone.png"]
    escape = '<article><img src="../../../../etc/passwd"></article>'  # outside the site is not the page's image
    assert inspect_dom(escape, page, site)["missing_images"]
    Image.fromarray(np.full((40, 40), 255, np.uint8)).save(tmp_path / "white.png")
    noisy = np.random.default_rng(0).integers(0, 255, (40, 40), dtype=np.uint8)
    Image.fromarray(noisy).save(tmp_path / "page.png")
    assert blank(tmp_path / "white.png") and not blank(tmp_path / "page.png")


@pytest.mark.slow
def test_make_docs_check_screenshots_the_rendered_pages() -> None:
    """Headless Chromium (Debian's, installed by make when missing) renders the home page, the ablation page and the
    configuration reference: tables rendered, the ablation plot shown, no blank page."""
    p = subprocess.run(["make", "docs-check"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for page in ("home", "ablation", "reference"):
        assert f"PASS  {page}" in p.stdout
    out = Path(re.search(r"\((/[^)]+docs_check/[^)]+)\)", p.stdout).group(1))
    assert all((out / f"{page}.png").stat().st_size > 10_000 for page in ("home", "ablation", "reference"))
