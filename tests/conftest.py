"""Shared fixtures: real configs composed with Hydra's compose API, made tiny, writing under tmp paths.

The tiny model, tiny CLIP and a small synthetic dataset are built once per session in a shared cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

import vase.config  # noqa: F401  (registers the resolvers the configs use, as train.py and evaluate.py do)
from tests.forkserver import ForkServer

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"

# the suite's torch jobs share the cores (two xdist workers, and tests that start several processes): idle OpenMP
# threads sleep rather than spin on the other's core (make test sets it before torch loads; here for a bare pytest's
# subprocesses). Measured: two sweeps side by side 149 s so, over 15 minutes spinning (docs/development.md)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# What the suite may leave in the checkout: the venv, vase's cache and tools' caches. Anything else is a test writing
# where a user's runs live (a user's `python -m vase.runs` would list the suite's runs among theirs).
_MAY_WRITE = (".venv", ".cache/", ".pytest_cache/", ".ruff_cache/", "vase.egg-info/")


def _checkout_state() -> set[str] | None:
    """``git status`` of the checkout, untracked and ignored files included (None outside a git checkout)."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        return None
    p = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=normal"], cwd=ROOT,
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return {line for line in p.stdout.splitlines()  # new files and folders ("??", "!!"), not a developer's edits
            if line[:2] in ("??", "!!") and "__pycache__" not in line and not line[3:].startswith(_MAY_WRITE)}


