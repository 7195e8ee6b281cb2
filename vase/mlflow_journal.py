"""An MLflow server that stops answering mid-run does not stop the run: what was not logged is kept, and sent later.

``logger=mlflow`` builds `JournaledMLFlowLogger` (Lightning's ``MLFlowLogger``, same arguments). The first call to the
server that fails (after one retry and at most 10 s without an answer: `BOUNDED_HTTP`, each variable the user's to
set) is said in one line, and from then
on nothing more is sent during the run: every logging call (metrics, parameters, tags, tables, images, the run's end)
goes to ``mlflow_unsent.jsonl`` in the run's folder instead, training goes on and the run keeps its adapter. At the end
of the run one line says what was not logged and the command that sends it once the server is back:

    python -m vase.mlflow_journal <run folder>      # replays mlflow_unsent.jsonl into the same MLflow run

The replay is resumable: the lines sent are counted in ``mlflow_unsent.jsonl.sent`` (written after each one), so a
replay cut short sends only the rest when run again; a finished replay renames the journal ``mlflow_unsent.sent.jsonl``.

A sweep's end keeps its own part the same way: the sweep's parent run (its parameters, the verdict's metrics, its
tables and files) and each job's comparison with the baseline are one record, `send_sweep`'s ``plan``; where MLflow
does not take it at the sweep's end, the plan is kept in ``mlflow_sweep_unsent.json`` in the sweep's folder, and the
same command sends it (and every job's own journal first):

    python -m vase.mlflow_journal <sweep folder>    # each job's mlflow_unsent.jsonl, then the sweep's parent run

Sending a plan again finds the parent run an earlier attempt made (by the sweep's group) instead of making another.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.utilities import rank_zero_only

from vase.config.entry import check_only
from vase.errors import VaseError, first_line
from vase.io import append_jsonl, atomic_write_text, shown_path

log = logging.getLogger(__name__)

JOURNAL = "mlflow_unsent.jsonl"
SENT = "mlflow_unsent.sent.jsonl"  # the journal, once replayed
# the client calls vase and Lightning make to log (every other call, e.g. get_run, is a read: it answers None once
# the server is down)
LOGGING_CALLS = ("log_batch", "log_metric", "log_param", "set_tag", "log_dict", "log_text", "log_artifact",
                 "log_artifacts", "set_terminated")
WHAT = {"log_batch": "batch", "log_metric": "metric", "log_param": "parameter", "set_tag": "tag", "log_dict": "table",
        "log_text": "text", "log_artifact": "file", "log_artifacts": "folder", "set_terminated": "the run's end"}


def _encode(v: Any) -> Any:
    """MLflow's entities (Metric, Param, RunTag) as tagged JSON; everything else as it is."""
    name = type(v).__name__
    if name == "Metric":
        return {"__mlflow__": "Metric", "key": v.key, "value": v.value, "timestamp": v.timestamp, "step": v.step}
    if name in ("Param", "RunTag"):
        return {"__mlflow__": name, "key": v.key, "value": v.value}
    if isinstance(v, (list, tuple)):
        return [_encode(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    return v


def _decode(v: Any) -> Any:
    from mlflow.entities import Metric, Param, RunTag  # lazy: mlflow, slow to import (the replay alone needs it)

    if isinstance(v, dict) and "__mlflow__" in v:
        kind = v["__mlflow__"]
        if kind == "Metric":
            return Metric(v["key"], v["value"], v["timestamp"], v["step"])
        return (Param if kind == "Param" else RunTag)(v["key"], v["value"])
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


class _Guarded:
    """The logger's MLflow client: calls go through until one fails, then logging calls go to the journal."""

    def __init__(self, client: Any, owner: JournaledMLFlowLogger) -> None:
        self._client, self._owner = client, owner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            owner = self._owner
            if owner.down is None:
                try:
                    return attr(*args, **kwargs)
                except Exception as e:  # noqa: BLE001 - any failure of the server: the run goes on without it
                    owner.went_down(name, e)
            if name in LOGGING_CALLS:
                owner.keep(name, args, kwargs)
            return None

        return call


BOUNDED_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
"""MLflow's retries during a run, unless the user set them: one retry after 1 s, 10 s without an answer (MLflow's own
7 retries with doubling waits held training about 4 minutes when its server died; vase's journal keeps what the
failure would lose, so a short wait loses nothing). The replay (`replay`) keeps MLflow's patient defaults."""


def bound_mlflow_retries() -> dict[str, str]:
    """Set `BOUNDED_HTTP` in this process where the user has not set the variable; returns what it set."""
    out = {k: v for k, v in BOUNDED_HTTP.items() if k not in os.environ}
    os.environ.update(out)
    return out


class JournaledMLFlowLogger(MLFlowLogger):
    """Lightning's ``MLFlowLogger`` whose server may stop answering mid-run (see the module's doc). ``journal``: the
    file what was not logged goes to (the run's folder; ``None``: the logger's ``save_dir``)."""

    def __init__(self, *args: Any, journal: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        bound_mlflow_retries()  # a dead server costs the run seconds, not minutes
        self.journal = Path(journal) if journal else Path(self.save_dir or ".") / JOURNAL
        self.down: str | None = None
        self.kept: Counter[str] = Counter()

    @property
    def experiment(self) -> Any:  # type: ignore[override]
        return _Guarded(MLFlowLogger.experiment.fget(self), self)  # type: ignore[attr-defined]

    def went_down(self, call: str, error: BaseException) -> None:
        if self.down is not None:
            return
        self.down = f"{type(error).__name__}: {first_line(error, 200)}"
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.journal, [{"tracking_uri": self._tracking_uri, "run_id": self._run_id,
                                     "experiment_id": self._experiment_id, "failed_call": call, "error": self.down}])
        print(f"MLflow: the server {self._tracking_uri} stopped answering ({call}: {self.down}); the run goes on, and "
              f"what it logs from here is kept in {self.journal}", file=sys.stderr, flush=True)

    def keep(self, call: str, args: tuple, kwargs: dict[str, Any]) -> None:
        append_jsonl(self.journal, [{"call": call, "args": _encode(list(args)),
                                     "kwargs": {k: _encode(v) for k, v in kwargs.items()}}])
        if call == "log_batch":
            for field in ("metrics", "params", "tags"):
                self.kept[field] += len(kwargs.get(field) or [])
        else:
            self.kept[WHAT.get(call, call)] += 1

    @rank_zero_only
    def finalize(self, status: str = "success") -> None:
        if self.down is None:
            super().finalize(status)  # the server may stop answering here too
        if self.down is not None and self._initialized and not self.kept["the run's end"]:
            status = {"success": "FINISHED", "failed": "FAILED", "finished": "FINISHED"}.get(status, status)
            self.keep("set_terminated", (self._run_id, status), {})

    def unsent_line(self, run_dir: str | Path | None = None) -> str | None:
        """One line: what was not logged to the server, where it is kept and the command that sends it; None when
        everything was sent."""
        if self.down is None:
            return None
        kept = ", ".join(what if what == "the run's end" else f"{n} {what}" + ("s" if n > 1 and what in WHAT.values()
                                                                                else "")
                         for what, n in self.kept.items() if n) or "nothing"
        folder = run_dir if run_dir is not None else self.journal.parent
        return (f"MLflow: not logged to {self._tracking_uri} (run {self._run_id}), the server having stopped "
                f"answering: {kept}; kept in {self.journal}; once it is back: python -m vase.mlflow_journal {shown_path(folder)}")


PROBE_S = 5.0


def _answers(tracking_uri: str) -> None:
    """A server's ``/health`` within `PROBE_S` seconds, before anything is sent (MLflow's own client would retry a
    dead server for minutes): VaseError naming the URI where nothing answers. A store that is no server passes."""
    if urlparse(tracking_uri).scheme not in ("http", "https"):
        return
    try:
        urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=PROBE_S).close()
    except urllib.error.HTTPError as e:
        if e.code not in (401, 403):  # an auth wall in front of a server is a server
            raise VaseError(f"MLflow at {tracking_uri}: no server there (HTTP {e.code} on /health); nothing sent, "
                            f"the same command sends it once it answers") from None
    except (urllib.error.URLError, OSError) as e:
        raise VaseError(f"MLflow at {tracking_uri}: no server answers ({getattr(e, 'reason', e)}); nothing sent, the "
                        f"same command sends it once it answers") from None


def replay(run_dir: Path, tracking_uri: str | None = None) -> int:
    """Send ``run_dir``'s journal to the MLflow run it belongs to (its server, or ``tracking_uri``); the calls sent."""
    from mlflow.tracking import MlflowClient  # lazy: mlflow, slow to import

    journal = run_dir / JOURNAL
    if not journal.is_file():
        sent_before = "; mlflow_unsent.sent.jsonl is what was sent" if (run_dir / SENT).is_file() else ""
        raise VaseError(f"{journal}: no such file: nothing of this run waits to be sent to MLflow{sent_before}")
    lines = journal.read_text().splitlines()
    try:
        header, calls = json.loads(lines[0]), [json.loads(x) for x in lines[1:] if x.strip()]
    except (json.JSONDecodeError, IndexError) as e:
        raise VaseError(f"{journal}: not a journal vase wrote ({type(e).__name__}: {e})") from None
    progress = journal.with_name(journal.name + ".sent")
    sent = int(progress.read_text()) if progress.is_file() else 0
    _answers(tracking_uri or header["tracking_uri"])
    client = MlflowClient(tracking_uri or header["tracking_uri"])
    try:
        client.get_run(header["run_id"])
    except Exception as e:  # noqa: BLE001 - the one line says which server and which run
        raise VaseError(f"MLflow at {tracking_uri or header['tracking_uri']} does not answer for run {header['run_id']} "
                        f"({type(e).__name__}: {first_line(e, 200)}); nothing sent, try again "
                        f"once it is back") from None
    for n, c in enumerate(calls):
        if n < sent:
            continue
        if not isinstance(c, dict) or c.get("call") not in LOGGING_CALLS:
            raise VaseError(f"{journal}:{n + 2}: not a logging call vase keeps ({str(c)[:120]}); {n - sent} sent, "
                            f"the rest not")
        try:
            getattr(client, c["call"])(*_decode(c.get("args", [])), **{k: _decode(v) for k, v in
                                                                      c.get("kwargs", {}).items()})
        except Exception as e:  # noqa: BLE001 - the server stopped again: what was sent is counted, the rest waits
            raise VaseError(f"MLflow stopped answering after {n - sent} of {len(calls) - sent} logging calls "
                            f"({type(e).__name__}: {first_line(e, 200)}); the same command sends "
                            f"the rest") from None
        atomic_write_text(progress, str(n + 1))
    journal.rename(journal.with_name(SENT))
    progress.unlink(missing_ok=True)  # the count of a journal this replay wrote, now renamed
    return len(calls) - sent


SWEEP_JOURNAL = "mlflow_sweep_unsent.json"
"""A sweep's MLflow part that its end could not send (`send_sweep`'s plan), in the sweep's folder."""
SWEEP_SENT = "mlflow_sweep_unsent.sent.json"  # the same, once sent
SHARED_VIEW_TAG = "mlflow.sharedViewState."
"""Where MLflow's UI (3.x) reads a shared view of an experiment's runs (``?viewStateShareKey=<key>`` in the link)."""


def send_sweep(plan: dict[str, Any], sweep_dir: Path, tracking_uri: str | None = None) -> dict[str, str]:
    """Send a sweep's MLflow part, ``plan`` (made at the sweep's end: `vase.reports.sweep_dashboards.mlflow_plan`):
    its parent run (``run_name``, ``tags``; found again by ``tags.sweep_group`` where an earlier attempt made it) with
    its ``params``, ``metrics``, ``tables`` and the sweep's ``files``; every job's run of the group made its child,
    with its comparison with the baseline (``children``: job folder name -> metrics); the jobs ``view`` saved on the
    experiment. Returns ``{"experiment_id", "parent", "missing"}`` (the jobs of ``children`` whose run the server
    does not have: deleted, or logged elsewhere). Any failure of the server propagates: the caller keeps the
    plan (`SWEEP_JOURNAL`)."""
    from mlflow.tracking import MlflowClient  # lazy: mlflow, slow to import

    uri = tracking_uri or str(plan["tracking_uri"])
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(str(plan["experiment_name"]))
    exp_id = exp.experiment_id if exp is not None else client.create_experiment(str(plan["experiment_name"]))
    group = str(plan["group"]).replace("'", "")
    found = client.search_runs([exp_id], filter_string=f"tags.sweep_group = '{group}' and tags.job_type = 'sweep'",
                               max_results=1)
    parent = found[0].info.run_id if found else client.create_run(
        exp_id, run_name=str(plan["run_name"]), tags=dict(plan["tags"])).info.run_id
    for path, table in plan["tables"].items():
        client.log_dict(parent, table, path)
    for key, value in plan["params"].items():
        client.log_param(parent, key, value)
    for key, value in plan["metrics"].items():
        client.log_metric(parent, key, value)
    for name in plan["files"]:
        if (sweep_dir / name).is_file():
            client.log_artifact(parent, str(sweep_dir / name), artifact_path="sweep")
    found_jobs = set()
    for run in client.search_runs([exp_id], filter_string=f"tags.sweep_group = '{group}'", max_results=10000):
        if run.info.run_id != parent:
            client.set_tag(run.info.run_id, "mlflow.parentRunId", parent)
            job = Path(str(run.data.tags.get("vase.run_dir", ""))).name
            found_jobs.add(job)
            for key, value in plan["children"].get(job, {}).items():  # its setting against the baseline's job
                client.log_metric(run.info.run_id, key, value)
            for key, text in (plan.get("children_tags") or {}).get(job, {}).items():  # the same, as people read it
                client.set_tag(run.info.run_id, key, text)
    view = plan.get("view")
    if view:
        client.set_experiment_tag(exp_id, SHARED_VIEW_TAG + str(view["key"]), str(view["state"]))
    client.set_terminated(parent)
    return {"experiment_id": str(exp_id), "parent": str(parent),
            "missing": sorted(set(plan["children"]) - found_jobs, key=lambda j: (len(j), j))}


def replay_sweep(sweep_dir: Path, tracking_uri: str | None = None) -> str:
    """Send what a sweep's end kept (`SWEEP_JOURNAL`) and rename it `SWEEP_SENT`; returns the parent run's id."""
    journal = sweep_dir / SWEEP_JOURNAL
    try:
        plan = json.loads(journal.read_text())
    except (OSError, ValueError) as e:
        raise VaseError(f"{journal}: not a sweep's MLflow record vase wrote ({type(e).__name__}: {e})") from None
    _answers(tracking_uri or str(plan.get("tracking_uri")))
    try:
        sent = send_sweep(plan, sweep_dir, tracking_uri)
    except Exception as e:  # noqa: BLE001 - the server's failure, in one line; the record stays for the next try
        raise VaseError(f"MLflow at {tracking_uri or plan.get('tracking_uri')} did not take the sweep's parent run "
                        f"({type(e).__name__}: {first_line(e, 200)}); nothing lost: {journal} stays, the same "
                        f"command sends it once the server answers") from None
    journal.rename(sweep_dir / SWEEP_SENT)
    return sent["parent"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.mlflow_journal", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="the run's folder (it holds mlflow_unsent.jsonl), or a sweep's (each "
                                               "job's journal, then the sweep's mlflow_sweep_unsent.json)")
    ap.add_argument("--tracking-uri", help="send to this server instead of the one the run logged to")
    a = ap.parse_args(argv)
    if check_only():  # the docs' commands are checked this far by the tests
        print(f"config ok: {a.run_dir} (arguments parsed; nothing read or sent)")
        return 0
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # vase's line names the run, not MLflow's
    sweep = (a.run_dir / SWEEP_JOURNAL).is_file()
    try:
        if not sweep:
            n = replay(a.run_dir, a.tracking_uri)
            print(f"MLflow: sent {n} logging calls of {a.run_dir} to its run")
            return 0
        for job in sorted(p.parent for p in a.run_dir.glob(f"*/{JOURNAL}")):  # the jobs' runs first: their parent next
            n = replay(job, a.tracking_uri)
            print(f"MLflow: sent {n} logging calls of {job} to its run")
        parent = replay_sweep(a.run_dir, a.tracking_uri)
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"MLflow: sent the sweep {a.run_dir} to its parent run {parent}, each job's comparison to its run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
