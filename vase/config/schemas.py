"""The structured-config schemas, one dataclass per section, and the range checks they run in ``__post_init__``.

A composed config is checked section by section against these schemas (types through OmegaConf, ranges in
``__post_init__``); the first bad value raises `ConfigError` with one line naming its key, e.g.
``reward.tau=1.7 must lie in [0, 1]``. `vase.config.validate` applies them to a whole config.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from vase.annotate.vocab import DIMENSIONS
from vase.choices import (
    AGGREGATIONS,
    CPU_ALLOCATORS,
    CPU_KERNELS,
    DATA_MIXES,
    DTYPES,
    LAYOUTS,
    LOSS_TYPES,
    NEGATIVE_CONTROLS,
    RETRIEVAL_FORMATS,
    ROLLOUT_ENGINES,
    SCALE_REWARDS,
    SIMILARITIES,
    STAGES,
    VIEW_FEATURES,
)
from vase.errors import ConfigError
from vase.views import VIEWS
from vase.workers import workers_for


def check_value(cond: bool, key: str, value: Any, why: str) -> None:
    """Raise ConfigError ``<key>=<value> <why>``, one line, unless ``cond`` holds."""
    if not cond:
        raise ConfigError(f"{key}={value!r} {why}")


PROCESS_SETTINGS = {"cpu_kernels": (CPU_KERNELS, f"must be one of {list(CPU_KERNELS)}"),
                    "cpu_allocator": (CPU_ALLOCATORS, f"must be one of {list(CPU_ALLOCATORS)}"),
                    "resume": (("auto", "never"), "must be auto or never")}
"""The keys a job's process takes before it computes (`vase.config.process_settings`, resume's folder), each with the
values it may have: `validate` checks a run's, and a sweep checks every value its jobs would take at its start
(`vase.launchers.SweepPreflight`), before it makes its folder."""


def check_process_settings(values: Any) -> None:
    """ConfigError naming the first key of `PROCESS_SETTINGS` whose value in ``values`` (a config, or a mapping) is
    none of its own; a key ``values`` lacks or sets to null is not checked."""
    for key, (allowed, why) in PROCESS_SETTINGS.items():
        value = values.get(key)
        if value is not None:
            check_value(str(value) in allowed, key, value, why)


@dataclass
class LoraSchema:
    r: int = 8
    alpha: int = 32
    dropout: float = 0.05
    target_modules: Any = "all-linear"
    freeze_vision: bool = True
    modules_to_save: list[str] | None = None

    def __post_init__(self) -> None:
        check_value(self.r >= 1, "stage.module.lora.r", self.r, "must be at least 1")
        check_value(self.alpha > 0, "stage.module.lora.alpha", self.alpha, "must be positive")
        check_value(0.0 <= self.dropout < 1.0, "stage.module.lora.dropout", self.dropout, "must lie in [0, 1)")


@dataclass
class StageSchema:
    name: str = "sft"
    epochs: int = 2
    batch_size: int = 1
    grad_accum: int = 16
    module: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_value(self.name in STAGES, "stage.name", self.name, f"is not a known stage; choose one of {list(STAGES)}")
        check_value(self.epochs >= 1, "stage.epochs", self.epochs, "must be at least 1")
        check_value(self.batch_size >= 1, "stage.batch_size", self.batch_size, "must be at least 1")
        check_value(self.grad_accum >= 1, "stage.grad_accum", self.grad_accum, "must be at least 1")


@dataclass
class GRPOSchema:
    num_generations: int = 4
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 256
    beta: float = 0.001
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    num_iterations: int = 1
    loss_type: str = "grpo"
    scale_rewards: str = "group"
    negative_control: Any = None
    rollout: str = "eager"
    multi_objective_aggregation: str = "sum_then_normalize"

    def __post_init__(self) -> None:
        k = "stage.module"
        check_value(self.rollout in ROLLOUT_ENGINES, f"{k}.rollout", self.rollout, f"must be one of {list(ROLLOUT_ENGINES)}")
        check_value(self.multi_objective_aggregation in AGGREGATIONS, f"{k}.multi_objective_aggregation",
                    self.multi_objective_aggregation, f"must be one of {list(AGGREGATIONS)}")
        check_value(self.negative_control in (None, *NEGATIVE_CONTROLS), f"{k}.negative_control",
               self.negative_control, f"must be null or one of {list(NEGATIVE_CONTROLS)}")
        check_value(
            self.num_generations >= 2,
            f"{k}.num_generations",
            self.num_generations,
            "must be at least 2 (advantages are relative within a group)",
        )
        check_value(self.temperature > 0, f"{k}.temperature", self.temperature, "must be positive")
        check_value(0 < self.top_p <= 1, f"{k}.top_p", self.top_p, "must lie in (0, 1]")
        check_value(
            self.max_completion_length >= 1, f"{k}.max_completion_length", self.max_completion_length, "must be >= 1"
        )
        check_value(self.beta >= 0, f"{k}.beta", self.beta, "must be non-negative")
        check_value(self.epsilon_low >= 0, f"{k}.epsilon_low", self.epsilon_low, "must be non-negative")
        check_value(self.epsilon_high >= 0, f"{k}.epsilon_high", self.epsilon_high, "must be non-negative")
        check_value(self.num_iterations >= 1, f"{k}.num_iterations", self.num_iterations, "must be at least 1")
        check_value(self.loss_type in LOSS_TYPES, f"{k}.loss_type", self.loss_type, f"must be one of {list(LOSS_TYPES)}")
        check_value(
            self.scale_rewards in SCALE_REWARDS,
            f"{k}.scale_rewards",
            self.scale_rewards,
            f"must be one of {list(SCALE_REWARDS)}",
        )


def _per_dimension(name: str, kind: type) -> type:
    """A schema with one mandatory field per dimension of the vocabulary (no defaults: the values live in
    conf/reward/*.yaml alone, and a missing dimension is an error naming it)."""
    return make_dataclass(name, [(d, kind, field(default=MISSING)) for d in DIMENSIONS])


RewardWeights = _per_dimension("RewardWeights", float)

# what the config check knows of vase's own reward terms (a user's term is checked by its signature alone)
_TERMS = "vase.rewards.terms."


def _check_term(name: str, term: Any, tau: float) -> None:
    k = f"reward.terms.{name}"
    check_value(isinstance(term, dict) and "_target_" in term, k, term,
           "must be a mapping with _target_ (a RewardTerm class) and weight (a number), plus the class's own arguments")
    target = str(term["_target_"])
    tw = term.get("weight", 1.0)
    check_value(isinstance(tw, (int, float)) and tw >= 0, f"{k}.weight", tw, "must be a non-negative number")
    if target == _TERMS + "Similarity":
        check_value(term.get("dimension") in DIMENSIONS, f"{k}.dimension", term.get("dimension"),
               f"must be one of {list(DIMENSIONS)}")
        check_value(term.get("similarity") in SIMILARITIES, f"{k}.similarity", term.get("similarity"),
               f"must be one of {list(SIMILARITIES)}")
        t = term.get("tau", tau)
        check_value(isinstance(t, (int, float)) and 0.0 <= t <= 1.0, f"{k}.tau", t, "must lie in [0, 1]")
    elif target == _TERMS + "FormatPenalty":
        lo, hi = term.get("min_words", 0), term.get("max_words", 0)
        check_value(isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi, f"{k}.min_words", lo,
               f"must lie in [0, {k}.max_words={hi}]")
    elif target == _TERMS + "Learned":
        check_value(not tw or bool(term.get("checkpoint")), f"{k}.checkpoint", term.get("checkpoint"),
               f"must name attribute_heads.pt (or be train) when {k}.weight > 0")


@dataclass
class RewardSchema:
    _target_: str = "vase.rewards.VaseReward"
    tau: float = MISSING
    weights: RewardWeights = field(default_factory=RewardWeights)
    embedding_model: str = MISSING
    embedding_device: str = "cpu"
    normalize_weights: Any = None
    terms: dict = MISSING
    effective_weights: Any = None

    def __post_init__(self) -> None:
        check_value(0.0 <= self.tau <= 1.0, "reward.tau", self.tau, "must lie in [0, 1]")
        for dim in DIMENSIONS:
            w = getattr(self.weights, dim)
            check_value(w >= 0, f"reward.weights.{dim}", w, "must be non-negative")
        terms = {n: t for n, t in (self.terms or {}).items() if t is not None}  # null switches a term off
        check_value(bool(terms), "reward.terms", self.terms, "must list at least one term")
        for name, term in terms.items():
            _check_term(name, term, self.tau)
            if str(term.get("_target_")) == _TERMS + "Similarity" and term.get("dimension") in DIMENSIONS:
                d = term["dimension"]
                check_value(abs(float(term.get("weight", 1.0)) - getattr(self.weights, d)) < 1e-12,
                       f"reward.terms.{name}.weight", term.get("weight"),
                       f"differs from reward.weights.{d}={getattr(self.weights, d)}: set reward.weights.{d} "
                       f"(the term's weight follows it)")
        nw = self.normalize_weights
        check_value(nw is None or isinstance(nw, bool) or (isinstance(nw, (list, tuple)) and all(d in DIMENSIONS for d in nw)),
               "reward.normalize_weights", nw, f"must be null, true, false or a list of dimensions {list(DIMENSIONS)}")


@dataclass
class SyntheticSchema:
    num_vases: int = 32
    seed: int = 0
    val_fraction: float = 0.25
    detail: bool = False  # the figures' attributes, below the model's input resolution (vase.data.synthetic)

    def __post_init__(self) -> None:
        check_value(self.num_vases >= 2, "data.synthetic.num_vases", self.num_vases, "must be at least 2")
        check_value(0 < self.val_fraction < 1, "data.synthetic.val_fraction", self.val_fraction, "must lie in (0, 1)")


@dataclass
class DataSchema:
    _target_: str = "vase.data.datamodule.VaseDataModule"
    root: str = "data/synthetic"
    views: list[str] = field(default_factory=lambda: ["front", "back", "left", "right", "top", "bottom"])
    batch_size: int = 1
    eval_batch_size: int = 8
    num_workers: int = 0
    modality: str = "views"
    mix: str = "caption"
    max_length: int = 4096
    synthetic: SyntheticSchema | None = None
    render: dict | None = None
    limit_train: int | None = None
    limit_val: int | None = None
    layout: str = "auto"
    split: dict | None = None
    retrieval: dict | None = None
    max_video_frames: int = 16
    pixel_cache_mb: float | None = 1024
    zoom: bool = False
    zoom_width: Any = 1.0
    zoom_direct: Any = 5

    def __post_init__(self) -> None:
        check_value(self.layout in ("auto", *LAYOUTS), "data.layout", self.layout, f"must be auto or one of {list(LAYOUTS)}")

        bad = [v for v in self.views if v not in VIEWS]
        check_value(
            not bad and len(self.views) > 0,
            "data.views",
            list(self.views),
            f"must be a non-empty subset of {list(VIEWS)}",
        )
        check_value(self.mix in DATA_MIXES, "data.mix", self.mix,
               f"must be one of {', '.join(DATA_MIXES)} (all: both plus multiple-choice questions); for a mix of "
               f"your own, register_data_mix from a module your project's conf/plugins.yaml lists (modules: "
               f"[mylab.ext]; --config-dir conf)")
        check_value(self.modality in ("views", "orbit"), "data.modality", self.modality, "must be views or orbit")
        frames = int((self.render or {}).get("orbit_frames", 0) or 0)
        check_value(self.modality != "orbit" or frames > 0, "data.modality", self.modality,
               "needs orbit frames: set render.orbit_frames (e.g. 16)")
        check_value(self.batch_size >= 1, "data.batch_size", self.batch_size, "must be at least 1")
        check_value(self.pixel_cache_mb is None or self.pixel_cache_mb >= 0, "data.pixel_cache_mb", self.pixel_cache_mb,
                    "must be 0 (off) or more MiB")
        # 0 would train on nothing and still mark the run finished: "no limit" is null
        check_value(self.limit_train is None or self.limit_train >= 1, "data.limit_train", self.limit_train,
               "must be at least 1, or null for no limit")
        check_value(self.limit_val is None or self.limit_val >= 0, "data.limit_val", self.limit_val,
               "must be non-negative (0 only when nothing is evaluated), or null for no limit")
        check_value(self.max_length >= 32, "data.max_length", self.max_length, "must be at least 32")
        check_zoom(self.zoom_width, self.zoom_direct)


def check_zoom(width: Any, direct: Any) -> None:
    """``data.zoom_width`` and ``data.zoom_direct``: checked with the rest of the config and by the data module."""
    check_value(isinstance(width, (int, float)) and 0.0 < float(width) <= 1.0, "data.zoom_width", width,
           "must be in (0, 1]: the share of the frieze's width the taught zoom call covers")
    check_value(isinstance(direct, int) and 0 <= direct <= 5, "data.zoom_direct", direct,
           "must be 0 to 5: how many of the five other questions per vase are taught with the tool offered")


def check_retrieval(node: Any) -> None:
    """``retrieval.*``: checked before any model loads, whether or not retrieval is on (``k`` > 0)."""
    node = node or {}
    k = node.get("k", 0)
    check_value(isinstance(k, int) and not isinstance(k, bool) and k >= 0, "retrieval.k", k,
           "must be a whole number >= 0 (0: off)")
    fmt = node.get("format") or "asked"
    check_value(fmt in RETRIEVAL_FORMATS, "retrieval.format", fmt, f"must be one of {', '.join(RETRIEVAL_FORMATS)}")
    features = node.get("features") or "auto"
    check_value(features in VIEW_FEATURES, "retrieval.features", features, f"must be one of {', '.join(VIEW_FEATURES)}")


@dataclass
class RenderSchema:
    enabled: bool = True
    resolution: int = 224
    fov_deg: float = 35.0
    orbit_frames: int = 0
    cache_dir: str | None = None
    write_to_root: bool = False
    on_error: str = "raise"
    orbit_video: bool = False
    sheets: bool = False
    workers: Any = "auto"  # auto or a positive count (vase.workers.workers_for)

    def __post_init__(self) -> None:
        try:
            workers_for(self.workers, 1)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        check_value(not self.orbit_video or self.orbit_frames > 0, "render.orbit_video", self.orbit_video,
               "needs render.orbit_frames > 0 (the frames the video is made of)")
        check_value(self.on_error in ("raise", "skip"), "render.on_error", self.on_error, "must be 'raise' or 'skip'")
        check_value(16 <= self.resolution <= 4096, "render.resolution", self.resolution, "must lie in [16, 4096]")
        check_value(5 <= self.fov_deg <= 120, "render.fov_deg", self.fov_deg, "must lie in [5, 120] degrees")
        check_value(self.orbit_frames >= 0, "render.orbit_frames", self.orbit_frames, "must be non-negative")


@dataclass
class ModelSchema:
    label: str = "model"
    name_or_path: str = "Qwen/Qwen2.5-VL-7B-Instruct"
    build_tiny: bool = False
    tiny: dict | None = None
    dtype: str = "bfloat16"
    attn_implementation: str | None = "sdpa"
    processor: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_value(str(self.dtype).lower() in DTYPES, "model.dtype", self.dtype, f"must be one of {list(DTYPES)}")


@dataclass
class MetricsSchema:
    clip: dict = field(default_factory=dict)
    text_encoder: dict = field(default_factory=dict)
    embedding_cache: str | None = None
    image_score: bool = True
    extra: list = field(default_factory=list)  # names of vase.metrics.registry (checked where the scorer is built)
    weights: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        backend = (self.clip or {}).get("backend", "open_clip")
        check_value(backend in ("hf", "open_clip"), "metrics.clip.backend", backend, "must be 'hf' or 'open_clip'")
        for k, w in (self.weights or {}).items():
            check_value(float(w) >= 0, f"metrics.weights.{k}", w, "must be non-negative")


@dataclass
class FilterSchema:
    """``filter.*``'s top-level settings (``python -m vase.filter``); the stages' own nodes are their targets'."""

    min_side: int = 64
    keep: str = "manifest"
    unusual_modes: str = "convert"
    draft: bool = True
    batch_size: int = 32
    num_workers: int = 2

    def __post_init__(self) -> None:
        check_value(self.min_side >= 1, "filter.min_side", self.min_side, "must be at least 1 (pixels)")
        check_value(self.keep in ("manifest", "link", "copy"), "filter.keep", self.keep, "must be manifest, link or copy")
        check_value(self.unusual_modes in ("convert", "reject"), "filter.unusual_modes", self.unusual_modes,
               "must be convert or reject")
        check_value(self.batch_size >= 1, "filter.batch_size", self.batch_size, "must be at least 1")
        check_value(self.num_workers >= 0, "filter.num_workers", self.num_workers, "must be non-negative")


SECTIONS: dict[str, type] = {
    "stage": StageSchema,
    "reward": RewardSchema,
    # render before data: data.root interpolates render.resolution/fov_deg, so a bad one is named as itself
    "render": RenderSchema,
    "data": DataSchema,
    "model": ModelSchema,
    "metrics": MetricsSchema,
    "filter": FilterSchema,
}


def register_configs() -> None:
    """Put the schemas in Hydra's ConfigStore (group ``schema``), so ``--info`` and IDEs can show them."""
    cs = ConfigStore.instance()
    for name, cls in SECTIONS.items():
        cs.store(group="schema", name=name, node=cls)
    cs.store(group="schema", name="grpo", node=GRPOSchema)
    cs.store(group="schema", name="lora", node=LoraSchema)
