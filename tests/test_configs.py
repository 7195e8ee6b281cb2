"""Every option of every config group composes; bad values fail fast with one line naming the key."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.conftest import CONF, ROOT, compose_cfg, run_python
from vase.config import validate

TRAIN_GROUPS = [
    "model",
    "stage",
    "data",
    "reward",
    "trainer",
    "logger",
    "callbacks",
    "metrics",
    "render",
    "paths",
    "debug",
    "experiment",
    "sweep",
]


def resolve_all(cfg) -> None:
    """Every interpolation outside Hydra's own section resolves (no dangling ${...})."""
    OmegaConf.to_container(cfg, resolve=True)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_every_group_has_the_options_the_docs_promise() -> None:
    assert {"tiny", "qwen2_5_vl_3b", "qwen2_5_vl_7b"} <= set(options("model"))
    assert {"sft", "grpo"} <= set(options("stage"))
    assert {"synthetic", "vasevqa3d"} <= set(options("data"))
    assert {"vase6d"} <= set(options("reward"))
    assert {"cpu", "gpu", "ddp", "deepspeed_zero2", "deepspeed_zero3"} <= set(options("trainer"))
    assert {"wandb", "csv", "none"} <= set(options("logger"))
    assert "demo" in options("experiment")


@pytest.mark.parametrize("group", TRAIN_GROUPS)
def test_every_option_composes_and_validates(group: str, tmp_path: Path, session_dirs: dict) -> None:
    opts = options(group)
    assert opts, f"conf/{group} has no options"
    for opt in opts:
        cfg = compose_cfg("train", [f"{group}={opt}"], tmp_path, session_dirs)
        validate(cfg)
        resolve_all(cfg)


@pytest.mark.parametrize("group", ["model", "data", "metrics", "logger", "render"])
def test_evaluate_groups_compose(group: str, tmp_path: Path, session_dirs: dict) -> None:
    for opt in options(group):
        cfg = compose_cfg("evaluate", [f"{group}={opt}"], tmp_path, session_dirs)
        validate(cfg)
        resolve_all(cfg)


def test_paper_defaults_in_configs(tmp_path: Path, session_dirs: dict) -> None:
    cfg = compose_cfg("train", ["stage=sft"], tmp_path, session_dirs)
    lora = cfg.stage.module.lora
    assert (lora.r, lora.alpha, lora.target_modules, lora.freeze_vision) == (8, 32, "all-linear", True)
    assert cfg.stage.module.optimizer.lr == 1e-4 and cfg.stage.epochs == 2 and cfg.stage.grad_accum == 16
    assert cfg.stage.module.warmup_ratio == 0.05
    w = cfg.reward.weights
    assert (w.fabric, w.technique, w.decoration, w.shape, w.dating, w.attribution) == (0.2, 0.2, 0.2, 0.15, 0.15, 0.1)
    assert cfg.reward.tau == 0.7
    g = compose_cfg("train", ["stage=grpo"], tmp_path, session_dirs).stage
    assert (
        g.module.optimizer.lr,
        g.module.num_generations,
        g.module.temperature,
        g.module.max_completion_length,
        g.module.beta,
        g.grad_accum,
    ) == (1e-6, 4, 1.0, 256, 0.001, 4)


