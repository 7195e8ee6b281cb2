"""Structured configs: dataclass schemas in Hydra's ConfigStore, and validation before any model loads.

A composed config is checked section by section against these schemas (types through OmegaConf, ranges in
``__post_init__``); the first bad value raises :class:`ConfigError` with one line naming its key, e.g.
``reward.tau=1.7 must lie in [0, 1]``. This module imports no torch, so the check takes well under a second.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import get_object
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vase.annotate.vocab import DIMENSIONS
from vase.choices import (
    DATA_TASK_NAMES,
    DTYPES,
    LAYOUTS,
    LOSS_TYPES,
    NEGATIVE_CONTROLS,
    RETRIEVAL_FORMATS,
    ROLLOUT_ENGINES,
    SCALE_REWARDS,
    SIMILARITIES,
    STAGES,
    TINY_OPEN_CLIP_NAME,
    VIEW_FEATURES,
    VQA_PROTOCOLS,
)
from vase.errors import ConfigError, Interrupted, VaseError
from vase.io import is_within
from vase.models.tiny import spec_fingerprint
from vase.runs import (
    check_given_dir,
    claim,
    job_dir,
    job_overrides,
    read_status,
    root_digest,
    run_dir,
    set_status,
    set_status_held,
)
from vase.views import VIEWS, path_key

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
EVAL_TASKS = {
    "generate": "caption a split with a model (and adapter) and score the captions (the default)",
    "score": "score caption files: generated=G.json ground_truth=T.json output=OUT.json",
    "vqa": "per-dimension VQA accuracy, open-ended and/or multiple choice by letter or by option likelihood (vqa.protocol=open|mc|ll|both|open+ll)",
    "leaderboard": "gather runs and results files into one table and plot: runs=[dir,file,...]",
    "export": "merge an adapter into its base and save a Hugging Face checkpoint: adapter=... output=<new dir>",
    "check": "list every problem of a dataset before a long run: data.root=...",
    "vaseeval": "score 3D reconstructions against ground-truth GLBs: gt_dir=... 'methods={name: dir}'",
    "attributes": "the six-head attribute baseline on frozen CLIP view features",
    "invrender": "inverse rendering: predictor=model|oracle|random answers generator parameters, rendered and scored",
}
"""``evaluate.py task=...``: each task with its one line (``python evaluate.py --help`` lists them)."""
FILTER_TASKS = {
    "run": "filter a photo folder: quality classifier (if given), CLIP fragment filter, best view (the default)",
    "train_quality": "train the ResNet-50 good/bad classifier on a labelled folder (0/ bad, 1/ good)",
    "synthetic": "make synthetic museum photos, train the classifier on them, filter them",
}
"""``python -m vase.filter task=...``: the curation tasks. conf/task holds every entry point's task files; each entry
point takes only its own names (:func:`preflight_overrides`)."""


def tasks_help(tasks: dict[str, str] = EVAL_TASKS, command: str = "python evaluate.py") -> str:
    """An entry point's tasks, one line each."""
    width = max(map(len, tasks))
    return f"Tasks ({command} task=<name>):\n" + "".join(f"  {name:<{width}}  {what}\n" for name, what in tasks.items())


def _check(cond: bool, key: str, value: Any, why: str) -> None:
    if not cond:
        raise ConfigError(f"{key}={value!r} {why}")


@dataclass
class LoraSchema:
    r: int = 8
    alpha: int = 32
    dropout: float = 0.05
    target_modules: Any = "all-linear"
    freeze_vision: bool = True
    modules_to_save: list[str] | None = None

    def __post_init__(self) -> None:
        _check(self.r >= 1, "stage.module.lora.r", self.r, "must be at least 1")
        _check(self.alpha > 0, "stage.module.lora.alpha", self.alpha, "must be positive")
        _check(0.0 <= self.dropout < 1.0, "stage.module.lora.dropout", self.dropout, "must lie in [0, 1)")


