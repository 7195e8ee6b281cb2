"""The dashboards (issues 38 and 44): logger=tensorboard, logger=mlflow and logger=wandb, alone or together
(logger=[a,b]), get the same: what was swept and the effective reward weights as short parameters (the full config as
a file), training curves, evaluation tables and images, the held-out verdict as metrics; a sweep becomes an MLflow
parent run with its jobs as children and a W&B group with a summary run; TensorBoard one folder per job named by its
overrides, with the swept key first in the hparams view."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python

SWEEP = ["-m", "debug=fast", "stage=grpo", "sft_init=true", "+stage@sft=sft", "+sft.max_steps=2",
         "reward.weights.shape=0,0.6", "reward.normalize_weights=[shape]", "val.heldout=true",
         "+hypothesis.compare=reward.weights.shape", "+hypothesis.baseline=0", "+hypothesis.report=ablation",
         "logger=[mlflow,tensorboard,wandb]", "stage.module.log_completions_every=1", "val.after=true"]
"""The ablation loop at debug size: a two-job reward-weight sweep from one shared SFT, its hypothesis named on the command
line, held-out verdict on, logged to the three dashboards at once."""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("loggers") / "logs"
    # from the user's own folder (the printed commands name it relatively), with vase's cache of tiny models
    p = run_python([str(ROOT / "train.py"), *SWEEP, f"paths.log_dir={logs}", f"paths.cache_dir={ROOT / '.cache'}"],
                   cwd=logs.parent, env={**os.environ, "WANDB_MODE": "offline", "MLFLOW_TRACKING_URI": ""}, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "MLflow: the sweep is run" in p.stdout and "mlflow ui --backend-store-uri sqlite:///" in p.stdout
    # the link to the jobs opens the view saved on the experiment (the test below reads it), not MLflow's default page
    assert "MLflow: the sweep's jobs, with the swept values and the hypothesis's measures: " in p.stdout
    assert "/#/experiments/1/runs?viewStateShareKey=vase-multirun-" in p.stdout
    (logs / "sweep_stdout.txt").write_text(p.stdout)
    # a clean end: no TensorBoard reader's "Directory watcher" lines, no plugin chatter; every command it prints
    # names the sweep's folders and the store relative to where the user ran it
    assert "Directory watcher" not in p.stdout + p.stderr and "setup plugin" not in p.stdout + p.stderr
    commands = [ln for ln in p.stdout.splitlines() if ln.startswith(("W&B (offline): push", "TensorBoard:", "MLflow:"))]
    assert len(commands) >= 4 and not any(str(logs) in ln for ln in commands), commands
    assert "mlflow ui --backend-store-uri sqlite:///logs/mlflow.db, then" in p.stdout
    assert "hypothesis: this sweep compares reward.weights.shape against 0 on heldout/total (replicates: seed); at " \
           "its end ablation.md" in p.stdout
    return logs


# what a sweep over reward.weights.shape (others rescaled in proportion) may vary between its jobs: the swept key and
# the effective weights it determines; nothing else (no path, no time, no hash)
SWEPT = "sweep/reward.weights.shape"
DETERMINED = {f"weights/{d}" for d in ("fabric", "technique", "shape", "dating", "decoration", "attribution")}


def test_a_sweep_is_an_mlflow_parent_run_with_every_job_a_child_that_shows_what_was_swept(sweep: Path) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{sweep / 'mlflow.db'}")
    exp = client.get_experiment_by_name("vase")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("job_type") == "sweep"]
    assert len(parents) == 1 and len(runs) == 3
    parent = parents[0]
    attached = {a.path for a in client.list_artifacts(parent.info.run_id, "sweep")}
    assert {"sweep/summary.md", "sweep/summary.json", "sweep/sweep.png", "sweep/ablation.png"} <= attached
    verdict = {a.path for a in client.list_artifacts(parent.info.run_id, "tables")}
    assert "tables/ablation_verdict.json" in verdict and parent.data.params[SWEPT] == "0,0.6"
    children = [r for r in runs if r.info.run_id != parent.info.run_id]
    assert all(r.data.tags.get("mlflow.parentRunId") == parent.info.run_id for r in children)
    assert sorted(r.info.run_name for r in children) == ["grpo-w_shape=0", "grpo-w_shape=0.6"]
    for r in children:
        params, metrics = r.data.params, r.data.metrics
        assert params["override/stage"] == "grpo" and params["reward.tau"] == "0.7" and len(params) < 40
        assert not any("dir" in k or "path" in k for k in params)  # paths are tags and files, never params
        assert list(params)[0] == SWEPT or SWEPT in params
        assert {"train/reward", "hp/overall_score", "hp/train_reward_last20"} <= set(metrics)
        # the held-out verdict per dimension and the paper's caption metrics against the start, as metrics
        assert {"hp/heldout/shape_vs_start", "hp/heldout/shape_vs_start_lo", "hp/heldout/shape_verdict",
                "hp/heldout/shape_start", "hp/heldout_captions/lexical_similarity_vs_start",
                "hp/heldout_captions/overall_score_start"} <= set(metrics)
        curve = client.get_metric_history(r.info.run_id, "train/reward")
        assert len(curve) >= 2  # a curve, not a single point
        # MLflow's comparison page plots the first metric a run logged: the verdict's comparison with the baseline,
        # 0 at the job's start (every job starts where the baseline does), the sweep's value at its end (the latest of
        # the same step is the one MLflow shows; the baseline's 0, its own row); then the held-out change against the
        # start, 0 at the start, its measured value after the last step
        assert list(metrics)[:2] == ["vs_baseline/heldout/total", "hp/heldout/shape_vs_start"]
        for key in ("vs_baseline/heldout/total", "hp/heldout/shape_vs_start"):
            history = sorted(client.get_metric_history(r.info.run_id, key), key=lambda m: m.timestamp)
            first, last = history[0], history[-1]  # (a job's comparison may be sent as it ends and at the sweep's end)
            assert first.value == 0.0 and first.timestamp <= min(m.timestamp for m in curve)
            assert last.step == first.step and last.timestamp >= max(m.timestamp for m in curve)
            assert last.value == metrics[key]
        files = {a.path for d in ("tables", "report") for a in client.list_artifacts(r.info.run_id, d)}
        assert {"tables/train_completions.json", "tables/val_table.json", "report/loss.png"} <= files
        assert "config.yaml" in {a.path for a in client.list_artifacts(r.info.run_id)}  # the full config, a file
        assert r.data.tags["vase.run_dir"].endswith(("/0", "/1"))
    a, b = (r.data.params for r in children)
    assert sorted(float(r.data.params[SWEPT]) for r in children) == [0.0, 0.6]
    # the comparison page's first plot takes the parameters that differ: the swept key alone; the weights it
    # determines are tags, on each run's page
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {SWEPT}
    ta, tb = (r.data.tags for r in children)
    assert {k for k in ta.keys() | tb.keys() if k.startswith("weights/") and ta.get(k) != tb.get(k)} == DETERMINED
    exp = client.get_experiment(exp.experiment_id)  # opened on its runs in MLflow 3's UI, not the GenAI overview
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    # the answer on the parent: its name says it, its description has the verdict line, its metrics the numbers
    found = json.loads((next((sweep / "train" / "multiruns").iterdir()) / "verdict.json").read_text())
    pooled = found["blocks"]["all"]["reward.weights.shape=0.6"]["heldout/total"]["pooled"]
    assert parent.info.run_name.startswith("multirun-") and parent.info.run_name.endswith(
        f"-summary: too short to decide (debug=fast): reward.weights.shape=0.6 vs 0: held-out total reward "
        f"{pooled['diff']:+.3g} "
        f"[{pooled['lo']:+.3g}, {pooled['hi']:+.3g}] {pooled['direction']} (1 run x {pooled['vases']} vases: another run "
        f"is not covered)")  # what the interval covers, beside it on every surface
    note = parent.data.tags["mlflow.note.content"]
    # the verdict first (after the debug sweep's "too short to decide"), not a machine's path nor the client's folders
    assert note.startswith(found["too_short"].replace("**", "") + "\n\n" + found["lines"][0].replace("**", ""))
    assert note.startswith("Too short to decide (debug=fast)") and str(sweep) not in note
    assert "| against reward.weights.shape=0 | measure | change [95 % interval] | covers | verdict |" in note
    assert f"| reward.weights.shape=0.6 | held-out total reward | {pooled['diff']:+.3g} " in note
    got = parent.data.metrics
    assert got["verdict/reward.weights.shape_0.6/heldout/total/effect"] == float(f"{pooled['diff']:.3g}")
    assert got["verdict/reward.weights.shape_0.6/heldout/total/low"] == float(f"{pooled['lo']:.3g}")
    assert got["verdict/reward.weights.shape_0.6/heldout/total/high"] == float(f"{pooled['hi']:.3g}")
    # the jobs' view: the jobs alone (their parent not among them), by the hypothesis's measure, its columns shown
    view = json.loads(next(v for k, v in exp.tags.items() if k.startswith("mlflow.sharedViewState.vase-multirun-")))
    shown = client.search_runs([exp.experiment_id], filter_string=view["searchFilter"])
    assert sorted(r.info.run_name for r in shown) == ["grpo-w_shape=0", "grpo-w_shape=0.6"]
    # sorted by, and showing, each job against the baseline on the hypothesis's first measure with its interval
    assert view["orderByKey"] == "metrics.`vs_baseline/heldout/total`"
    # (after the swept key, the comparison as one text a person reads: the difference and both bounds)
    assert view["selectedColumns"] == ["params.`sweep/reward.weights.shape`", "tags.`Δ total`",
                                       "metrics.`vs_baseline/heldout/total`",
                                       "metrics.`vs_baseline/heldout/total_low`",
                                       "metrics.`vs_baseline/heldout/total_high`"]
    # each job's own run carries the hypothesis's comparison: its setting against the baseline job of its seed, in the
    # title's units, with its interval's bounds
    rep = found["jobs"]["1"]["replicate"]
    mine = found["blocks"]["all"]["reward.weights.shape=0.6"]["heldout/total"]["per_replicate"][rep]
    child = next(r for r in children if r.info.run_name == "grpo-w_shape=0.6")
    # to 3 significant digits, as people read them (MLflow shows every digit it holds)
    assert child.data.metrics["vs_baseline/heldout/total"] == float(f"{mine['diff']:.3g}")
    assert child.data.metrics["vs_baseline/heldout/total_low"] == float(f"{mine['lo']:.3g}")
    assert child.data.tags["Δ total"] == f"{mine['diff']:+.3g} [{mine['lo']:+.3g}, {mine['hi']:+.3g}]"
    assert next(r for r in children if r.info.run_name == "grpo-w_shape=0").data.tags["Δ total"] == "0 (baseline)"
    base = next(r for r in children if r.info.run_name == "grpo-w_shape=0").data.metrics  # the baseline: 0, its own row
    assert {k: v for k, v in base.items() if k.startswith("vs_baseline/")} == dict.fromkeys(
        [k for k in child.data.metrics if k.startswith("vs_baseline/")], 0.0)
    # no parameter repeats another: a swept or given key is not also an identity parameter
    for r in children:
        assert not ({k.split("/", 1)[-1] for k in r.data.params if "/" in k} & {k for k in r.data.params if "/" not in k})


def test_tensorboard_gets_one_folder_per_job_named_by_its_overrides_with_the_swept_key_first(sweep: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    sweep_dir = next((sweep / "train" / "multiruns").iterdir())
    folders = sorted(p.parent for p in sweep_dir.glob("*/tensorboard/*/hparams.yaml"))
    # each run's folder is named by its overrides: TensorBoard shows 0/tensorboard/grpo-w_shape=0, not 0/tensorboard
    assert [str(f.relative_to(sweep_dir)) for f in folders] == ["0/tensorboard/grpo-w_shape=0",
                                                                 "1/tensorboard/grpo-w_shape=0.6"]
    for folder in folders:
        ea = EventAccumulator(str(folder), size_guidance={"tensors": 0, "images": 0, "scalars": 0})
        ea.Reload()
        tags = ea.Tags()
        assert "train/reward" in tags["scalars"] and len(ea.Scalars("train/reward")) >= 2
        assert {"report/loss", "report/contact_sheet"} <= set(tags["images"])
        assert {"val/table/text_summary", "train/completions/text_summary"} <= set(tags["tensors"])
        assert "config/text_summary" in tags["tensors"]  # the full config, as a text panel
        hp = {}
        metrics: list[str] = []
        columns: list[tuple[bool, str]] = []
        for content in ea.PluginTagToContent("hparams").values():
            data = plugin_data_pb2.HParamsPluginData.FromString(content)
            if data.HasField("session_start_info"):
                hp = dict(data.session_start_info.hparams)
            if data.HasField("experiment"):
                metrics = [m.name.tag for m in data.experiment.metric_infos]
                columns = [(not h.differs, h.name) for h in data.experiment.hparam_infos]
        # the columns are only what varies among the jobs: the swept key (the weights it moves are in run_params,
        # the config panel and the other dashboards), so the metric columns stay in view beside it
        assert set(hp) == {SWEPT} and hp[SWEPT].number_value in (0.0, pytest.approx(0.6))
        assert columns == [(False, SWEPT)]
        # its metric columns: what the hypothesis asks about first (the swept weight's own dimension), then the
        # held-out change per dimension and the end scores
        # (written by the sweep's end into every job's run: the hypothesis's comparison with the baseline first)
        assert metrics[:6] == ["vs_baseline/heldout/total", "vs_baseline/heldout/total_low",
                               "vs_baseline/heldout/total_high", "hp/heldout/shape_vs_start", "hp/heldout/shape_right",
                               "hp/heldout/reward"]
        assert "hp/heldout/fabric_vs_start" in metrics
        assert "hp/overall_score" in metrics and "hp/train_reward_last20" in metrics
        # the verdict on TensorBoard's TEXT page, saying first that this debug-sized sweep is too short to decide
        said = ea.Tensors("sweep/verdict/text_summary")[-1].tensor_proto.string_val[0].decode()
        assert said.startswith("too short to decide (debug=fast): reward.weights.shape=0.6 vs 0: held-out total")
        # every job has the comparison's values, the baseline at 0 (its own row, and a line in the parallel
        # coordinates, which leave out a run without them)
        compared = {k: ea.Scalars(k)[-1].value for k in metrics[:3]}
        if folder.name == "grpo-w_shape=0":
            assert compared == dict.fromkeys(metrics[:3], 0.0)
        else:
            assert compared["vs_baseline/heldout/total_low"] <= compared["vs_baseline/heldout/total"] \
                <= compared["vs_baseline/heldout/total_high"]


def test_wandb_s_record_shows_the_same_keys_and_metrics_and_groups_the_sweep(sweep: Path) -> None:
    """Read back from the offline run files (W&B's own records): each job named by its sweep values, in the sweep's
    group, with the same short parameters MLflow gets, the held-out metrics, and the full config as a file; the
    summary run holds the verdict table and the plots."""
    from tests.wandb_records import run_view

    sweep_dir = next((sweep / "train" / "multiruns").iterdir())
    jobs = [run_view(next((sweep_dir / j / "wandb").glob("offline-run-*/run-*.wandb"))) for j in ("0", "1")]
    group = f"multirun-{sweep_dir.name}"
    assert [j["name"] for j in jobs] == ["grpo-w_shape=0", "grpo-w_shape=0.6"]
    assert all(j["group"] == group and j["job_type"] == "grpo" for j in jobs)
    a, b = ({k: v for k, v in j["config"].items() if not k.startswith("_")} for j in jobs)
    assert SWEPT in a and len(a) < 40 and not any("dir" in k or "path" in k for k in a)
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {SWEPT} | DETERMINED
    assert all({"hp/heldout/shape_vs_start", "hp/heldout_captions/overall_score_vs_start", "train/reward"}
               <= j["history"] for j in jobs)
    assert all("vase_config.yaml" in j["files"] for j in jobs)
    # the weight-0.6 job's own run holds its comparison with the baseline job (which ran before it), the numbers the
    # sweep's end puts in verdict.json; the baseline's holds none
    found = json.loads((sweep_dir / "verdict.json").read_text())
    rep = found["jobs"]["1"]["replicate"]
    mine = found["blocks"]["all"]["reward.weights.shape=0.6"]["heldout/total"]["per_replicate"][rep]
    assert jobs[1]["summary"]["vs_baseline/heldout/total"] == float(f"{mine['diff']:.3g}")
    assert jobs[1]["summary"]["vs_baseline/heldout/total_high"] == float(f"{mine['hi']:.3g}")
    assert not any(k.startswith("vs_baseline/") for k in jobs[0]["summary"])
    summary = run_view(next((sweep_dir / "wandb").glob("offline-run-*/run-*.wandb")))
    assert summary["group"] == group and summary["config"][SWEPT] == "0,0.6"
    assert {"sweep/summary", "sweep/ablation_verdict", "sweep/ablation", "sweep/vs_baseline"} <= summary["history"]
    # the verdict in the summary run's summary (the runs table's columns): its line and its numbers
    pooled = found["blocks"]["all"]["reward.weights.shape=0.6"]["heldout/total"]["pooled"]
    assert summary["summary"]["verdict"].startswith(
        f"too short to decide (debug=fast): reward.weights.shape=0.6 vs 0: held-out total reward {pooled['diff']:+.3g} [{pooled['lo']:+.3g}, "
        f"{pooled['hi']:+.3g}] {pooled['direction']}")
    assert summary["summary"]["verdict/reward.weights.shape_0.6/heldout/total/low"] == float(f"{pooled['lo']:.3g}")
    assert "ablation.md" in summary["files"]


@pytest.mark.slow  # 27-46 s of subprocesses: make test stays under its 15 minutes (a fresh clone's 1,015 s, 2026-12-07)
def test_runs_started_together_on_a_fresh_mlflow_store_both_land_and_the_store_stays_whole(tmp_path: Path) -> None:
    """Two logger=mlflow runs started at once on a clone with no logs/mlflow.db yet: MLflow's migration of a new store
    raced ("duplicate column name: step") and broke it for every later run; vase makes the store once, under a lock."""
    from mlflow.tracking import MlflowClient

    logs = tmp_path / "logs"
    cmd = [sys.executable, "train.py", "logger=mlflow", "debug=fast", "trainer.max_steps=1", "val.after=false",
           "report=false", f"paths.log_dir={logs}"]
    env = {**os.environ, "WANDB_MODE": "disabled", "MLFLOW_TRACKING_URI": ""}
    procs = [subprocess.Popen([*cmd, f"seed={i}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for i in (1, 2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-1500:] for o in outs]
    client = MlflowClient(f"sqlite:///{logs / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("vase").experiment_id])
    assert sorted(r.data.params["override/seed"] for r in runs) == ["1", "2"]
    assert not any(p.name.endswith(".lock") for p in logs.iterdir())  # the lock lives in the temp folder


def test_a_tracking_server_that_does_not_answer_is_one_line_before_the_model_loads(tmp_path: Path) -> None:
    """MLflow's client retried for minutes after the model had loaded; vase probes the server first."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = run_python(["train.py", "logger=mlflow", "debug=fast", f"paths.log_dir={tmp_path}"], cwd=ROOT,
                   env={**os.environ, "WANDB_MODE": "disabled", "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"},
                   timeout=300)
    assert p.returncode == 2 and "loading model" not in p.stdout + p.stderr  # before the model loads, no retries
    assert "retry" not in p.stderr.lower()
    assert p.stderr.strip().splitlines()[-1].startswith(
        f"config error: logger.mlflow.tracking_uri='http://127.0.0.1:{port}': no MLflow server answers there")
    assert "Traceback" not in p.stderr and "loading model" not in p.stderr + p.stdout
    record = json.loads(next(tmp_path.glob("train/runs/*/.vase-run.json")).read_text())
    assert record["status"] == "failed" and "no MLflow server" in record["reason"]


