"""vase's commands, installed with the package (``pip install vase``, or ``pip install -e .`` in a checkout):

    vase train experiment=demo                 # = vase-train = python train.py in a checkout
    vase evaluate action=vqa adapter=<run>/adapter
    vase data-check /data/VaseVQA-3D           # any tool below: vase <command> --help
    vase --version

Each command is the module ``python -m`` runs in a checkout (`COMMANDS`), so a checkout and an installed wheel run the
same code. Configs come from the package (``vase/conf``: every group, experiment and sweep); runs, caches and
renders go under the current folder (``paths.root_dir``) or where the config points, never into the package.
"""

from __future__ import annotations

import importlib
import runpy
import sys

from vase.cli.version import version_line
from vase.config.renames import deprecation, say_deprecated
from vase.errors import ConfigError

COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("vase.cli.train:main", "train, a sweep with -m (Hydra overrides: vase train --help lists the groups)"),
    "evaluate": ("vase.cli.evaluate:main", "an evaluation action: generate, score, vqa, leaderboard, export, ..."),
    "data-check": ("vase.data.check", "every problem of a dataset folder, before a long run"),
    "render": ("vase.data.render", "render a dataset's views (the cache, never the dataset's folder)"),
    # a function, not the module run as __main__: vase's own imports have loaded vase.runs already, and runpy would warn;
    # with the plugins loaded as every command loads them
    "runs": ("vase.cli.project:runs_main", "the runs and sweeps of a log folder: how each ended, what made it, how to rerun it"),
    # a function, not the module run as __main__: a plugin registers its report kind in the module vase imports
    "verdict": ("vase.reports.verdict:main", "a sweep's verdict again, from its folder (its hypothesis: block)"),
    "power": ("vase.reports.power", "the smallest difference a held-out set can detect"),
    "sanity": ("vase.sanity", "the GRPO learning check"),
    "filter": ("vase.filter", "curate museum photos: quality, fragments, best view"),
    "retrieval": ("vase.retrieval", "retrieval-augmented captions"),
    "reconstruct": ("vase.reconstruct", "image-to-3D reconstruction"),
    "config-reference": ("vase.docsgen.config_reference", "write the configuration reference"),
    "changelog": ("vase.cli.version:changelog_main", "what changed in each version, and what bumps what"),
    "init": ("vase.cli.init:main", "a new project on vase: conf, a package, pyproject.toml, tests (vase init <dir>)"),
}
"""``vase <command>``: what it runs (``module:function``, or a module run as ``python -m`` runs it) and its line."""

RENAMED_COMMANDS = {"question": "verdict"}
"""Old command -> new one, accepted until vase 0.3 with one deprecation line (`vase.config.renames.deprecation`)."""


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return ("usage: vase <command> [args...]   (vase <command> --help for its own)\n\n" + "\n".join(lines)
            + "\n\n  --version  vase's version and the code it runs\n")


def main(argv: list[str] | None = None) -> int:
    """The ``vase`` command: ``vase <command> args...`` runs that command as if it were ``python -m <module> args...``
    (its own ``--help``, exit status and messages)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0
    if args[0] == "--version":
        print(version_line())
        return 0
    if args[0] in RENAMED_COMMANDS:
        try:
            say_deprecated(deprecation(f"vase {args[0]}", f"vase {RENAMED_COMMANDS[args[0]]}"))
        except ConfigError as e:  # VASE_DEPRECATIONS=error
            print(f"vase: {e}", file=sys.stderr)
            return 2
        args[0] = RENAMED_COMMANDS[args[0]]
    if args[0] not in COMMANDS:
        print(f"vase: {args[0]!r} is no command; choose one of {', '.join(COMMANDS)} (vase --help)", file=sys.stderr)
        return 2
    target, _ = COMMANDS[args[0]]
    sys.argv = [f"vase {args[0]}", *args[1:]]
    if ":" in target:
        module, function = target.split(":")
        return getattr(importlib.import_module(module), function)() or 0
    runpy.run_module(target, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
