"""The demo learns, DDP over gloo trains, and a command-line sweep runs: the product's main promises, end to end."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python
from tests.wheel import ENV, install_wheel
from vase.checks.cluster_check import history_ranks
from vase.checks.wheel_check import tree_digest


def assert_the_demo_learns(run: Path) -> None:
    """What must hold of a demo run whatever the seed, read from its folder: SFT's loss falls by more than half and
    its captions share far more words with the references than the untrained model's (which emits random tokens) and
    sit closer in embedding distribution; GRPO keeps that, one history row per GRPO step. (Whether GRPO raises the
    demo's six-term reward in its 216 steps is not asserted here: the learning check, make grpo-sanity, is the test
    that GRPO learns.)"""
    from omegaconf import OmegaConf

    untrained, sft, grpo = json.loads((run / "results.json").read_text()).values()
    assert sft["lexical_similarity"] > untrained["lexical_similarity"] + 0.2
    assert sft["r_at_10"] > untrained["r_at_10"]
    assert sft["fid_score"] < untrained["fid_score"]
    assert grpo["lexical_similarity"] > untrained["lexical_similarity"] + 0.2
    loss = [h["loss"] for h in json.loads((run / "train_history.json").read_text())]
    assert sum(loss[-10:]) / 10 < 0.5 * sum(loss[:10]) / 10
    reward = [h["reward"] for h in json.loads((run / "train_history_grpo.json").read_text())]
    cfg = OmegaConf.load(run / "config.yaml")
    synth = cfg.data.synthetic
    n_train = synth.num_vases - max(1, round(synth.num_vases * synth.val_fraction))
    steps = cfg.followup.epochs * math.ceil(n_train / cfg.followup.batch_size)  # one history row per GRPO step
    assert len(reward) == steps and all(-1.0 <= r <= 1.2 for r in reward)
    assert grpo["fid_score"] < untrained["fid_score"]
    report = (run / "report.md").read_text()
    for part in ("(untrained)", "(sft)", "(grpo)", "loss.png", "contact_sheet.png", "grpo: mean reward"):
        assert part in report


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""For runs side by side on the 2 cores: a thread each, so two runs take about the time one takes with both cores."""


def run_side_by_side(cmds: list[list[str]], envs: list[dict[str, str]] | None = None, timeout: int = 1800,
                     cwds: list[Path] | None = None) -> list[str]:
    """Run commands at once (from vase's folder, or each from its ``cwds``; a thread each; ``envs``: each one's
    environment, default this process's); their outputs, after asserting each exited 0."""
    procs = [subprocess.Popen(c, cwd=cwds[k] if cwds else ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env={**(envs[k] if envs else os.environ), **ONE_THREAD})
             for k, c in enumerate(cmds)]
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    for c, p, out in zip(cmds, procs, outs):
        assert p.returncode == 0, (" ".join(c[1:]), out[-3000:])
    return outs


@pytest.mark.slow
def test_the_demo_learns_on_two_more_seeds_one_of_them_from_the_installed_wheel(tmp_path: Path,
                                                                                session_dirs: dict) -> None:
    """The README's demo on seeds 1 and 2, side by side (`assert_the_demo_learns`); seed 42, the README's, is
    tests/test_cpu_kernels.py's first demo run. Seed 2 runs as a user who ran ``pip install <wheel>`` does: the wheel
    installed into a fresh environment (`tests.wheel`), ``vase-train experiment=demo`` from an empty folder with no
    path given, so its data, tiny models, renders, shared caches and run are made from nothing under that folder, and
    nothing is written into the installed package."""
    installed = install_wheel(tmp_path / "wheel")
    before = tree_digest(installed["package"])
    user = tmp_path / "user"
    user.mkdir()
    seed1 = tmp_path / "seed1"
    run_side_by_side([[sys.executable, "train.py", "experiment=demo", "logger=none", "seed=1", f"hydra.run.dir={seed1}",
                       f"paths.cache_dir={session_dirs['cache']}", f"paths.data_dir={session_dirs['data']}",
                       f"paths.log_dir={tmp_path / 'logs'}"],
                      [str(installed["bin"] / "vase-train"), "experiment=demo", "logger=none", "seed=2"]],
                     envs=[dict(os.environ), ENV], cwds=[ROOT, user])
    assert_the_demo_learns(seed1)
    (run,) = (user / "logs" / "demo" / "runs").iterdir()  # the demo's run kind names its folder
    assert_the_demo_learns(run)
    assert {p.name for p in (user / ".cache").iterdir()} >= {"models", "data"}  # made from nothing, here
    record = json.loads((run / ".vase-run.json").read_text())
    # the wheel's code: no checkout, the commit it was built from (vase/BUILD.json, written at build)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert record["status"] == "finished" and record["code"].get("installed") and record["code"]["commit"] == head, \
        record
    assert tree_digest(installed["package"]) == before  # nothing written into the package


def _train(args: list[str], tmp_path: Path, session_dirs: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    common = [f"paths.cache_dir={session_dirs['cache']}", f"paths.data_dir={session_dirs['data']}",
              f"paths.log_dir={tmp_path / 'logs'}", "logger=none", "render.resolution=64", "debug=fast",
              "val.after=false"]
    return run_python(["train.py", *args, *common], cwd=ROOT, timeout=timeout)


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_ddp_over_gloo_runs_two_processes(tmp_path: Path, session_dirs: dict) -> None:
    p = _train(["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", f"hydra.run.dir={tmp_path / 'run'}"],
               tmp_path, session_dirs)
    assert p.returncode == 0, p.stderr[-3000:]
    log = p.stdout + p.stderr
    assert "distributed_backend=gloo" in log and "Starting with 2 processes" in log
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
    assert len(json.loads((tmp_path / "run" / "train_history.json").read_text())) == 2
    # what each rank read as its first step started: one model and one dataset, each rank its own shard's batch
    ranks = [json.loads((tmp_path / "run" / "inputs" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["model_digest"] == ranks[1]["model_digest"] and ranks[0]["data_digest"] == ranks[1]["data_digest"]
    assert ranks[0]["first_batch"]["input_ids"] != ranks[1]["first_batch"]["input_ids"]
    # the history is rank 0's losses, not whichever rank finished last (each rank's record keeps its first loss)
    assert ranks[0]["loss"] != ranks[1]["loss"]
    assert history_ranks(tmp_path / "run") == ["rank0"]
