"""vase's self-hosted dashboards against the real servers (``make dashboards-check``): MLflow and TensorBoard, checked
for what a user sees.

    python -m vase.checks.dashboards_check           # PASS/FAIL per part; logs/dashboards_check/<time>/

Starts a real MLflow tracking server (``mlflow server`` from MLflow's own virtualenv, built under
``~/.cache/vase/tools/`` (`tools_dir`) from the package index when missing: vase itself installs only MLflow's client) on 127.0.0.1,
with its SQLite store and its artifact store in a folder of its own; runs a ten-job reward-weight sweep with a real
effect (`SWEEP`: experiment=ablation_quick on six views and 100 GRPO steps of 4 prompts, GRPO at shape weight 0 and
0.6 on seeds 1 to 5 from one shared SFT, held-out verdict on the runs pooled) with ``logger=[mlflow,tensorboard]`` from another working directory, as a second machine
would; starts TensorBoard on the sweep; then:

0. ``real-effect``: the sweep's answer is ``up`` with an interval above 0 (held-out shape right), so what the pages
   show is an answer.
1. ``mlflow``, through MLflow's REST API: one parent run for the sweep holding its summary and the ablation's verdict
   table, ten child runs whose parameters differ in exactly the swept key, the seed (a replicate) and the weights the
   swept key determines (one seed's two jobs in the swept key alone), the weight
   0.6 job holding its comparison with the baseline (``vs_baseline/...``); the parent holds the answer as
   ``verdict/...`` metrics and in its name. Every file went to the server's artifact store. Through the rendered
   pages (headless Chromium, shadow DOM included), reading only what is on the first screen at 1,400 x 900
   (`IN_VIEW_TEXT`): the jobs link vase printed shows, whole (`WHOLE_IN_VIEW_TEXT`: no title cut short, nothing
   one scroll away) with MLflow's Assistant panel open, both weights' jobs, the swept key as the first parameter column and
   each job against the baseline with both bounds under a title with its unit (`CELL_TITLE`); the answer link shows the verdict (``... up``); the run comparison's first plot
   has the swept key as its first axis, and is drawn: coloured pixels in its box (`ink`), not a grey placeholder.
2. ``mlflow-single-run``: ``train.py logger=mlflow`` alone (no sweep) against the same server: its run finishes on
   the server, every tag a value (no None), its config file in the server's artifact store.
3. ``mlflow-server-dies``: a single run against a second server that is killed (SIGKILL) once the run's first
   losses are on it: training finishes and keeps its adapter, one line says what was not logged and how to send it;
   the server started again on its store, ``python -m vase.mlflow_journal <run>`` sends it (every step's loss, the
   run's end, its end metrics on the server).
4. ``tensorboard``: started with the command the sweep printed (one relative folder); its HTTP API lists one run per
   job, named by its swept values, with the training reward's scalars, the swept key as the hparams view's first
   column and the comparison with the baseline as its first metric; HPARAMS' first screen shows the swept key, that
   measure and every job; the page the command names shows the training curves drawn (pixels) and no ``hp/`` chart.

The screenshots are taken from the same rendered pages. Both servers are stopped at the end, whatever happened.
Results in ``dashboards_check.json`` / ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from vase import markdown as md
from vase.checks.docs_check import DEEP_TEXT, IN_VIEW_TEXT, WHOLE_IN_VIEW_TEXT, BrowserPage, browser, rendered
from vase.checks.mlflow_faults import api, check_server_dies, check_server_gone_at_sweep_end, mlflow_version, server
from vase.checks.slurm import free_port
from vase.checks.venvs import tool_venv, tools_dir
from vase.io import atomic_write_json, atomic_write_text
from vase.provenance import machine_stamp
from vase.reports.sweep_dashboards import CURVES
from vase.runs import log_root, run_dir

ROOT = Path(__file__).resolve().parents[2]


SWEEP = ["experiment=ablation_quick", "data.views=[front,back,left,right,top,bottom]", "stage.batch_size=4",
         "trainer.max_steps=100", "val.vqa=null", "hypothesis.moves=[heldout/shape_right,heldout/fabric_right]",
         "seed=1,2,3,4,5", "logger=[mlflow,tensorboard]"]
"""A sweep with a real effect, small enough for a check: experiment=ablation_quick (one SFT on 240 vases, GRPO at
shape weight 0 and 0.6, the held-out verdict on 240 vases) as it was measured for this check, on six views with 100
GRPO steps of 4 prompts (the quick form itself now shows two views in 75 steps of 16), where the shape weight
moves held-out shape up with an interval that excludes 0 (measured: +19.6 [+14.2, +25.0] points on AMD EPYC, 4 min
35 s from an empty cache on 2 cores; +12.1 [+6.2, +17.9] on an Intel Xeon, where the whole check took 316 s from
empty caches and 165 s warm, alone; 2026-12-02), so the screenshots show an answer, not ``+0 [+0, +0]``. (On 160 vases
the SFT collapsed onto one shape and GRPO moved nothing: +0.0.) A verdict decides on three runs a setting or more,
over the runs' spread: on seeds 1, 2 and 3 (the quick form's) the check's sweep decided on one machine and not on
another (2026-12-07: +14.6 [+2.2, +27.0] in CI's run, 676 s beside the rest of the slow suite; +12.1 [-5.6, +29.7]
on an Intel Xeon, its runs +6, +12 and +18 with 2 degrees of freedom), so the check runs five seeds a weight (ten
GRPO jobs; 4 degrees of freedom), and its answer stands on either."""
SWEPT = "sweep/reward.weights.shape"
DETERMINED = {f"weights/{d}" for d in ("fabric", "technique", "shape", "dating", "decoration", "attribution")}
"""The weights the swept key determines: tags of each job's run, no axis of the comparison page."""
HELDOUT = "hp/heldout/shape_vs_start"
"""Each job's held-out change from its start, a metric of its run."""
MEASURE = "vs_baseline/heldout/shape_right"
"""The hypothesis's comparison of a job with the baseline, the runs tables' first metric."""
CELL_TITLE = "Δ shape_right in points"
"""The jobs view's column of each job against the baseline as text (`vase.reports.verdict_view.job_cells`)."""
CELL = re.compile(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]")
"""A compared job's cell there: the difference in points and both bounds (``+20.0 [+12.5, +27.5]``)."""
SWEPT_TITLE, MEASURE_TITLE = "w_shape", "Δ shape_right"
"""The swept key's and the comparison's column titles in TensorBoard's HPARAMS (`vase.tensorboard_sweep.column_title`)."""
VERDICT = "reward.weights.shape=0.6 vs 0.0: held-out shape right"
REPLICATE = "sweep_replicate/seed"
"""The seed (`SWEEP`: five runs a weight), a replicate of the hypothesis: the other parameter that differs."""
SEEDS = (1, 2, 3, 4, 5)
SWEPT_VALUES = [0.0] * len(SEEDS) + [0.6] * len(SEEDS)
JOBS = ("grpo-w_shape=0.0", "grpo-w_shape=0.6")
"""Each weight's jobs in MLflow's jobs view (``grpo-w_shape=0.0-seed=1`` ...)."""
BOARD_RUNS = tuple(f"w_shape={w}-seed={s}" for w in ("0.0", "0.6") for s in SEEDS)
"""The runs TensorBoard lists when started with the command the sweep printed (a link per job, named by its values)."""
SCREEN = (1400, 900)
"""The first screen a check reads: a laptop's browser window."""


