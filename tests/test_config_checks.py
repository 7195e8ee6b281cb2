"""The config check: a typo, a bad value, a missing key or a target that takes no such argument is one line before
anything loads, the same for every way in (train.py, evaluate.py, the ms-swift plugin, TRL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg, one_line, run_cli, run_python
from vase.config import validate
from vase.errors import ConfigError


def _run(args: list[str], tmp_path: Path, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:

    env = {**os.environ, "WANDB_MODE": "disabled", **({"VASE_CHECK_CONFIG": "1"} if check else {})}
    return run_python([*args], cwd=ROOT, env=env, timeout=timeout)


def _records(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in root.rglob(".vase-run.json")] if root.exists() else []


@pytest.mark.parametrize(("override", "expected"), [
    ("+stage.modul.lr=1", "+stage.modul.lr: stage has no key 'modul', so nothing would read it; did you mean 'module'?"),
    ("+stage.module.optimizer.lrr=1", "stage.module.optimizer.lrr: AdamW takes no argument 'lrr', so nothing would "
                                      "read it; did you mean 'lr'?"),
    ("stage.module.optimizer.lr=-1", "stage.module.optimizer.lr=-1 must be a positive number"),
])
def test_a_typo_or_a_bad_value_fails_before_the_model_loads(override: str, expected: str, tmp_path: Path,
                                                              session_dirs: dict) -> None:
    p = run_cli(["train.py", "logger=none", override], tmp_path, session_dirs)
    assert one_line(p) == f"config error: {expected}"
    assert "loading model" not in p.stdout + p.stderr


def test_every_target_in_every_shipped_config_takes_its_keys(tmp_path: Path, session_dirs: dict) -> None:
    """The signature check must not refuse what vase ships (every experiment, both entry points)."""
    for name in sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")):
        validate(compose_cfg("train", [f"experiment={name}"], tmp_path / name, session_dirs))
    validate(compose_cfg("evaluate", [], tmp_path / "evaluate", session_dirs))


@pytest.mark.parametrize("args", [
    ["action=score", "generated=/nonexistent/g.json", "ground_truth=/nonexistent/t.json"],
    ["action=vaseeval", "gt_dir=/nonexistent/gt", "methods={a: /nonexistent/a}"],
    ["action=foo"],
])
def test_evaluate_refusals_are_one_line(args: list[str], tmp_path: Path, session_dirs: dict) -> None:
    from vase.config import EVAL_ACTIONS

    line = one_line(run_cli(["evaluate.py", "logger=none", *args], tmp_path, session_dirs))
    assert "/nonexistent/" in line or ("action='foo'" in line and all(f"'{t}'" in line for t in EVAL_ACTIONS))


@pytest.mark.parametrize(("overrides", "expected"), [
    (["data.limit_train=0"], "data.limit_train=0 must be at least 1, or null for no limit"),
    (["data.limit_val=0", "val.after=true"], "data.limit_val=0 leaves no vase to evaluate"),
    # the troubleshooting page's old fix, "at least 1": FID failed on it after the run had trained
    (["data.limit_val=1", "val.after=true"], "data.limit_val=1 leaves 1 vase to evaluate (val.before/after "
                                                  "are on; FID needs at least 2); give at least 2"),
    (["stage.module.optimizer.lrr=1"],  # the same line as the + form (test_trust)
     "stage.module.optimizer.lrr: AdamW takes no argument 'lrr', so nothing would read it; did you mean 'lr'?"),
    (["stage=grpo", "stage.module.num_generation=1"],
     "stage.module.num_generation: GRPOModule takes no argument 'num_generation', so nothing would read it; did you "
     "mean 'num_generations'?"),
    (["stage.num_generations=1"], "stage.num_generations: stage has no key 'num_generations'"),
    (["callbacks.mine._target_=x.Y"], "(a new entry is added with +callbacks.mine._target_=...)"),
    (["stage=grpo", "+reward.terms.mine._target_=nope.Mod", "+reward.terms.mine.weight=1"],
     "reward.terms.mine._target_='nope.Mod' cannot be imported: ModuleNotFoundError: No module named 'nope'"),
])
def test_bad_values_and_keys_are_one_line_before_anything_loads(overrides: list[str], expected: str,
                                                                 tmp_path: Path, session_dirs: dict) -> None:
    p = run_cli(["train.py", "logger=none", *overrides], tmp_path, session_dirs)
    line = one_line(p)
    assert line.startswith("config error: ") and expected in line, line
    assert "sweep job" not in p.stderr and "loading model" not in p.stdout + p.stderr
    # a run stopped by its config is marked failed, never left 'running' for resume=auto or a reader to take as live
    statuses = [json.loads(f.read_text())["status"] for f in (tmp_path / "logs").rglob(".vase-run.json")]
    assert all(s == "failed" for s in statuses), statuses


def test_a_config_error_loads_no_torch(tmp_path: Path) -> None:
    """A bad value is refused in about a second: nothing on that path (the Hydra callbacks every run loads, the
    preflight checks) imports torch or Lightning."""
    p = run_python(["-X", "importtime", "train.py", "stage=grpo", "reward.tau=1.7",
                    f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "config error: reward.tau=1.7" in p.stderr
    heavy = sorted({ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if "import time:" in ln
                    and ln.split("|")[-1].strip().split(".")[0] in ("torch", "pytorch_lightning", "transformers")})
    assert not heavy, heavy[:5]


@pytest.mark.parametrize("overrides,says", [("tau=5", "reward.tau=5.0 must lie in [0, 1]"),
                                            ("weights.shape=-3", "reward.weights.shape=-3.0 must be non-negative"),
                                            ("nosuchkey=1", "reward.nosuchkey")])
def test_the_plugin_and_trl_refuse_what_train_py_refuses(overrides: str, says: str, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path, session_dirs: dict) -> None:
    """VASE_REWARD_OVERRIDES="tau=5" once trained an ms-swift run on R=0.10 for the reference caption (train.py
    refuses it); "nosuchkey=1" gave a raw TypeError naming neither the variable nor the valid keys."""
    from vase.integrations.columns import ColumnReward
    from vase.integrations.trl import reward_functions

    monkeypatch.setenv("VASE_REWARD_OVERRIDES", overrides)
    for build in (ColumnReward, reward_functions):  # the ms-swift plugin's shared reward; TRL's functions
        with pytest.raises(ConfigError) as e:
            build()
        msg = str(e.value)
        assert msg.startswith(f"VASE_REWARD_OVERRIDES='{overrides}'") and says in msg and "\n" not in msg
        assert "valid keys: tau" in msg and "weights.shape" in msg and "terms.<name>.<field>" in msg
    if overrides != "nosuchkey=1":  # train.py says the same of the same value
        with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
            validate(compose_cfg("train", ["stage=grpo", f"reward.{overrides}"], tmp_path, session_dirs))
    monkeypatch.setenv("VASE_REWARD_OVERRIDES", "weights.shape=0.6 tau=0.5")
    assert ColumnReward().reward.terms["shape"].weight == 0.6


@pytest.mark.parametrize("override,says", [("data.zoom_width=2", "data.zoom_width=2 must be in (0, 1]"),
                                           ("data.zoom_direct=-1", "data.zoom_direct=-1 must be 0 to 5"),
                                           ("retrieval.format=nope", "retrieval.format='nope' must be one of"),
                                           ("retrieval.k=abc", "retrieval.k='abc' must be a whole number"),
                                           ("retrieval.features=x", "retrieval.features='x' must be one of")])
def test_every_data_and_retrieval_knob_is_checked_with_the_config(override: str, says: str, tmp_path: Path,
                                                                   session_dirs: dict) -> None:
    """Before: the zoom knobs failed after the model loaded, in Hydra's 7-line block; retrieval.format=nope trained
    with exit 0 when retrieval was off."""
    for config in ("train", "evaluate"):
        if config == "evaluate" and override.startswith("data.zoom"):
            continue
        with pytest.raises(ConfigError) as e:
            validate(compose_cfg(config, [override], tmp_path, session_dirs))
        assert str(e.value).startswith(says), str(e.value)


def test_a_plain_typed_argument_of_a_target_is_checked(tmp_path: Path, session_dirs: dict) -> None:
    """reconstruct.generator.rows=abc once became a failure per object ("silhouette under 8 rows") in a run that
    ended "finished"."""
    cfg = compose_cfg("generate3d", ["reconstruct.generator.rows=abc", f"input={tmp_path}"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"reconstruct\.generator\.rows='abc' must be a whole number"):
        validate(cfg)
    cfg = compose_cfg("curate", ["filter.keep=nope", f"filter.input={tmp_path}"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"filter\.keep='nope' must be manifest, link or copy"):
        validate(cfg)


@pytest.mark.parametrize(("args", "check", "line"), [
    (["train.py", "cluster=slurm", "cluster.nodes=0"], True,
     "config error: cluster.nodes=0 must be a whole number of at least 1 (nodes per job)"),
    (["train.py", "cluster=slurm", "cluster.nodes=-1"], True,
     "config error: cluster.nodes=-1 must be a whole number of at least 1 (nodes per job)"),
    (["train.py", "-m", "cluster=slurm", "cluster.nodes=abc"], False,
     "config error: cluster.nodes='abc' must be a whole number of at least 1 (nodes per job)"),
    (["train.py", "nosuchkey=1"], True,
     "config error: nosuchkey: the config has no key 'nosuchkey', so nothing would read it; valid keys: "),
    (["train.py", "sede=3"], True, "config error: sede: the config has no key 'sede', so nothing would read it; "
                                   "did you mean 'seed'?"),
    (["train.py", "logger=tensorboard", "logger.tensorboard.save_dir=<file>", "debug=fast"], False,
     "config error: logger.tensorboard.save_dir='<file>' is a file; the logger writes a folder there"),
    (["-m", "vase.data.render", "--root", "<missing>"], False, "error: --root <missing>: no such dataset folder"),
    (["-m", "vase.data.render", "--root", "<file>"], False, "error: --root <file>: no such dataset folder"),
])
def test_each_config_gap_is_one_line_and_leaves_no_record_running(args: list[str], check: bool, line: str,
                                                                   tmp_path: Path) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("x")
    subs = {"<file>": str(afile), "<missing>": str(tmp_path / "nonexistent")}
    args = [next((a.replace(k, v) for k, v in subs.items() if k in a), a) for a in args]
    line = next((line.replace(k, v) for k, v in subs.items() if k in line), line)
    logs = tmp_path / "logs"
    if args[0] == "train.py":
        args += [f"paths.log_dir={logs}"]
    p = _run(args, tmp_path, check)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and err and err[-1].startswith(line), p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "loading model" not in p.stdout + p.stderr
    assert not [r for r in _records(logs) if r.get("status") == "running"]


@pytest.mark.parametrize("target, says", [
    ("vase.training.callbacks.Nope", "vase.training.callbacks has no class Nope"),
    ("vase.training.callbacks.nope", "vase.training.callbacks has no function nope"),
    ("nopkg_of_nobody.Nope", "cannot be imported: ModuleNotFoundError: No module named 'nopkg_of_nobody'"),
])
def test_a_target_naming_a_missing_class_says_which_module_lacks_it(target: str, says: str, tmp_path: Path,
                                                                    session_dirs: dict) -> None:
    cfg = compose_cfg("train", ["logger=none", f"+callbacks.mine._target_={target}"], tmp_path, session_dirs)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert f"callbacks.mine._target_={target!r}" in str(e.value) and says in str(e.value)
    assert "is not a package" not in str(e.value)


def test_a_gpu_trainer_without_a_gpu_is_one_line_before_the_model_loads(tmp_path: Path) -> None:
    """The recipe `train.py trainer=gpu stage=grpo stage.module.rollout=compiled` on a machine without a GPU ended in
    Hydra's wrapped MisconfigurationException after 36 s and a model load; now one line, before anything loads."""
    p = run_python(["train.py", "trainer=gpu", "stage=grpo", "stage.module.rollout=compiled", "logger=none",
                    f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                   timeout=300)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and err[-1].startswith("config error: trainer.accelerator=gpu asks for 1 CUDA GPU(s)"), \
        p.stderr[-2000:]
    assert "use trainer=cpu" in err[-1] and "Traceback" not in p.stderr and "loading model" not in p.stdout + p.stderr


def test_a_missing_adapter_is_one_line_before_the_model_loads(tmp_path: Path) -> None:
    """`evaluate.py action=export adapter=<a folder that does not exist>` ended in a Python traceback after a load."""
    for task in ("export", "generate"):
        p = run_python(["evaluate.py", f"action={task}", f"adapter={tmp_path / 'nope'}",
                        f"output={tmp_path / 'merged'}", "logger=none", f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT,
                       timeout=300)
        err = p.stderr.strip().splitlines()
        assert p.returncode == 2 and err[-1] == (f"config error: adapter='{tmp_path / 'nope'}': no such folder; give "
                                                 f"the adapter folder a training run saved (<run>/adapter, e.g. "
                                                 f"logs/train/runs/<time>/adapter)"), p.stderr[-2000:]
        assert "Traceback" not in p.stderr and not (tmp_path / "merged").exists()


@pytest.mark.parametrize("argv", [["run_kind=../../escaped"], ["-m", "seed=1,2", "run_kind=../../escaped"],
                                  ["-m", "sweep=seeds", "run_kind=.."]])
def test_a_run_kind_that_leaves_the_log_folder_is_one_line_and_nothing_is_written_outside(argv: list[str],
                                                                                          tmp_path: Path) -> None:
    """`run_kind=../../../x` (a key sweep and experiment files set) put a whole sweep outside paths.log_dir without a
    word; a bad resume= was Hydra's 90-line traceback."""
    logs = tmp_path / "a" / "b" / "logs"
    p = run_python([str(ROOT / "train.py"), *argv, "logger=none", f"paths.log_dir={logs}"], cwd=tmp_path, timeout=300)
    err = p.stderr.strip().splitlines()
    name = argv[-1].split("=", 1)[1]
    assert p.returncode == 2 and err[-1] == (f"config error: run_kind={name!r} must be one folder name (letters, "
                                             f"digits, '.', '_', '-'; not '.' or '..'): it names the folder under "
                                             f"paths.log_dir that runs go in"), p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert {p.name for p in tmp_path.rglob("*") if not p.is_relative_to(logs)} <= {"a", "b"}  # logs/ and above only
    p = run_python(["train.py", "resume=bogus", "logger=none", f"paths.log_dir={logs}"], cwd=ROOT, timeout=300)
    assert p.returncode == 2 and p.stderr.strip() == "config error: resume='bogus' must be auto or never", p.stderr


def test_a_key_only_the_other_entry_point_reads_is_one_line(tmp_path: Path, session_dirs: dict) -> None:
    """`debug=fast` under evaluate.py set `val.max_new_tokens` and `trainer.max_steps`, keys only train.py reads,
    and evaluate.py ran its full length without a word; a train.py key given by hand is refused the same way, and
    train.py keeps its own."""
    p = run_cli(["evaluate.py", "debug=fast"], tmp_path, session_dirs)
    assert one_line(p) == ("config error: every_stage, stage, trainer, val: train.py's keys, which evaluate.py never "
                           "reads (set by debug=fast); for a short evaluation: data.limit_val=2 "
                           "generation.max_new_tokens=8")
    p = run_cli(["evaluate.py", "+trainer.max_steps=2"], tmp_path, session_dirs)
    assert one_line(p).startswith("config error: trainer: train.py's key, which evaluate.py never reads")
    assert _run(["train.py", "debug=fast", "logger=none", f"paths.log_dir={tmp_path}"], tmp_path,
                check=True).returncode == 0


def test_an_unknown_key_at_the_top_of_a_users_file_is_refused_with_the_nearest_one(tmp_path: Path) -> None:
    """A user's experiment with ``folowup:`` or ``vall:`` passed the config check and ran without its follow-up or
    its evaluation settings (2026-12-03): one line naming the file and the key meant. A key of the user's own that an
    interpolation reads passes."""
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "typo.yaml").write_text("# @package _global_\nvall:\n  after: false\n")
    (conf / "mine.yaml").write_text("# @package _global_\nmylab:\n  seed: 7\nseed: ${mylab.seed}\n")
    env = {**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    base = [sys.executable, "train.py", "--config-dir", str(tmp_path / "conf"), f"paths.log_dir={tmp_path / 'logs'}"]
    p = run_python([*base, "experiment=typo"], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1] == (
        f"config error: vall: no such key at the top of the config (set in {conf / 'typo.yaml'}), so nothing would "
        f"read it; did you mean 'val'?"), p.stderr[-2000:]
    p = run_python([*base, "experiment=mine"], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0 and "config ok" in p.stdout, p.stderr[-2000:]


@pytest.mark.parametrize("env", ["", "  ", None, "elsewhere"])
def test_an_empty_log_dir_variable_is_unset_not_the_filesystem_root(env: str | None, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``VASE_LOG_DIR=`` (set, empty: a shell's ``VASE_LOG_DIR= vase train ...``) put runs under ``/train/...`` (the
    empty string joined to ``/train``); now an empty or blank value is as if unset: ``<root_dir>/logs``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import vase.config  # noqa: F401  (the ${vase.*} resolvers)

    if env is None:
        monkeypatch.delenv("VASE_LOG_DIR", raising=False)
    else:
        monkeypatch.setenv("VASE_LOG_DIR", str(tmp_path / env) if env == "elsewhere" else env)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"paths.root_dir={tmp_path}"])
    GlobalHydra.instance().clear()
    want = tmp_path / "elsewhere" if env == "elsewhere" else tmp_path / "logs"
    assert Path(cfg.paths.log_dir) == want
