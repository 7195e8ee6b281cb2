"""The troubleshooting page's symptoms are real: each is provoked here as a user meets it (the command's overrides, a
broken file, a server that does not answer), its printed line must equal the one the page shows (the page's folders
stand for this test's temporary ones), carry the fix the page gives, and the fix, applied, must make it pass."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import CONF, ROOT, compose_cfg, run_python
from vase.config import preflight_overrides, validate
from vase.config.entry import one_line, run_entry
from vase.docsgen.symptoms import SHOWN_ROOT, SYMPTOMS
from vase.errors import ConfigError, VaseError
from vase.pipeline.reach import reach_check


@dataclass(frozen=True)
class Case:
    bad: list[str] = field(default_factory=list)  # overrides of train.py (or evaluate.py), {tmp} for this test's folder
    fixed: list[str] | None = None  # the same with the page's fix applied (None: the fix is not an override)
    config: str = "train"
    setup: Callable[[Path], None] | None = None  # files the user has (a broken checkpoint, an empty folder)
    call: Callable[[Path, pytest.MonkeyPatch], None] | None = None  # where the error is not a config's: what raises
    cli: list[str] | None = None  # or a command, run as typed (PATH: {tmp}/bin, then /usr/bin:/bin)
    repair: Callable[[Path], None] | None = None  # the page's fix to the user's files (then ``fixed`` or ``bad`` runs)
    check: bool = True  # the command under VASE_CHECK_CONFIG=1
    no_gpu: bool = False  # on a machine without a CUDA GPU (this one is made so, where it has one)


def _folder(*names: str) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        for name in names:
            (tmp / name).mkdir(parents=True, exist_ok=True)
    return make


def _checkpoint(without: str) -> Callable[[Path], None]:
    """A checkpoint folder with every file the check reads, then one removed (or, for a shard, cut short)."""
    def make(tmp: Path) -> None:
        ck = tmp / "Qwen2.5-VL-3B-Instruct"
        ck.mkdir(parents=True)
        for name in ("config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json",
                     "chat_template.json"):
            (ck / name).write_text(json.dumps({"chat_template": "{{ x }}"} if "chat" in name else {}))
        header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
        (ck / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
        if without == "shard":
            data = (ck / "model.safetensors").read_bytes()
            (ck / "model.safetensors").write_bytes(data[:-4])
        elif without:
            (ck / without).unlink()
    return make


def _restored(name: str) -> Callable[[Path], None]:
    """The fix "copy it from the checkpoint's release": the file a whole release has, put back."""
    def make(tmp: Path) -> None:
        whole = tmp / "release"
        _checkpoint("")(whole)
        shutil.copy(whole / "Qwen2.5-VL-3B-Instruct" / name, tmp / "Qwen2.5-VL-3B-Instruct" / name)
    return make


def _annotations(text: str) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / "VaseVQA-3D" / "annotations").mkdir(parents=True)
        (tmp / "VaseVQA-3D" / "annotations" / "train.json").write_text(text)
    return make


def _sbatch_refuses(tmp: Path) -> None:
    """An sbatch that cannot reach its controller (no slurm.conf, no DNS record), as SLURM's own client says it; the
    client's srun beside it (submitit looks for it first), so the test holds on a machine without SLURM."""
    (tmp / "bin").mkdir()
    (tmp / "bin" / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: fetch_config: DNS SRV lookup failed' >&2\n"
                                        "echo 'sbatch: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    (tmp / "bin" / "srun").write_text("#!/bin/sh\nexit 1\n")
    for tool in ("sbatch", "srun"):
        (tmp / "bin" / tool).chmod(0o755)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = _closed_port()


def _oom(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    def body(cfg: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of "
                                     "79.19 GiB of which 1.02 GiB is free.")
    monkeypatch.setattr("vase.config.entry.job_dir", lambda: None)
    run_entry(body, None)


def _full_disk(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import namedtuple

    from vase.config.preflight import check_writable

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 << 30, (10 << 30) - 4096, 4096))
    check_writable(tmp / "logs", "paths.log_dir")


CASES: dict[str, Case] = {
    "key-typo": Case(["stage.module.optimizer.lrr=1e-4"], ["stage.module.optimizer.lr=1e-4"]),
    "key-new": Case(["callbacks.mine._target_=pytorch_lightning.callbacks.LearningRateMonitor"],
                    ["+callbacks.mine._target_=pytorch_lightning.callbacks.LearningRateMonitor"]),
    "key-unknown-group": Case(["model=qwen2.5_vl_3b"], ["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/ckpt"],
                              setup=lambda t: _checkpoint("")(t) or (t / "Qwen2.5-VL-3B-Instruct").rename(t / "ckpt")),
    "value-range": Case(["stage=grpo", "reward.tau=1.7"], ["stage=grpo", "reward.tau=0.7"]),
    "value-stage": Case(["stage.name=rl"], ["stage=grpo"]),
    "value-weight": Case(["stage=grpo", "reward.weights.shape=-1"], ["stage=grpo", "reward.weights.shape=0"]),
    "value-temperature": Case(["generation.temperature=0"], ["generation.do_sample=false"], config="evaluate"),
    "value-reward-target": Case(["stage=grpo", "+reward.terms.mine._target_=my_rewards.Shape",
                                 "+reward.terms.mine.weight=1"]),
    "value-limit": Case(["data.limit_val=1", "val.after=true"], ["data.limit_val=2", "val.after=true"]),
    "data-missing": Case(["data=vasevqa3d", "data.root={tmp}/VaseVQA-3D"], ["data=vasevqa3d",
                         "data.root={tmp}/VaseVQA-3D"], setup=None),
    "data-no-layout": Case(["data=vasevqa3d", "data.root={tmp}/VaseVQA-3D"], setup=_folder("VaseVQA-3D"),
                           repair=_annotations("[]")),
    "data-synthetic-root": Case(["data.root={tmp}/VaseVQA-3D"], ["data=vasevqa3d", "data.root={tmp}/VaseVQA-3D"],
                                setup=_annotations("[]")),
    "data-bad-json": Case(call=lambda t, m: __import__("vase.data.layouts", fromlist=["x"]).read_records(
        t / "VaseVQA-3D"), setup=_annotations("[{\"id\": \"v1\", "),
        repair=lambda t: (t / "VaseVQA-3D" / "annotations" / "train.json").write_text("[]")),
    "data-check-cli": Case(cli=["-m", "vase.data.check", "{tmp}/VaseVQA-3D"]),
    "render-not-dataset": Case(cli=["-m", "vase.data.render", "--root", "{tmp}/photos", "--cache-dir", "{tmp}/cache"],
                               setup=_folder("photos")),
    "ckpt-missing": Case(["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B"],
                         ["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"], setup=_checkpoint("")),
    "ckpt-no-config": Case(["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"],
                           setup=_checkpoint("config.json"), repair=_restored("config.json")),
    "ckpt-no-processor": Case(["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"],
                              setup=_checkpoint("preprocessor_config.json"),
                              repair=_restored("preprocessor_config.json")),
    "ckpt-no-template": Case(["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"],
                             setup=_checkpoint("chat_template.json"), repair=_restored("chat_template.json")),
    "ckpt-cut-shard": Case(["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"],
                           setup=_checkpoint("shard"), repair=_restored("model.safetensors")),
    "ckpt-tiny-into-yours": Case(["model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"],
                                 ["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"],
                                 setup=_checkpoint("")),
    "ckpt-hub-offline": Case(["model=qwen2_5_vl_3b", "model.name_or_path=Qwen/Qwen2.5-VL-3B-Instruct"],
                             ["model=qwen2_5_vl_3b", "model.name_or_path={tmp}/Qwen2.5-VL-3B-Instruct"],
                             setup=_checkpoint("")),
    "adapter-not-adapter": Case(["init_adapter={tmp}/run"], ["init_adapter={tmp}/run/adapter"],
                                setup=_folder("run/adapter"),
                                repair=lambda t: (t / "run" / "adapter" / "adapter_config.json").write_text("{}")),
    "mlflow-down": Case(["logger=mlflow", f"logger.mlflow.tracking_uri=http://127.0.0.1:{PORT}"], ["logger=mlflow"]),
    "logger-unknown": Case(["logger=mlfow"], ["logger=mlflow"]),
    "logger-dir-file": Case(["logger=tensorboard", "logger.tensorboard.save_dir={tmp}/tb"],
                            ["logger=tensorboard", "logger.tensorboard.save_dir={tmp}/tb-logs"],
                            setup=lambda t: (t / "tb").write_text("notes\n")),
    "slurm-timeout": Case(cli=["train.py", "-m", "cluster=slurm", "logger=none", "cluster.timeout_min=1"]),
    "slurm-tasks": Case(["cluster=slurm", "cluster.tasks_per_node=0"], ["cluster=slurm", "cluster.tasks_per_node=1"]),
    "slurm-no-sbatch": Case(cli=["train.py", "-m", "cluster=slurm", "logger=none"], check=False),
    "slurm-refused": Case(cli=["train.py", "-m", "cluster=slurm", "logger=none"], check=False, setup=_sbatch_refuses),
    "disk-not-writable": Case(cli=["train.py", "logger=none", "paths.log_dir={tmp}/notes.txt/logs"],
                              setup=lambda t: (t / "notes.txt").write_text("mine\n")),
    "disk-full": Case(call=_full_disk),
    "out-flag-yours": Case(cli=["-m", "vase.models.tiny", "--out", "{tmp}/mine"], setup=_folder("mine")),
    "gpu-oom": Case(call=_oom),
    "gpu-none": Case(["trainer=gpu", "stage=grpo"], ["trainer=cpu", "stage=grpo"], no_gpu=True),
}


def _shown(text: str, tmp: Path, dirs: dict) -> str:
    """The line as the page shows it: this test's folders as a user's (/data/...), the checkout as ~/vase."""
    text = text.replace(str(dirs["cache"]), "~/vase/.cache").replace(str(tmp), SHOWN_ROOT)
    return text.replace(str(ROOT), "~/vase").replace(str(PORT), "5000")


def _provoke(case: Case, args: list[str], tmp: Path, dirs: dict, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> str | None:
    """The line the user would see, or None when the command goes through."""
    argv = [a.format(tmp=tmp) for a in args]
    if case.cli is not None:
        env = {**os.environ, "WANDB_MODE": "disabled", "VASE_LOG_DIR": str(tmp / "vase-logs"),
               "PATH": f"{tmp / 'bin'}:/usr/bin:/bin" if (tmp / "bin").is_dir() else "/nonexistent"}
        env.pop("VASE_CHECK_CONFIG", None)
        if case.check:
            env["VASE_CHECK_CONFIG"] = "1"
        p = run_python([*[a.format(tmp=tmp) for a in case.cli]], cwd=ROOT, env=env, timeout=300)
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.startswith(("error: ", "config error: "))]
        assert p.returncode == 2 and lines, (p.returncode, p.stderr[-1500:])
        return lines[-1]
    try:
        if case.call is not None:
            case.call(tmp, monkeypatch)
        else:
            preflight_overrides(argv, CONF, case.config)
            cfg = compose_cfg(case.config, argv, tmp / "out", dirs)
            validate(cfg)
            reach_check(cfg)
    except VaseError as e:
        return f"{'config error' if isinstance(e, ConfigError) else 'error'}: {one_line(e)}"
    except SystemExit as e:  # an entry point's own one line (or_exit): what it printed
        assert e.code == 2
        return capsys.readouterr().err.strip().splitlines()[-1]
    return None


@pytest.mark.parametrize("sid", [s.id for s in SYMPTOMS])
def test_each_symptom_is_what_the_user_sees_with_its_fix(sid: str, tmp_path: Path, session_dirs: dict,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    symptom = next(s for s in SYMPTOMS if s.id == sid)
    case = CASES[sid]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    if case.setup is not None:
        case.setup(tmp_path)
    if case.no_gpu:
        monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    line = _provoke(case, case.bad, tmp_path, session_dirs, monkeypatch, capsys)
    if os.environ.get("VASE_DUMP_SYMPTOMS"):
        with open(os.environ["VASE_DUMP_SYMPTOMS"], "a") as f:
            f.write(json.dumps({"id": sid, "seen": _shown(line or "", tmp_path, session_dirs)}) + "\n")
    assert line is not None, f"{sid}: no error"
    assert _shown(line, tmp_path, session_dirs) == symptom.seen
    assert symptom.needle in line, (symptom.needle, line)  # the message itself carries the page's fix
    if case.fixed is not None or case.repair is not None:
        if sid == "data-missing":
            _annotations(json.dumps([]))(tmp_path)
        if case.repair is not None:
            case.repair(tmp_path)
        fixed = case.fixed if case.fixed is not None else case.bad
        assert _provoke(case, fixed, tmp_path, session_dirs, monkeypatch, capsys) is None, f"{sid}: the fix fails"


def test_every_symptom_is_provoked_here_and_the_page_has_at_least_30() -> None:
    assert sorted(CASES) == sorted(s.id for s in SYMPTOMS)
    assert len(SYMPTOMS) >= 30 and len({s.id for s in SYMPTOMS}) == len(SYMPTOMS)


def test_the_config_check_says_what_it_reached_and_what_it_did_not(tmp_path: Path, session_dirs: dict,
                                                                   synthetic_root: Path, hub_checkpoint: Path) -> None:
    """VASE_CHECK_CONFIG=1 said "config ok" for a dataset path, a checkpoint folder or an MLflow URI that a run would
    fail on 50 s later. On a user's real things it now says what it checked (the dataset's layout, the checkpoint
    folder) and what it could not (W&B, GPU memory, the SLURM queue); the same command with the dataset misspelled is
    the run's own one line (test_each_symptom_is_what_the_user_sees_with_its_fix: data-missing)."""
    args = ["data=vasevqa3d", f"data.root={synthetic_root}", "model=qwen2_5_vl_3b",
            f"model.name_or_path={hub_checkpoint}", "logger=wandb"]
    cfg = compose_cfg("train", args, tmp_path / "out", session_dirs)
    validate(cfg)
    checked, unchecked = reach_check(cfg)
    assert checked == (f"checked: data.root={synthetic_root} (vase layout); model.name_or_path={hub_checkpoint} "
                       f"(checkpoint folder)"), checked
    assert unchecked.startswith("not checked: W&B (not contacted before the run; offline unless a key is configured), "
                                "GPU memory")
    p = run_python(["train.py", *args], cwd=ROOT, env={**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled",
                            "VASE_LOG_DIR": str(tmp_path / "logs")}, timeout=300)
    assert p.returncode == 0 and p.stdout.splitlines()[-2:] == [checked, unchecked], p.stdout[-800:] + p.stderr[-800:]


def test_the_fix_for_an_unimportable_term_works_as_the_page_gives_it(tmp_path: Path) -> None:
    """The page's first fix, "run from the folder that holds the module", as a user does it: ``python
    <vase>/train.py`` and ``vase train`` from that folder, without ``--config-dir`` (the current folder was put on the
    import path only with it, 2026-12-03), pass the config check; from another folder, the page's line."""
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "my_rewards.py").write_text(
        "from vase.rewards.terms import RewardTerm\n\n\nclass Shape(RewardTerm):\n"
        "    def __call__(self, completions, targets, **batch):\n        return [0.0 for _ in completions]\n")
    args = ["stage=grpo", "+reward.terms.mine._target_=my_rewards.Shape", "+reward.terms.mine.weight=1",
            f"paths.log_dir={tmp_path / 'logs'}"]
    env = {**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled"}
    for command in ([sys.executable, str(ROOT / "train.py")], [sys.executable, "-m", "vase.cli", "train"]):
        p = subprocess.run([*command, *args], cwd=mine, capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0 and "config ok" in p.stdout, p.stderr[-2000:]
    p = run_python([str(ROOT / "train.py"), *args], cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 2 and "No module named 'my_rewards'" in p.stderr, p.stderr[-2000:]
