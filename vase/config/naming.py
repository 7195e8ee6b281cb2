"""What names a run and a sweep: the resolvers behind W&B's run name, group and tags (``${vase.run_name:...}``,
``${vase.sweep_group:}``, ``${vase.tags:...}``, ``${vase.overrides_hash:}``), the keys a sweep varies, a name made
safe as one folder (``${vase.folder_name:...}``), the tiny model's cache key and the launch folder."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import OmegaConf

from vase.errors import ConfigError
from vase.models.tiny import spec_fingerprint
from vase.runs import job_overrides, read_status


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
    """``${vase.run_name:<stage>}``: a run's name in every dashboard, from its overrides (`name_from_overrides`); a
    sweep's job is named by the values its sweep gave it (``grpo-w_shape=0.6-seed=1``), what tells it from the other
    jobs of its group, and the overrides they share stay in each run's parameters."""
    overrides = job_overrides()
    swept = swept_keys()
    if swept:
        overrides = [o for o in overrides if o.partition("=")[0].lstrip("+~") in swept] or overrides
    return name_from_overrides(overrides, prefix)


def short_key(key: str) -> str:
    """A config key as run names and dashboard columns shorten it.

    >>> short_key("reward.weights.shape"), short_key("stage.module.optimizer.lr"), short_key("seed")
    ('w_shape', 'optimizer.lr', 'seed')
    """
    for long, short in _ABBREV:
        if key.startswith(long):
            return short + key[len(long):]
    return key


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
        if any(key.startswith(p) for p in _NOT_IN_NAMES) or key in ("stage", "action"):
            continue
        parts.append(f"{short_key(key)}={value}")
    return "-".join([prefix, *parts]) if prefix else "-".join(parts) or "run"


def sweep_group() -> str | None:
    """``${vase.sweep_group:}``: in a multirun, the sweep's name and launch time (one W&B group per sweep); else null."""
    try:
        hc = HydraConfig.get()
    except ValueError:  # not inside a Hydra job
        return None
    if hc.mode != RunMode.MULTIRUN:
        return None
    return group_name(hc.runtime.choices, hc.sweep.dir)


def group_name(choices: Any, sweep_dir: Any) -> str:
    """A sweep's name on the dashboards: its preset (``sweep=``), else its experiment (``experiment=ablation_quick``),
    else ``multirun``, and its folder's launch time.

    >>> group_name({"sweep": None, "experiment": "ablation_quick"}, "logs/x/multiruns/2026-12-01_10-00-00")
    'ablation_quick-2026-12-01_10-00-00'
    """
    choices = choices or {}
    name = choices.get("sweep") or choices.get("experiment") or "multirun"
    return f"{name}-{Path(str(sweep_dir)).name}"


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


def sweep_keys_of(overrides: Iterable[str], params: Any = None) -> list[str]:
    """The keys that a multirun's command-line ``overrides`` and its sweeper's ``params`` (``hydra.sweeper.params``)
    vary: a list of values, a range or a search space; in the order given, the command line's first.

    >>> sweep_keys_of(["reward.weights.shape=0,0.6", "stage=grpo", "seed=range(1,3)"], {"reward.tau": "0.6,0.7"})
    ['reward.weights.shape', 'seed', 'reward.tau']
    >>> sweep_keys_of(["stage=grpo"], {"lr": "interval(1e-5, 1e-3)"})
    ['lr']
    """
    out: list[str] = []
    for key, _ in _sweeps([str(o) for o in overrides] + [f"{k}={v}" for k, v in dict(params or {}).items()]):
        if key not in out:
            out.append(key)
    return out


def sweep_values_of(overrides: Iterable[str], params: Any = None) -> dict[str, list[str] | None]:
    """Each swept key's values as the sweep gives them (strings), or None where they cannot be listed (an interval
    a search samples from); the command line's win over ``params``, as in Hydra's sweepers.

    >>> sweep_values_of(["stage.module.beta=0.001,0.04", "seed=range(1,4)"], {"lr": "interval(1e-5, 1e-3)",
    ...                                                                      "seed": "1,2"})
    {'lr': None, 'seed': ['1', '2', '3'], 'stage.module.beta': ['0.001', '0.04']}
    """
    out: dict[str, list[str] | None] = {}
    for key, parsed in _sweeps([f"{k}={v}" for k, v in dict(params or {}).items()] + [str(o) for o in overrides]):
        try:
            out[key] = list(parsed.sweep_string_iterator())
        except HydraException:  # an interval: sampled, not listed
            out[key] = None
    return out