@dataclass
class StageSchema:
    name: str = "sft"
    epochs: int = 2
    batch_size: int = 1
    grad_accum: int = 16
    module: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(self.name in STAGES, "stage.name", self.name, f"is not a known stage; choose one of {list(STAGES)}")
        _check(self.epochs >= 1, "stage.epochs", self.epochs, "must be at least 1")
        _check(self.batch_size >= 1, "stage.batch_size", self.batch_size, "must be at least 1")
        _check(self.grad_accum >= 1, "stage.grad_accum", self.grad_accum, "must be at least 1")


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

    def __post_init__(self) -> None:
        k = "stage.module"
        _check(self.rollout in ROLLOUT_ENGINES, f"{k}.rollout", self.rollout, f"must be one of {list(ROLLOUT_ENGINES)}")
        _check(self.negative_control in (None, *NEGATIVE_CONTROLS), f"{k}.negative_control",
               self.negative_control, f"must be null or one of {list(NEGATIVE_CONTROLS)}")
        _check(
            self.num_generations >= 2,
            f"{k}.num_generations",
            self.num_generations,
            "must be at least 2 (advantages are relative within a group)",
        )
        _check(self.temperature > 0, f"{k}.temperature", self.temperature, "must be positive")
        _check(0 < self.top_p <= 1, f"{k}.top_p", self.top_p, "must lie in (0, 1]")
        _check(
            self.max_completion_length >= 1, f"{k}.max_completion_length", self.max_completion_length, "must be >= 1"
        )
        _check(self.beta >= 0, f"{k}.beta", self.beta, "must be non-negative")
        _check(self.epsilon_low >= 0, f"{k}.epsilon_low", self.epsilon_low, "must be non-negative")
        _check(self.epsilon_high >= 0, f"{k}.epsilon_high", self.epsilon_high, "must be non-negative")
        _check(self.num_iterations >= 1, f"{k}.num_iterations", self.num_iterations, "must be at least 1")
        _check(self.loss_type in LOSS_TYPES, f"{k}.loss_type", self.loss_type, f"must be one of {list(LOSS_TYPES)}")
        _check(
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
    _check(isinstance(term, dict) and "_target_" in term, k, term,
           "must be {_target_: <a RewardTerm class>, weight: <w>, ...}")
    target = str(term["_target_"])
    tw = term.get("weight", 1.0)
    _check(isinstance(tw, (int, float)) and tw >= 0, f"{k}.weight", tw, "must be a non-negative number")
    if target == _TERMS + "Similarity":
        _check(term.get("dimension") in DIMENSIONS, f"{k}.dimension", term.get("dimension"),
               f"must be one of {list(DIMENSIONS)}")
        _check(term.get("similarity") in SIMILARITIES, f"{k}.similarity", term.get("similarity"),
               f"must be one of {list(SIMILARITIES)}")
        t = term.get("tau", tau)
        _check(isinstance(t, (int, float)) and 0.0 <= t <= 1.0, f"{k}.tau", t, "must lie in [0, 1]")
    elif target == _TERMS + "FormatPenalty":
        lo, hi = term.get("min_words", 0), term.get("max_words", 0)
        _check(isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi, f"{k}.min_words", lo,
               f"must lie in [0, {k}.max_words={hi}]")
    elif target == _TERMS + "Learned":
        _check(not tw or bool(term.get("checkpoint")), f"{k}.checkpoint", term.get("checkpoint"),
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
        _check(0.0 <= self.tau <= 1.0, "reward.tau", self.tau, "must lie in [0, 1]")
        for dim in DIMENSIONS:
            w = getattr(self.weights, dim)
            _check(w >= 0, f"reward.weights.{dim}", w, "must be non-negative")
        terms = {n: t for n, t in (self.terms or {}).items() if t is not None}  # null switches a term off
        _check(bool(terms), "reward.terms", self.terms, "must list at least one term")
        for name, term in terms.items():
            _check_term(name, term, self.tau)
            if str(term.get("_target_")) == _TERMS + "Similarity" and term.get("dimension") in DIMENSIONS:
                d = term["dimension"]
                _check(abs(float(term.get("weight", 1.0)) - getattr(self.weights, d)) < 1e-12,
                       f"reward.terms.{name}.weight", term.get("weight"),
                       f"differs from reward.weights.{d}={getattr(self.weights, d)}: set reward.weights.{d} "
                       f"(the term's weight follows it)")
        nw = self.normalize_weights
        _check(nw is None or isinstance(nw, bool) or (isinstance(nw, (list, tuple)) and all(d in DIMENSIONS for d in nw)),
               "reward.normalize_weights", nw, f"must be null, true, false or a list of dimensions {list(DIMENSIONS)}")


def validate_reward(node: Any) -> None:
    """The reward section's checks (:class:`RewardSchema`: tau, the weights, every term and its fields), one rule for
    every way a reward is built: train.py's config, the ms-swift plugin and TRL's reward functions. Raises
    ConfigError naming the first bad key (``reward.tau=5.0 must lie in [0, 1]``)."""
    _validate_section("reward", RewardSchema, node)


def reward_keys(node: Any) -> str:
    """The keys an override of the reward ``node`` may set, in one line (for an error that names a bad one)."""
    top = [str(k) for k in node if str(k) not in ("_target_", "weights", "terms", "effective_weights")]
    terms = [str(n) for n, t in (node.get("terms") or {}).items() if t is not None]
    return (", ".join(top + [f"weights.{d}" for d in DIMENSIONS])
            + f", terms.<name>.<field> (terms: {', '.join(terms)})")


@dataclass
class SyntheticSchema:
    num_vases: int = 32
    seed: int = 0
    val_fraction: float = 0.25
    detail: bool = False  # the figures' attributes, below the model's input resolution (vase.data.synthetic)

    def __post_init__(self) -> None:
        _check(self.num_vases >= 2, "data.synthetic.num_vases", self.num_vases, "must be at least 2")
        _check(0 < self.val_fraction < 1, "data.synthetic.val_fraction", self.val_fraction, "must lie in (0, 1)")


@dataclass
class DataSchema:
    _target_: str = "vase.data.datamodule.VaseDataModule"
    root: str = "data/synthetic"
    views: list[str] = field(default_factory=lambda: ["front", "back", "left", "right", "top", "bottom"])
    batch_size: int = 1
    eval_batch_size: int = 8
    num_workers: int = 0
    modality: str = "views"
    task: str = "caption"
    max_length: int = 4096
    synthetic: SyntheticSchema | None = None
    render: dict | None = None
    limit_train: int | None = None
    limit_val: int | None = None
    layout: str = "auto"
    split: dict | None = None
    retrieval: dict | None = None
    max_video_frames: int = 16
    zoom: bool = False
    zoom_width: Any = 1.0
    zoom_direct: Any = 5

    def __post_init__(self) -> None:
        _check(self.layout in ("auto", *LAYOUTS), "data.layout", self.layout, f"must be auto or one of {list(LAYOUTS)}")

        bad = [v for v in self.views if v not in VIEWS]
        _check(
            not bad and len(self.views) > 0,
            "data.views",
            list(self.views),
            f"must be a non-empty subset of {list(VIEWS)}",
        )
        _check(self.task in DATA_TASK_NAMES, "data.task", self.task,
               "must be caption, qa, both, all (both plus multiple-choice questions) or invrender")
        _check(self.modality in ("views", "orbit"), "data.modality", self.modality, "must be views or orbit")
        frames = int((self.render or {}).get("orbit_frames", 0) or 0)
        _check(self.modality != "orbit" or frames > 0, "data.modality", self.modality,
               "needs orbit frames: set render.orbit_frames (e.g. 16)")
        _check(self.batch_size >= 1, "data.batch_size", self.batch_size, "must be at least 1")
        # 0 would train on nothing and still mark the run finished: "no limit" is null
        _check(self.limit_train is None or self.limit_train >= 1, "data.limit_train", self.limit_train,
               "must be at least 1, or null for no limit")
        _check(self.limit_val is None or self.limit_val >= 0, "data.limit_val", self.limit_val,
               "must be non-negative (0 only when nothing is evaluated), or null for no limit")
        _check(self.max_length >= 32, "data.max_length", self.max_length, "must be at least 32")
        check_zoom(self.zoom_width, self.zoom_direct)


def check_zoom(width: Any, direct: Any) -> None:
    """``data.zoom_width`` and ``data.zoom_direct``: checked with the rest of the config and by the data module."""
    _check(isinstance(width, (int, float)) and 0.0 < float(width) <= 1.0, "data.zoom_width", width,
           "must be in (0, 1]: the share of the frieze's width the taught zoom call covers")
    _check(isinstance(direct, int) and 0 <= direct <= 5, "data.zoom_direct", direct,
           "must be 0 to 5: how many of the five other questions per vase are taught with the tool offered")


def check_retrieval(node: Any) -> None:
    """``retrieval.*``: checked before any model loads, whether or not retrieval is on (``k`` > 0)."""
    node = node or {}
    k = node.get("k", 0)
    _check(isinstance(k, int) and not isinstance(k, bool) and k >= 0, "retrieval.k", k,
           "must be a whole number >= 0 (0: off)")
    fmt = node.get("format") or "asked"
    _check(fmt in RETRIEVAL_FORMATS, "retrieval.format", fmt, f"must be one of {', '.join(RETRIEVAL_FORMATS)}")
    features = node.get("features") or "auto"
    _check(features in VIEW_FEATURES, "retrieval.features", features, f"must be one of {', '.join(VIEW_FEATURES)}")


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

    def __post_init__(self) -> None:
        _check(not self.orbit_video or self.orbit_frames > 0, "render.orbit_video", self.orbit_video,
               "needs render.orbit_frames > 0 (the frames the video is made of)")
        _check(self.on_error in ("raise", "skip"), "render.on_error", self.on_error, "must be 'raise' or 'skip'")
        _check(16 <= self.resolution <= 4096, "render.resolution", self.resolution, "must lie in [16, 4096]")
        _check(5 <= self.fov_deg <= 120, "render.fov_deg", self.fov_deg, "must lie in [5, 120] degrees")
        _check(self.orbit_frames >= 0, "render.orbit_frames", self.orbit_frames, "must be non-negative")


@dataclass(frozen=True)
class Decoding:
    """How evaluation decodes (``generation.*`` in evaluate.py, ``evaluate.*`` in train.py): vase's config alone. A
    downloaded checkpoint's ``generation_config.json`` (the hub's Qwen2.5-VL asks for sampling at temperature 0.1 with
    a repetition penalty of 1.05) is never merged in: greedy means greedy, with no penalty unless this says so.

    >>> Decoding.of({"do_sample": True, "temperature": 0.7}).record()["temperature"]
    0.7
    >>> Decoding().tag(), Decoding(repetition_penalty=1.05).tag() != ""
    ('', True)
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    repetition_penalty: float = 1.0

    @classmethod
    def of(cls, node: Any, key: str = "generation") -> Decoding:
        """The decoding that a config node (``generation`` or ``evaluate``) asks for; missing keys take the
        defaults; a bad value raises ConfigError naming ``<key>.<field>``."""
        get = node.get if hasattr(node, "get") else (lambda k, d=None: getattr(node, k, d))
        d = cls(**{f: get(f, default) for f, default in asdict(cls()).items() if get(f, None) is not None})
        def number(x: Any) -> bool:  # a number, not a word or a flag ("abc" must be a config error, not a ValueError)
            return isinstance(x, (int, float)) and not isinstance(x, bool)

        _check(isinstance(d.do_sample, bool), f"{key}.do_sample", d.do_sample, "must be true or false")
        _check(number(d.temperature) and d.temperature > 0, f"{key}.temperature", d.temperature, "must be positive")
        _check(number(d.top_p) and 0 < d.top_p <= 1, f"{key}.top_p", d.top_p, "must lie in (0, 1]")
        _check(number(d.top_k) and int(d.top_k) == d.top_k and d.top_k >= 0, f"{key}.top_k", d.top_k,
               "must be a whole number >= 0")
        _check(number(d.repetition_penalty) and d.repetition_penalty > 0, f"{key}.repetition_penalty",
               d.repetition_penalty, "must be positive")
        return d

    def record(self) -> dict[str, Any]:
        """What a results file records of how its answers were decoded."""
        return {**asdict(self), "source": "vase config (the checkpoint's generation_config.json is not read)"}

    def tag(self) -> str:
        """"" for greedy without a penalty (the default), else a short key of the settings: cached answers made
        with other settings are never reused."""
        if self == Decoding():
            return ""
        return "_dec" + hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]


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
        _check(str(self.dtype).lower() in DTYPES, "model.dtype", self.dtype, f"must be one of {list(DTYPES)}")


@dataclass
class MetricsSchema:
    clip: dict = field(default_factory=dict)
    text_encoder: dict = field(default_factory=dict)
    embedding_cache: str | None = None
    image_score: bool = True
    weights: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        backend = (self.clip or {}).get("backend", "open_clip")
        _check(backend in ("hf", "open_clip"), "metrics.clip.backend", backend, "must be 'hf' or 'open_clip'")
        for k, w in (self.weights or {}).items():
            _check(float(w) >= 0, f"metrics.weights.{k}", w, "must be non-negative")


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
        _check(self.min_side >= 1, "filter.min_side", self.min_side, "must be at least 1 (pixels)")
        _check(self.keep in ("manifest", "link", "copy"), "filter.keep", self.keep, "must be manifest, link or copy")
        _check(self.unusual_modes in ("convert", "reject"), "filter.unusual_modes", self.unusual_modes,
               "must be convert or reject")
        _check(self.batch_size >= 1, "filter.batch_size", self.batch_size, "must be at least 1")
        _check(self.num_workers >= 0, "filter.num_workers", self.num_workers, "must be non-negative")


SECTIONS: dict[str, type] = {
    "stage": StageSchema,
    "reward": RewardSchema,
    "data": DataSchema,
    "render": RenderSchema,
    "model": ModelSchema,
    "metrics": MetricsSchema,
    "filter": FilterSchema,
}


def load_option(group: str, option: str) -> DictConfig:
    """One option of a config group as its YAML file defines it (``conf/<group>/<option>.yaml``), for code that
    builds objects outside Hydra; the file stays the one source of its values."""
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        raise ConfigError(f"{group}={option!r} is not a known option; choose one of {choices} (files in {path.parent})")
    return OmegaConf.load(path)


def register_configs() -> None:
    """Put the schemas in Hydra's ConfigStore (group ``schema``), so ``--info`` and IDEs can show them."""
    cs = ConfigStore.instance()
    for name, cls in SECTIONS.items():
        cs.store(group="schema", name=name, node=cls)
    cs.store(group="schema", name="grpo", node=GRPOSchema)
    cs.store(group="schema", name="lora", node=LoraSchema)


def _full_key(section: str, e: OmegaConfBaseException) -> str:
    sub = getattr(e, "full_key", None) or ""
    if not sub:
        return section
    return sub if sub.startswith(section + ".") else f"{section}.{sub}"


def _validate_section(key: str, schema: type, node: Any) -> None:
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), node)
        OmegaConf.to_object(merged)  # runs __post_init__ range checks
    except ConfigError:
        raise
    except OmegaConfBaseException as e:
        full = _full_key(key, e)
        msg = str(e).splitlines()[0]
        raise ConfigError(f"{full}: {msg}") from None


