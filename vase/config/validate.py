"""Validation of a whole composed config before any model loads: every section against its schema, the stages, the
trainer, every ``_target_``'s arguments, added keys, owned paths and the reward's use; one line naming the first bad key."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

from hydra import compose
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vase.annotate.vocab import DIMENSIONS
from vase.choices import MIN_EVAL_VASES, TINY_OPEN_CLIP_NAME, VQA_PROTOCOLS
from vase.config.cluster import check_cluster
from vase.config.decoding import Decoding
from vase.config.entry_actions import EVAL_ACTIONS, FILTER_ACTIONS
from vase.config.options import CONF_DIR
from vase.config.renames import files_with
from vase.config.schemas import (
    SECTIONS,
    GRPOSchema,
    LoraSchema,
    RewardSchema,
    StageSchema,
    check_process_settings,
    check_retrieval,
    check_value,
)
from vase.config.targets import import_target, nearest, validate_targets
from vase.errors import ConfigError
from vase.io import is_within
from vase.runs import job_overrides


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
    if cfg.get("run_kind") == "filter" and cfg.get("action") not in FILTER_ACTIONS:
        raise ConfigError(f"action={cfg.get('action')!r} is not a curation action; choose one of {', '.join(FILTER_ACTIONS)} "
                          f"(python -m vase.filter --help says what each does)")
    if cfg.get("run_kind") == "evaluate" and cfg.get("action") not in EVAL_ACTIONS:
        raise ConfigError(f"action={cfg.get('action')!r} is not an evaluation action; choose one of {', '.join(EVAL_ACTIONS)} "
                          f"(python evaluate.py --help says what each does)")
    if isinstance(cfg.get("cluster"), DictConfig):
        check_cluster(cfg.cluster)  # before the interpolations that read it (trainer.num_nodes, the launcher's)
    # a reward key on a stage that never reads the reward, before the reward's ranges: fixing a range first would
    # only lead to this error next
    _validate_reward_use(cfg)
    check_process_settings(cfg)  # resume: a single run's folder refuses it as Hydra makes it; a sweep's jobs never make one
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
    _validate_reward_weights(cfg)
    for key in ("stage", "followup"):
        if cfg.get(key) is not None:
            _validate_stage(key, _resolved(cfg, key))
    if cfg.get("trainer") is not None:
        _validate_trainer(_resolved(cfg, "trainer"))
    for key in ("val.vqa", "vqa.protocol"):  # e.g. open+ll; checked here, before any model loads
        v = OmegaConf.select(cfg, key, default=None)
        if v:
            parts = ["open", "mc"] if v == "both" else str(v).split("+")
            check_value(all(p in VQA_PROTOCOLS for p in parts), key, v,
                   "must be open, mc, ll, both, or several joined by '+' (open+ll)")
    split = OmegaConf.select(cfg, "val.heldout_split", default=None)
    if split is not None:
        check_value(split in ("all", "search", "confirm"), "val.heldout_split", split,
                    "must be all, search or confirm (the two disjoint halves of the held-out vases)")
    if isinstance(cfg.get("retrieval"), DictConfig):
        check_retrieval(_resolved(cfg, "retrieval"))
    for key in ("generation", "val"):  # the decoding of evaluate.py and of train.py's evaluation
        if isinstance(cfg.get(key), DictConfig):
            Decoding.of(_resolved(cfg, key), key)
    _validate_limits(cfg)
    _validate_owned_paths(cfg)
    _validate_entry_keys(cfg)
    _validate_top_keys(cfg)
    validate_targets(cfg)
    _validate_added_keys(cfg)


ENTRIES = {"train": "train.py", "evaluate": "evaluate.py"}
"""The entry points whose configs share the conf/ tree (and so the debug, experiment and data groups)."""


def entry_keys(name: str) -> set[str]:
    """The top-level keys an entry point's primary config (``conf/<name>.yaml``) defines: its own keys and the groups
    its defaults list composes."""
    primary = OmegaConf.load(CONF_DIR / f"{name}.yaml")
    keys = {str(k) for k in primary if k != "defaults"}
    for entry in primary.get("defaults") or []:
        group = next(iter(entry)) if isinstance(entry, DictConfig) else str(entry)
        group = str(group).removeprefix("override ").removeprefix("optional ").lstrip("/").split("@")[0]
        keys.add(group.split("/")[0])
    return keys


def _validate_entry_keys(cfg: DictConfig) -> None:
    """Under evaluate.py, a key only train.py reads is refused in one line: ``debug=fast`` set
    ``val.max_new_tokens`` (train.py's evaluation) and ``trainer.max_steps``, and evaluate.py ran its full
    length without a word. (train.py is not checked the other way: it composes the zero-shot experiments, which name
    their row for evaluate.py.)"""
    try:
        name = HydraConfig.get().job.config_name
    except ValueError:  # outside a Hydra job (a test's composed config): nothing to compare with
        return
    if name != "evaluate":  # train.py composes evaluate.py's experiments too (the zero-shot ones name a row)
        return
    own = entry_keys(name)
    foreign = sorted(k for other in ENTRIES if other != name for k in entry_keys(other) - own if k in cfg)
    if not foreign:
        return
    choices = HydraConfig.get().runtime.choices
    preset = next((f"{g}={choices[g]}" for g in ("debug", "experiment") if choices.get(g)), None)
    others = ", ".join(ENTRIES[o] for o in ENTRIES if o != name)
    hint = ("; for a short evaluation: data.limit_val=2 generation.max_new_tokens=8" if name == "evaluate" else "")
    raise ConfigError(f"{', '.join(foreign)}: {others}'s key{'s' if len(foreign) > 1 else ''}, which "
                      f"{ENTRIES[name]} never reads{f' (set by {preset})' if preset else ''}{hint}")


_REFERENCE = re.compile(r"\$\{(?:oc\.select:|oc\.env:)?([A-Za-z_]\w*)")


def _validate_top_keys(cfg: DictConfig) -> None:
    """A key at the top of the config that no entry point defines (a user's file with ``folowup:`` or ``vall:``, where
    Hydra merges anything a file sets) is refused in one line naming the file and the nearest key, instead of being
    ignored; a key an interpolation reads (``${mylab.width}``) is the user's own setting and passes."""
    try:
        name = HydraConfig.get().job.config_name
    except ValueError:  # outside a Hydra job (a test's composed config): nothing to compare with
        return
    if name not in ENTRIES:
        return
    known = {k for entry in ENTRIES for k in entry_keys(entry)} | {"hydra"}
    # an evaluation action's file defines its own section (conf/action/vqa.yaml: vqa:), a package's action too
    action = HydraConfig.get().runtime.choices.get("action")
    if action:
        for root in (Path(str(src.path)) for src in HydraConfig.get().runtime.config_sources if src.schema == "file"):
            if (root / "action" / f"{action}.yaml").is_file():
                defined = OmegaConf.load(root / "action" / f"{action}.yaml")
                known |= {str(k) for k in defined if k != "defaults"} if isinstance(defined, DictConfig) else set()
                break
    read = set(_REFERENCE.findall(OmegaConf.to_yaml(cfg, resolve=False)))
    for key in cfg:
        if str(key) not in known and str(key) not in read:
            where = files_with(str(key))
            raise ConfigError(f"{key}: no such key at the top of the config (set in {', '.join(where) or 'a config file'}"
                              f"), so nothing would read it{nearest(str(key), sorted(known - {'hydra'}))}")


# dicts whose entries code iterates, so a user may add one (+callbacks.mine._target_=..., +logger.csv=...)
OPEN_NODES = ("callbacks", "logger", "methods", "hydra", "tags", "reward.terms")


def _validate_added_keys(cfg: DictConfig) -> None:
    """A key added with ``+key=value`` (Hydra's advice for a key it does not know) must be one some code reads: the
    argument of a ``_target_`` (checked above) or an entry of an open dict (callbacks, loggers). A typo such as
    ``+stage.modul.lr=1`` is refused naming the nearest existing key, instead of running with it ignored."""
    added = [o.split("=", 1)[0].lstrip("+") for o in job_overrides() if o.startswith("+")]
    added = [k for k in added if "." in k and "@" not in k and "/" not in k and not k.startswith(OPEN_NODES)]
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
        why = unknown_key(base, key, targets=False)
        if why:
            raise ConfigError(f"+{why}")


def unknown_key(base: DictConfig, key: str, targets: bool = True) -> str | None:
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
                params = inspect.signature(import_target(target)).parameters
            except Exception:  # noqa: BLE001 - validate() names an unimportable target once the config composes
                return None
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()) or part in params:
                return None
            return (f"{key}: {target.rsplit('.', 1)[-1]} takes no argument {part!r}, so nothing would read it"
                    f"{nearest(part, [p for p in params if p != 'self'])}")
        if part not in node:
            return f"{key}: {where} has no key {part!r}, so nothing would read it{nearest(part, list(node.keys()))}"
        node = node[part] if isinstance(node._get_node(part), DictConfig) else None
    return None


