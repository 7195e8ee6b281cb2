"""vase's self-hosted dashboards against the real servers (``make dashboards-check``): MLflow and TensorBoard.

    python -m vase.integrations.dashboards_check           # PASS/FAIL per part; logs/dashboards_check/<time>/

Starts a real MLflow tracking server (``mlflow server`` from MLflow's own virtualenv, built under
``.cache/dashboards/`` from the package index when missing: vase itself installs only MLflow's client) with a
temporary SQLite store on 127.0.0.1, and TensorBoard on 127.0.0.1; runs a two-job reward-weight sweep at debug size
(GRPO at shape weight 0 and 0.6, held-out reward on) with ``logger=[mlflow,tensorboard]`` against them; then:

1. ``mlflow``: reads the runs back through MLflow's REST API: one parent run for the sweep holding its summary, two
   child runs whose params carry the effective reward weights and whose metrics carry the held-out reward per
   dimension; and screenshots MLflow's run-comparison page in headless Chromium (it must not be blank).
2. ``tensorboard``: TensorBoard's own HTTP API lists one run per job, with the training reward's scalars and the
   hparams plugin's data; its HPARAMS page is screenshotted.

Both servers are stopped at the end, whatever happened. Results in ``dashboards_check.json`` / ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from vase.integrations.docs_check import browser, screenshot
from vase.integrations.slurm import _free_port
from vase.integrations.venvs import tool_venv
from vase.io import atomic_write_json, atomic_write_text
from vase.runs import machine_stamp, run_dir

ROOT = Path(__file__).resolve().parents[2]


def mlflow_version() -> str:
    """The MLflow client vase has (the server is built at the same version)."""
    return version("mlflow-skinny")


@contextmanager
def server(cmd: list[str], log: Path, url: str, ready: str, timeout: float = 180) -> Iterator[subprocess.Popen]:
    """A server process in its own process group, up when ``url`` answers, stopped (the whole group) on exit."""
    out = open(log, "w")  # noqa: SIM115 - closed below
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=log.parent)
    try:
        deadline = time.time() + timeout
        while True:
            try:
                with urllib.request.urlopen(url + ready, timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if p.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{cmd[0]} did not come up at {url} (log: {log}): "
                                   f"{log.read_text(errors='replace')[-1500:]}")
            time.sleep(1)
        yield p
    finally:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out.close()


def _api(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"},
                                 method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def _screenshot(url: str, out: Path) -> bool:
    """A dashboard's page (its scripts given 15 s) into ``out``; False without Chromium or on a blank page."""
    exe = browser()
    return exe is not None and screenshot(exe, url, out, "1400,1000", wait_ms=15000, timeout=180)


def run_sweep(work: Path, mlflow_url: str) -> tuple[int, Path | None]:
    logs = work / "logs"
    cmd = [sys.executable, "train.py", "-m", "stage=grpo", "debug=fast", "reward.weights.shape=0,0.6",
           "reward.normalize_weights=[shape]", "evaluate.heldout=true", "logger=[mlflow,tensorboard]",
           f"paths.log_dir={logs}"]
    with open(work / "sweep.log", "w") as f:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=1800,
                            env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_url, "WANDB_MODE": "disabled"}).returncode
    found = sorted((logs / "train" / "multiruns").glob("*/")) if (logs / "train" / "multiruns").is_dir() else []
    return rc, found[-1] if found else None


def check_mlflow(url: str, work: Path) -> dict[str, Any]:
    exp = _api(url, "/api/2.0/mlflow/experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": "vase"}))
    exp_id = exp["experiment"]["experiment_id"]
    runs = _api(url, "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": 100}).get("runs", [])

    def tags(r: dict[str, Any]) -> dict[str, str]:
        return {t["key"]: t["value"] for t in r["data"].get("tags", [])}

    parents = [r for r in runs if tags(r).get("job_type") == "sweep"]
    parent = parents[0]["info"]["run_id"] if len(parents) == 1 else None
    children = [r for r in runs if parent and tags(r).get("mlflow.parentRunId") == parent]
    weights = sorted(float({p["key"]: p["value"] for p in r["data"].get("params", [])}.get(
        "reward/effective_weights/shape", "nan")) for r in children)
    heldout = [sorted(m["key"] for m in r["data"].get("metrics", []) if "/heldout/" in m["key"]) for r in children]
    files = _api(url, "/api/2.0/mlflow/artifacts/list?" + urllib.parse.urlencode(
        {"run_id": parent, "path": "sweep"})).get("files", []) if parent else []
    shot = work / "mlflow_compare.png"
    ids = json.dumps([r["info"]["run_id"] for r in children])
    shown = _screenshot(f"{url}/#/compare-runs?runs={urllib.parse.quote(ids)}&experiments="
                        f"{urllib.parse.quote(json.dumps([exp_id]))}", shot)
    ok = (parent is not None and len(children) == 2 and weights == [0.0, 0.6]
          and all("val/grpo/heldout/shape_right" in h for h in heldout)
          and any(f["path"].endswith("summary.md") for f in files) and shown)
    return {"passed": ok, "runs": len(runs), "children": len(children), "effective_shape_weights": weights,
            "heldout_metrics": heldout[0][:8] if heldout else [], "parent_files": [f["path"] for f in files],
            "screenshot": str(shot), "screenshot_shows_a_page": shown}