def _resolved(cfg: DictConfig, key: str) -> DictConfig:
    """The section with its interpolations resolved (they may point anywhere in the config)."""
    try:
        return OmegaConf.create(OmegaConf.to_container(cfg[key], resolve=True))
    except OmegaConfBaseException as e:
        full = _full_key(key, e)
        raise ConfigError(f"{full}: {str(e).splitlines()[0]}") from None


def validate(cfg: DictConfig) -> None:
    """Check every section present in ``cfg``; raise ConfigError naming the first bad key."""
    if cfg.get("task_name") == "filter" and cfg.get("task") not in FILTER_TASKS:
        raise ConfigError(f"task={cfg.get('task')!r} is not a curation task; choose one of {', '.join(FILTER_TASKS)} "
                          f"(python -m vase.filter --help says what each does)")
    if cfg.get("task_name") == "evaluate" and cfg.get("task") not in EVAL_TASKS:
        raise ConfigError(f"task={cfg.get('task')!r} is not an evaluation task; choose one of {', '.join(EVAL_TASKS)} "
                          f"(python evaluate.py --help says what each does)")
    for key, schema in SECTIONS.items():
        if key in cfg and cfg[key] is not None:
            node = _resolved(cfg, key)
            if key == "stage":
                node = OmegaConf.masked_copy(
                    node, [k for k in ("name", "epochs", "batch_size", "grad_accum") if k in node]
                )
            if key in ("data", "filter"):  # the keys the schema knows; the rest are checked by their readers
                node = OmegaConf.masked_copy(node, [k for k in node if k in schema.__dataclass_fields__])
            _validate_section(key, schema, node)
    for key in ("stage", "followup"):
        if cfg.get(key) is not None:
            _validate_stage(key, _resolved(cfg, key))
    if cfg.get("trainer") is not None:
        _validate_trainer(_resolved(cfg, "trainer"))
    for key in ("evaluate.vqa", "vqa.protocol"):  # e.g. open+ll; checked here, before any model loads
        v = OmegaConf.select(cfg, key, default=None)
        if v:
            parts = ["open", "mc"] if v == "both" else str(v).split("+")
            _check(all(p in VQA_PROTOCOLS for p in parts), key, v,
                   "must be open, mc, ll, both, or several joined by '+' (open+ll)")
    if isinstance(cfg.get("retrieval"), DictConfig):
        check_retrieval(_resolved(cfg, "retrieval"))
    for key in ("generation", "evaluate"):  # the decoding of evaluate.py and of train.py's evaluation
        if isinstance(cfg.get(key), DictConfig):
            Decoding.of(_resolved(cfg, key), key)
    _validate_limits(cfg)
    _validate_owned_paths(cfg)
    _validate_reward_use(cfg)
    _validate_targets(cfg)
    _validate_added_keys(cfg)


