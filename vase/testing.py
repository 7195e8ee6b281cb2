"""Helpers for the tests of a project built on vase (the tests ``vase init`` writes use them):

    from vase.testing import compose, run, sweep_of

    def test_my_setup_is_a_valid_run(tmp_path):
        cfg = compose("conf", ["experiment=my_setup"], tmp_path)    # as vase train would compose and check it
        assert cfg.reward.terms.amphora.weight == 0.5

    def test_my_sweep_ends_with_its_verdict(tmp_path):
        p = run(["-m", "sweep=my_sweep", "debug=fast", "logger=none"], tmp_path)
        assert p.returncode == 0 and (sweep_of(tmp_path) / "verdict.md").is_file()

`compose` goes through what ``vase train --config-dir conf`` does before a model loads: the project's plugins
(conf/plugins.yaml), the command-line check, Hydra's composition with the project's folder before vase's, and vase's
validation (a bad value raises ConfigError naming the key); `run` runs the command itself, in a subprocess, as a user
types it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from omegaconf import DictConfig, open_dict

from vase.config import CONF_DIR, load_plugins, preflight_overrides, validate
from vase.config.entry_actions import EVAL_ACTIONS
from vase.config.renames import renamed_keys, say_deprecated

CACHE_ENV = "VASE_TEST_CACHE"
"""Where `compose` and `run` keep the tiny models and synthetic data between tests (default: the project's .cache)."""


def compose(conf: str | Path, overrides: list[str], out: str | Path, entry: str = "train") -> DictConfig:
    """The config ``vase <entry> --config-dir <conf> <overrides>`` runs, composed and checked as that command checks
    it before any model loads, its run folder ``out``. Raises ConfigError (one line naming the key) where the command
    would refuse it."""
    conf = Path(conf).resolve()
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the project's modules, as the command imports them
    Plugins.instance()  # Hydra's scan of hydra_plugins first (vase's sweepers subclass what it loads), then vase's
    from hydra_plugins.vase_launchers import register  # lazy: after the scan (its module docstring)

    register()
    load_plugins(conf)
    argv = preflight_overrides(list(overrides), CONF_DIR, entry, EVAL_ACTIONS if entry == "evaluate" else None, [conf])
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = hydra_compose(config_name=entry, overrides=argv, return_hydra_config=True)
    HydraConfig().set_config(cfg)
    # a file written for a name 0.2 changed: moved to the new one with its deprecation line (refused under
    # VASE_DEPRECATIONS=error), as the command does before it validates
    renamed_keys(cfg, say_deprecated, argv)
    out = Path(out)
    with open_dict(cfg):
        cfg.paths.output_dir = str(out)
        cfg.paths.log_dir = str(out / "logs")
        cfg.paths.cache_dir = os.environ.get(CACHE_ENV) or str(Path.cwd() / ".cache")
        del cfg["hydra"]  # as under the command, the job's config has no hydra section (HydraConfig holds it)
    validate(cfg)
    return cfg


def run(args: list[str], log_dir: str | Path, conf: str | Path = "conf", entry: str = "train",
        timeout: float = 1800) -> subprocess.CompletedProcess:
    """``vase <entry> --config-dir <conf> <args>`` from the current folder, its runs under ``log_dir``, W&B off; the
    finished process (its ``stdout``, ``stderr``, ``returncode``)."""
    env = {**os.environ, "WANDB_MODE": "disabled"}
    cache = [f"paths.cache_dir={os.environ[CACHE_ENV]}"] if os.environ.get(CACHE_ENV) else []
    return subprocess.run([sys.executable, "-m", "vase.cli", entry, "--config-dir", str(conf), *args,
                           f"paths.log_dir={log_dir}", *cache], capture_output=True, text=True, timeout=timeout,
                          env=env)


def sweep_of(log_dir: str | Path, run_kind: str = "train") -> Path:
    """The newest sweep folder under ``log_dir`` (what `run` with ``-m`` made)."""
    found = sorted((Path(log_dir) / run_kind / "multiruns").glob("*/"))
    if not found:
        raise FileNotFoundError(f"no sweep under {Path(log_dir) / run_kind / 'multiruns'}")
    return found[-1]