def _page(url: str, out: Path, until: Any, script: str = DEEP_TEXT) -> str:
    """What ``url`` shows once drawn at `SCREEN` (its text, shadow DOM included; with `IN_VIEW_TEXT` only what is on
    the first screen; "" without Chromium), screenshotted into ``out``."""
    exe = browser()
    return (rendered(exe, url, script=script, until=until, out=out, size=SCREEN, timeout=90) or "") if exe else ""


LARGEST_PLOT = """(() => {
  const W = window.innerWidth, H = window.innerHeight; let best = null;
  const walk = (root) => {
    for (const el of root.querySelectorAll('svg, canvas')) {
      const r = el.getBoundingClientRect();
      const x0 = Math.max(0, r.left), y0 = Math.max(0, r.top), x1 = Math.min(W, r.right), y1 = Math.min(H, r.bottom);
      const area = (x1 - x0) * (y1 - y0);
      if (x1 - x0 >= 200 && y1 - y0 >= 100 && (!best || area > best.area)) best = {x: x0, y: y0, w: x1 - x0, h: y1 - y0, area};
    }
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document); return best;
})()"""
"""The largest plot (an SVG or a canvas, at least 200 x 100 px) on the first screen: its box there, or null."""

PLOT_PAGE = "({text: " + IN_VIEW_TEXT + ", plot: " + LARGEST_PLOT + "})"
"""The first screen's text and its largest plot's box."""

