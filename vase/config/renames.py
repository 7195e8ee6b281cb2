"""Names vase 0.2 changed, accepted for one release with a one-line deprecation note: on the command line
(`renamed_overrides`, before Hydra composes) and in a config file written for the old names (`renamed_keys`, a user's
experiment with ``data: {task: qa}``, before validation). The words: docs/glossary.md#words.

>>> renamed_overrides(["data.task=qa", "+sft.data_task=both", "evaluate.vqa=mc", "seed=1"], say=lambda line: None)
['data.mix=qa', '+sft.data_mix=both', 'val.vqa=mc', 'seed=1']
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from vase.errors import ConfigError
from vase.runs.describe import PACKAGE_CONF  # vase's own configs: a new name there is a default

UNTIL = "0.3"
"""The release that drops the old names."""

RENAMED = {
    "task": "action",  # evaluate.py's and python -m vase.filter's config group: what the entry point does
    "data.task": "data.mix",  # which prompt tasks a run trains on
    "sft.data_task": "sft.data_mix",
    "evaluate.heldout_task": "val.heldout_mix",
    "task_name": "run_kind",  # which entry point made a run: its log folder and W&B job type
    "evaluate": "val",  # train.py's section: what is measured on the val split before and after each stage
    "question": "hypothesis",  # a sweep's block: what it compares, against what, on which measures (verdict.md)
}
"""Old key or group -> new one; an old section renames every key under it (``evaluate.vqa`` -> ``val.vqa``). "task"
now means only what a model is asked (``vase.prompt_tasks``); "evaluate" only the entry point ``evaluate.py``;
"question" only what a model is asked about a vase (a VQA question)."""

_OVERRIDE = re.compile(r"^([+~]*)([A-Za-z_][\w.]*)(=.*)?$")
_ABSENT = object()


STRICT_ENV = "VASE_DEPRECATIONS"
"""``VASE_DEPRECATIONS=error``: every old name is refused (one line naming the new one, exit 2) instead of accepted
with a deprecation line, so that a project's CI finds each before the release that drops it (docs/library.md)."""


def deprecation(old: str, new: str, where: str = "") -> str:
    """The one line a deprecated name gets (``where``: where it was given, ``on the command line`` or ``in <file>``).

    >>> deprecation("data.task", "data.mix")
    'deprecated: data.task is now data.mix (the old name is accepted until vase 0.3)'
    >>> deprecation("question", "hypothesis", "in sweeps/mine.yaml")
    'deprecated: question is now hypothesis, in sweeps/mine.yaml (the old name is accepted until vase 0.3)'
    """
    return f"deprecated: {old} is now {new}{f', {where}' if where else ''} (the old name is accepted until vase {UNTIL})"


def strict() -> bool:
    """Whether old names are refused (`STRICT_ENV`)."""
    return os.environ.get(STRICT_ENV, "").strip().lower() == "error"


_SAID: set[str] = set()


def say_deprecated(line: str) -> None:
    """Say a deprecation line on stderr once per process (a sweep's jobs compose one after another in it), or, with
    ``VASE_DEPRECATIONS=error``, refuse the old name: ConfigError."""
    if strict():
        raise ConfigError(refused([line]))
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


def refused(lines: list[str]) -> str:
    """Every old name of ``lines`` (deprecation lines) refused in one line, as `VASE_DEPRECATIONS=error` says them.

    >>> refused([deprecation("data.task", "data.mix", "on the command line"), deprecation("evaluate", "val")])
    'old names refused (VASE_DEPRECATIONS=error): data.task is now data.mix, on the command line; evaluate is now val'
    """
    said = [line.removeprefix("deprecated: ").replace(f" (the old name is accepted until vase {UNTIL})", "")
            for line in lines]
    return f"old name{'s' if len(said) > 1 else ''} refused (VASE_DEPRECATIONS=error): {'; '.join(said)}"


def say_each(lines: list[str], say: Callable[[str], None]) -> None:
    """Each deprecation line through ``say``; under `VASE_DEPRECATIONS=error` with vase's own `say_deprecated`, all
    of them refused at once (`refused`), so a project's CI learns every old name of a run from one try."""
    if lines and strict() and say is say_deprecated:
        raise ConfigError(refused(lines))
    for line in lines:
        say(line)


