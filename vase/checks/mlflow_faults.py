"""The dashboards check's MLflow servers and their faults (`vase.checks.dashboards_check` runs them): a server
process up on the loopback and stopped with its group (`server`), its REST API (`api`), and the two faults a user
meets: the server gone when a sweep's end sends its parent run (`check_server_gone_at_sweep_end`), and a server
killed while a run logs to it (`check_server_dies`); in each, what was not sent is kept and sent later by the printed
command."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
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

from vase.checks.slurm import free_port

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


def api(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"},
                                 method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def _runs_of(url: str, run_dir_part: str) -> list[dict[str, Any]]:
    """The runs of experiment ``vase`` on the server whose ``vase.run_dir`` tag contains ``run_dir_part``."""
    exp = api(url, "/api/2.0/mlflow/experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": "vase"}))
    runs = api(url, "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment"]["experiment_id"]],
                                                     "max_results": 100}).get("runs", [])
    return [r for r in runs if run_dir_part in {t["key"]: t["value"] for t in r["data"].get("tags", [])}
            .get("vase.run_dir", "")]


def _loss_steps(url: str, run_id: str) -> list[int]:
    hist = api(url, "/api/2.0/mlflow/metrics/get-history?" + urllib.parse.urlencode(
        {"run_id": run_id, "metric_key": "train/loss", "max_results": 10000})).get("metrics", [])
    return sorted({int(m["step"]) for m in hist})


GONE_SWEEP = ["stage.module.lora.r=4,8", "+hypothesis.compare=stage.module.lora.r", "+hypothesis.baseline=4",
              "+hypothesis.moves=[loss]", "debug=fast", "val.after=false", "report=false", "logger=mlflow",
              "+hydra.callbacks.end_fault._target_=tests.end_faults.EndFault"]
"""A two-job sweep whose MLflow server is killed as its end's MLflow part starts (`tests.end_faults`: the check runs
from a checkout)."""


def _journal_folder(line: str) -> str:
    """The folder a printed ``python -m vase.mlflow_journal <folder>`` hint names, as printed (quoted for the shell).

    >>> _journal_folder("MLflow: ...; once it is back: python -m vase.mlflow_journal 'my logs/run'")
    "'my logs/run'"
    """
    return line.rsplit("python -m vase.mlflow_journal ", 1)[-1]


def check_server_gone_at_sweep_end(venv: Path, work: Path, cache: Path) -> dict[str, Any]:
    """A sweep whose server is killed (SIGKILL, its whole process group) once its jobs are on it, as its end's MLflow
    part starts: the sweep ends with exit 0 and one line naming the tracking URI in use and the command; the server
    started again on its store, that command sends the parent run (with the verdict's metrics) and makes each job its
    child, the job against the baseline with its ``vs_baseline/...`` values."""
    port, store, client = free_port(), work / "gone-at-end", work / "client-gone"
    url = f"http://127.0.0.1:{port}"
    store.mkdir()
    client.mkdir()
    cmd = [str(venv / "bin" / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--backend-store-uri",
           f"sqlite:///{store / 'mlflow.db'}", "--artifacts-destination", str(store / "artifacts"), "--workers", "1"]
    logs = client / "logs"
    sweep_cmd = [sys.executable, str(ROOT / "train.py"), "-m", *GONE_SWEEP, f"paths.log_dir={logs}",
                 f"paths.cache_dir={cache}"]
    with server(cmd, work / "gone_at_end_1.log", url, "/health") as srv:
        p = subprocess.run(sweep_cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                           env={**os.environ, "MLFLOW_TRACKING_URI": url, "WANDB_MODE": "disabled",
                                "VASE_TEST_END_FAULT": "kill:mlflow", "VASE_TEST_KILL_GROUP": str(srv.pid)})
    (work / "gone_at_end_sweep.log").write_text(p.stdout + p.stderr)
    found = sorted(logs.glob("train/multiruns/*/"))
    sweep = found[-1] if found else logs
    said = [ln for ln in p.stderr.splitlines() if ln.startswith(f"MLflow: {url} did not take the sweep's parent run")]
    kept = (sweep / "mlflow_sweep_unsent.json").is_file()
    record = json.loads((sweep / ".vase-run.json").read_text()) if (sweep / ".vase-run.json").is_file() else {}
    with server(cmd, work / "gone_at_end_2.log", url, "/health"):  # back, on the same store
        # the printed command as the user types it, from where the sweep ran (a relative path: `shown_path`)
        printed = _journal_folder(said[0]) if said else shlex.quote(str(sweep))
        sync = subprocess.run([sys.executable, "-m", "vase.mlflow_journal", *shlex.split(printed)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600, env={**os.environ, "WANDB_MODE": "disabled"})
        runs = _runs_of(url, str(sweep))
        exp = api(url, "/api/2.0/mlflow/experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": "vase"}))
        every = api(url, "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment"]["experiment_id"]],
                                                          "max_results": 100}).get("runs", [])

    def tags(r: dict[str, Any]) -> dict[str, str]:
        return {t["key"]: t["value"] for t in r["data"].get("tags", [])}

    group = f"multirun-{sweep.name}"
    parents = [r for r in every if tags(r).get("job_type") == "sweep" and tags(r).get("sweep_group") == group]
    parent = parents[0] if parents else None
    verdict = sorted(m["key"] for m in parent["data"].get("metrics", [])) if parent else []
    children = [r for r in runs if parent and tags(r).get("mlflow.parentRunId") == parent["info"]["run_id"]]
    compared = [sorted(m["key"] for m in r["data"].get("metrics", []) if m["key"].startswith("vs_baseline/"))
                for r in children]
    ok = (p.returncode == 0 and len(said) == 1 and "python -m vase.mlflow_journal " in said[0]
          and (ROOT / shlex.split(printed)[0]).resolve() == sweep.resolve() and kept
          and record.get("status") == "finished" and sync.returncode == 0 and len(parents) == 1
          and any(k.startswith("verdict/") for k in verdict) and len(children) == 2
          and sorted(map(len, compared)) == [1, 1])  # the baseline's at 0, its own row
    return {"passed": ok, "rc": p.returncode, "line": said[-1][:300] if said else p.stderr[-600:], "kept": kept,
            "record": record.get("status"), "sync_rc": sync.returncode, "sync_said": (sync.stdout + sync.stderr)[-300:],
            "parents": len(parents), "parent_metrics": verdict[:4], "children": len(children),
            "children_vs_baseline": compared}


STEPS_WHEN_KILLED = 64  # the run whose server dies: 8 vases, 8 epochs


def check_server_dies(venv: Path, work: Path, cache: Path) -> dict[str, Any]:
    """``train.py logger=mlflow`` whose server is killed (SIGKILL) once the run's first losses are on it: training
    finishes and keeps its adapter, one line says what was not logged and the command that sends it; the server
    started again on its store, that command sends it: the run on the server then holds every step's loss, the
    run's end (FINISHED) and its end metrics."""
    port, store, client = free_port(), work / "server-dies", work / "client"
    url = f"http://127.0.0.1:{port}"
    store.mkdir()
    client.mkdir(exist_ok=True)
    cmd = [str(venv / "bin" / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--backend-store-uri",
           f"sqlite:///{store / 'mlflow.db'}", "--artifacts-destination", str(store / "artifacts"), "--workers", "1"]
    logs = client / "dies"
    # long enough (STEPS_WHEN_KILLED steps) that the kill lands mid-run: debug=fast alone is 8 steps, about 2 s, and a
    # fast machine finished them all between two looks at the server (CI, stop 78: killed after step 7 of 8)
    train = [sys.executable, str(ROOT / "train.py"), "debug=fast", "logger=mlflow", "val.after=false",
             f"stage.epochs={STEPS_WHEN_KILLED // 8}", f"trainer.max_steps={STEPS_WHEN_KILLED}",
             "trainer.log_every_n_steps=1", f"paths.log_dir={logs}",
             f"paths.cache_dir={cache}"]
    killed_at: list[int] = []
    with open(work / "server_dies_run.log", "w") as f:
        with server(cmd, work / "server_dies_1.log", url, "/health") as srv:
            p = subprocess.Popen(train, cwd=client, stdout=f, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "MLFLOW_TRACKING_URI": url, "WANDB_MODE": "disabled"})  # MLflow's retries: vase's own bound (BOUNDED_HTTP)
            deadline = time.time() + 900
            while p.poll() is None and time.time() < deadline and not killed_at:
                with contextlib.suppress(OSError, ValueError, KeyError):
                    runs = _runs_of(url, str(logs))
                    steps = _loss_steps(url, runs[0]["info"]["run_id"]) if runs else []
                    if steps:
                        os.killpg(srv.pid, signal.SIGKILL)  # the server dies mid-run
                        killed_at.append(max(steps))
                time.sleep(0.2)
        try:
            rc = p.wait(timeout=900)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = 124
    text = (work / "server_dies_run.log").read_text(errors="replace")
    runs_dirs = sorted((logs / "train" / "runs").glob("*/")) if (logs / "train" / "runs").is_dir() else []
    run = runs_dirs[-1] if runs_dirs else logs
    said = [ln for ln in text.splitlines() if "python -m vase.mlflow_journal" in ln]
    history = json.loads((run / "train_history.json").read_text()) if (run / "train_history.json").is_file() else []
    adapter = (run / "adapter" / "adapter_config.json").is_file()
    with server(cmd, work / "server_dies_2.log", url, "/health"):  # back, on the same store
        # the printed command as the user types it, where the run ran (the run's folder relative to it)
        printed = _journal_folder(said[-1]) if said else shlex.quote(str(run))
        sync = subprocess.run([sys.executable, "-m", "vase.mlflow_journal", *shlex.split(printed)], cwd=client,
                              capture_output=True, text=True, timeout=600, env={**os.environ, "WANDB_MODE": "disabled"})
        runs = _runs_of(url, str(run))
        steps = _loss_steps(url, runs[0]["info"]["run_id"]) if runs else []
        status = runs[0]["info"]["status"] if runs else None
        metrics = {m["key"] for m in runs[0]["data"].get("metrics", [])} if runs else set()
    want = sorted({int(h["step"]) for h in history})
    mid_run = bool(killed_at and want) and killed_at[0] < max(want)  # else the check tested nothing: say so
    ok = (rc == 0 and mid_run and adapter and len(said) == 1 and sync.returncode == 0 and bool(want)
          and (client / shlex.split(printed)[0]).resolve() == run.resolve()
          and steps == want and status == "FINISHED" and any(k.startswith("hp/") for k in metrics))
    return {"passed": ok, "rc": rc, "server_killed_after_step": killed_at[0] if killed_at else None,
            "killed_mid_run": mid_run,
            "adapter_kept": adapter, "line": said[-1][:400] if said else None, "lines_saying_it": len(said),
            "sync_rc": sync.returncode, "sync_said": (sync.stdout + sync.stderr).strip()[-300:],
            "loss_steps_on_server": f"{len(steps)} of {len(want)}", "status": status,
            "end_metrics": sorted(k for k in metrics if k.startswith("hp/"))[:6]}