MIN_INK = 400
"""Coloured pixels a drawn plot shows at the least (two jobs' lines or curves): a loading placeholder is grey."""


def ink(png: Path, box: dict[str, float]) -> int:
    """The coloured pixels (saturation above 0.3, not dark) inside ``box`` of a screenshot: what a drawn plot's
    lines put there, and a grey placeholder or an empty frame does not."""
    with Image.open(png) as im:
        crop = im.convert("RGB").crop((int(box["x"]), int(box["y"]), int(box["x"] + box["w"]), int(box["y"] + box["h"])))
    rgb = np.asarray(crop, dtype=np.float32) / 255.0
    hi, lo = rgb.max(axis=-1), rgb.min(axis=-1)
    saturation = np.where(hi > 0, (hi - lo) / np.maximum(hi, 1e-6), 0.0)
    return int(((saturation > 0.3) & (hi > 0.25)).sum())


def drawn_page(url: str, out: Path, until: Any, timeout: float = 90) -> dict[str, Any]:
    """What ``url`` shows on its first screen at `SCREEN` once its text holds ``until`` and its largest plot is drawn,
    judged by pixels (`ink`: a plot whose frame is there but whose lines are not is not drawn), screenshotted into
    ``out``: ``text``, ``plot`` (its box) and ``ink``; all empty without Chromium."""
    exe = browser()
    if not exe:
        return {"text": "", "plot": None, "ink": 0}
    with BrowserPage(exe, SCREEN) as page:
        page.goto(url)
        got = page.wait(PLOT_PAGE, lambda v: until(v.get("text") or "") and v.get("plot"), timeout) or {}
        deadline, coloured = time.time() + 30, 0
        while True:  # the frame is there; wait for its lines
            page.screenshot(out)
            got = page.evaluate(PLOT_PAGE) or got
            coloured = ink(out, got["plot"]) if got.get("plot") else 0
            if coloured >= MIN_INK or time.time() > deadline:
                break
            time.sleep(1)
    return {"text": got.get("text") or "", "plot": got.get("plot"), "ink": coloured}


def run_sweep(work: Path, mlflow_url: str, cache: Path) -> tuple[int, Path | None]:
    """The sweep from ``work/client`` (not vase's folder: a second machine's working directory), against the server;
    returns its exit status and its folder."""
    client = work / "client"
    client.mkdir(exist_ok=True)
    logs = client / "logs"
    cmd = [sys.executable, str(ROOT / "train.py"), "-m", *SWEEP, f"paths.log_dir={logs}",
           f"paths.cache_dir={cache}"]
    with open(work / "sweep.log", "w") as f:
        rc = subprocess.run(cmd, cwd=client, stdout=f, stderr=subprocess.STDOUT, timeout=1800,
                            env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_url, "WANDB_MODE": "disabled"}).returncode
    found = sorted(logs.glob("*/multiruns/*/"))
    return rc, found[-1] if found else None


