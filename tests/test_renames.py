"""The names 0.2 changed ("task" now means only what a model is asked: docs/glossary.md#words) still work for one
release, each with one deprecation line naming the new one: on the command line, in a user's config file, in Python
and in a package's entry-point group."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

CHECK = {**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}


def test_old_overrides_get_their_new_names_and_one_line_each() -> None:
    from vase.config import RENAMED, renamed_overrides

    said: list[str] = []
    argv = ["task=vqa", "data.task=qa", "+sft.data_task=both", "evaluate.heldout_task=qa", "task_name=mine", "seed=1",
            "data.mix=both", "--cfg", "hydra.overrides.task=[a]", "~task", "evaluate.vqa=mc", "+evaluate.after=false",
            "evaluation.x=1"]
    assert renamed_overrides(argv, said.append) == [
        "action=vqa", "data.mix=qa", "+sft.data_mix=both", "val.heldout_mix=qa", "run_kind=mine", "seed=1",
        "data.mix=both", "--cfg", "hydra.overrides.task=[a]", "~action", "val.vqa=mc", "+val.after=false",
        "evaluation.x=1"]
    assert said[1] == "deprecated: data.task is now data.mix (the old name is accepted until vase 0.3)"
    assert said[-1] == "deprecated: evaluate.after is now val.after (the old name is accepted until vase 0.3)"
    assert len(said) == 8 and set(RENAMED) == {"task", "data.task", "sft.data_task", "evaluate.heldout_task", "task_name",
                                               "evaluate"}


def test_a_config_file_written_for_the_old_names_has_its_values_moved(train_cfg) -> None:
    from omegaconf import open_dict

    from vase.config import renamed_keys, validate

    cfg = train_cfg()
    with open_dict(cfg):  # what a user's experiment file written before 0.2 adds to the composed config
        cfg.data.task = "qa"
        cfg.evaluate = {"heldout_task": "both", "vqa": "mc"}  # train.py's section under its old name, in part
    said: list[str] = []
    assert renamed_keys(cfg, said.append) == ["data.task", "evaluate.heldout_task", "evaluate"]
    assert cfg.data.mix == "qa" and cfg.val.heldout_mix == "both" and "task" not in cfg.data
    assert cfg.val.vqa == "mc" and cfg.val.heldout_split == "all" and "evaluate" not in cfg  # merged: the rest kept its defaults
    assert said == ["deprecated: data.task is now data.mix (the old name is accepted until vase 0.3)",
                    "deprecated: evaluate.heldout_task is now val.heldout_mix (the old name is accepted until vase 0.3)",
                    "deprecated: evaluate is now val (the old name is accepted until vase 0.3)"]
    validate(cfg)
    assert renamed_keys(cfg, said.append) == [] and len(said) == 3  # nothing old left: nothing said


def test_old_python_names_import_with_a_warning_and_are_the_new_objects() -> None:
    import vase.config
    import vase.prompt_tasks
    from vase.data.datamodule import VaseDataModule

    with pytest.warns(FutureWarning, match=r"vase.config.EVAL_TASKS is now vase.config.EVAL_ACTIONS"):
        from vase.config import EVAL_TASKS
    assert EVAL_TASKS is vase.config.EVAL_ACTIONS
    with pytest.warns(FutureWarning, match="register_eval_task is now"):
        assert vase.config.register_eval_task is vase.config.register_eval_action
    with pytest.warns(FutureWarning, match="DATA_TASKS is now vase.prompt_tasks.DATA_MIXES"):
        assert vase.prompt_tasks.DATA_TASKS is vase.prompt_tasks.DATA_MIXES
    with pytest.warns(FutureWarning, match=r"VaseDataModule\(task=...\) is now VaseDataModule\(mix=...\)"):
        assert VaseDataModule("data/nowhere", task="qa").mix == "qa"
    with pytest.raises(AttributeError, match="has no attribute 'EVAL_TASK'"):
        vase.config.EVAL_TASK  # noqa: B018 - a name that never was: the usual error


def test_a_user_s_old_command_and_config_file_still_run_and_say_the_new_names(tmp_path: Path) -> None:
    """vase train with a user's experiment file that sets data.task, and data.task= on the command line: the run's
    config check passes with the old value under the new key (a bad old value is refused under its new name)."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "old.yaml").write_text("# @package _global_\ndata:\n  task: qa\nevaluate:\n  vqa: mc\n")
    (conf / "experiment" / "bad.yaml").write_text("# @package _global_\ndata:\n  task: everything\n")
    logs = f"paths.log_dir={tmp_path / 'logs'}"
    p = subprocess.run([sys.executable, "train.py", "--config-dir", str(conf), "experiment=old", logs], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env=CHECK)
    assert p.returncode == 0 and "config ok" in p.stdout, p.stderr[-2000:]
    assert "deprecated: data.task is now data.mix (the old name is accepted until vase 0.3)" in p.stderr.splitlines()
    assert "deprecated: evaluate is now val (the old name is accepted until vase 0.3)" in p.stderr.splitlines()
    p = subprocess.run([sys.executable, "train.py", "--config-dir", str(conf), "experiment=bad", logs], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env=CHECK)
    assert p.returncode == 2 and "data.mix='everything' must be" in p.stderr, p.stderr[-2000:]
    p = subprocess.run([sys.executable, "train.py", "data.task=both", "task_name=mine", logs], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env=CHECK)
    assert p.returncode == 0 and "config ok: data.mix=both run_kind=mine" in p.stdout, p.stdout + p.stderr[-2000:]
    assert (tmp_path / "logs" / "mine").is_dir()  # the run kind names the folder, as task_name did
    assert sum(line.startswith("deprecated: ") for line in p.stderr.splitlines()) == 2


def test_a_plugin_written_for_the_old_names_runs_with_task_equals(tmp_path: Path) -> None:
    """A package from before 0.2 (its entry-point group vase.eval_tasks, EvalTask and register_eval_task), run with
    evaluate.py task=<its name>: it runs, and each old name is one line naming the new one."""
    site = tmp_path / "site"
    (site / "old_plugin" / "conf" / "action").mkdir(parents=True)
    (site / "old_plugin" / "__init__.py").write_text(textwrap.dedent('''
        from vase.config import EvalTask, register_eval_task

        def run(cfg):
            return {"scores": {"n": 7}}

        register_eval_task("seven", EvalTask("a plugin from before 0.2", "old_plugin:run"))
        '''))
    (site / "old_plugin" / "conf" / "action" / "seven.yaml").write_text("# @package _global_\naction: seven\n")
    info = site / "old_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: old-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vase.eval_tasks]\nseven = old_plugin\n")
    p = subprocess.run([sys.executable, "evaluate.py", "task=seven", "logger=none",
                        f"hydra.searchpath=[file://{site / 'old_plugin' / 'conf'}]", f"paths.log_dir={tmp_path / 'logs'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(site), "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    said = [line for line in p.stderr.splitlines() if "deprecated: " in line]
    for old in ("entry-point group vase.eval_tasks is now vase.eval_actions", "vase.config.EvalTask is now",
                "vase.config.register_eval_task is now", "deprecated: task is now action"):
        assert any(old in line for line in said), (old, said)
