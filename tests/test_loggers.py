"""Self-hosted dashboards (issue 38): logger=tensorboard and logger=mlflow, alone or with others (logger=[a,b]), get
what the W&B logger gets: the config with the effective reward weights, training curves, evaluation tables and images;
a sweep becomes an MLflow parent run with its jobs as children, and TensorBoard one folder per job with the hparams
view."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("loggers") / "logs"
    p = subprocess.run([sys.executable, "train.py", "-m", "debug=fast", "stage=grpo", "stage.module.lora.r=4,8",
                        "logger=[mlflow,tensorboard]", "stage.module.log_completions_every=1", "evaluate.after=true",
                        f"paths.log_dir={logs}"], cwd=ROOT, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "WANDB_MODE": "disabled", "MLFLOW_TRACKING_URI": ""})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "MLflow: the sweep is run" in p.stdout
    return logs


def test_a_sweep_is_an_mlflow_parent_run_with_every_job_a_child_that_has_what_wandb_gets(sweep: Path) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{sweep / 'mlflow.db'}")
    exp = client.get_experiment_by_name("vase")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("job_type") == "sweep"]
    assert len(parents) == 1 and len(runs) == 3
    parent = parents[0].info.run_id
    attached = {a.path for a in client.list_artifacts(parent, "sweep")}
    assert {"sweep/summary.md", "sweep/summary.json", "sweep/sweep.png"} <= attached
    children = [r for r in runs if r.info.run_id != parent]
    assert all(r.data.tags.get("mlflow.parentRunId") == parent for r in children)
    for r in children:
        params, metrics = r.data.params, r.data.metrics
        assert params["reward/effective_weights/shape"] == "0.15" and params["stage/name"] == "grpo"
        assert {"train/reward", "hp/overall_score", "hp/train_reward_last20"} <= set(metrics)
        history = client.get_metric_history(r.info.run_id, "train/reward")
        assert len(history) >= 2  # a curve, not a single point
        files = {a.path for d in ("tables", "report") for a in client.list_artifacts(r.info.run_id, d)}
        assert {"tables/train_completions.json", "tables/val_table.json", "report/loss.png"} <= files
    assert sorted(r.data.params["stage/module/lora/r"] for r in children) == ["4", "8"]


def test_tensorboard_gets_one_folder_per_job_with_curves_tables_images_and_the_hparams_view(sweep: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    sweep_dir = next((sweep / "train" / "multiruns").iterdir())
    folders = sorted(p.parent for p in sweep_dir.glob("*/tensorboard/hparams.yaml"))
    assert [f.parent.name for f in folders] == ["0", "1"]
    for folder in folders:
        ea = EventAccumulator(str(folder), size_guidance={"tensors": 0, "images": 0, "scalars": 0})
        ea.Reload()
        tags = ea.Tags()
        assert "train/reward" in tags["scalars"] and len(ea.Scalars("train/reward")) >= 2
        assert {"report/loss", "report/contact_sheet"} <= set(tags["images"])
        assert {"val/table/text_summary", "train/completions/text_summary"} <= set(tags["tensors"])
        hp = {}
        metrics: list[str] = []
        for content in ea.PluginTagToContent("hparams").values():
            data = plugin_data_pb2.HParamsPluginData.FromString(content)
            if data.HasField("session_start_info"):
                hp = dict(data.session_start_info.hparams)
            if data.HasField("experiment"):
                metrics = [m.name.tag for m in data.experiment.metric_infos]
        assert hp["w_shape"].number_value == pytest.approx(0.15) and "stage.module.lora.r" in hp
        assert "hp/overall_score" in metrics and "hp/train_reward_last20" in metrics


def test_several_loggers_are_chosen_at_once_and_a_wrong_one_is_named(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "train.py", "logger=[wandb,mlfow]", f"paths.log_dir={tmp_path}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "logger='mlfow' is not a known option" in p.stderr and "mlflow" in p.stderr


@pytest.mark.slow
def test_make_dashboards_check_passes_against_real_mlflow_and_tensorboard_servers() -> None:
    """MLflow's own server (its venv built from the package index) and TensorBoard on the loopback: a two-job sweep
    logged to both, read back through their HTTP APIs, the comparison pages screenshotted; servers stopped."""
    p = subprocess.run(["make", "dashboards-check"], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-3000:]
    assert "PASS  mlflow" in p.stdout and "PASS  tensorboard" in p.stdout
    left = subprocess.run(["pgrep", "-af", "mlflow server|tensorboard.main"], capture_output=True, text=True).stdout
    assert not left.strip(), left