def plotted_axes(text: str) -> tuple[list[str], list[str]]:
    """What MLflow's comparison page plots, read from its first screen's text: the parameters chosen for its first plot
    (in their order: the first is its first axis) and its metrics (the colour), the chips after the selectors' labels
    ``Parameters:`` and ``Metrics:`` (keys hold no spaces; the chips end at the "Clear All" button).

    >>> plotted_axes("Box Plot Parameters: sweep/x weights/a Metrics: hp/heldout/shape_vs_start Clear All -0.4")
    (['sweep/x', 'weights/a'], ['hp/heldout/shape_vs_start'])
    """
    if "Parameters:" not in text or "Metrics:" not in text:
        return [], []
    params, _, rest = text.split("Parameters:", 1)[1].partition("Metrics:")
    return params.split(), rest.split("Clear All", 1)[0].split()


def check_mlflow(url: str, work: Path, artifacts: Path) -> dict[str, Any]:
    exp = api(url, "/api/2.0/mlflow/experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": "vase"}))
    exp_id = exp["experiment"]["experiment_id"]
    runs = api(url, "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": 100}).get("runs", [])

    def tags(r: dict[str, Any]) -> dict[str, str]:
        return {t["key"]: t["value"] for t in r["data"].get("tags", [])}

    def params(r: dict[str, Any]) -> dict[str, str]:
        return {p["key"]: p["value"] for p in r["data"].get("params", [])}

    parents = [r for r in runs if tags(r).get("job_type") == "sweep"]
    parent = parents[0]["info"]["run_id"] if len(parents) == 1 else None
    children = [r for r in runs if parent and tags(r).get("mlflow.parentRunId") == parent]
    swept = sorted(float(params(r).get(SWEPT, "nan")) for r in children)
    every = [params(r) for r in children]
    differing = sorted(k for k in set().union(*every) if len({p.get(k) for p in every}) > 1) if every else []
    # one seed's two jobs differ in the swept key alone
    by_seed = [[p for p in every if p.get(REPLICATE) == s] for s in sorted({p.get(REPLICATE) for p in every})]
    pairs_differ = [sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)) for a, b in
                    (pair for pair in by_seed if len(pair) == 2)]
    heldout = [sorted(m["key"] for m in r["data"].get("metrics", []) if m["key"].startswith("hp/heldout/"))
               for r in children]
    files = api(url, "/api/2.0/mlflow/artifacts/list?" + urllib.parse.urlencode(
        {"run_id": parent, "path": "sweep"})).get("files", []) if parent else []
    tables = api(url, "/api/2.0/mlflow/artifacts/list?" + urllib.parse.urlencode(
        {"run_id": parent, "path": "tables"})).get("files", []) if parent else []
    # the files are in the server's artifact store, and nowhere on the client's side
    on_server = sorted(str(p.relative_to(artifacts)) for p in artifacts.rglob("summary.md"))
    client_side = sorted(str(p) for p in (work / "client").rglob("mlartifacts"))
    # what a user sees: the comparison page, and the page the link vase printed opens
    ids = json.dumps([r["info"]["run_id"] for r in children])
    compare_url = (f"{url}/#/compare-runs?runs={urllib.parse.quote(ids)}&experiments="
                   f"{urllib.parse.quote(json.dumps([exp_id]))}")
    # the comparison's first screen: its first plot (parallel coordinates) drawn, and the selectors that say what
    compare = drawn_page(compare_url, work / "mlflow_compare.png",
                         until=lambda t: "Parameters:" in t and "Metrics:" in t and SWEPT in t)
    axes, metric = plotted_axes(compare["text"])
    log = (work / "sweep.log").read_text(errors="replace")
    printed = re.findall(r"MLflow: the sweep's jobs, with the swept values and the hypothesis's measures: (\S+)", log)
    answer_link = re.findall(r"MLflow: the sweep is run \S+, its answer: (\S+)", log)
    # the first screen of the page the printed link opens, what is shown whole on it (a title cut short or a bound
    # one scroll to the right is not), with MLflow's Assistant panel open as a new user finds it: each job by its
    # swept value, the swept key before any other parameter (a replicate never first), and each job against the
    # baseline with both bounds under a title that says the unit
    runs_page = _page(printed[-1], work / "mlflow_runs.png", script=WHOLE_IN_VIEW_TEXT,
                      until=lambda t: all(j in t for j in JOBS) and CELL_TITLE in t) if printed else ""
    first_key = next(iter(re.findall(r"\bsweep/\S+", runs_page)), None)
    jobs_in_view = (all(j in runs_page for j in JOBS) and CELL_TITLE in runs_page and first_key == SWEPT
                    and "0 (baseline)" in runs_page and bool(CELL.search(runs_page)))
    # the parent's page: the whole verdict in its name, on the first screen
    parent_run = next((r for r in runs if r["info"]["run_id"] == parent), None) if parent else None
    parent_name = parent_run["info"].get("run_name", "") if parent_run else ""
    answer_page = _page(answer_link[-1], work / "mlflow_answer.png", script=IN_VIEW_TEXT,
                        until=lambda t: VERDICT in t) if answer_link else ""
    verdict_metrics = sorted(m["key"] for m in parent_run["data"].get("metrics", [])) if parent_run else []
    comparison = [sorted(m["key"] for m in r["data"].get("metrics", []) if m["key"].startswith("vs_baseline/"))
                  for r in children]
    verdict_in_view = VERDICT in answer_page and " up" in answer_page.split(VERDICT, 1)[-1][:80]
    ok = (parent is not None and len(children) == len(BOARD_RUNS) and swept == SWEPT_VALUES
          and differing == [SWEPT, REPLICATE] and pairs_differ == [[SWEPT]] * len(SEEDS) and all(DETERMINED <= set(tags(r)) for r in children)
          and all(HELDOUT in h for h in heldout)
          and any(f["path"].endswith("summary.md") for f in files)
          and any(f["path"].endswith("ablation_verdict.json") for f in tables)
          and bool(on_server) and not client_side
          and axes == [SWEPT, REPLICATE] and metric == [MEASURE] and compare["ink"] >= MIN_INK and jobs_in_view
          and VERDICT in parent_name and verdict_in_view and any(MEASURE in c for c in comparison)
          and any(k.endswith("/effect") for k in verdict_metrics) and any(k.endswith("/low") for k in verdict_metrics))
    return {"passed": ok, "runs": len(runs), "children": len(children), "swept_values": swept,
            "params_differing_between_jobs": differing, "within_a_seed": pairs_differ, "heldout_metrics": heldout[0][:6] if heldout else [],
            "comparison_metrics": comparison, "parent_files": [f["path"] for f in files],
            "parent_tables": [f["path"] for f in tables], "files_in_server_store": on_server,
            "client_side_artifact_folders": client_side, "comparison_axes": axes, "comparison_metric": metric,
            "comparison_plot_ink": compare["ink"], "first_screen_of_comparison": compare["text"][:600],
            "printed_link": printed[-1:] or None, "first_key_in_jobs_view": first_key,
            "jobs_and_measure_on_first_screen": jobs_in_view, "first_screen_of_jobs": runs_page[:600],
            "parent_name": parent_name, "verdict_on_first_screen": verdict_in_view,
            "parent_metrics": verdict_metrics[:6],
            "screenshots": [str(work / n) for n in ("mlflow_runs.png", "mlflow_answer.png", "mlflow_compare.png")]}