def _validate_limits(cfg: DictConfig) -> None:
    """``data.limit_val`` below `MIN_EVAL_VASES` leaves too little to score (FID compares two sets of captions, each
    of at least 2): refused where evaluation is asked for; ``sft.limit_train`` (the shared SFT's own limit) is at
    least 1 like ``data.limit_train``."""
    ev = cfg.get("val") or {}
    evaluating = cfg.get("run_kind") == "evaluate"
    captions = (evaluating and cfg.get("action", "generate") == "generate") or any(ev.get(k) for k in ("before", "after"))
    limit = OmegaConf.select(cfg, "data.limit_val", default=None)
    check_value(limit != 0 or not (evaluating or captions), "data.limit_val", limit,
                "leaves no vase to evaluate; give at least 1, or null for no limit")
    check_value(limit is None or limit >= MIN_EVAL_VASES or not captions, "data.limit_val", limit,
                f"leaves {'no vase' if limit == 0 else f'{limit} vase'} to evaluate (val.before/after are on; "
                f"FID needs at least {MIN_EVAL_VASES}); give at least {MIN_EVAL_VASES}, or null for no limit")
    sft_limit = OmegaConf.select(cfg, "sft.limit_train", default=None)
    check_value(sft_limit is None or sft_limit >= 1, "sft.limit_train", sft_limit, "must be at least 1, or null for no limit")