def _sweeps(given: list[str]) -> Iterator[tuple[str, Override]]:
    """Each sweep override of ``given`` (``key=a,b``, a range, a search space) with its key, in order; one Hydra cannot
    parse is left out (Hydra names a malformed override itself when it composes)."""
    parser = OverridesParser.create()
    for o in given:
        try:
            parsed = parser.parse_override(o)
        except HydraException:
            continue
        if parsed.is_sweep_override():
            yield parsed.get_key_element().lstrip("+~"), parsed


def view_order(keys: Iterable[str], hypothesis: Any = None) -> list[str]:
    """Swept ``keys`` in the order a runs table shows them: those the sweep's ``hypothesis`` compares, the others, its
    replicates (a seed, a data draw) last; the given order within each.

    >>> view_order(["seed", "stage.module.beta"], {"compare": "stage.module.beta", "replicates": ["seed"]})
    ['stage.module.beta', 'seed']
    """
    def listed(name: str) -> list[str]:
        v = (hypothesis or {}).get(name)
        return [str(v)] if isinstance(v, str) else [str(x) for x in (v or [])]

    compared, replicates = listed("compare"), listed("replicates")
    keys = list(keys)
    return sorted(keys, key=lambda k: 0 if k in compared else 2 if k in replicates else 1)


def swept_keys() -> list[str]:
    """In a job of a multirun: the keys its sweep varies (its command line, noted in the sweep folder's run record when
    it started, and ``hydra.sweeper.params``); [] in a single run or outside Hydra."""
    try:
        hc = HydraConfig.get()
    except ValueError:  # not inside a Hydra job
        return []
    if hc.mode != RunMode.MULTIRUN:
        return []
    noted = read_status(str(hc.sweep.dir)).get("overrides", [])
    return sweep_keys_of(noted, hc.sweeper.get("params"))


_UNSAFE = re.compile(r"[^A-Za-z0-9._,=+-]+")


def kind_dir(name: Any) -> str:
    """``${vase.kind_dir:${run_kind}}``: ``run_kind`` as the one folder under ``paths.log_dir`` that a run's folders go
    in, refused (ConfigError naming the key) where it is not one plain folder name: a sweep or experiment file sets
    it, and ``../../x`` put a whole sweep outside ``paths.log_dir`` without a word.

    >>> kind_dir("ablation_demo")
    'ablation_demo'
    >>> kind_dir("../../x")
    Traceback (most recent call last):
    vase.errors.ConfigError: run_kind='../../x' must be one folder name (letters, digits, '.', '_', '-'; not '.' or '..'): it names the folder under paths.log_dir that runs go in
    """
    text = str(name)
    if not re.fullmatch(r"[\w.-]+", text) or set(text) <= {"."}:
        raise ConfigError(f"run_kind={text!r} must be one folder name (letters, digits, '.', '_', '-'; not '.' or "
                          f"'..'): it names the folder under paths.log_dir that runs go in")
    return text


def folder_name(name: Any, limit: int = 120) -> str:
    """``${vase.folder_name:<text>}``: ``name`` as one safe folder name: every run of other characters (``/``, spaces,
    quotes) becomes ``_``, never ``.`` or ``..``, at most ``limit`` characters (a longer name keeps its start and a
    hash of the whole). Names come from overrides, which the user typed: they are never joined into a path as given.

    >>> folder_name("grpo-w_shape=0.6-seed=1"), folder_name("grpo-init_adapter=../../x y"), folder_name("..")
    ('grpo-w_shape=0.6-seed=1', 'grpo-init_adapter=.._.._x_y', '_')
    """
    text = _UNSAFE.sub("_", str(name)).strip() or "_"
    if set(text) <= {"."}:
        text = "_"
    if len(text) > limit:
        text = text[: limit - 9] + "-" + hashlib.sha256(str(name).encode()).hexdigest()[:8]
    return text