def sweep_effect(sweep: Path) -> dict[str, Any]:
    """The check's sweep has a real effect: its hypothesis's first measure for the setting against the baseline, pooled,
    is ``up`` with an interval above 0 (else its screenshots would show no answer)."""
    q = json.loads((sweep / "verdict.json").read_text()) if (sweep / "verdict.json").is_file() else {}
    found = (((q.get("blocks") or {}).get("all") or {}).get("reward.weights.shape=0.6") or {}).get(
        "heldout/shape_right", {}).get("pooled") or {}
    return {"passed": found.get("direction") == "up" and (found.get("lo") or 0) > 0,
            "shape_right_points": {k: round(100 * found[k], 1) for k in ("diff", "lo", "hi") if found.get(k) is not None}}


def check_single_run(url: str, work: Path, cache: Path, artifacts: Path) -> dict[str, Any]:
    """``python train.py logger=mlflow`` alone (not a sweep) against the server, from the client's folder: it
    finishes, its run is on the server with every tag a value (a None tag once failed every single run against a
    server after the model loaded), and its config file is in the server's artifact store."""
    client = work / "client"
    cmd = [sys.executable, str(ROOT / "train.py"), "debug=fast", "logger=mlflow", "val.after=false",
           f"paths.log_dir={client / 'single'}", f"paths.cache_dir={cache}"]
    with open(work / "single_run.log", "w") as f:
        rc = subprocess.run(cmd, cwd=client, stdout=f, stderr=subprocess.STDOUT, timeout=1200,
                            env={**os.environ, "MLFLOW_TRACKING_URI": url, "WANDB_MODE": "disabled"}).returncode
    exp = api(url, "/api/2.0/mlflow/experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": "vase"}))
    runs = api(url, "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment"]["experiment_id"]],
                                                     "max_results": 100}).get("runs", [])
    single = [r for r in runs if str(client / "single") in {t["key"]: t["value"] for t in r["data"].get("tags", [])
                                                              }.get("vase.run_dir", "")]
    tags = {t["key"]: t["value"] for t in single[0]["data"].get("tags", [])} if single else {}
    files = api(url, "/api/2.0/mlflow/artifacts/list?" + urllib.parse.urlencode(
        {"run_id": single[0]["info"]["run_id"]})).get("files", []) if single else []
    stored = sorted(str(p.relative_to(artifacts)) for p in artifacts.rglob("config.yaml"))
    ok = (rc == 0 and len(single) == 1 and single[0]["info"]["status"] == "FINISHED"
          and "sweep_group" not in tags and all(isinstance(v, str) and v not in ("", "None") for v in tags.values())
          and any(f["path"] == "config.yaml" for f in files) and bool(stored))
    return {"passed": ok, "rc": rc, "runs_found": len(single), "status": single[0]["info"]["status"] if single else None,
            "tags": sorted(tags)[:12], "artifacts": [f["path"] for f in files], "config_files_in_server_store": stored}


