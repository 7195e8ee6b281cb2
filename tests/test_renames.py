"""The names 0.2 changed ("task" now means only what a model is asked: docs/glossary.md#words) still work for one
release, each with one deprecation line naming the new one: on the command line, in a user's config file, in Python
and in a package's entry-point group."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, one_line, run_python

CHECK = {**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}


def test_old_overrides_get_their_new_names_and_one_line_each() -> None:
    from vase.config import RENAMED, renamed_overrides

    said: list[str] = []
    argv = ["task=vqa", "data.task=qa", "+sft.data_task=both", "evaluate.heldout_task=qa", "task_name=mine", "seed=1",
            "--cfg", "hydra.overrides.task=[a]", "~task", "evaluate.vqa=mc", "+evaluate.after=false",
            "evaluation.x=1", "+question.compare=seed"]
    assert renamed_overrides(argv, said.append) == [
        "action=vqa", "data.mix=qa", "+sft.data_mix=both", "val.heldout_mix=qa", "run_kind=mine", "seed=1",
        "--cfg", "hydra.overrides.task=[a]", "~action", "val.vqa=mc", "+val.after=false",
        "evaluation.x=1", "+hypothesis.compare=seed"]
    assert said[1] == ("deprecated: data.task is now data.mix, on the command line (the old name is accepted until "
                       "vase 0.3)")
    assert said[-2] == ("deprecated: evaluate.after is now val.after, on the command line (the old name is accepted "
                        "until vase 0.3)")
    assert len(said) == 9 and set(RENAMED) == {"task", "data.task", "sft.data_task", "evaluate.heldout_task", "task_name",
                                               "evaluate", "question"}


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
    p = run_python(["train.py", "--config-dir", str(conf), "experiment=old", logs], cwd=ROOT, env=CHECK, timeout=300)
    assert p.returncode == 0 and "config ok" in p.stdout, p.stderr[-2000:]
    old = conf / "experiment" / "old.yaml"
    assert (f"deprecated: data.task is now data.mix, in {old} (the old name is accepted until vase 0.3)"
            in p.stderr.splitlines()), p.stderr[-2000:]
    assert f"deprecated: evaluate is now val, in {old} (the old name is accepted until vase 0.3)" in p.stderr.splitlines()
    p = run_python(["train.py", "--config-dir", str(conf), "experiment=bad", logs], cwd=ROOT, env=CHECK, timeout=300)
    assert p.returncode == 2 and "data.mix='everything' must be" in p.stderr, p.stderr[-2000:]
    p = run_python(["train.py", "data.task=both", "task_name=mine", logs], cwd=ROOT, env=CHECK, timeout=300)
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
    p = run_python(["evaluate.py", "task=seven", "logger=none",
                    f"hydra.searchpath=[file://{site / 'old_plugin' / 'conf'}]", f"paths.log_dir={tmp_path / 'logs'}"],
                   cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(site), "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"},
                   timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    said = [line for line in p.stderr.splitlines() if "deprecated: " in line]
    for old in ("entry-point group vase.eval_tasks is now vase.eval_actions", "vase.config.EvalTask is now",
                "vase.config.register_eval_task is now", "deprecated: task is now action"):
        assert any(old in line for line in said), (old, said)


def _old_job(sweep: Path, num: int, beta: str, total: float) -> None:
    """A job of a sweep made before 0.2: its saved config holds the block under its old name, question:."""
    job = sweep / str(num)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(f"- stage.module.beta={beta}\n- seed=1\n")
    (job / ".hydra" / "config.yaml").write_text("question:\n  compare: stage.module.beta\n  baseline: 0.001\n"
                                                "  moves: [heldout/total]\n  report: question\n")
    (job / "heldout_reward.json").write_text(json.dumps({"items": {v: {"total": total + 0.01 * k}
                                                                   for k, v in enumerate("abcd")}}))


def test_a_sweep_from_before_0_2_still_gets_its_verdict_under_the_old_names(tmp_path: Path) -> None:
    """The sweep's question: block is its hypothesis: since 0.2, question.md is verdict.md, `vase question` is `vase
    verdict`, report kind question is verdict and vase.reports.question is vase.reports.verdict: each old name still
    works, with one line naming the new one."""
    sweep = tmp_path / "old_sweep"
    _old_job(sweep, 0, "0.001", 0.1)
    _old_job(sweep, 1, "0.04", 0.5)
    p = run_python(["-m", "vase.cli", "question", str(sweep)], cwd=tmp_path, env=CHECK, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("deprecated: ")]
    assert said == ["deprecated: vase question is now vase verdict (the old name is accepted until vase 0.3)",
                    "deprecated: hypothesis.report: question is now hypothesis.report: verdict (the old name is "
                    "accepted until vase 0.3)"]
    page = (sweep / "verdict.md").read_text()
    assert "stage.module.beta=0.04 against stage.module.beta=0.001" in page and not (sweep / "question.md").exists()
    from vase.reports.verdict_view import read_verdict

    found = read_verdict(sweep)
    assert found["hypothesis"]["compare"] == ["stage.module.beta"] and found["hypothesis"]["report"] == "verdict"
    old = tmp_path / "older_sweep"  # its end wrote question.json, the block under "question"
    old.mkdir()
    (old / "question.json").write_text(json.dumps({"question": {"moves": ["kl"]}, "lines": ["**x**: y"]}))
    assert read_verdict(old) == {"hypothesis": {"moves": ["kl"]}, "lines": ["**x**: y"]}
    assert read_verdict(tmp_path) == {}
    # the old module: the same objects, one warning per old name
    p = run_python(["-c", "import vase.reports.question as q, vase.reports.hypothesis as h; "
                        "assert q.question_of is h.hypothesis_of and q.REPORT_KINDS is h.REPORT_KINDS"], cwd=ROOT, env=CHECK, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "FutureWarning: deprecated: vase.reports.question is now vase.reports.verdict" in p.stderr
    # said where the name lives now (vase.reports.verdict's jobs went to modules of their own in 0.2.1)
    assert "deprecated: vase.reports.question.question_of is now vase.reports.hypothesis.hypothesis_of" in p.stderr


def test_a_sweep_file_or_command_line_with_the_old_question_block_is_checked_at_its_start(tmp_path: Path) -> None:
    """A user's sweep file written with question: and +question.compare= on the command line: the sweep says its
    hypothesis at its start, as with the new name; the command line's old key gets its one line."""
    conf = tmp_path / "conf" / "sweep"
    conf.mkdir(parents=True)
    (conf / "mine.yaml").write_text("# @package _global_\nquestion:\n  compare: seed\n  moves: [loss]\nhydra:\n"
                                    "  mode: MULTIRUN\n  sweeper:\n    params:\n      seed: 1,2\n")
    for args in (["sweep=mine", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"],
                 ["seed=1,2", "+question.compare=seed", "+question.moves=[loss]"]):
        p = run_python(["train.py", "-m", "debug=fast", *args, f"paths.log_dir={tmp_path}"], cwd=ROOT, env=CHECK,
                       timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "hypothesis: this sweep compares seed against its first value on loss" in p.stdout, p.stdout[-2000:]
        if args[0] == "sweep=mine":  # the file named, once for the sweep's two jobs
            said = [ln for ln in p.stderr.splitlines() if ln.startswith("deprecated: ")]
            assert said == [f"deprecated: question is now hypothesis, in {conf / 'mine.yaml'} (the old name is "
                            f"accepted until vase 0.3)"], p.stderr[-2000:]
    assert ("deprecated: question.compare is now hypothesis.compare, on the command line (the old name is accepted "
            "until vase 0.3)") in p.stderr.splitlines()


def test_an_old_name_beside_its_new_one_is_refused_in_one_line_naming_both(tmp_path: Path) -> None:
    """``evaluate.after=false val.after=true``: the later silently won; a file's old key beside the command line's new
    one: the file's old value silently won; a sweep file with question: and hypothesis: compared against one baseline
    while every job kept the other. Each is one line naming both names (and the file), exit 2, before any
    deprecation line, and a sweep is refused before its folder is made."""
    from vase.config import renamed_overrides
    from vase.errors import ConfigError

    said: list[str] = []
    with pytest.raises(ConfigError, match=r"^evaluate.after and val.after are both given on the command line, and "
                                          r"evaluate.after is the old name of val.after: the later would win without "
                                          r"a word; give val.after alone$"):
        renamed_overrides(["evaluate.after=false", "val.after=true"], say=said.append)
    assert said == []
    p = run_python(["train.py", "evaluate.after=false", "val.after=true", f"paths.log_dir={tmp_path / 'logs'}"],
                   cwd=ROOT, env=CHECK, timeout=300)
    assert one_line(p) == ("config error: evaluate.after and val.after are both given on the command line, and "
                           "evaluate.after is the old name of val.after: the later would win without a word; give "
                           "val.after alone")
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "old.yaml").write_text("# @package _global_\nevaluate:\n  after: false\n")
    p = run_python(["train.py", "--config-dir", str(tmp_path / "conf"), "experiment=old", "val.after=true",
                    f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env=CHECK, timeout=300)
    assert one_line(p) == (
        f"config error: evaluate in {conf / 'old.yaml'} and val.after=true on the command line are both given, and "
        f"evaluate is the old name of val: the file's value would win without a word; rename it val in the file")
    sweep = tmp_path / "conf" / "sweep"
    sweep.mkdir()
    (sweep / "both.yaml").write_text("# @package _global_\nhydra:\n  sweeper:\n    params:\n      seed: 1,2\n"
                                     "question:\n  compare: seed\n  baseline: 1\nhypothesis:\n  compare: seed\n"
                                     "  baseline: 2\n")
    for env in (CHECK, {**CHECK, "VASE_CHECK_CONFIG": ""}):  # the check says so too, and a real sweep makes no folder
        p = run_python(["train.py", "--config-dir", str(tmp_path / "conf"), "-m", "sweep=both", "debug=fast",
                        "logger=none", f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env=env, timeout=300)
        assert one_line(p) == (f"config error: question in {sweep / 'both.yaml'} and hypothesis in "
                               f"{sweep / 'both.yaml'} are both given, and question is the old name of hypothesis: "
                               f"one would win without a word; give hypothesis alone") and p.stdout == ""
    assert not (tmp_path / "logs" / "train" / "multiruns").exists()


def test_vase_deprecations_error_refuses_every_old_name_for_a_projects_ci(tmp_path: Path) -> None:
    """``VASE_DEPRECATIONS=error`` (docs/library.md): an old key on the command line or in a file, an old command and
    an old Python name are each refused in one line naming the new name, so a project's CI finds them before 0.3."""
    env = {**CHECK, "VASE_DEPRECATIONS": "error"}
    logs = f"paths.log_dir={tmp_path / 'logs'}"
    p = run_python(["train.py", "data.task=qa", logs], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "config error: old name refused (VASE_DEPRECATIONS=error): data.task is now data.mix, on the command line"], \
        p.stderr[-2000:]
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)

    def refused_with(text: str) -> str:
        """The last line of a run of experiment=old holding ``text``, which must be refused (exit 2)."""
        (conf / "old.yaml").write_text("# @package _global_\n" + text)
        p = run_python(["train.py", "--config-dir", str(tmp_path / "conf"), "experiment=old", logs], cwd=ROOT, env=env,
                       timeout=300)
        assert p.returncode == 2, p.stderr[-2000:]
        return p.stderr.strip().splitlines()[-1]

    assert refused_with("data:\n  task: qa\n") == (
        f"config error: old name refused (VASE_DEPRECATIONS=error): data.task is now data.mix, in {conf / 'old.yaml'}")
    # every old name of a file at once, and of the command line at once: a project's CI learns them from one try
    assert refused_with("data:\n  task: qa\nevaluate:\n  after: false\n") == (
        f"config error: old names refused (VASE_DEPRECATIONS=error): data.task is now data.mix, in "
        f"{conf / 'old.yaml'}; evaluate is now val, in {conf / 'old.yaml'}")
    p = run_python(["train.py", "data.task=qa", "evaluate.after=false", logs], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "config error: old names refused (VASE_DEPRECATIONS=error): data.task is now data.mix, on the command line; "
        "evaluate.after is now val.after, on the command line"], p.stderr[-2000:]
    p = run_python(["-m", "vase.cli", "question", str(tmp_path)], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 2 and "old name refused (VASE_DEPRECATIONS=error): vase question is now vase verdict" \
        in p.stderr, p.stderr
    p = run_python(["-c", "from vase.config import EVAL_TASKS"], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 1 and "ImportError: vase.config.EVAL_TASKS is refused under VASE_DEPRECATIONS=error: " \
        "deprecated: vase.config.EVAL_TASKS is now vase.config.EVAL_ACTIONS" in p.stderr, p.stderr[-1500:]


def test_vase_testing_composes_a_file_of_old_names_as_the_command_does(tmp_path: Path, monkeypatch, capsys) -> None:
    """``vase.testing.compose`` (what a project's own tests compose with) moves a file's old keys to their new names
    with the command's deprecation lines, and refuses them all under VASE_DEPRECATIONS=error: it composed
    ``data.task: qa`` silently to the default mix, and an old ``evaluate:`` section was "no such key"."""
    from vase import testing
    from vase.config import renames
    from vase.errors import ConfigError

    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "old.yaml").write_text("# @package _global_\ndata:\n  task: qa\nevaluate:\n  after: false\n")
    monkeypatch.setattr(renames, "_SAID", set())
    monkeypatch.delenv("VASE_DEPRECATIONS", raising=False)
    cfg = testing.compose(tmp_path / "conf", ["experiment=old"], tmp_path / "out")
    assert cfg.data.mix == "qa" and cfg.val.after is False and "task" not in cfg.data and "evaluate" not in cfg
    said = capsys.readouterr().err.splitlines()
    assert [line for line in said if line.startswith("deprecated: ")] == [
        f"deprecated: data.task is now data.mix, in {conf / 'old.yaml'} (the old name is accepted until vase 0.3)",
        f"deprecated: evaluate is now val, in {conf / 'old.yaml'} (the old name is accepted until vase 0.3)"], said
    monkeypatch.setenv("VASE_DEPRECATIONS", "error")
    with pytest.raises(ConfigError, match=r"^old names refused \(VASE_DEPRECATIONS=error\): data.task is now data.mix"):
        testing.compose(tmp_path / "conf", ["experiment=old"], tmp_path / "out2")