def _run(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    t = time.perf_counter()
    p = run_python([*args], cwd=ROOT, timeout=120)
    return p, time.perf_counter() - t


def test_cfg_job_composes_for_7b_grpo_zero3() -> None:
    p, _ = _run(["train.py", "model=qwen2_5_vl_7b", "stage=grpo", "trainer=deepspeed_zero3", "--cfg", "job"])
    assert p.returncode == 0, p.stderr
    cfg = OmegaConf.create(p.stdout)
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert cfg.trainer.strategy.stage == 3 and cfg.stage.name == "grpo"


@pytest.mark.parametrize(
    "override, key",
    [
        ("reward.tau=1.7", "reward.tau"),
        ("reward.weights.dating=-0.5", "reward.weights.dating"),
        ("stage=nonsense", "stage"),
        ("stage.name=nonsense", "stage.name"),
        ("render.resolution=abc", "render.resolution"),
        ("stage.module.lora.r=0", "stage.module.lora.r"),
    ],
)
def test_bad_value_fails_fast_with_one_line_naming_the_key(override: str, key: str) -> None:
    p, _ = _run(["train.py", override])
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("config error: ") and key in lines[0]
    assert "loading model" not in p.stdout + p.stderr  # fast: refused before any model loads (no clock asserted)


@pytest.mark.parametrize("override, key", [("trainer.devices=abc", "trainer.devices"),
                                           ("trainer.max_steps=1.5", "trainer.max_steps"),
                                           ("trainer.precision=17", "trainer.precision"),
                                           ("trainer.max_time=90", "trainer.max_time"),
                                           ("trainer.max_time=00:00:00:00", "trainer.max_time")])
def test_bad_trainer_values_fail_before_any_model_loads(override: str, key: str, tmp_path: Path) -> None:
    p = run_python(["train.py", override, f"hydra.run.dir={tmp_path}"], cwd=ROOT, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().startswith(f"config error: {key}=") and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "config.yaml").exists()  # the run never started


def test_a_training_time_budget_reaches_lightnings_timer(tmp_path: Path, session_dirs: dict) -> None:
    """trainer.max_time (what the SLURM time-limit check trains by) becomes Lightning's Timer with that duration."""
    from pytorch_lightning.callbacks import Timer

    from vase.pipeline.build import build_trainer

    cfg = compose_cfg("train", ["trainer.max_time=00:00:02:30"], tmp_path, session_dirs)
    trainer = build_trainer(cfg, cfg.stage, [], [], tmp_path, first=True)
    timers = [c for c in trainer.callbacks if isinstance(c, Timer)]
    assert len(timers) == 1 and timers[0]._duration == 150.0


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "experiments").glob("*.yaml")))
def test_every_experiment_runs_one_step_on_the_tiny_model(name: str, tmp_path: Path, session_dirs: dict,
                                                          tiny_model_dir: Path) -> None:
    """Each recipe, with model=tiny on synthetic data: one training step (or, for a zero-shot baseline, one
    caption scored) through its own stage, modality and module settings."""
    from vase.pipeline import run_training
    from vase.pipeline.evaluate import run_evaluation

    tiny = ["model=tiny", f"model.name_or_path={tiny_model_dir}", "model.dtype=float32", "data=synthetic",
            "data.synthetic.num_vases=8", "render.resolution=64", "logger=none", "metrics=hf_tiny",
            "data.num_workers=0"]
    if "zeroshot" in name:
        cfg = compose_cfg("evaluate", [f"experiment={name}", *tiny, "generation.max_new_tokens=2",
                                       "data.limit_val=2", "metrics.image_score=false"], tmp_path, session_dirs)
        validate(cfg)
        assert run_evaluation(cfg)["scores"]["n_pairs"] == 2
        return
    cfg = compose_cfg("train", [f"experiment={name}", *tiny, "trainer=cpu", "trainer.max_steps=1",
                                "stage.grad_accum=1", "stage.module.max_completion_length=4", "val.before=false",
                                "val.after=false", "report=false", "render.orbit_frames=4"]
                      if "_rl" in name else
                      [f"experiment={name}", *tiny, "trainer=cpu", "trainer.max_steps=1", "stage.grad_accum=1",
                       "val.before=false", "val.after=false", "report=false", "render.orbit_frames=4"],
                      tmp_path, session_dirs)
    validate(cfg)
    out = run_training(cfg)
    assert len(out["history"]) >= 1


def test_grpo_with_every_reward_term_at_zero_is_refused_and_one_term_is_enough(tmp_path: Path,
                                                                             session_dirs: dict) -> None:
    """All weights 0 once trained GRPO at a loss of 0.000 every step without a word."""
    from vase.annotate.vocab import DIMENSIONS
    from vase.errors import ConfigError

    zero = ["stage=grpo", *(f"reward.weights.{d}=0" for d in DIMENSIONS), "reward.terms.penalty.weight=0",
            "reward.terms.bonus.weight=0"]
    with pytest.raises(ConfigError, match=r"^every reward term weighs 0 .*learn nothing"):
        validate(compose_cfg("train", zero, tmp_path, session_dirs))
    validate(compose_cfg("train", [*zero, "reward.weights.shape=0.6"], tmp_path, session_dirs))


def test_grpo_from_a_shared_sft_is_one_config_that_sweeps_and_experiments_compose(tmp_path: Path,
                                                                                  session_dirs: dict) -> None:
    """Eight sweep and experiment files repeated the same lines (the SFT stage, GRPO over it, sft_init, held-out
    scoring): they compose conf/shared/grpo_from_sft.yaml now, and none repeats its lines."""
    users = [p for d in ("sweeps", "experiments") for p in sorted((ROOT / d).glob("*.yaml"))
             if "- /shared/grpo_from_sft" in p.read_text()]
    assert len(users) >= 8
    for p in users:
        text = p.read_text()
        assert "/stage@sft: sft" not in text and "override /stage: grpo" not in text and "\nsft_init: true" not in text, p
    cfg = compose_cfg("train", ["sweep=tau"], tmp_path, session_dirs)
    assert cfg.sft_init is True and cfg.val.heldout is True and cfg.stage.name == "grpo" and cfg.sft.name == "sft"


def test_debug_fast_limits_a_follow_up_stage_too(tmp_path: Path, session_dirs: dict) -> None:
    """debug=fast set the first stage's epochs and grad_accum, and a GRPO follow-up kept grad_accum 4: one optimizer
    step where the preset documents two (2026-12-03). ``every_stage`` carries them to the follow-up."""
    from tests.conftest import compose_cfg
    from vase.config.entry import every_stage

    cfg = compose_cfg("train", ["experiment=demo", "debug=fast", "followup.grad_accum=4", "followup.epochs=6"], tmp_path,
                      session_dirs)
    assert (cfg.followup.grad_accum, cfg.followup.epochs) == (4, 6)
    every_stage(cfg)
    assert (cfg.followup.grad_accum, cfg.followup.epochs) == (1, 1) and cfg.stage.grad_accum == 1
    plain = compose_cfg("train", ["experiment=demo"], tmp_path, session_dirs)
    every_stage(plain)  # without a preset that asks, a follow-up keeps its own
    assert plain.followup.grad_accum == 1 and plain.followup.epochs == 6