def check_tensorboard(url: str, work: Path) -> dict[str, Any]:
    """TensorBoard started with the command the sweep printed (`vase.reports.sweep_summary.tensorboard_command`):
    one run per job named by its swept values; the hparams columns are the swept key alone and the held-out measure
    leads the metrics; on HPARAMS' first screen, the swept key, the held-out measure and every job."""
    runs = api(url, "/data/runs")
    tags = api(url, "/data/plugin/scalars/tags")
    with_reward = sorted(r for r, t in tags.items() if "train/reward" in t)
    hparams = api(url, "/data/plugin/hparams/experiment", {"experimentName": ""})
    metrics = [m["name"]["tag"] for m in hparams.get("metricInfos", [])]
    columns = [h["name"] for h in hparams.get("hparamInfos", [])]
    page = _page(f"{url}/#hparams", work / "tensorboard_hparams.png", script=IN_VIEW_TEXT,
                 until=lambda t: "Trial ID" in t and all(j in t for j in BOARD_RUNS) and MEASURE_TITLE in t)
    in_view = SWEPT_TITLE in page and MEASURE_TITLE in page and all(j in page for j in BOARD_RUNS)
    # the parallel coordinates: every job's line (the baseline's too: it holds the comparison at 0), the swept key's
    # axis first, and no axis title run into another
    parallel = parallel_coordinates(url, work / "tensorboard_parallel.png")
    parallel_ok = (parallel["lines"] == len(BOARD_RUNS) and parallel["titles"][:1] == [SWEPT_TITLE]
                   and MEASURE_TITLE in parallel["titles"] and not parallel["overlaps"])
    # the page the printed command names: the training curves drawn on the first screen, no one-point hp/* chart
    curves = drawn_page(f"{url}/?tagFilter={CURVES}#timeseries", work / "tensorboard_curves.png",
                        until=lambda t: "train/reward" in t.replace(" ", ""))
    joined = curves["text"].replace(" ", "")  # a card's title is two texts ("train", "/reward")
    curves_first = "train/reward" in joined and "hp/" not in joined and curves["ink"] >= MIN_INK
    ok = (sorted(runs) == sorted(BOARD_RUNS) and len(with_reward) == len(BOARD_RUNS) and metrics[:1] == [MEASURE]
          and columns[:1] == [SWEPT] and in_view and curves_first and parallel_ok)
    return {"passed": ok, "runs": runs, "runs_with_reward": with_reward, "hparams_columns": columns[:8],
            "hparams_metrics": metrics[:8], "swept_key_measure_and_jobs_on_first_screen": in_view,
            "parallel_coordinates": parallel, "parallel_coordinates_every_job_readable_titles": parallel_ok,
            "first_screen": page[:600], "training_curves_drawn_first": curves_first, "curves_ink": curves["ink"],
            "curves_first_screen": curves["text"][:300],
            "screenshots": [str(work / "tensorboard_hparams.png"), str(work / "tensorboard_parallel.png"),
                            str(work / "tensorboard_curves.png")]}