def pytest_configure(config: pytest.Config) -> None:
    """Runs the suite starts (train.py, the checks, the learning check) go to a temporary log folder, never the
    checkout's ``logs/``: ``paths.log_dir`` and every check default to ``$VASE_LOG_DIR``."""
    if not os.environ.get("VASE_LOG_DIR"):
        os.environ["VASE_LOG_DIR"] = config._vase_logs = tempfile.mkdtemp(prefix="vase-test-logs-")
    config._vase_checkout = _checkout_state()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when it left anything new in the checkout (besides the venv and caches), naming it."""
    before = getattr(session.config, "_vase_checkout", None)
    after = _checkout_state() if before is not None else None
    new = sorted((after or set()) - (before or set()))
    if new:
        print("\nthe test suite wrote into the checkout (tests write under tmp_path or $VASE_LOG_DIR):\n  "
              + "\n  ".join(new))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


SLOW_FILES_LONGEST_FIRST = (
    "test_loggers.py", "test_sweeps.py", "test_synthetic.py", "test_cpu_kernels.py", "test_reward_terms.py",
    "test_end_to_end.py", "test_readme_commands.py", "test_docs.py", "test_stack.py", "test_ablation_demo.py",
    "test_search_confirm.py", "test_resume.py", "test_filter.py", "test_retrieval.py", "test_render.py")
"""The slow suite's files in the order its two workers take them (``make test-slow`` keeps it:
``--no-loadscope-reorder``): the longest first, so neither worker starts a long one near the end. xdist's own order
(most tests a file first) started the dashboards check (one test, about 20 minutes with its ten GRPO jobs) late
beside an idle worker: CI's slow suite of 2026-12-07 took 2,633 s. Its two longest files go first, one to each
worker; then a short one (a worker with one test pending is given the next file at once, so it waits behind the
dashboards check), then the rest by their measured durations (docs/development.md); a file not listed comes after."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("markexpr", "") != "slow":
        return
    rank = {name: i for i, name in enumerate(SLOW_FILES_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's tests keep their order


def pytest_unconfigure(config: pytest.Config) -> None:
    for server in _FORKS:
        server.close()
    logs = getattr(config, "_vase_logs", None)
    if logs:
        shutil.rmtree(logs, ignore_errors=True)  # the folder this session made for itself, nothing else


@pytest.fixture(scope="session")
def session_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("vase-session")
    return {"cache": base / "cache", "data": base / "data"}


def compose_cfg(config_name: str, overrides: list[str], output_dir: Path, dirs: dict[str, Path]) -> DictConfig:
    """Compose a real config with test overrides; Hydra's global state is cleared first."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    HydraConfig().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.root_dir = str(ROOT)
        cfg.paths.output_dir = str(output_dir)
        cfg.paths.log_dir = str(output_dir / "logs")
        cfg.paths.cache_dir = str(dirs["cache"])
        cfg.paths.data_dir = str(dirs["data"])
        del cfg["hydra"]  # as under @hydra.main, the job's config has no hydra section (HydraConfig holds it)
    GlobalHydra.instance().clear()
    return cfg


TINY_TRAIN = [
    "model=tiny",
    "logger=none",
    "trainer=cpu",
    "data.synthetic.num_vases=8",
    "render.resolution=64",
    "stage.batch_size=2",
    "stage.grad_accum=1",
    "stage.epochs=1",
    "trainer.max_steps=2",
    "val.before=false",
    "val.after=false",
    "report=false",
]


@pytest.fixture
def train_cfg(tmp_path: Path, session_dirs: dict[str, Path]):
    """Factory: ``train_cfg(extra_overrides)`` gives a tiny training config under ``tmp_path``."""

    def make(extra: list[str] | None = None) -> DictConfig:
        return compose_cfg("train", TINY_TRAIN + list(extra or []), tmp_path, session_dirs)

    return make


@pytest.fixture(scope="session")
def tiny_model_dir(session_dirs: dict[str, Path]) -> Path:
    from vase.models.tiny import build_tiny, spec_fingerprint

    # the folder model=tiny resolves to, so configs and fixtures share one build
    return build_tiny(session_dirs["cache"] / "models" / f"tiny-qwen2_5_vl-{spec_fingerprint()}")


@pytest.fixture(scope="session")
def tiny_clip_dir(session_dirs: dict[str, Path]) -> Path:
    from vase.models.tiny_clip import build_tiny_clip

    return build_tiny_clip(session_dirs["cache"] / "models" / "tiny-clip")


@pytest.fixture(scope="session")
def synthetic_root(session_dirs: dict[str, Path]) -> Path:
    """8 synthetic vases, rendered at 64 pixels (the same root the tiny train config uses)."""
    from vase.data.datamodule import VaseDataModule

    root = session_dirs["cache"] / "data" / "synthetic-n8-s0-r64-fov35"
    dm = VaseDataModule(
        str(root),
        synthetic={"num_vases": 8, "seed": 0, "val_fraction": 0.25},
        render={"enabled": True, "resolution": 64, "fov_deg": 35.0},
    )
    dm.prepare_data()
    return root


@pytest.fixture(scope="session")
def hub_checkpoint_dir(session_dirs: dict[str, Path]) -> Path:
    """The debug-size stand-in for a downloaded Qwen2.5-VL-3B-Instruct folder (vase.models.hub), built once."""
    from vase.models.hub import HubSpec, build_hub_checkpoint

    return build_hub_checkpoint(session_dirs["cache"] / "models" / f"hub-qwen2_5_vl-{HubSpec().fingerprint()}")


@pytest.fixture
def hub_checkpoint(hub_checkpoint_dir: Path, tmp_path: Path) -> Path:
    """The stand-in as a user's download: a copy without vase's build marks, in a folder of the user's."""
    import shutil

    out = tmp_path / "user" / "Qwen2.5-VL-3B-Instruct"
    shutil.copytree(hub_checkpoint_dir, out, ignore=shutil.ignore_patterns(".vase-built", "vase_hub_fixture.json"))
    return out


_FORKS: list[ForkServer] = []  # this test process's fork server, started on first use (tests.forkserver)


def run_python(args: list[str], cwd: Path | str = ROOT, env: dict[str, str] | None = None, timeout: float = 300,
               fresh: bool = False) -> subprocess.CompletedProcess:
    """``python <args...>`` (or the command ``[sys.executable, *args]``) in ``cwd`` with ``env`` (default: this
    process's), its output captured as text, as
    ``subprocess.run`` gives it: forked from `tests.forkserver`'s server, which imported torch, Lightning and vase's
    entry points once (about 6 of a config check's 10 s), unless ``fresh`` (a test of signals, process groups, what a
    new process reads as torch loads) or the job needs a new process (`ForkServer.fork_ok`)."""
    env = dict(os.environ if env is None else env)
    args = [str(a) for a in args]
    if args and args[0] == sys.executable:  # a whole command line, as subprocess takes it
        args = args[1:]
    if not fresh and not (args[0].startswith("-") and args[0] not in ("-m", "-c")):  # -X importtime: a new one
        if not _FORKS:
            _FORKS.append(ForkServer(ROOT, Path(tempfile.mkdtemp(prefix="vase-forks-"))))
        if _FORKS[0].fork_ok(args, env):
            return _FORKS[0].run(args, Path(cwd), env, timeout)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run_cli(args: list[str], tmp_path: Path, session_dirs: dict) -> subprocess.CompletedProcess:
    """An entry point run as a user types it (``[script, *overrides]``), its cache the session's and its logs under
    ``tmp_path``."""
    env = {**os.environ, "WANDB_MODE": "offline"}
    return run_python([*args, f"paths.cache_dir={session_dirs['cache']}", f"paths.log_dir={tmp_path / 'logs'}"],
                      env=env)


def one_line(p: subprocess.CompletedProcess) -> str:
    """A refusal's one line (exit 2, no traceback; warnings aside)."""
    lines = [x for x in p.stderr.splitlines() if x.strip() and "warn" not in x.lower()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    return lines[0]


def shipped_hypothesis(path: str) -> dict:
    """The ``hypothesis:`` block of a shipped sweep or experiment file (``sweeps/tau.yaml``), as its sweep's end reads
    it: a report's test asks the hypothesis the shipped file asks."""
    from omegaconf import OmegaConf

    from vase.reports.hypothesis import hypothesis_of

    q = hypothesis_of(OmegaConf.load(ROOT / path))
    assert q is not None, f"{path} has no hypothesis: block"
    return q
