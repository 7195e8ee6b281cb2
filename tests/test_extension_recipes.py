"""ARCHITECTURE.md's "where to add", followed as written for a prompt task, a sweep preset, a logger and a callback
(the reward term's recipe: tests/test_reward_terms.py; the evaluation action's: tests/test_eval_actions.py). What a
recipe adds to conf/ lives here in a folder of the test's own on Hydra's search path, as a user's would: nothing is
written into the checkout."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg, run_python
from tests.library_page import build_project, page_command


def _docs_example() -> str:
    """The prompt task docs/training.md shows (the python block that opens with ``# vase/prompt_tasks/ware.py``)."""
    found = re.search(r"```python\n# vase/prompt_tasks/ware\.py\n(.*?)```", (ROOT / "docs" / "training.md").read_text(),
                      re.S)
    assert found, "docs/training.md lost its prompt-task example"
    return found.group(1)


def test_a_prompt_task_is_one_module_one_samples_line_and_a_training_mix(tmp_path: Path, synthetic_root: Path,
                                                                        session_dirs: dict,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs' example module, its line in SAMPLES and a training mix in DATA_MIXES: the config check takes
    data.mix=ware and the training data holds each vase's caption and its new question, with its answer."""
    from vase.choices import DATA_MIXES
    from vase.config import validate
    from vase.data.datamodule import ChatDataset
    from vase.data.dataset import VaseDataset
    from vase.prompt_tasks import SAMPLES

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "ware_task_of_a_user.py").write_text(_docs_example())
    monkeypatch.syspath_prepend(str(pkg))
    module = __import__("ware_task_of_a_user")
    monkeypatch.setitem(SAMPLES, "ware", module.samples)
    monkeypatch.setitem(DATA_MIXES, "ware", ("caption", "ware"))
    try:
        cfg = compose_cfg("train", ["model=tiny", "logger=none", "data.mix=ware"], tmp_path, session_dirs)
        validate(cfg)
        base = VaseDataset(synthetic_root, "train")
        samples = [ChatDataset(base, "ware")[k] for k in range(len(ChatDataset(base, "ware")))]
        ware = [s for s in samples if s.id.endswith("#ware")]
        assert len(ware) == len(base.records) and len(samples) == 2 * len(base.records)
        rec = base.records[0]
        first = next(s for s in ware if s.id == f"{rec.id}#ware")
        assert first.answer == f"{rec.fabric} {rec.technique}." and module.PROMPT in first.prompt
    finally:
        sys.modules.pop("ware_task_of_a_user", None)
    monkeypatch.undo()
    from vase.errors import ConfigError

    with pytest.raises(ConfigError, match="data.mix"):   # without its line in DATA_MIXES the mix is refused
        validate(compose_cfg("train", ["model=tiny", "logger=none", "data.mix=ware"], tmp_path, session_dirs))


def test_a_sweep_preset_of_ones_own_runs_from_a_folder_on_the_search_path(tmp_path: Path) -> None:
    """sweep/<name>.yaml with the swept keys under hydra.sweeper.params, from the user's own conf folder: the
    command line takes it (and names both folders when the name is wrong), and each of its jobs is checked."""
    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    (conf / "sweep" / "my_ranks.yaml").write_text("# @package _global_\n# LoRA rank 4 against 8\nhydra:\n  sweeper:\n"
                                                  "    params:\n      stage.module.lora.r: 4,8\n")
    env = {**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled"}
    args = [sys.executable, "train.py", "-m", f"hydra.searchpath=[file://{conf}]", "debug=fast", "logger=none",
            f"paths.log_dir={tmp_path / 'logs'}"]
    p = run_python([*args, "sweep=my_ranks"], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "stage.module.lora.r=4" in p.stdout and "stage.module.lora.r=8" in p.stdout
    assert "config ok: the sweep's 2 job(s) checked" in p.stdout
    assert not list((tmp_path / "logs").rglob("multiruns")), "a config check left a sweep folder"
    p = run_python([*args, "sweep=my_rank"], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 2 and "sweep='my_rank' is not a known option" in p.stderr and "'my_ranks'" in p.stderr
    assert str(conf / "sweep") in p.stderr and "Traceback" not in p.stderr


def test_a_logger_is_one_conf_file_whose_target_is_a_lightning_logger(tmp_path: Path, session_dirs: dict) -> None:
    """logger/<name>.yaml: built by build_loggers beside another (logger=[csv,<name>]); an argument the class does not
    take is refused by the config check, naming the key."""
    from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

    from vase.config import validate
    from vase.errors import ConfigError
    from vase.loggers import build_loggers

    conf = tmp_path / "conf"
    (conf / "logger").mkdir(parents=True)
    (conf / "logger" / "my_tb.yaml").write_text("my_tb:\n  _target_: pytorch_lightning.loggers.TensorBoardLogger\n"
                                                "  save_dir: ${paths.output_dir}\n  name: my_tb\n")
    search = f"hydra.searchpath=[file://{conf}]"
    cfg = compose_cfg("train", ["model=tiny", search, "logger=[csv,my_tb]"], tmp_path, session_dirs)
    validate(cfg)
    loggers = build_loggers(cfg)
    assert sorted(type(lg).__name__ for lg in loggers) == ["CSVLogger", "TensorBoardLogger"]
    tb = next(lg for lg in loggers if isinstance(lg, TensorBoardLogger))
    assert Path(tb.save_dir) == tmp_path and not isinstance(tb, CSVLogger)
    # a class that lists its arguments (CSVLogger; not TensorBoardLogger, which passes **kwargs on) has a typo refused
    (conf / "logger" / "my_csv.yaml").write_text("my_csv:\n  _target_: pytorch_lightning.loggers.CSVLogger\n"
                                                 "  save_dir: ${paths.output_dir}\n  nmae: my_csv\n")
    cfg = compose_cfg("train", ["model=tiny", search, "logger=my_csv"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match="logger.my_csv.nmae: CSVLogger takes no argument 'nmae'"):
        validate(cfg)


def test_a_callback_is_one_conf_file_and_a_later_stage_writes_into_its_own_folder(tmp_path: Path,
                                                                                 session_dirs: dict) -> None:
    """callbacks/<name>.yaml beside vase's own (callbacks=[default,<name>]): built with the others; a callback with a
    dirpath writes, in a follow-up stage, under that stage's folder (build_callbacks' stage_dir)."""
    from pytorch_lightning.callbacks import LearningRateMonitor, ModelCheckpoint

    from vase.config import validate
    from vase.pipeline.build import build_callbacks

    conf = tmp_path / "conf"
    (conf / "callbacks").mkdir(parents=True)
    (conf / "callbacks" / "my_extra.yaml").write_text(
        "lr_monitor:\n  _target_: pytorch_lightning.callbacks.LearningRateMonitor\n  logging_interval: step\n"
        "best:\n  _target_: pytorch_lightning.callbacks.ModelCheckpoint\n  dirpath: ${paths.output_dir}/best\n")
    cfg = compose_cfg("train", ["model=tiny", "logger=none", f"hydra.searchpath=[file://{conf}]",
                                "callbacks=[default,my_extra]"], tmp_path, session_dirs)
    validate(cfg)
    first = build_callbacks(cfg)
    names = sorted(type(c).__name__ for c in first)
    assert {"LearningRateMonitor", "ModelCheckpoint", "ResumeCheckpoint", "SaveAdapter"} <= set(names)
    assert next(c for c in first if isinstance(c, LearningRateMonitor)).logging_interval == "step"
    assert Path(next(c for c in first if type(c) is ModelCheckpoint).dirpath) == tmp_path / "best"
    later = build_callbacks(cfg, stage_dir=tmp_path / "grpo")
    assert Path(next(c for c in later if type(c) is ModelCheckpoint).dirpath) == tmp_path / "grpo" / "best"


@pytest.mark.slow  # 72 s of make test's 15 minutes (2026-12-07); the wheel test's project sweep keeps the default path
def test_every_extension_point_works_from_a_users_project_without_installing_it(tmp_path: Path) -> None:
    """An evaluation action needed a package installed with an entry point, a prompt task or training mix could not be
    added from outside, and only vase evaluate loaded plugins (2026-12-03; vase runs none). Now a module the project's conf/plugins.yaml
    lists is loaded by every command from the folder it runs in: its action runs (vase evaluate), its mix passes the
    check and its report kind is known at a sweep's start (vase train), and vase verdict --config-dir conf writes that
    kind's report for a sweep of the project, and vase runs --config-dir says whether each module imports now (without
    it, neither imports what the record names). Without the plugins file, each is one line saying what registers it."""
    project = build_project(tmp_path / "myproject")  # docs/library.md's files, as the page shows them
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env.pop("VASE_CHECK_CONFIG", None)
    env.pop("VASE_LOG_DIR", None)  # the page's commands write where a user's do: the project's logs/

    def vase(*args: str, check: bool = False) -> subprocess.CompletedProcess:
        return run_python(["-m", "vase.cli", *args], cwd=project,
                          env={**env, **({"VASE_CHECK_CONFIG": "1"} if check else {})}, timeout=600)

    p = vase(*page_command("vase evaluate --config-dir conf action=word_counts")[1:])
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads((project / "out" / "word_counts.json").read_text()) == {"captions": 2, "mean_words": 5.5,
                                                                             "max_words": 9}
    p = vase(*page_command("vase train --config-dir conf data.mix=caption_and_shape")[1:])
    assert p.returncode == 0, p.stderr[-2000:]
    # the user's task made one more item a vase: the training data doubled
    found = re.search(r"training data: (\d+) items from (\d+) vases, data.mix=caption_and_shape "
                      r"\(caption \+ shape_question\)", p.stdout + p.stderr)
    assert found and int(found.group(1)) == 2 * int(found.group(2)), p.stdout[-2000:]
    (run,) = (project / "logs" / "train" / "runs").iterdir()  # the project's logger wrote the run's metrics
    assert "train/loss" in next((run / "lab_csv").rglob("metrics.csv")).read_text().splitlines()[0]
    p = vase("train", "--config-dir", "conf", "-m", "stage.module.optimizer.lr=1e-4,1e-3",
             "+hypothesis.compare=stage.module.optimizer.lr", "+hypothesis.moves=[loss]", "+hypothesis.report=chat",
             "debug=fast", "logger=none", "val.after=false", "report=false")
    assert p.returncode == 0 and "at its end chat.txt: the verdict's first line" in p.stdout, p.stderr[-2000:]
    (sweep,) = (project / "logs" / "train" / "multiruns").iterdir()
    chat = (sweep / "chat.txt").read_text()
    # vase wrote verdict.md first (the kind reads it) and prints its lines, then the kind's
    assert chat.startswith("stage.module.optimizer.lr=0.001 against stage.module.optimizer.lr=0.0001: training loss")
    assert f"chat: {chat.strip()}" in p.stdout and (sweep / "verdict.md").is_file()
    (sweep / "chat.txt").unlink()
    p = vase("verdict", str(sweep))  # a reader imports no module a record names: one line saying how to
    assert p.returncode == 2 and "lists mylab.ext in" in p.stderr and "--config-dir conf" in p.stderr, p.stderr
    p = vase("verdict", "--config-dir", "conf", str(sweep))  # the project named now, as vase train names it
    assert p.returncode == 0 and (sweep / "chat.txt").read_text() == chat, p.stderr[-2000:]
    job = next(j for j in sweep.iterdir() if (j / ".vase-run.json").is_file())
    runs = [sys.executable, "-m", "vase.cli", "runs", "--config-dir", str(project / "conf"), str(job)]
    p = run_python(runs, cwd=tmp_path, env=env, timeout=600)  # vase runs too, from elsewhere: the project's modules load from the folder named
    assert p.returncode == 0 and "  plugins:   mylab.ext: each imports now" in p.stdout, p.stdout + p.stderr[-2000:]
    good = (project / "mylab" / "ext.py").read_text()
    (project / "mylab" / "ext.py").write_text("raise ImportError('the lab renamed its helpers')\n")
    p = run_python(runs, cwd=tmp_path, env=env, timeout=600)  # the record still prints; the line says what fails
    assert p.returncode == 0 and "again:" in p.stdout and "module mylab.ext failed to import: ImportError: the lab " \
        "renamed its helpers" in p.stdout and "'again' needs it to import" in p.stdout, p.stdout + p.stderr[-2000:]
    (project / "mylab" / "ext.py").write_text(good)
    (project / "conf" / "plugins.yaml").unlink()
    p = vase("evaluate", "--config-dir", "conf", "action=word_counts", "logger=none", "paths.log_dir=logs")
    assert p.returncode == 2 and "register it from a module of yours: list the module in your project's " \
        "conf/plugins.yaml" in p.stderr, p.stderr[-2000:]
    p = vase("train", "--config-dir", "conf", "data.mix=caption_and_shape", "logger=none", "paths.log_dir=logs", check=True)
    assert p.returncode == 2 and "register_data_mix from a module your project's conf/plugins.yaml lists" in p.stderr