def check_tensorboard(url: str, work: Path) -> dict[str, Any]:
    runs = _api(url, "/data/runs")
    tags = _api(url, "/data/plugin/scalars/tags")
    with_reward = sorted(r for r, t in tags.items() if "train/reward" in t)
    hparams = _api(url, "/data/plugin/hparams/experiment", {"experimentName": ""})
    metrics = [m["name"]["tag"] for m in hparams.get("metricInfos", [])]
    shot = work / "tensorboard_hparams.png"
    shown = _screenshot(f"{url}/#hparams", shot)
    ok = len(runs) >= 2 and len(with_reward) == 2 and "hp/overall_score" in metrics and shown
    return {"passed": ok, "runs": runs, "runs_with_reward": with_reward, "hparams_metrics": metrics,
            "screenshot": str(shot), "screenshot_shows_a_page": shown}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.integrations.dashboards_check", description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / ".cache"))
    a = ap.parse_args(argv)
    started = time.time()
    work = Path(run_dir(str(ROOT / "logs" / "dashboards_check"), "never"))
    venv = tool_venv(Path(a.cache_dir) / "dashboards" / "mlflow-venv", [f"mlflow=={mlflow_version()}"],
                     work / "venv.log", "MLflow's server")
    results: dict[str, dict[str, Any]] = {}
    ml_port, tb_port = _free_port(), _free_port()
    ml_url, tb_url = f"http://127.0.0.1:{ml_port}", f"http://127.0.0.1:{tb_port}"
    ml_cmd = [str(venv / "bin" / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(ml_port),
              "--backend-store-uri", f"sqlite:///{work / 'mlflow.db'}", "--artifacts-destination",
              str(work / "mlartifacts"), "--workers", "1"]
    with server(ml_cmd, work / "mlflow_server.log", ml_url, "/health"):
        rc, sweep = run_sweep(work, ml_url)
        results["sweep"] = {"passed": rc == 0 and sweep is not None, "rc": rc, "sweep": str(sweep)}
        for name, part in (("mlflow", lambda: check_mlflow(ml_url, work)),):
            try:
                results[name] = part()
            except Exception as e:  # noqa: BLE001 - a part that breaks is a FAIL with its reason
                results[name] = {"passed": False, "error": f"{type(e).__name__}: {e}"}
    if sweep is not None:
        tb_cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(sweep), "--host", "127.0.0.1",
                  "--port", str(tb_port)]
        try:
            with server(tb_cmd, work / "tensorboard_server.log", tb_url, "/data/runs"):
                time.sleep(5)  # TensorBoard loads the event files in the background
                results["tensorboard"] = check_tensorboard(tb_url, work)
        except Exception as e:  # noqa: BLE001
            results["tensorboard"] = {"passed": False, "error": f"{type(e).__name__}: {e}"}
    for name, r in results.items():
        print(f"{'PASS' if r['passed'] else 'FAIL'}  {name}  " + json.dumps({k: v for k, v in r.items() if k != 'passed'},
                                                                          default=str)[:600])
    ok = all(r["passed"] for r in results.values()) and "tensorboard" in results
    atomic_write_json(work / "dashboards_check.json", {"machine": machine_stamp(), "results": results})
    atomic_write_text(work / "dashboards_check.md", "# Dashboards check\n\n| part | result |\n|---|---|\n" + "".join(
        f"| {n} | {'PASS' if r['passed'] else 'FAIL'} |\n" for n, r in results.items())
        + "\n![MLflow](mlflow_compare.png)\n\n![TensorBoard](tensorboard_hparams.png)\n")
    print(f"{'PASS' if ok else 'FAIL'}: dashboards check, {time.time() - started:.0f} s ({work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