_INSTANTIATE_KEYS = {"_target_", "_partial_", "_convert_", "_recursive_", "_args_"}
# dicts whose entries code iterates, so a user may add one (+callbacks.mine._target_=..., +logger.csv=...)
_OPEN_NODES = ("callbacks", "logger", "methods", "hydra", "tags", "reward.terms")


def _nearest(word: str, options: Any) -> str:
    close = difflib.get_close_matches(word, [str(o) for o in options], n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(sorted(map(str, options)))}"


def _import_target(target: str) -> Any:
    """The object a ``_target_`` names (Hydra's own lookup, without the ERROR line it logs before raising: vase
    reports the failure itself, in one line)."""
    logger = logging.getLogger("hydra.utils")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        return get_object(target)
    finally:
        logger.setLevel(level)


def _target_nodes(node: Any, path: str = "") -> Iterator[tuple[str, DictConfig]]:
    if not isinstance(node, DictConfig):
        return
    if "_target_" in node:
        yield path, node
    for k in node.keys():
        child = node._get_node(k)
        if isinstance(child, DictConfig) and not child._is_none():
            yield from _target_nodes(child, f"{path}.{k}" if path else str(k))


def _validate_targets(cfg: DictConfig) -> None:
    """Every ``_target_`` node's keys are arguments its target takes (a typo fails here, not after the model loads);
    an optimizer's learning rate is positive."""
    for path, node in _target_nodes(cfg):
        target = str(node._get_node("_target_")._value())
        try:
            fn = _import_target(target)
        except Exception as e:  # noqa: BLE001 - any import failure is the user's to see, before a model loads
            cause = e.__cause__ or e.__context__ or e
            raise ConfigError(f"{path}._target_={target!r} cannot be imported: {type(cause).__name__}: "
                              f"{str(cause).splitlines()[0] if str(cause) else ''}") from None
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # no signature to check the keys against (a builtin)
            continue
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            continue
        for key in node.keys():
            if key not in _INSTANTIATE_KEYS and key not in params:
                raise ConfigError(f"{path}.{key}: {target.rsplit('.', 1)[-1]} takes no argument {key!r}, so nothing "
                                  f"would read it{_nearest(str(key), [p for p in params if p != 'self'])}")
            if key in params:
                _check_argument_type(cfg, f"{path}.{key}", params[key], target)
        if path.endswith("optimizer") and "lr" in node:
            lr = OmegaConf.select(cfg, f"{path}.lr")
            _check(isinstance(lr, (int, float)) and lr > 0, f"{path}.lr", lr, "must be a positive number")


_PLAIN_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _check_argument_type(cfg: DictConfig, key: str, param: inspect.Parameter, target: str) -> None:
    """A value given to a plain annotated argument (``int``, ``float``, ``bool``, ``str``, optionally ``| None``) must
    be of that type: ``reconstruct.generator.rows=abc`` is refused here, not turned into a failure per object."""
    ann = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
    parts = [a.strip() for a in str(ann).split("|")]
    optional = "None" in parts
    kinds = [p for p in parts if p != "None"]
    if len(kinds) != 1 or kinds[0] not in _PLAIN_TYPES:
        return
    try:
        value = OmegaConf.select(cfg, key)
    except OmegaConfBaseException:
        return  # an interpolation that resolves only at run time: its reader checks it
    if value is None and optional:
        return
    ok = isinstance(value, _PLAIN_TYPES[kinds[0]]) and not (kinds[0] in ("int", "float") and isinstance(value, bool))
    _check(ok, key, value, f"must be {'a whole number' if kinds[0] == 'int' else 'a number' if kinds[0] == 'float' else kinds[0]}"
           f" ({target.rsplit('.', 1)[-1]} takes {param.name}: {ann})")


