"""The check of an entry point's command line before Hydra composes: ``group=option`` against the files in
``conf/``, ``a.b=value`` against the keys the config has, and a given run folder claimed; one line per problem."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from vase.config.validate import OPEN_NODES, unknown_key
from vase.errors import ConfigError
from vase.runs import check_given_dir, claim, log_root


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
    if not {"--help", "-h", "--cfg", "-c", "--info", "--hydra-help"} & set(argv):  # those write nothing
        check_writable(log_dir_of(argv), "paths.log_dir")


def log_dir_of(argv: list[str]) -> Path:
    """The log folder a command will write its run under: ``paths.log_dir=`` when given, else the default's."""
    given = next((a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("paths.log_dir=")), None)
    return Path(given).expanduser() if given else log_root(Path.cwd())


def check_writable(folder: Path, key: str) -> None:
    """Refuse, in one line, a folder that cannot be written (read-only, forbidden, full) before Hydra writes there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ConfigError(f"{key}={folder}: vase cannot write there ({e.strerror or e}); choose a folder you can write "
                          f"({key}=...)") from None


def _check_override_keys(argv: list[str], conf_dir: Path, config_name: str) -> None:
    """``a.b=value`` (no ``+``) for a key the composed config lacks: one line naming the nearest key, before Hydra's
    multi-line "not in struct" error. The config is composed from the group overrides alone (first option of a
    sweep list); anything this cannot compose is left for Hydra to report."""
    pairs = [a.split("=", 1) for a in argv if not a.startswith("-") and "=" in a]

    def group(k: str) -> bool:  # a config group (conf/<group>/), possibly at a package (+stage@sft)
        return "." not in k and (Path(conf_dir) / k.lstrip("+~").split("@")[0]).is_dir()

    # a.b=value, and a top-level key=value that names no group (nosuchkey=1: Hydra's six-line block otherwise)
    dotted = [k for k, _ in pairs if not k.startswith(("+", "~", "hydra")) and "@" not in k and "/" not in k
              and not group(k)]
    if not dotted:
        return
    groups = [f"{k}={v.split(',')[0]}" for k, v in pairs if group(k) and "(" not in v]
    try:
        with initialize_config_dir(config_dir=str(Path(conf_dir).resolve()), version_base="1.3"):
            base = compose(config_name=config_name, overrides=groups)
    except Exception:  # noqa: BLE001 - Hydra reports what it cannot compose itself
        return
    finally:
        GlobalHydra.instance().clear()
    for key in dotted:
        why = unknown_key(base, key)
        if why:
            add = f" (a new entry is added with +{key}=...)" if key.startswith(OPEN_NODES) else ""
            raise ConfigError(why + add)