PARALLEL_TAB = """(() => {
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.children.length === 0 && /^parallel coordinates view$/i.test((el.textContent || '').trim())) {
        el.click(); return true;
      }
      if (el.shadowRoot && walk(el.shadowRoot)) return true;
    }
    return false;
  };
  return walk(document);
})()"""
"""Clicks HPARAMS' "Parallel coordinates view" tab (true once clicked)."""

PARALLEL_DRAWN = """(() => {
  const got = {lines: 0, titles: [], overlaps: []};
  const walk = (root) => {
    for (const g of root.querySelectorAll('g.foreground')) {
      for (const p of g.querySelectorAll('path')) {
        const r = p.getBoundingClientRect();
        if ((p.getAttribute('d') || '').length > 0 && getComputedStyle(p).display !== 'none' && r.width > 0) got.lines++;
      }
    }
    for (const t of root.querySelectorAll('text.axis-title')) {
      const r = t.getBoundingClientRect();
      if (r.width > 0) got.titles.push({text: t.textContent, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom});
    }
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document);
  const T = got.titles;
  for (let i = 0; i < T.length; i++) for (let j = i + 1; j < T.length; j++)
    if (T[i].x0 < T[j].x1 && T[j].x0 < T[i].x1 && T[i].y0 < T[j].y1 && T[j].y0 < T[i].y1) got.overlaps.push([T[i].text, T[j].text]);
  return got;
})()"""
"""What TensorBoard's parallel coordinates draw: a line per job (``g.foreground`` paths), the axis titles with their
boxes on the screen, and each pair of titles whose boxes overlap (text run into text)."""