def test_a_broken_mlflow_store_is_named_in_one_line_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "mlflow.db").write_bytes(b"not a database" * 300)
    p = run_python(["train.py", "logger=mlflow", "debug=fast", f"paths.log_dir={tmp_path}"], cwd=ROOT,
                   env={**os.environ, "WANDB_MODE": "disabled", "MLFLOW_TRACKING_URI": ""}, timeout=300)
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2 and last.startswith(f"error: {tmp_path / 'mlflow.db'}: MLflow's store cannot be opened")
    assert f"mv {tmp_path / 'mlflow.db'} {tmp_path / 'mlflow.db'}.broken" in last and "Traceback" not in p.stderr
    assert (tmp_path / "mlflow.db").read_bytes() == b"not a database" * 300  # the store is the user's: left as it was


def test_against_a_server_mlflow_keeps_artifacts_in_the_server_s_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client-side artifact_location sent a server's files to a folder only this machine sees."""
    from hydra import compose, initialize_config_dir

    from tests.conftest import ROOT as root

    with initialize_config_dir(config_dir=str(root / "conf"), version_base="1.3"):
        node = compose("train", overrides=["logger=mlflow", "paths.log_dir=/x/logs"]).logger.mlflow
        monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://10.0.0.5:5000")
        assert (node.tracking_uri, node.artifact_location) == ("http://10.0.0.5:5000", None)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
        assert (node.tracking_uri, node.artifact_location) == ("sqlite:////x/logs/mlflow.db", "/x/logs/mlartifacts")