def renamed_overrides(argv: list[str], say: Callable[[str], None] = say_deprecated) -> list[str]:
    """``argv`` with each override of an old name (``data.task=qa``, ``task=vqa``, ``+sft.data_task=both``) given its
    new name, one deprecation line said for each; everything else as it was. An old name given beside its new one
    (``evaluate.after=false val.after=true``: the later would silently win) is refused in one line naming both, before
    any deprecation line."""
    out, given, lines = [], {}, []
    for arg in argv:
        m = _OVERRIDE.match(arg)
        new = renamed(m.group(2)) if m and not arg.startswith("-") else None
        if new is not None:
            lines.append(deprecation(m.group(2), new, "on the command line"))
            arg = f"{m.group(1)}{new}{m.group(3) or ''}"
            given.setdefault(new, []).append(m.group(2))
        elif m and not arg.startswith("-"):
            given.setdefault(m.group(2), []).append(m.group(2))
        out.append(arg)
    for new, names in given.items():
        old = next((n for n in names if n != new), None)
        if len(set(names)) > 1 and old is not None:
            raise ConfigError(f"{' and '.join(dict.fromkeys(names))} are both given on the command line, and {old} is "
                              f"the old name of {new}: the later would win without a word; give {new} alone")
    say_each(lines, say)
    return out


def renamed(key: str) -> str | None:
    """``key``'s new name: its own entry of `RENAMED`, else its section's (the longest old prefix) with the rest kept;
    None when nothing in it was renamed.

    >>> renamed("evaluate.vqa"), renamed("evaluate.heldout_task"), renamed("evaluation.x"), renamed("seed")
    ('val.vqa', 'val.heldout_mix', None, None)
    """
    if key in RENAMED:
        return RENAMED[key]
    old = max((k for k in RENAMED if key.startswith(k + ".")), key=len, default=None)
    return None if old is None else RENAMED[old] + key[len(old):]


def renamed_keys(cfg: DictConfig, say: Callable[[str], None] = say_deprecated,
                 given: list[str] | None = None) -> list[str]:
    """Move each old key a composed config holds (a config file written for the old names) to its new name, the old
    value winning over the new key's default (only a file written for the old names sets the old key); says one
    deprecation line each, naming the file it comes from (`files_with`), and returns the old keys it moved. ``given``:
    the command line's overrides; an old key of a file moved onto a key the command line sets is refused in one line
    naming both (the file's old value would silently win)."""
    moved, lines = [], []
    both_given(cfg, given)
    for old, new in RENAMED.items():
        value = OmegaConf.select(cfg, old, default=_ABSENT, throw_on_missing=False)
        if value is _ABSENT:
            continue
        where = files_with(old)
        parent, _, leaf = old.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        with open_dict(cfg):
            # a section (a user's file with evaluate: {vqa: mc}) merges into the new one's defaults
            OmegaConf.update(cfg, new, value, merge=isinstance(value, DictConfig), force_add=True)
            node.pop(leaf)
        lines.append(deprecation(old, new, f"in {', '.join(where)}" if where else ""))
        moved.append(old)
    say_each(lines, say)
    return moved


def both_given(cfg: DictConfig, given: list[str] | None = None, hc: Any = None) -> None:
    """Refuse, in one line naming both and their files, an old name that a composed config holds beside its new one
    given too: in one file (a sweep file with ``question:`` and ``hypothesis:``), in another file of the user's, or on
    the command line (``given``: its overrides). Moved, the old value would win over the new one without a word.
    ``hc``: the ``hydra`` node of a config Hydra has not set as its job's yet (a sweep's, at its start)."""
    for old, new in RENAMED.items():
        if OmegaConf.select(cfg, old, default=_ABSENT, throw_on_missing=False) is _ABSENT:
            continue
        where = files_with(old, hc)
        on_line = [o.lstrip("+~") for o in given or [] if (m := _OVERRIDE.match(o)) is not None
                   and (m.group(2) == new or m.group(2).startswith(new + "."))]
        beside = [f for f in files_with(new, hc)
                  if f in where or not any(d.resolve() == PACKAGE_CONF for d in Path(f).parents)]
        if beside:
            raise ConfigError(f"{old} in {', '.join(where) or 'a config file'} and {new} in {', '.join(beside)} are "
                              f"both given, and {old} is the old name of {new}: one would win without a word; give "
                              f"{new} alone")
        if on_line:
            raise ConfigError(f"{old} in {', '.join(where) or 'a config file'} and {on_line[0]} on the command line "
                              f"are both given, and {old} is the old name of {new}: the file's value would win without "
                              f"a word; rename it {new} in the file")