def _validate_added_keys(cfg: DictConfig) -> None:
    """A key added with ``+key=value`` (Hydra's advice for a key it does not know) must be one some code reads: the
    argument of a ``_target_`` (checked above) or an entry of an open dict (callbacks, loggers). A typo such as
    ``+stage.modul.lr=1`` is refused naming the nearest existing key, instead of running with it ignored."""
    added = [o.split("=", 1)[0].lstrip("+") for o in job_overrides() if o.startswith("+")]
    added = [k for k in added if "." in k and "@" not in k and "/" not in k and not k.startswith(_OPEN_NODES)]
    if not added:
        return
    try:  # the config as composed without the added keys: what the files define
        if not GlobalHydra.instance().is_initialized():
            return
        plain = [o for o in job_overrides() if not o.startswith("+")]
        base = compose(config_name=HydraConfig.get().job.config_name, overrides=plain)
    except (ValueError, OmegaConfBaseException):
        return
    for key in added:
        why = _unknown_key(base, key, targets=False)
        if why:
            raise ConfigError(f"+{why}")


def _unknown_key(base: DictConfig, key: str, targets: bool = True) -> str | None:
    """Why the dotted ``key`` names nothing in ``base`` (one line, with the nearest key), or None if it does. Below a
    ``_target_`` node the key must be an argument of the target (with ``targets``; else it is not checked here)."""
    node, parts = base, key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, DictConfig):
            return None
        where = ".".join(parts[:i]) or "the config"
        if "_target_" in node and part not in node:
            if not targets:
                return None
            target = str(node._get_node("_target_")._value())
            try:
                params = inspect.signature(_import_target(target)).parameters
            except Exception:  # noqa: BLE001 - validate() names an unimportable target once the config composes
                return None
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()) or part in params:
                return None
            return (f"{key}: {target.rsplit('.', 1)[-1]} takes no argument {part!r}, so nothing would read it"
                    f"{_nearest(part, [p for p in params if p != 'self'])}")
        if part not in node:
            return f"{key}: {where} has no key {part!r}, so nothing would read it{_nearest(part, list(node.keys()))}"
        node = node[part] if isinstance(node._get_node(part), DictConfig) else None
    return None


def _validate_limits(cfg: DictConfig) -> None:
    """``data.limit_val=0`` leaves nothing to evaluate on: refused where evaluation is asked for; ``sft.limit_train``
    (the shared SFT's own limit) is at least 1 like ``data.limit_train``."""
    ev = cfg.get("evaluate") or {}
    asked = cfg.get("task_name") == "evaluate" or any(ev.get(k) for k in ("before", "after"))
    _check(OmegaConf.select(cfg, "data.limit_val", default=None) != 0 or not asked, "data.limit_val", 0,
           "leaves no vase to evaluate (evaluate.before/after are on); give at least 1, or null for no limit")
    sft_limit = OmegaConf.select(cfg, "sft.limit_train", default=None)
    _check(sft_limit is None or sft_limit >= 1, "sft.limit_train", sft_limit, "must be at least 1, or null for no limit")


def _validate_reward_use(cfg: DictConfig) -> None:
    """A reward setting on a run whose only stage is SFT changes nothing: a reward sweep must train GRPO."""
    stage = cfg.get("stage")
    if stage is None or cfg.get("task_name") != "train" or stage.get("name") != "sft" or cfg.get("followup"):
        return
    keys = [o.split("=", 1)[0].lstrip("+~") for o in job_overrides()]
    reward_keys = [k for k in keys if k.startswith("reward.")]  # values, not the group's option (reward=vase6d)
    if reward_keys:
        raise ConfigError(f"{reward_keys[0]} is set, but stage=sft never uses the reward; add stage=grpo (sft_init=true "
                          f"starts every GRPO job from one shared SFT adapter, as sweep=reward_weights and sweep=tau do)")


def _validate_trainer(trainer: DictConfig) -> None:
    """The Lightning trainer's values that otherwise fail only after the model has loaded."""
    devices = trainer.get("devices", 1)
    ok = devices in ("auto", -1) or (isinstance(devices, int) and not isinstance(devices, bool) and devices >= 1) or (
        isinstance(devices, (list, tuple)) or OmegaConf.is_list(devices)
    ) or (isinstance(devices, str) and all(p.strip().isdigit() for p in devices.split(",") if p.strip()))
    _check(bool(ok), "trainer.devices", devices, "must be a positive integer, -1, 'auto', or a list of device ids")
    for key in ("max_steps", "max_epochs"):
        v = trainer.get(key)
        if v is not None:
            _check(isinstance(v, int) and not isinstance(v, bool) and v >= -1, f"trainer.{key}", v,
                   "must be an integer >= -1 (-1: no limit)")
    max_time = trainer.get("max_time")
    if max_time is not None:
        _check(isinstance(max_time, str) and re.fullmatch(r"\d+:\d{1,2}:\d{1,2}:\d{1,2}", max_time) is not None
               and any(int(p) for p in max_time.split(":")), "trainer.max_time", max_time,
               "must be a training-time budget DD:HH:MM:SS above zero (00:03:50:00), or null")
    acc = trainer.get("accelerator", "auto")
    _check(acc in ("cpu", "gpu", "cuda", "mps", "tpu", "auto"), "trainer.accelerator", acc,
           "must be one of cpu, gpu, cuda, mps, tpu, auto")
    prec = str(trainer.get("precision", "32-true"))
    known = ("64", "32", "16", "bf16", "64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true",
             "transformer-engine", "transformer-engine-float16")
    _check(prec in known, "trainer.precision", prec, f"must be one of {list(known)}")
    clip = trainer.get("gradient_clip_val")
    if clip is not None:
        _check(isinstance(clip, (int, float)) and clip >= 0, "trainer.gradient_clip_val", clip, "must be >= 0 or null")


def _cache_dir(cfg: DictConfig) -> Path | None:
    try:
        return Path(str(OmegaConf.select(cfg, "paths.cache_dir", throw_on_missing=True)))
    except OmegaConfBaseException:
        return None


