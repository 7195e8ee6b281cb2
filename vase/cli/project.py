"""A user's own project: ``--config-dir DIR`` names its ``conf/`` (experiments, sweeps, callbacks, loggers... in vase's
group folders), which comes before vase's own, so a file of the same name there is the one used (and said). The
project's code is imported from the current folder (``_target_: mypkg.terms.MyTerm``), as ``python -m`` would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hydra.core.plugins import Plugins

from vase import runs
from vase.config import CONF_DIR
from vase.config.entry_actions import (
    IMPORT_PLUGINS_FLAG,
    PROJECT_PLUGINS,
    listed_project_plugins,
    load_reader_plugins,
    take_config_dir,
)
from vase.config.validate import entry_keys
from vase.errors import ConfigError
from vase.provenance import PROJECT_ENV
from vase.runs import describe


def shadowed(folder: Path) -> list[str]:
    """The config files of ``folder`` that have the name of one of vase's own (``experiment/demo.yaml``): yours is
    used in place of vase's."""
    mine = {p.relative_to(folder).as_posix() for p in folder.rglob("*.yaml")}
    return sorted(rel for rel in mine if (CONF_DIR / rel).is_file())


def use_project(argv: list[str]) -> tuple[list[str], Path]:
    """Where a command composes from: the user's ``--config-dir`` (taken out of ``argv``; a line on stderr for each
    of its files that replaces one of vase's) or vase's own conf. Either way the current folder is put on the import
    path, so that a ``_target_`` of the user's module in the folder they run from imports (as ``python -m`` finds
    modules), with or without ``--config-dir``."""
    Plugins.instance()  # Hydra's scan of hydra_plugins first (vase's sweepers subclass what it loads), then vase's
    from hydra_plugins.vase_launchers import register  # lazy: after the scan (its module docstring)

    register()  # vase's configs after the user's folder, its sweepers and launchers: found from any folder
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the project's modules (_target_: mypkg...), as python -m finds them
    rest, folder = take_config_dir(argv)
    if folder is None:
        return rest, CONF_DIR
    # the project's code goes into every run record beside vase's: its git checkout, else the folder run from
    top = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    os.environ[PROJECT_ENV] = top.stdout.strip() if top.returncode == 0 and top.stdout.strip() else os.getcwd()
    for rel in shadowed(folder):
        print(f"note: {folder / rel} (yours) is used in place of vase's {rel.removesuffix('.yaml')}", file=sys.stderr)
    return rest, folder


HIDDEN_GROUPS = {"action", "schema", "shared", "sweep/space"}
"""Config groups no --help lists: evaluate.py's actions (its help lists them with what each does) and vase's internal
ones (the schemas, the files that presets share, a search's space)."""


def command_name(script: str) -> str:
    """How the user started an entry point: ``vase train`` (the ``vase`` command sets ``argv[0]``), ``vase-train``,
    or ``python train.py`` in a checkout."""
    given = Path(sys.argv[0]).name if sys.argv else ""
    return sys.argv[0] if sys.argv and sys.argv[0].startswith("vase ") else (
        given if given.startswith("vase-") else f"python {script}.py")


def groups_help(entry: str, conf: Path) -> str:
    """An entry point's config groups (those its primary config composes: `vase.config.validate.entry_keys`) and
    their options, one line each (``group: a, b``), from the user's project folder (``conf``, when given) and vase's
    own, less `HIDDEN_GROUPS`: what ``--help`` lists before the config."""
    own = entry_keys(entry)
    groups: dict[str, set[str]] = {}
    for d in dict.fromkeys([conf, CONF_DIR]):
        for folder, _, files in os.walk(d, followlinks=True):  # experiment/ and sweep/ are links in a checkout
            group = Path(folder).relative_to(d).as_posix()
            if group.split("/")[0] in own and group not in HIDDEN_GROUPS and not group.startswith("hydra"):
                groups.setdefault(group, set()).update(Path(f).stem for f in files if f.endswith(".yaml"))
    lines = [f"{g}: {', '.join(sorted(o))}" for g, o in sorted(groups.items()) if o]
    return (f"usage: {command_name(entry)} [group=option ...] [key=value ...]   (-m: a sweep)\n\n== Configuration "
            f"groups ==\nCompose your configuration from those groups (group=option)\n\n" + "\n".join(lines) + "\n")


def runs_main(argv: list[str] | None = None) -> int:
    """``vase runs``: `vase.runs.describe.main`. For one run or sweep of a user's project, its record ends with a
    ``plugins:`` line: the modules its project's ``conf/plugins.yaml`` lists, read as data and never imported from
    the record's folder (a run folder received from someone else runs none of its code when it is inspected), unless
    the user names the project now (``--config-dir conf``: imported from there, as ``vase train`` imports them) or
    asks for the record's own (``--import-plugins``); then whether each imports now (its 'again' needs it)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    trust = IMPORT_PLUGINS_FLAG in argv
    try:
        argv, conf = take_config_dir([a for a in argv if a != IMPORT_PLUGINS_FLAG])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rc = describe.main(argv)
    roots = [a for a in argv if not a.startswith("-")]
    if rc == 0 and len(roots) == 1 and (Path(roots[0]) / runs.RUN_FILE).is_file():
        line = plugins_line(roots[0], conf, trust)
        if line:
            print(line)
    return rc


def plugins_line(run: str | Path, conf: Path | None = None, trust: bool = False) -> str | None:
    """The ``plugins:`` line of `runs_main`: what the run's project lists and the installed packages add, and, where
    the user named where to import the project's from (``conf``, ``trust``), whether each imports now; None for a
    run of vase's own configs where no installed package adds any."""
    recorded = describe.project_conf_of(run)
    head = "  plugins:   "
    try:
        listed = listed_project_plugins(recorded)
    except ConfigError as e:
        return f"{head}{e}"
    if conf is None and not trust and listed:
        return (f"{head}{', '.join(listed)} (listed by {Path(str(recorded)) / PROJECT_PLUGINS}): not imported, since "
                f"reading a run runs none of its code; to check that each imports, run from its project with "
                f"--config-dir conf, or add {IMPORT_PLUGINS_FLAG} to import them from {Path(str(recorded)).parent}")
    try:
        loaded = load_reader_plugins(conf, recorded, trust)
    except ConfigError as e:
        return f"{head}{e}: 'again' needs it to import"
    source = conf if conf is not None else recorded if trust else None
    if not loaded:
        return f"{head}none (its project lists none, and no installed package adds any)" if recorded else None
    missing = [m for m in listed if m not in loaded]
    return (f"{head}{', '.join(loaded)}: each imports now"
            + (f" (from {Path(str(source)) / PROJECT_PLUGINS})" if source is not None and
               (Path(str(source)) / PROJECT_PLUGINS).is_file() else "")
            + (f"; its project listed {', '.join(missing)}, which {Path(str(conf)) / PROJECT_PLUGINS} does not"
               if missing and conf is not None else ""))