def files_with(key: str, hc: Any = None) -> list[str]:
    """The config files of the running Hydra job (or of the one whose ``hydra`` node is ``hc``: a sweep's, before its
    jobs) that set ``key`` at the top of the config: its primary config and each chosen option of a
    ``# @package _global_`` group (experiment, sweep, debug preset) on the search path, as paths; [] outside Hydra."""
    try:
        hc = HydraConfig.get() if hc is None else hc
    except ValueError:
        return []
    roots = [Path(str(src.path)) for src in hc.runtime.config_sources if src.schema == "file"]
    names = [f"{hc.job.config_name}.yaml", *(f"{g}/{o}.yaml" for g, o in hc.runtime.choices.items()
                                             if isinstance(o, str) and not g.startswith("hydra"))]
    found = []
    for name in names:
        for root in roots:
            path = root / name
            if not path.is_file():
                continue
            try:
                loaded = OmegaConf.load(path)
            except Exception:  # noqa: BLE001 - a file Hydra read already; this lookup only names it
                continue
            if isinstance(loaded, DictConfig) and OmegaConf.select(loaded, key, default=_ABSENT) is not _ABSENT:
                found.append(str(path))
            break  # the first root that holds the option is the one Hydra read
    return found
RENAMED_API = {
    "vase.config": {"EVAL_TASKS": "EVAL_ACTIONS", "FILTER_TASKS": "FILTER_ACTIONS", "EvalTask": "EvalAction",
                    "register_eval_task": "register_eval_action", "load_eval_task_plugins": "load_eval_action_plugins",
                    "tasks_help": "actions_help"},
    "vase.prompt_tasks": {"DATA_TASKS": "DATA_MIXES"},
    # the whole module moved to vase.reports.verdict (`MOVED_MODULES`); these names changed with it
    "vase.reports.question": {"question_of": "hypothesis_of", "question": "hypothesis",
                              "check_question": "check_hypothesis", "sweep_question": "sweep_hypothesis",
                              "write_question_answer": "write_verdict", "write_question_report": "write_verdict_report",
                              "question_columns": "hypothesis_columns", "answer_sweep": "decide_sweep",
                              "answer_metrics": "verdict_metrics", "answer_text": "verdict_text",
                              "short_answer": "short_verdict", "joined_answer": "joined_verdict"},
}
"""Python names 0.2 changed, per module: the old name still imports for one release, with a FutureWarning."""


MOVED_MODULES = {"vase.reports.question": "vase.reports.verdict"}
"""Modules 0.2 renamed: the old one still imports (with a FutureWarning), its names read from the new one."""


def old_name(module: str, namespace: dict, name: str) -> object:
    """A module's ``__getattr__``: an old name of `RENAMED_API` gives the new object with a FutureWarning (shown by
    default: one line naming both), any other unknown name the usual AttributeError. For a module of
    `MOVED_MODULES`, ``namespace`` is the new module's and an unrenamed name is simply read from it."""
    home = MOVED_MODULES.get(module, module)
    new = RENAMED_API.get(module, {}).get(name)
    if new is None:
        if home != module and name in namespace:
            return namespace[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    if home != module:  # a moved module's name, said where it lives now (the new module's own, or one it imports)
        home = getattr(namespace[new], "__module__", None) or home
    line = deprecation(f"{module}.{name}", f"{home}.{new}")
    if strict():  # VASE_DEPRECATIONS=error: a project's CI finds the old name now
        # ImportError, not AttributeError: `from module import name` would put its own words in place of these
        raise ImportError(f"{module}.{name} is refused under VASE_DEPRECATIONS=error: {line}")
    warnings.warn(line, FutureWarning, stacklevel=3)
    return namespace[new]