def _validate_reward_weights(cfg: DictConfig) -> None:
    """A GRPO run whose every reward term weighs 0 would train on a reward of 0 (a loss of 0 at every step): refused.
    Run after the sections' checks, which name a weight's broken interpolation first."""
    stages = [OmegaConf.select(cfg, k, default=None) for k in ("stage.name", "followup.name")]
    terms = OmegaConf.select(cfg, "reward.terms", default=None)
    if "grpo" in stages and isinstance(terms, DictConfig):
        weights = {name: t.get("weight", 1.0) for name, t in terms.items() if isinstance(t, DictConfig)}
        if weights and all(isinstance(w, (int, float)) and float(w) == 0.0 for w in weights.values()):
            raise ConfigError("every reward term weighs 0 (reward.weights.* and reward.terms.<term>.weight): GRPO would "
                              "train on a reward of 0, a loss of 0 at every step, and learn nothing; give at least one "
                              "term a weight above 0")


def _validate_reward_use(cfg: DictConfig) -> None:
    """A reward setting on a run whose only stage is SFT changes nothing: a reward sweep must train GRPO. Run before
    the sections' checks, so that a reward value's range is never the first of two errors on the default stage."""
    stage = cfg.get("stage")
    if stage is None or cfg.get("run_kind") != "train" or stage.get("name") != "sft" or cfg.get("followup"):
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
    check_value(bool(ok), "trainer.devices", devices, "must be a positive integer, -1, 'auto', or a list of device ids")
    for key in ("max_steps", "max_epochs"):
        v = trainer.get(key)
        if v is not None:
            check_value(isinstance(v, int) and not isinstance(v, bool) and v >= -1, f"trainer.{key}", v,
                   "must be an integer >= -1 (-1: no limit)")
    max_time = trainer.get("max_time")
    if max_time is not None:
        check_value(isinstance(max_time, str) and re.fullmatch(r"\d+:\d{1,2}:\d{1,2}:\d{1,2}", max_time) is not None
               and any(int(p) for p in max_time.split(":")), "trainer.max_time", max_time,
               "must be a training-time budget DD:HH:MM:SS above zero (00:03:50:00), or null")
    acc = trainer.get("accelerator", "auto")
    check_value(acc in ("cpu", "gpu", "cuda", "mps", "tpu", "auto"), "trainer.accelerator", acc,
           "must be one of cpu, gpu, cuda, mps, tpu, auto")
    prec = str(trainer.get("precision", "32-true"))
    known = ("64", "32", "16", "bf16", "64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true",
             "transformer-engine", "transformer-engine-float16")
    check_value(prec in known, "trainer.precision", prec, f"must be one of {list(known)}")
    clip = trainer.get("gradient_clip_val")
    if clip is not None:
        check_value(isinstance(clip, (int, float)) and clip >= 0, "trainer.gradient_clip_val", clip, "must be >= 0 or null")


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


def validate_reward(node: Any) -> None:
    """The reward section's checks (`RewardSchema`: tau, the weights, every term and its fields), one rule for
    every way a reward is built: train.py's config, the ms-swift plugin and TRL's reward functions. Raises
    ConfigError naming the first bad key (``reward.tau=5.0 must lie in [0, 1]``)."""
    _validate_section("reward", RewardSchema, node)


def reward_keys(node: Any) -> str:
    """The keys an override of the reward ``node`` may set, in one line (for an error that names a bad one)."""
    top = [str(k) for k in node if str(k) not in ("_target_", "weights", "terms", "effective_weights")]
    terms = [str(n) for n, t in (node.get("terms") or {}).items() if t is not None]
    return (", ".join(top + [f"weights.{d}" for d in DIMENSIONS])
            + f", terms.<name>.<field> (terms: {', '.join(terms)})")