def parallel_coordinates(url: str, out: Path, timeout: float = 90) -> dict[str, Any]:
    """HPARAMS' parallel coordinates at `SCREEN`, screenshotted into ``out``: the lines drawn, the axis titles and
    those that overlap; empty without Chromium."""
    exe = browser()
    if not exe:
        return {"lines": 0, "titles": [], "overlaps": []}
    with BrowserPage(exe, SCREEN) as page:
        page.goto(f"{url}/#hparams")
        page.wait(PARALLEL_TAB, lambda clicked: bool(clicked), timeout)
        got = page.wait(PARALLEL_DRAWN, lambda v: v and v.get("lines", 0) >= len(BOARD_RUNS) and v.get("titles"),
                        timeout) or {}
        time.sleep(1)  # its transitions settle
        got = page.evaluate(PARALLEL_DRAWN) or got
        page.screenshot(out)
    return {"lines": got.get("lines", 0), "titles": [t["text"] for t in got.get("titles") or []],
            "overlaps": got.get("overlaps") or []}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.checks.dashboards_check", description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / ".cache"), help="the tiny model and synthetic vases")
    a = ap.parse_args(argv)
    started = time.time()
    work = Path(run_dir(str(log_root(ROOT) / "dashboards_check"), "never"))
    venv = tool_venv(tools_dir() / "mlflow-venv", [f"mlflow=={mlflow_version()}"],
                     work / "venv.log", "MLflow's server")
    results: dict[str, dict[str, Any]] = {}
    seconds = {"mlflow-venv": round(time.time() - started)}  # where the check's time goes, part by part
    ml_port, tb_port = free_port(), free_port()
    ml_url, tb_url = f"http://127.0.0.1:{ml_port}", f"http://127.0.0.1:{tb_port}"
    store = work / "server"  # the server's own folder: its database and its artifact store
    store.mkdir()
    ml_cmd = [str(venv / "bin" / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(ml_port),
              "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}", "--artifacts-destination",
              str(store / "artifacts"), "--workers", "1"]
    with server(ml_cmd, work / "mlflow_server.log", ml_url, "/health"):
        t = time.time()
        rc, sweep = run_sweep(work, ml_url, Path(a.cache_dir))
        seconds["sweep"] = round(time.time() - t)
        results["sweep"] = {"passed": rc == 0 and sweep is not None, "rc": rc, "sweep": str(sweep)}
        results["real-effect"] = sweep_effect(sweep) if sweep is not None else {"passed": False}
        for name, part in (("mlflow", lambda: check_mlflow(ml_url, work, store / "artifacts")),
                           ("mlflow-single-run", lambda: check_single_run(ml_url, work, Path(a.cache_dir),
                                                                          store / "artifacts")),
                           ("mlflow-server-dies", lambda: check_server_dies(venv, work, Path(a.cache_dir))),
                           ("mlflow-gone-at-sweep-end",
                            lambda: check_server_gone_at_sweep_end(venv, work, Path(a.cache_dir)))):
            t = time.time()
            try:
                results[name] = part()
            except Exception as e:  # noqa: BLE001 - a part that breaks is a FAIL with its reason
                results[name] = {"passed": False, "error": f"{type(e).__name__}: {e}"}
            seconds[name] = round(time.time() - t)
    said = re.findall(r"TensorBoard: the jobs side by side, named by their swept values: (.+)",
                      (work / "sweep.log").read_text(errors="replace"))
    if sweep is not None and said:  # the command the sweep printed, as a user runs it, where the sweep ran
        tb_cmd = [sys.executable, "-m", "tensorboard.main", *shlex.split(said[-1].partition(", then ")[0])[1:],
                  "--host", "127.0.0.1", "--port", str(tb_port)]
        t = time.time()
        try:
            with server(tb_cmd, work / "client" / "tensorboard_server.log", tb_url, "/data/runs"):
                time.sleep(5)  # TensorBoard loads the event files in the background
                results["tensorboard"] = check_tensorboard(tb_url, work)
        except Exception as e:  # noqa: BLE001
            results["tensorboard"] = {"passed": False, "error": f"{type(e).__name__}: {e}"}
        seconds["tensorboard"] = round(time.time() - t)
    for name, r in results.items():
        print(f"{'PASS' if r['passed'] else 'FAIL'}  {name}  " + json.dumps({k: v for k, v in r.items() if k != 'passed'},
                                                                          default=str)[:600])
    if sweep is not None and not said:
        results["tensorboard"] = {"passed": False, "error": "the sweep printed no tensorboard command"}
    ok = all(r["passed"] for r in results.values()) and "tensorboard" in results
    print("seconds per part: " + ", ".join(f"{k} {v}" for k, v in seconds.items()))
    atomic_write_json(work / "dashboards_check.json", {"machine": machine_stamp(), "results": results,
                                                       "seconds": seconds})
    atomic_write_text(work / "dashboards_check.md", "# Dashboards check\n\n" + md.table_text(
        ["part", "result"], [[n, "PASS" if r["passed"] else "FAIL"] for n, r in results.items()])
        + "\n![MLflow: the sweep's jobs, from the printed link](mlflow_runs.png)\n\n"
        "![MLflow: the sweep's answer, from the printed link](mlflow_answer.png)\n\n"
        "![MLflow's comparison](mlflow_compare.png)\n\n![TensorBoard's hparams](tensorboard_hparams.png)\n\n"
        "![TensorBoard's parallel coordinates](tensorboard_parallel.png)\n\n"
        "![TensorBoard's training curves](tensorboard_curves.png)\n")
    print(f"{'PASS' if ok else 'FAIL'}: dashboards check, {time.time() - started:.0f} s ({work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
