"""The check of an entry point's command line before Hydra composes: ``group=option`` against the files in
``conf/``, ``a.b=value`` against the keys the config has, and a given run folder claimed; one line per problem."""

from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from vase.config.entry_actions import REGISTERS
from vase.config.renames import renamed_overrides
from vase.config.targets import nearest
from vase.config.validate import OPEN_NODES, unknown_key
from vase.errors import ConfigError, DataError, storage_problem
from vase.runs import check_given_dir, claim, log_root


def preflight_overrides(argv: list[str], conf_dir: str | Path, config_name: str = "train",
                        actions: dict[str, str] | None = None, project: list[Path] | None = None) -> list[str]:
    """Check the overrides before Hydra composes: ``group=option`` against the files in ``conf_dir`` (``action=``
    against this entry point's own ``actions``), and ``a.b=value`` against the keys the config has.

    Hydra's own messages for an unknown option or key span many lines; this raises ConfigError with one line naming
    the group and the options there are, or the key and the nearest one (the same line ``+a.b=value`` gets).
    ``project``: the user's own conf folder (``--config-dir``), whose options count too. Returns ``argv`` with the
    names 0.2 changed given their new ones (`renamed_overrides`, a deprecation line each): what Hydra is to compose.
    """
    argv = renamed_overrides(argv)
    conf_dir = Path(conf_dir)
    resume = next((a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("resume=")), None)
    extra, unknown = search_path_dirs(argv)
    # the user's project folder first (--config-dir), vase's conf/, the folders on the search path
    dirs = [*[Path(p) for p in project or [] if Path(p) != conf_dir], conf_dir, *extra]
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
        if not any((d / key).is_dir() for d in dirs) or value in ("null", "") or unknown:
            continue  # an option that only a package on the search path holds (pkg://...) is Hydra's to find
        options = sorted({p.stem for d in dirs for p in (d / key).glob("*.yaml")})
        if key == "action" and actions is not None:
            options = [t for t in options if t in actions]  # conf/action holds every entry point's actions
        # a multirun sweep lists several (a,b); [a,b] selects several at once (logger=[wandb,mlflow])
        for v in value.strip("[]").split(","):
            v = v.strip()
            if v not in options:
                where = ", ".join(str(d / key) for d in dirs if (d / key).is_dir())
                mine = (f"; an action of your own: its conf/action/{v}.yaml, and {REGISTERS}" if key == "action"
                        else "")
                raise ConfigError(f"{key}={v!r} is not a known option; choose one of {options} (files in {where})"
                                  f"{mine}")
    _check_override_keys(argv, conf_dir, config_name, dirs)
    if not {"--help", "-h", "--cfg", "-c", "--info", "--hydra-help"} & set(argv):  # those write nothing
        check_writable(log_dir_of(argv), "paths.log_dir")
    return argv


def search_path_dirs(argv: list[str]) -> tuple[list[Path], bool]:
    """The folders ``hydra.searchpath=[file:///a,...]`` adds to ``conf/`` (a user's own presets, loggers, actions), and
    whether it names a place that is not a folder (``pkg://...``), whose options this check cannot list."""
    given = next((a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("hydra.searchpath=")), None)
    if not given:
        return [], False
    dirs, other = [], False
    for entry in given.strip().strip("[]").split(","):
        entry = entry.strip().strip("'\"")
        if entry.startswith("file://"):
            dirs.append(Path(entry.removeprefix("file://")).expanduser())
        elif entry:
            other = True
    return dirs, other


def log_dir_of(argv: list[str]) -> Path:
    """The log folder a command will write its run under: ``paths.log_dir=`` when given, else the default's."""
    given = next((a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("paths.log_dir=")), None)
    return Path(given).expanduser() if given else log_root(Path.cwd())


MIN_FREE_BYTES = 1 << 20
"""What a run's folder needs free before Hydra writes its config files there (about 20 KB; Hydra's own failure to
write them is a multi-line report vase cannot shorten), with room to spare."""


def check_writable(folder: Path, key: str) -> None:
    """Refuse, in one line, a folder that cannot be written (read-only, forbidden) or whose disk is full (less than
    `MIN_FREE_BYTES` free) before Hydra writes there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
        free = shutil.disk_usage(folder).free
    except OSError as e:
        line = storage_problem(e)
        if line and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DataError(line) from None
        raise ConfigError(f"{key}={folder}: vase cannot write there ({e.strerror or e}); choose a folder you can write "
                          f"({key}=...)") from None
    if free < MIN_FREE_BYTES:
        raise DataError(f"no space left on the device writing {folder}: {free // 1024} KiB free, a run needs at least "
                        f"{MIN_FREE_BYTES >> 20} MiB; free space there, or write elsewhere ({key}=..., "
                        f"paths.cache_dir=...)")


def _check_override_keys(argv: list[str], conf_dir: Path, config_name: str, dirs: list[Path] | None = None) -> None:
    """``a.b=value`` (no ``+``) for a key the composed config lacks: one line naming the nearest key, before Hydra's
    multi-line "not in struct" error. The config is composed from the group overrides alone (first option of a
    sweep list); anything this cannot compose is left for Hydra to report. ``dirs``: the folders whose
    sub-folders are config groups (``conf_dir`` and the user's on the search path; ``conf_dir`` alone by default)."""
    dirs = dirs or [Path(conf_dir)]
    pairs = [a.split("=", 1) for a in argv if not a.startswith("-") and "=" in a]

    def group(k: str) -> bool:  # a config group (conf/<group>/, or the user's), possibly at a package (+stage@sft)
        return "." not in k and any((Path(d) / k.lstrip("+~").split("@")[0]).is_dir() for d in dirs)

    # a.b=value, and a top-level key=value that names no group (nosuchkey=1: Hydra's six-line block otherwise)
    dotted = [k for k, _ in pairs if not k.startswith(("+", "~", "hydra")) and "@" not in k and "/" not in k
              and not group(k)]
    # the sweeper's own settings (hydra.sweeper.top_k): a misspelt one was Hydra's six lines "not in struct"
    sweeper = [k for k, _ in pairs if k.startswith("hydra.sweeper.") and not k.startswith("hydra.sweeper.params.")]
    if not dotted and not sweeper:
        return
    groups = [f"{k}={v.split(',')[0]}" for k, v in pairs if group(k) and "(" not in v]
    groups += [f"{k}={v}" for k, v in pairs if k.lstrip("+") == "hydra.searchpath"]  # the user's own options
    try:
        # the first folder is the primary one (the user's project where --config-dir names it; vase's follows)
        with initialize_config_dir(config_dir=str(Path(dirs[0]).resolve()), version_base="1.3"):
            base = compose(config_name=config_name, overrides=groups, return_hydra_config=bool(sweeper))
    except Exception:  # noqa: BLE001 - Hydra reports what it cannot compose itself
        return
    finally:
        GlobalHydra.instance().clear()
    node = base.get("hydra", {}).get("sweeper") if sweeper else None
    for key in sweeper:
        part = key.split(".")[2]
        if node is not None and part not in node:
            target = str(node.get("_target_", "the sweeper")).rsplit(".", 1)[-1]
            raise ConfigError(f"{key}: {target} has no setting {part!r}"
                              f"{nearest(part, [k for k in node if k != '_target_'])}")
    for key in dotted:
        why = unknown_key(base, key)
        if why:
            add = f" (a new entry is added with +{key}=...)" if key.startswith(OPEN_NODES) else ""
            raise ConfigError(why + add)