def _validate_owned_paths(cfg: DictConfig) -> None:
    """What vase builds (tiny models, tiny encoders, synthetic vases) it builds only under ``paths.cache_dir``.

    A path the user gives is read, never written: asking to build a random tiny model or synthetic data at any
    other path is an error here, before anything is loaded, rather than a checkpoint or dataset replaced later.
    """
    cache = _cache_dir(cfg)
    if cache is None or "paths" not in cfg:
        return
    where = f"paths.cache_dir={str(cache)!r}"
    model = _resolved(cfg, "model") if cfg.get("model") is not None else None
    if model is not None and model.get("build_tiny") and not is_within(str(model.name_or_path), cache):
        raise ConfigError(
            f"model.name_or_path={model.name_or_path!r} with model.build_tiny=true would build a random tiny model "
            f"there; vase builds tiny models only under {where}. To load this checkpoint set model.build_tiny=false "
            f"(or choose model=qwen2_5_vl_3b / qwen2_5_vl_7b)")
    clip = OmegaConf.select(cfg, "metrics.clip")
    if clip is not None and clip.get("build_tiny"):
        clip = _resolved(cfg, "metrics").clip
        key, value = (("metrics.clip.model", clip.get("model")) if clip.get("backend", "open_clip") == "hf"
                      else ("metrics.clip.pretrained", clip.get("pretrained")))
        if value is None or not is_within(str(value), cache):
            arch = ("" if key == "metrics.clip.model" else
                    " and metrics.clip.model=<the open_clip architecture of these weights, e.g. ViT-B-32>")
            raise ConfigError(
                f"{key}={value!r} with metrics.clip.build_tiny=true would build a random tiny CLIP there; vase builds "
                f"tiny encoders only under {where}. To use these weights set metrics.clip.build_tiny=false{arch}")
    elif (clip is not None and clip.get("backend", "open_clip") == "open_clip"
          and clip.get("model") == TINY_OPEN_CLIP_NAME):
        raise ConfigError(
            f"metrics.clip.model={TINY_OPEN_CLIP_NAME!r} is vase's tiny test architecture, which exists only when vase "
            f"builds it (metrics.clip.build_tiny=true); for your own weights name their open_clip architecture, e.g. "
            f"metrics.clip.model=ViT-B-32")
    data = cfg.get("data")
    if data is not None and data.get("synthetic"):
        root = _resolved(cfg, "data").root
        if not is_within(str(root), cache):
            raise ConfigError(
                f"data.root={root!r} with data.synthetic set would generate synthetic vases into that folder; vase "
                f"generates them only under {where}. To read your dataset drop the synthetic settings "
                f"(data=vasevqa3d has none; experiment=demo sets them) or use data=synthetic")


def _validate_stage(key: str, stage: DictConfig) -> None:
    """A stage section (``stage``, or ``followup`` for a second stage in the same run) and its module."""
    fields = [k for k in ("name", "epochs", "batch_size", "grad_accum") if k in stage]
    _validate_section(key, StageSchema, OmegaConf.masked_copy(stage, fields))
    if "module" not in stage:
        return
    module = stage.module
    if "lora" in module and module.lora is not None:
        _validate_section(f"{key}.module.lora", LoraSchema, module.lora)
    if stage.get("name") == "grpo":
        names = [k for k in GRPOSchema.__dataclass_fields__ if k in module]
        try:
            _validate_section(f"{key}.module", GRPOSchema, OmegaConf.masked_copy(module, names))
        except ConfigError as e:
            raise ConfigError(str(e).replace("stage.module", f"{key}.module", 1)) from None


# ---------------------------------------------------------------- resolvers


def wandb_offline() -> bool:
    """W&B runs offline unless the user configured a key (WANDB_API_KEY or a netrc entry for api.wandb.ai)."""
    if os.environ.get("WANDB_MODE", "").lower() in ("online", "run"):
        return False
    if os.environ.get("WANDB_API_KEY"):
        return False
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return "api.wandb.ai" not in netrc.read_text()
    except OSError:
        return True


def tiny_key(overrides: Any = None) -> str:
    """``${vase.tiny_key:${model.tiny}}``: the tiny model's cache key, the fingerprint of its spec."""
    if overrides is not None and not isinstance(overrides, dict):
        overrides = OmegaConf.to_container(overrides, resolve=True)
    return spec_fingerprint(overrides)


def launch_dir() -> str:
    """``${vase.cwd:}``: the directory the command was launched from. Unlike ``${hydra:runtime.cwd}`` it resolves
    before Hydra sets its runtime config, which a multirun's sweep directory needs."""
    return os.getcwd()


_ABBREV = (("reward.weights.", "w_"), ("reward.", ""), ("stage.module.lora.", "lora_"), ("stage.module.", ""),
           ("stage.", ""), ("data.", ""), ("model.", "model_"))
_NOT_IN_NAMES = ("paths.", "logger", "hydra.", "sweep", "experiment", "callbacks.", "trainer.devices")


def run_name(prefix: str = "") -> str:
    """``${vase.run_name:<stage>}``: a W&B run name from the job's overrides (see :func:`name_from_overrides`)."""
    return name_from_overrides(job_overrides(), prefix)


def name_from_overrides(overrides: list[str], prefix: str = "") -> str:
    """A short run name from overrides; paths, loggers and Hydra's own settings are left out.

    >>> name_from_overrides(["reward.weights.shape=0.6", "seed=1", "paths.log_dir=/x", "stage=grpo"], "grpo")
    'grpo-w_shape=0.6-seed=1'
    >>> name_from_overrides([], "sft")
    'sft'
    """
    parts = []
    for o in overrides:
        key, _, value = o.partition("=")
        key = key.lstrip("+~")
        if any(key.startswith(p) for p in _NOT_IN_NAMES) or key in ("stage", "task"):
            continue
        for long, short in _ABBREV:
            if key.startswith(long):
                key = short + key[len(long):]
                break
        parts.append(f"{key}={value}")
    return "-".join([prefix, *parts]) if prefix else "-".join(parts) or "run"


def sweep_group() -> str | None:
    """``${vase.sweep_group:}``: in a multirun, the sweep's name and launch time (one W&B group per sweep); else null."""
    try:
        hc = HydraConfig.get()
    except ValueError:  # not inside a Hydra job
        return None
    if hc.mode != RunMode.MULTIRUN:
        return None
    name = hc.runtime.choices.get("sweep") or "multirun"
    return f"{name}-{Path(str(hc.sweep.dir)).name}"


def overrides_hash() -> str:
    """``${vase.overrides_hash:}``: a short hash of the job's overrides (what tells two jobs of a sweep apart; with
    the same code and defaults, equal overrides compose equal configs)."""
    return hashlib.sha256("\n".join(sorted(job_overrides())).encode()).hexdigest()[:8]


def run_tags(tags: Any = None) -> list[str]:
    """``${vase.tags:${tags}}``: the configured tags plus ``experiment:<name>``, ``sweep:<name>`` and ``cfg:<hash>``."""
    out = [str(t) for t in (tags or [])]
    try:
        choices = HydraConfig.get().runtime.choices
    except ValueError:  # not inside a Hydra job
        choices = {}
    for group in ("experiment", "sweep"):
        if choices.get(group):
            out.append(f"{group}:{choices[group]}")
    out.append(f"cfg:{overrides_hash()}")
    return out