def test_several_loggers_are_chosen_at_once_and_a_wrong_one_is_named(tmp_path: Path) -> None:
    p = run_python(["train.py", "logger=[wandb,mlfow]", f"paths.log_dir={tmp_path}"], cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "logger='mlfow' is not a known option" in p.stderr and "mlflow" in p.stderr


@pytest.mark.slow
@pytest.mark.timeout(3600)  # its ten GRPO jobs beside the slow suite's other worker: 1,654 s in CI's form, 2026-12-07
def test_make_dashboards_check_passes_against_real_mlflow_and_tensorboard_servers() -> None:
    """MLflow's own server (its venv built from the package index) and TensorBoard on the loopback: a two-job sweep
    logged to both, read back through their HTTP APIs, the comparison pages screenshotted; a single run against the
    MLflow server (no None tag, its config in the server's store); a single run whose MLflow server is killed mid-run
    (it finishes with its adapter, says in one line what was not logged, and `python -m vase.mlflow_journal` sends it
    once the server is back); servers stopped."""
    p = subprocess.run(["make", "--no-print-directory", "dashboards-check"], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    for part in ("real-effect", "mlflow", "mlflow-single-run", "mlflow-server-dies", "tensorboard"):
        assert f"PASS  {part} " in p.stdout, p.stdout[-4000:]
    left = subprocess.run(["pgrep", "-af", "mlflow server|tensorboard.main"], capture_output=True, text=True).stdout
    assert not left.strip(), left


def test_every_metric_a_run_logs_is_in_the_glossary(sweep: Path) -> None:
    """docs/glossary.md names every metric the sweep's jobs logged (read back from MLflow), each dimension, term, stage
    and caption metric written as its placeholder."""
    import re

    from mlflow.tracking import MlflowClient

    from vase.annotate.vocab import DIMENSIONS

    glossary = (ROOT / "docs" / "glossary.md").read_text()
    listed = set(re.findall(r"`([^`]+)`", glossary))
    from vase.metrics.registry import CAPTION_METRICS

    metrics = sorted([*CAPTION_METRICS, "n_pairs"], key=len, reverse=True)  # the registry's, longest first
    client = MlflowClient(f"sqlite:///{sweep / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("vase").experiment_id])
    keys = {k for r in runs if r.data.tags.get("job_type") != "sweep" for k in r.data.metrics}
    assert len(keys) > 50

    def placeholder(key: str) -> str:
        for m in metrics:  # r_at_10 before r_at_1
            key = re.sub(rf"(?<=/){m}(?=$|_)", "<metric>", key)
        key = re.sub(r"^val/(untrained|sft|grpo)/", "val/<stage>/", key)
        key = re.sub(rf"(?<=/)({'|'.join(DIMENSIONS)})(?=$|_)", "<dim>", key)
        return re.sub(r"(?<=/)(bonus|penalty|invrender|learned|keyword)(?=$|_shape$)", "<term>", key)

    missing = sorted({placeholder(k) for k in keys} - listed - {"<term>_shape"})
    missing = [m for m in missing if not (m.endswith("_shape") and m.replace("_shape", "") in listed)]
    assert not missing, missing
    # train_history.json keeps the training values per step under the same names less "train/" (the glossary says so)
    histories = sorted(sweep.rglob("train_history*.json"))
    assert histories and "train_history.json" in glossary
    history_keys = {f"train/{k}" for h in histories for row in json.loads(h.read_text()) for k in row if k != "step"}
    assert "train/reward/shape" in history_keys
    missing = sorted({placeholder(k) for k in history_keys} - listed)
    missing = [m for m in missing if not (m.endswith("_shape") and m.replace("_shape", "") in listed)]
    assert not missing, missing


def _busy() -> None:
    while True:
        pass


def test_a_finished_wandb_run_s_record_is_whole_on_a_loaded_machine(tmp_path: Path) -> None:
    """wandb.finish() returns before W&B's service has written the run's record (seen: 32,768 bytes on return,
    57,022 three seconds later); vase's finish_wandb waits for the record's closing entry, so a record read (or
    synced) the moment the run ends holds every metric. Two busy processes load both cores meanwhile."""
    import multiprocessing

    import wandb

    from vase.loggers import finish_wandb
    from vase.wandb_record import is_complete, records

    ctx = multiprocessing.get_context("spawn")
    load = [ctx.Process(target=_busy, daemon=True) for _ in range(2)]
    for p in load:
        p.start()
    try:
        for k in range(3):
            run = wandb.init(project="vase-test", dir=str(tmp_path / str(k)), mode="offline", reinit="create_new")
            for step in range(300):
                run.log({"train/loss": 1.0 / (step + 1), "train/reward": step / 300})
            path = run.settings.sync_file
            finish_wandb(run)
            assert is_complete(path), f"run {k}: the record has no closing entry when finish_wandb returns"
            kinds = [r.WhichOneof("record_type") for r in records(path)]
            assert kinds.count("history") == 300 and kinds[-1] == "exit", (k, kinds[-5:])
    finally:
        for p in load:
            p.kill()
            p.join()


def test_a_record_that_never_closes_is_named_once_the_wait_is_over(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    from vase.wandb_record import HEADER, wait_until_complete

    half = tmp_path / "run-abc.wandb"
    half.write_bytes(b":W&B\xe1\xbe\x00")  # the header alone, as a record read too early looked
    assert len(half.read_bytes()) == HEADER
    with caplog.at_level("WARNING", logger="vase"):
        assert wait_until_complete(half, timeout_s=0.3) is False
    assert str(half) in caplog.text and "wandb sync" in caplog.text
    other = tmp_path / "other.wandb"
    other.write_bytes(b"not a record")
    assert wait_until_complete(other, timeout_s=5) is False and "not a W&B run record" in caplog.text


def test_mlflow_s_file_store_is_one_line_naming_the_uri_and_what_to_use(tmp_path: Path) -> None:
    """MLFLOW_TRACKING_URI=file://...: MLflow 3's file store refuses (46 lines of its exception once)."""
    from vase.errors import ConfigError
    from vase.mlflow_store import prepare_mlflow

    uri = f"file://{tmp_path / 'mlruns'}"
    with pytest.raises(ConfigError) as e:
        prepare_mlflow(uri, "vase")
    assert "\n" not in str(e.value) and str(e.value).startswith(f"logger.mlflow.tracking_uri={uri!r}")
    assert "sqlite:///" in str(e.value) and "maintenance mode" in str(e.value)


def test_a_tag_that_does_not_apply_is_left_out_not_sent_as_none(tmp_path: Path) -> None:
    """A single run has no sweep: MLflow's REST store refused the None sweep_group tag (TypeError, run lost)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tests.conftest import CONF
    from vase.loggers import build_loggers

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["logger=mlflow", f"paths.log_dir={tmp_path}"])
    GlobalHydra.instance().clear()
    assert cfg.logger.mlflow.tags.sweep_group is None  # outside a multirun
    (lg,) = build_loggers(cfg)
    assert "sweep_group" not in lg.tags and lg.tags["run_kind"] == "train"
    assert all(isinstance(v, str) for v in lg.tags.values())


def test_an_mlflow_server_that_stops_answering_mid_run_loses_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    """The logger's server stops answering after the run began (here: its client pointed at a port nobody listens
    on, a real refused connection): logging goes on into the run's journal, not an exception; the end-of-run line
    says what was kept and the command that sends it; that command (vase.mlflow_journal) sends it to the run, then
    says in one line that nothing is left, and a replay cut short sends only the rest."""
    from mlflow.tracking import MlflowClient

    from vase.checks.slurm import free_port
    from vase.loggers import say_unsent
    from vase.mlflow_journal import BOUNDED_HTTP, JOURNAL, JournaledMLFlowLogger, main

    for k in BOUNDED_HTTP:  # unset, as on a user's machine; restored after the test
        monkeypatch.setenv(k, "x")
        monkeypatch.delenv(k)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")  # the user's own value is kept
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = tmp_path / "run"
    lg = JournaledMLFlowLogger(experiment_name="vase", tracking_uri=uri, journal=run_dir / JOURNAL,
                               artifact_location=str(tmp_path / "mlartifacts"))
    lg.log_hyperparams({"lr": 0.1})
    lg.log_metrics({"train/loss": 1.0}, step=0)
    # MLflow's retries bounded (7 retries, doubling waits: about 4 minutes of a stalled run per dead server)
    assert {k: os.environ[k] for k in BOUNDED_HTTP} == {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                                                       "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                                                       "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
    lg._mlflow_client = MlflowClient(f"http://127.0.0.1:{free_port()}")  # the server is gone
    for step in (1, 2, 3):
        lg.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step)
    lg.experiment.log_dict(lg.run_id, {"columns": ["a"], "data": [[1]]}, "tables/x.json")
    lg.finalize("success")
    err = capsys.readouterr().err
    assert err.count("stopped answering") == 1, err
    (line,) = say_unsent([lg], run_dir)
    assert f"python -m vase.mlflow_journal {run_dir}" in line and "3 metrics" in line and "the run's end" in line
    store = MlflowClient(uri)
    assert [m.step for m in store.get_metric_history(lg.run_id, "train/loss")] == [0]
    journal = run_dir / JOURNAL
    (journal.parent / (JOURNAL + ".sent")).write_text("1")  # a replay that was cut after its first call
    assert main([str(run_dir)]) == 0
    steps = sorted(m.step for m in store.get_metric_history(lg.run_id, "train/loss"))
    assert steps == [0, 2, 3]  # the first kept call (step 1) counted as sent: only the rest went
    assert store.get_run(lg.run_id).info.status == "FINISHED"
    assert "tables/x.json" in [f.path for f in store.list_artifacts(lg.run_id, "tables")]
    assert not journal.exists() and (run_dir / "mlflow_unsent.sent.jsonl").is_file()
    assert main([str(run_dir)]) == 2
    assert "nothing of this run waits to be sent" in capsys.readouterr().err
    # a journal is replayed as logging calls only: a line asking for anything else is refused, nothing done
    journal.write_text(json.dumps({"tracking_uri": uri, "run_id": lg.run_id}) + "\n"
                       + json.dumps({"call": "delete_run", "args": [lg.run_id], "kwargs": {}}) + "\n")
    assert main([str(run_dir)]) == 2
    assert "not a logging call vase keeps" in capsys.readouterr().err
    assert store.get_run(lg.run_id).info.lifecycle_stage == "active"


def test_the_printed_wandb_command_pushes_the_whole_sweep(sweep: Path) -> None:
    """The sweep's end prints one command for all its offline W&B runs (each job's and the summary's); run as a user
    would, in a shell, with --dry-run: W&B's own sync counts the three runs."""
    said = re.findall(r"W&B \(offline\): push the whole sweep later with: (.+)", (sweep / "sweep_stdout.txt").read_text())
    # relative to the folder the sweep ran from, as the TensorBoard line and the docs write it, and run there
    assert len(said) == 1 and said[0].startswith("wandb sync logs/train/multiruns/"), said
    wandb = Path(sys.executable).parent / "wandb"
    p = subprocess.run(["bash", "-c", said[0].replace("wandb sync ", f"{wandb} sync --dry-run ", 1)], cwd=sweep.parent,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "WANDB_MODE": "offline"})
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "Would sync 3 run(s)" in out, out[-2000:]
    assert out.count(".wandb") == 3


def test_the_printed_tensorboard_command_names_each_job_by_its_swept_values(sweep: Path) -> None:
    """TensorBoard's tables cut a run's path (0/tensorboard/...): the sweep's end prints a --logdir_spec whose run
    names are the jobs' swept values, each pointing at its job's events (make dashboards-check starts TensorBoard
    with it)."""
    import shlex

    said = re.findall(r"TensorBoard: the jobs side by side, named by their swept values: (.+)",
                      (sweep / "sweep_stdout.txt").read_text())
    assert len(said) == 1
    command, _, page = said[0].partition(", then ")
    args = shlex.split(command)
    # one folder, relative to where the sweep ran: a link per job, named by its swept values, to the job's run
    assert args[:2] == ["tensorboard", "--logdir"] and len(args) == 3 and len(command) < 120, command
    board = sweep.parent / args[2]
    assert args[2].startswith("logs/train/multiruns/") and board.parent.parent.name == "multiruns"
    assert sorted(p.name for p in board.iterdir()) == ["w_shape=0", "w_shape=0.6"]
    assert all(p.is_symlink() and p.resolve().name == f"grpo-{p.name}" and any(p.glob("events.out.*"))
               for p in board.iterdir())
    # the training curves first, not the one-point hp/* charts
    assert page == "http://localhost:6006/?tagFilter=train%2F%28reward%7Closs%7Ckl%29%24#timeseries"


def test_a_sweep_job_s_tensorboard_session_holds_its_replicate_s_value_too(tmp_path: Path) -> None:
    """Each job's hparams session carries every column's value, a replicate's (``sweep_replicate/seed``) as well as the
    compared key's: without it TensorBoard's parallel coordinates drew no line at all for a sweep with seeds."""
    from pytorch_lightning.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    from vase.loggers import _tensorboard_hparams

    lg = TensorBoardLogger(str(tmp_path), name="job", version="0")
    _tensorboard_hparams(lg, {"sweep/reward.weights.shape": 0.6, "sweep_replicate/seed": 2, "stage": "grpo"},
                         {"hp/heldout/shape_right": 0.4})
    lg.experiment.close()
    ea = EventAccumulator(str(tmp_path / "job" / "0"))
    ea.Reload()
    data = [plugin_data_pb2.HParamsPluginData.FromString(c) for c in ea.PluginTagToContent("hparams").values()]
    (start,) = [d.session_start_info for d in data if d.HasField("session_start_info")]
    assert {k: v.number_value for k, v in start.hparams.items()} == {"sweep/reward.weights.shape": 0.6,
                                                                      "sweep_replicate/seed": 2.0}
    assert not [d for d in data if d.HasField("experiment")]  # a sweep's job leaves the columns to the sweep's end


def test_a_sweeps_tensorboard_view_is_written_once_at_its_end_with_the_comparison_first(tmp_path: Path) -> None:
    """TensorBoard keeps the first experiment record a run holds (its hparams columns): a job of a sweep writes none,
    and the sweep's end writes one for every job, the compared key first (a replicate after it, unticked) and each
    job's comparison with the baseline as the first metrics, logged in that job's run; the printed command is one
    relative folder of links named by the jobs' swept values."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
    from torch.utils.tensorboard import SummaryWriter

    from vase.reports.sweep_dashboards import tensorboard_command
    from vase.tensorboard_sweep import tensorboard_sweep_columns, tensorboard_tags

    sweep = tmp_path / "logs" / "train" / "multiruns" / "t"
    runs = [sweep / "0" / "tensorboard" / "grpo-beta=0.001-seed=1", sweep / "1" / "tensorboard" / "grpo-beta=0.04-seed=1"]
    for run in runs:
        w = SummaryWriter(str(run))
        w.add_scalar("hp/heldout/reward", 0.5, 0)
        w.close()
    params = [{"sweep_replicate/seed": 1, "sweep/stage.module.beta": b} for b in (0.001, 0.04)]
    comparisons = [{}, {"vs_baseline/heldout/total": 3.0, "vs_baseline/heldout/total_low": 1.0,
                        "vs_baseline/heldout/total_high": 5.0}]
    tensorboard_sweep_columns(runs, params, ["sweep/stage.module.beta"], ["hp/heldout/reward"], comparisons)
    assert tensorboard_tags(runs) == ["hp/heldout/reward"]
    for run, comparison in zip(runs, comparisons):
        ea = EventAccumulator(str(run))
        ea.Reload()
        experiments = [plugin_data_pb2.HParamsPluginData.FromString(c).experiment
                       for c in ea.PluginTagToContent("hparams").values()
                       if plugin_data_pb2.HParamsPluginData.FromString(c).HasField("experiment")]
        assert len(experiments) == 1
        exp = experiments[0]
        assert [m.name.tag for m in exp.metric_infos] == ["vs_baseline/heldout/total", "vs_baseline/heldout/total_low",
                                                         "vs_baseline/heldout/total_high", "hp/heldout/reward"]
        assert [(h.name, h.differs) for h in exp.hparam_infos] == [("sweep/stage.module.beta", True),
                                                                   ("sweep_replicate/seed", False)]
        # short titles, so that the parallel coordinates' axis titles do not run into each other
        assert [h.display_name for h in exp.hparam_infos] == ["beta", "seed"]
        assert [m.display_name for m in exp.metric_infos] == ["Δ total", "Δ total low", "Δ total high", "reward"]
        assert {k: ea.Scalars(k)[-1].value for k in comparison} == comparison
    said = tensorboard_command(sweep, here=tmp_path)
    assert said.startswith("tensorboard --logdir logs/train/multiruns/t/tensorboard, then http://localhost:6006/")
    links = sorted((sweep / "tensorboard").iterdir())
    assert [p.name for p in links] == ["beta=0.001-seed=1", "beta=0.04-seed=1"]
    assert [p.resolve() for p in links] == [r.resolve() for r in runs] and not any(Path(os.readlink(p)).is_absolute() for p in links)
    assert tensorboard_command(sweep, here=tmp_path) == said  # a second end of the same sweep: the same links
