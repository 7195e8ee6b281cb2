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

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"

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


SLOW_SECONDS: dict[str, float] = {  # measured 2026-12-02 (make test-slow, this machine, 2 workers)
    "tests/test_loggers.py::test_make_dashboards_check_passes_against_real_mlflow_and_tensorboard_servers": 1164,
    "tests/test_sweeps.py::test_the_cluster_check_passes_on_a_real_slurm_cluster_its_time_limit_part_on_a_loaded_machine": 540,
    "tests/test_reward_terms.py::test_grpo_sanity_passes_and_fails_when_the_learner_is_broken": 537,
    "tests/test_search_confirm.py::test_the_documented_command_searches_confirms_and_resumes_after_a_kill": 486,
    "tests/test_ablation_demo.py::test_the_ablation_demo_twice_gives_byte_identical_results": 200,
    "tests/test_cpu_kernels.py::test_the_demo_prints_the_same_table_under_two_kernel_settings": 352,
    "tests/test_end_to_end.py::test_the_demo_learns_on_two_more_seeds_one_of_them_from_the_installed_wheel": 300,
    "tests/test_stack.py::test_make_stack_check_passes_with_the_real_ms_swift_and_trl": 248,
    "tests/test_cpu_kernels.py::test_the_kernel_probe_finds_no_difference_under_the_pins_and_names_the_op_where_settings_part": 156,
    "tests/test_docs.py::test_make_docs_check_reads_and_screenshots_every_rendered_page": 91,
    "tests/test_readme_commands.py::test_every_readme_command_composes_and_validates": 85,
    "tests/test_sweeps.py::test_reward_weights_sweep_as_the_readme_shows_it": 63,
    "tests/test_sweeps.py::test_a_killed_submitit_job_fails_alone_and_the_same_command_completes_the_sweep": 61,
    "tests/test_resume.py::test_sigterm_then_sigkill_then_the_same_command_gives_the_uninterrupted_curve": 51,
    "tests/test_sweeps.py::test_tau_sweep_runs_grpo_jobs_from_one_shared_sft_adapter": 48,
    "tests/test_filter.py::test_synthetic_task_runs_end_to_end_from_one_command": 34,
    "tests/test_sweeps.py::test_a_killed_sweep_resumes_by_rerunning_it": 33,
    "tests/test_rollout.py::test_engines_decode_the_eager_tokens_batch_after_batch[compiled]": 24,
    "tests/test_render.py::test_two_runs_at_two_resolutions_at_once_each_train_on_their_own_views": 24,
    "tests/test_filter.py::test_killed_run_resumes_to_the_same_final_manifest": 23,
    "tests/test_readme_commands.py::test_every_recipe_runs_as_written_in_a_fresh_shell": 23,
    "tests/test_sweeps.py::test_the_slurm_facing_tests_pass_on_a_machine_without_slurm": 22,
    "tests/test_end_to_end.py::test_ddp_over_gloo_runs_two_processes": 21,
    "tests/test_resume.py::test_continuing_a_finished_run_with_more_steps_trains_them": 19,
    "tests/test_resume.py::test_two_runs_started_together_keep_their_own_folders": 15,
    "tests/test_sweeps.py::test_a_reward_sweep_says_at_its_start_whether_an_ablation_report_will_come[args0-expect0]": 15,
}
"""The slow suite's longest tests and their seconds in one `make test-slow` on this 2-core machine. `make test-slow`
(``--dist loadgroup``) splits the slow tests between its workers by these, longest first, each to the worker with
the fewest seconds so far, so that both end together: xdist's own order follows each file's number of tests, not how
long they take. A test not listed (all are shorter) counts `DEFAULT_SLOW_SECONDS`."""
DEFAULT_SLOW_SECONDS = 10.0


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the tests' ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``, each slow test's worker (`SLOW_SECONDS`): the same split on every worker, computed
    from the table alone."""
    if config.getoption("dist", "no") != "loadgroup":
        return
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    slow = [item for item in items if item.get_closest_marker("slow")]
    seconds = {item.nodeid: SLOW_SECONDS.get(item.nodeid, DEFAULT_SLOW_SECONDS) for item in slow}
    load = [0.0] * workers
    for item in sorted(slow, key=lambda i: (-seconds[i.nodeid], i.nodeid)):
        k = load.index(min(load))
        load[k] += seconds[item.nodeid]
        item.add_marker(pytest.mark.xdist_group(f"worker{k}"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when it left anything new in the checkout (besides the venv and caches), naming it."""
    before = getattr(session.config, "_vase_checkout", None)
    after = _checkout_state() if before is not None else None
    new = sorted((after or set()) - (before or set()))
    if new:
        print("\nthe test suite wrote into the checkout (tests write under tmp_path or $VASE_LOG_DIR):\n  "
              + "\n  ".join(new))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
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
    "evaluate.before=false",
    "evaluate.after=false",
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


def run_cli(args: list[str], tmp_path: Path, session_dirs: dict) -> subprocess.CompletedProcess:
    """An entry point run as a user types it (``[script, *overrides]``), its cache the session's and its logs under
    ``tmp_path``."""
    env = {**os.environ, "WANDB_MODE": "offline"}
    return subprocess.run([sys.executable, *args, f"paths.cache_dir={session_dirs['cache']}",
                           f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def one_line(p: subprocess.CompletedProcess) -> str:
    """A refusal's one line (exit 2, no traceback; warnings aside)."""
    lines = [x for x in p.stderr.splitlines() if x.strip() and "warn" not in x.lower()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    return lines[0]


def shipped_question(path: str) -> dict:
    """The ``question:`` block of a shipped sweep or experiment file (``sweeps/tau.yaml``), as its sweep's end reads
    it: a report's test asks the question the shipped file asks."""
    from omegaconf import OmegaConf

    from vase.reports.question import question_of

    q = question_of(OmegaConf.load(ROOT / path))
    assert q is not None, f"{path} has no question: block"
    return q