def slurm_gpus(gpus_per_node: Any) -> int | None:
    """``${vase.slurm_gpus:${cluster.gpus_per_node}}``: the GPUs sbatch asks for; none on a CPU partition (0), where
    submitit would otherwise request ``--gpus-per-node=0`` and sbatch refuses it.

    >>> slurm_gpus(8), slurm_gpus(0), slurm_gpus(None)
    (8, None, None)
    """
    return int(gpus_per_node) if gpus_per_node else None


def slurm_tasks(tasks_per_node: Any, gpus_per_node: Any) -> int:
    """``${vase.slurm_tasks:${cluster.tasks_per_node},${cluster.gpus_per_node}}``: processes (Lightning ranks) per node:
    ``cluster.tasks_per_node`` when set, else one per GPU, and one on a CPU partition.

    >>> slurm_tasks(None, 8), slurm_tasks(None, 0), slurm_tasks(2, 0)
    (8, 1, 2)
    """
    if tasks_per_node not in (None, "", "null"):
        if int(tasks_per_node) < 1:
            raise ConfigError(f"cluster.tasks_per_node={tasks_per_node} must be at least 1 (or null: one per GPU)")
        return int(tasks_per_node)
    return max(int(gpus_per_node or 0), 1)


SLURM_LIMIT_CHECK_S = 30  # slurmctld tests time limits (and sends --signal's warning) about every 30 s
SLURM_STARTUP_S = 20  # what a job needs to start Python and install submitit's signal handler


def check_slurm_signal(timeout_min: Any, signal_delay_s: Any) -> None:
    """Refuse a time limit too short for the warning signal that submitit asks for (``--signal=USR2@delay``).

    slurmctld sends it at its first limit test (every ~30 s) at which the time left is under ``delay + 30`` s, so a
    job whose limit is not well above that gets USR2 at launch, before submitit's handler exists, and dies (exit 140)
    on every restart instead of checkpointing and requeueing.

    >>> check_slurm_signal(1440, 90)
    >>> check_slurm_signal(2, 90)
    Traceback (most recent call last):
    ...
    vase.errors.ConfigError: cluster.timeout_min=2 (120 s) leaves 0 s before SLURM may send the warning signal (hydra.launcher.signal_delay_s=90, plus up to 30 s between SLURM's limit tests); a job needs about 20 s to start and catch it. Raise cluster.timeout_min or lower hydra.launcher.signal_delay_s
    """
    if timeout_min in (None, "") or signal_delay_s in (None, ""):
        return
    limit = int(float(timeout_min) * 60)
    left = limit - int(signal_delay_s) - SLURM_LIMIT_CHECK_S
    if left < SLURM_STARTUP_S:
        raise ConfigError(f"cluster.timeout_min={timeout_min} ({limit} s) leaves {max(left, 0)} s before SLURM may "
                          f"send the warning signal (hydra.launcher.signal_delay_s={signal_delay_s}, plus up to "
                          f"{SLURM_LIMIT_CHECK_S} s between SLURM's limit tests); a job needs about {SLURM_STARTUP_S} s "
                          f"to start and catch it. Raise cluster.timeout_min or lower hydra.launcher.signal_delay_s")


def mlflow_uri(log_dir: str) -> str:
    """``${vase.mlflow_uri:<log_dir>}``: MLFLOW_TRACKING_URI when set (and not empty), else a SQLite store in the log
    folder (MLflow 3 refuses its old file store)."""
    return os.environ.get("MLFLOW_TRACKING_URI", "").strip() or f"sqlite:///{Path(log_dir).resolve()}/mlflow.db"


def slurm_partition_nodes(partition: str | None, run: Any = None) -> tuple[str, int] | None:
    """The partition's name and how many nodes it has (``sinfo``), the default partition when none is named; None
    where SLURM's tools are not here or the cluster does not answer (nothing to check against)."""
    if shutil.which("sinfo") is None:
        return None
    run = run or (lambda args: subprocess.run(args, capture_output=True, text=True, timeout=30))
    try:
        p = run(["sinfo", "-h", "-o", "%P %D"])
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    counts: dict[str, int] = {}
    default = None
    for line in p.stdout.splitlines():
        name, _, n = line.strip().partition(" ")
        if not n.strip().isdigit():
            continue
        if name.endswith("*"):
            name = default = name[:-1]
        counts[name] = counts.get(name, 0) + int(n)
    name = partition or default
    return (name, counts[name]) if name in counts else None


def check_slurm_nodes(nodes: Any, partition: Any, run: Any = None) -> None:
    r"""Refuse a job that asks for more nodes than its partition has: sbatch accepts it and it pends for ever.

    >>> ok = lambda args: type("P", (), {"returncode": 0, "stdout": "debug* 2\ngpu 8\n"})()
    >>> check_slurm_nodes(2, None, run=ok)
    >>> check_slurm_nodes(3, None, run=ok)
    Traceback (most recent call last):
    ...
    vase.errors.ConfigError: cluster.nodes=3 asks for more nodes than partition debug has (2); a job that asks for more pends for ever. Lower cluster.nodes or choose a larger partition with cluster.partition
    """
    if nodes in (None, ""):
        return
    found = slurm_partition_nodes(None if partition in (None, "") else str(partition), run)
    if found is not None and int(nodes) > found[1]:
        raise ConfigError(f"cluster.nodes={nodes} asks for more nodes than partition {found[0]} has ({found[1]}); a job "
                          f"that asks for more pends for ever. Lower cluster.nodes or choose a larger partition with "
                          f"cluster.partition")


def register_resolvers() -> None:
    for name, fn in (("vase.run_name", run_name), ("vase.sweep_group", sweep_group),
                     ("vase.overrides_hash", overrides_hash), ("vase.tags", run_tags),
                     ("vase.slurm_gpus", slurm_gpus), ("vase.slurm_tasks", slurm_tasks), ("vase.mlflow_uri", mlflow_uri)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
    if not OmegaConf.has_resolver("vase.wandb_offline"):
        OmegaConf.register_new_resolver("vase.wandb_offline", wandb_offline)
    if not OmegaConf.has_resolver("vase.cwd"):
        OmegaConf.register_new_resolver("vase.cwd", launch_dir)
    if not OmegaConf.has_resolver("vase.input_key"):
        OmegaConf.register_new_resolver("vase.input_key", path_key)
    if not OmegaConf.has_resolver("vase.tiny_key"):
        OmegaConf.register_new_resolver("vase.tiny_key", tiny_key)
    if not OmegaConf.has_resolver("vase.config_digest"):  # not cached: it reads the config it is resolved in
        OmegaConf.register_new_resolver("vase.config_digest", root_digest)
    if not OmegaConf.has_resolver("vase.run_dir"):
        # cached in the config too, so a sweep's jobs (and a requeued SLURM job's pickled config) keep one folder
        OmegaConf.register_new_resolver("vase.run_dir", run_dir, use_cache=True)


register_resolvers()
register_configs()


def preflight_overrides(argv: list[str], conf_dir: str | Path, config_name: str = "train",
                        tasks: dict[str, str] | None = None) -> None:
    """Check the overrides before Hydra composes: ``group=option`` against the files in ``conf_dir`` (``task=``
    against this entry point's own ``tasks``), and ``a.b=value`` against the keys the config has.

    Hydra's own messages for an unknown option or key span many lines; this raises ConfigError with one line naming
    the group and the options there are, or the key and the nearest one (the same line ``+a.b=value`` gets).
    """
    conf_dir = Path(conf_dir)
    resume = next((a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("resume=")), None)
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key in ("hydra.run.dir", "hydra.sweep.dir"):
            check_given_dir(value, key, resume if key == "hydra.run.dir" else None)  # before Hydra writes there
        if key == "hydra.run.dir" and not {"-m", "--multirun"} & set(argv):  # a multirun never writes there
            # held from here, before Hydra writes its .hydra/ files and log there: a second command given the same
            # folder while this one still starts up is refused before it writes anything
            claim(value, resume or "auto", overrides=[a for a in argv if "=" in a and not a.startswith("-")])
        if "." in key or "@" in key or "/" in key or key.startswith("hydra"):
            continue
        group = conf_dir / key
        if not group.is_dir() or value in ("null", ""):
            continue
        options = sorted(p.stem for p in group.glob("*.yaml"))
        if key == "task" and tasks is not None:
            options = [t for t in options if t in tasks]  # conf/task holds every entry point's tasks
        # a multirun sweep lists several (a,b); [a,b] selects several at once (logger=[wandb,mlflow])
        for v in value.strip("[]").split(","):
            v = v.strip()
            if v not in options:
                raise ConfigError(f"{key}={v!r} is not a known option; choose one of {options} (files in {group})")
    _check_override_keys(argv, conf_dir, config_name)


def _check_override_keys(argv: list[str], conf_dir: Path, config_name: str) -> None:
    """``a.b=value`` (no ``+``) for a key the composed config lacks: one line naming the nearest key, before Hydra's
    multi-line "not in struct" error. The config is composed from the group overrides alone (first option of a
    sweep list); anything this cannot compose is left for Hydra to report."""
    pairs = [a.split("=", 1) for a in argv if not a.startswith("-") and "=" in a]
    dotted = [k for k, _ in pairs if "." in k and not k.startswith(("+", "~", "hydra.")) and "@" not in k
              and "/" not in k]
    if not dotted:
        return
    groups = []
    for k, v in pairs:
        if "." in k.lstrip("+") or k.lstrip("+~").startswith("hydra") or "(" in v:
            continue
        groups.append(f"{k}={v.split(',')[0]}")
    try:
        with initialize_config_dir(config_dir=str(Path(conf_dir).resolve()), version_base="1.3"):
            base = compose(config_name=config_name, overrides=groups)
    except Exception:  # noqa: BLE001 - Hydra reports what it cannot compose itself
        return
    finally:
        GlobalHydra.instance().clear()
    for key in dotted:
        why = _unknown_key(base, key)
        if why:
            add = f" (a new entry is added with +{key}=...)" if key.startswith(_OPEN_NODES) else ""
            raise ConfigError(why + add)


CHECK_ONLY_ENV = "VASE_CHECK_CONFIG"
"""With ``VASE_CHECK_CONFIG=1`` an entry point composes and validates its config, says so and stops: how the tests
run every command of the README without training anything."""


def validated(cfg: DictConfig) -> bool:
    """Validate ``cfg`` (a bad value: one line and exit 2); True when the command should go on, False when
    ``VASE_CHECK_CONFIG=1`` asked only for the check (the run directory is marked ``checked``)."""
    or_exit(validate, cfg)
    if os.environ.get(CHECK_ONLY_ENV) != "1":
        return True
    set_status_held("checked")
    print(f"config ok: {' '.join(job_overrides())}")
    return False


def one_line(e: BaseException) -> str:
    """The message of a vase error as one line: an error raised in a DataLoader worker comes back wrapped in the
    worker's traceback ("Caught DataError in DataLoader worker process 0. Original Traceback ..."), whose last line
    is the original message.

    >>> one_line(ValueError("Caught DataError in DataLoader worker process 0.\\nOriginal Traceback (most recent "
    ...                     "call last):\\n  File x\\nvase.errors.DataError: /d/a.png: too large"))
    '/d/a.png: too large'
    """
    msg = str(e)
    if "\nOriginal Traceback" not in msg:
        return msg
    last = [x for x in msg.splitlines() if x.strip()][-1]
    head, _, rest = last.partition(": ")
    return rest if rest and " " not in head else last


def run_entry(body: Any, cfg: DictConfig) -> Any:
    """The one run lifecycle of every Hydra entry point (train.py, evaluate.py, ``python -m vase.filter``,
    ``vase.reconstruct``, ``vase.retrieval``), after :func:`validated`: ``body(cfg)``, then the job's run record says
    ``finished``. A vase error (a bad value, a bad input file): one line, the record ``failed`` with it, exit 2. A stop
    on a signal after saving (:class:`~vase.errors.Interrupted`): ``interrupted``, re-raised. Any other exception:
    ``failed`` with its one-line reason, re-raised (its traceback is the report). A process killed outright leaves
    ``running``, which readers see as ``killed`` (:func:`vase.runs.status_of`)."""
    job = job_dir()
    try:
        out = or_exit(body, cfg)
    except Interrupted:
        if job is not None:
            set_status(job, "interrupted")
        raise
    except Exception as e:
        if job is not None:
            set_status(job, "failed", f"{type(e).__name__}: {one_line(e)}")
        raise
    if job is not None and read_status(job).get("status") == "running":
        set_status(job, "finished")
    return out


def or_exit(check: Any, *args: Any) -> Any:
    """Run ``check(*args)`` and return what it returns; on a vase error (a bad config value, a bad input file) print
    its one line to stderr, mark the run directories this process holds as failed, and exit with status 2, the same
    for every entry point."""
    try:
        return check(*args)
    except VaseError as e:
        set_status_held("failed", one_line(e))
        print(f"{'config error' if isinstance(e, ConfigError) else 'error'}: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
