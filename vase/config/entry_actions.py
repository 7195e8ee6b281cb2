"""The actions each entry point takes: ``evaluate.py action=...`` (evaluation actions, one registry: `EVAL_ACTIONS`) and
``python -m vase.filter action=...`` (curation actions, `FILTER_ACTIONS`), with their help.

An evaluation action is one module of `vase.pipeline.actions` (its `EvalAction`, ``ACTION``: what the early checks need to
know about it; and its ``run``) and its ``conf/action/<name>.yaml``. `vase.pipeline.evaluate.run_evaluation` dispatches
from this registry only. The registry imports nothing heavy: the action modules import their libraries inside ``run``,
so ``--help`` and the config check stay fast.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from vase.config.renames import deprecation, say_deprecated
from vase.errors import ConfigError


@dataclass(frozen=True)
class EvalAction:
    """One ``evaluate.py action=<name>``.

    ``help``: its one line in ``python evaluate.py --help``. ``run``: ``"module:function"`` (a module of
    `ACTION_PACKAGE` leaves it out: its own ``run``), the function taking the composed config and returning a dict (``scores`` / ``rows`` / ``table`` go to the loggers). ``loads_model``:
    the model (``cfg.model``) is checked before anything loads, always (True) or when the predicate on the config
    says so. ``reads_split``: it evaluates the examples of ``split``, so an empty split is refused before a load.
    ``logs``: a tracking server is checked first and the results go to the loggers. ``writes``: the files it writes
    beside ``output`` (``{name}``: output's own name, ``{stem}``: its name without suffix); one that exists and is
    not this run's is refused before any work. ``precheck``: ``"module:function"`` run on the config before all else
    (a refusal of its own inputs)."""

    help: str
    run: str = ""
    loads_model: bool | Callable[[Any], bool] = False
    reads_split: bool = False
    logs: bool = True
    writes: tuple[str, ...] = ("{name}", "{stem}.md")
    precheck: str | None = None

    def function(self, field: str = "run") -> Callable[[Any], Any]:
        """The function ``run`` (or ``precheck``) names, imported now."""
        target = getattr(self, field)
        module, _, name = target.partition(":")
        found = getattr(importlib.import_module(module), name, None)
        if not callable(found):
            raise ImportError(f"{module} has no function {name} (EvalAction.{field}={target!r})")
        return found

    def checks_model(self, cfg: Any) -> bool:
        return self.loads_model(cfg) if callable(self.loads_model) else bool(self.loads_model)

    def written(self, output: str | Path) -> list[Path]:
        out = Path(str(output))
        return [out.parent / w.format(name=out.name, stem=out.stem) for w in self.writes]


ACTION_PACKAGE = "vase.pipeline.actions"
"""The package whose modules are vase's evaluation actions: ``<action>.py`` with ``ACTION`` and ``run`` (its docstring)."""
FIRST_ACTION = "generate"
"""The default action, listed first; the others follow by name."""


class EvalActions(MutableMapping[str, EvalAction]):
    """``evaluate.py action=...``: the one registry of evaluation actions. vase's own are the modules of `ACTION_PACKAGE`,
    found by their names and imported when the registry is first read (each module's top imports nothing heavy); a
    package's own are added by `register_eval_action`."""

    def __init__(self, package: str) -> None:
        self.package = package
        self._actions: dict[str, EvalAction] | None = None

    def _found(self) -> dict[str, EvalAction]:
        if self._actions is None:
            pkg = importlib.import_module(self.package)
            names = sorted((m.name for m in pkgutil.iter_modules(pkg.__path__)
                            if not m.name.startswith("_") and m.name != "common"),
                           key=lambda n: (n != FIRST_ACTION, n))
            found: dict[str, EvalAction] = {}
            for name in names:
                module = importlib.import_module(f"{self.package}.{name}")
                action = getattr(module, "ACTION", None)
                if not isinstance(action, EvalAction):
                    raise ImportError(f"{module.__name__} is in {self.package} but has no ACTION (an EvalAction): "
                                      f"every module there but common is an evaluation action")
                found[name] = action if action.run else replace(action, run=f"{module.__name__}:run")
            self._actions = {**found, **(self._actions or {})}
        return self._actions

    def __getitem__(self, name: str) -> EvalAction:
        return self._found()[name]

    def __setitem__(self, name: str, action: EvalAction) -> None:
        self._found()[name] = action

    def __delitem__(self, name: str) -> None:
        del self._found()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())


EVAL_ACTIONS = EvalActions(ACTION_PACKAGE)
"""``evaluate.py action=...``: the one registry of evaluation actions (``python evaluate.py --help`` lists them)."""


PLUGIN_GROUP = "vase.eval_actions"
"""The entry-point group a package names its evaluation actions' module in (``[project.entry-points."vase.eval_actions"]``,
``count = "mypkg.actions"``): ``evaluate.py`` imports each such module before it reads its command line, and the module
registers its actions (`register_eval_action`)."""
OLD_PLUGIN_GROUP = "vase.eval_tasks"
"""The group's name before 0.2, still read for one release (with a deprecation line)."""


def load_eval_action_plugins() -> list[str]:
    """Import the modules installed packages name under `PLUGIN_GROUP`; returns their names. A module that fails to
    import is one line naming it and its package (ConfigError), not a traceback."""
    loaded = []
    old = list(entry_points(group=OLD_PLUGIN_GROUP))
    if old:
        say_deprecated(deprecation(f"entry-point group {OLD_PLUGIN_GROUP}", PLUGIN_GROUP))
    for ep in [*entry_points(group=PLUGIN_GROUP), *old]:
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - another package's module: its failure is named, not raised raw
            package = ep.dist.name if ep.dist else "?"
            raise ConfigError(f"evaluation-action plugin {ep.name} = {ep.value} (package {package}) failed to import: "
                              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        loaded.append(ep.value)
    return loaded


PROJECT_PLUGINS = "plugins.yaml"
"""In a user's project's conf folder: ``modules: [mylab.actions, ...]``, the project's modules every vase command
imports before it runs (each registers what it adds: an evaluation action, a report kind, a prompt task or a training
mix), from the folder the command runs in, with no install."""
REGISTERS = ("register it from a module of yours: list the module in your project's conf/plugins.yaml (modules: "
             "[mylab.ext]) and give --config-dir conf, or name it in an installed package's entry-point group "
             "vase.eval_actions")
"""What a line about an unknown extension says registers one (an action, a report kind, a training mix)."""


def listed_project_plugins(conf: str | Path | None) -> list[str]:
    """The modules a project's ``<conf>/plugins.yaml`` (`PROJECT_PLUGINS`) lists, read as data: nothing is imported
    ([] where there is no such file). A file that is no list of modules is one line naming it (ConfigError)."""
    path = Path(conf) / PROJECT_PLUGINS if conf else None
    if path is None or not path.is_file():
        return []
    try:
        listed = OmegaConf.to_container(OmegaConf.load(path)).get("modules")
    except Exception as e:  # noqa: BLE001 - a file of the user's: one line naming it
        raise ConfigError(f"{path}: not a plugins file ({type(e).__name__}: {str(e).splitlines()[0]}); write "
                          f"modules: [mylab.ext, ...]") from None
    if not isinstance(listed, list) or not all(isinstance(m, str) and m for m in listed):
        raise ConfigError(f"{path}: modules must be a list of module names (modules: [mylab.ext]), got {listed!r}")
    return [str(m) for m in listed]


def load_project_plugins(conf: str | Path | None) -> list[str]:
    """Import the modules a user's project lists in ``<conf>/plugins.yaml`` (`listed_project_plugins`); returns their
    names. A file that is no list of modules, or a module that fails to import, is one line naming it (ConfigError)."""
    listed = listed_project_plugins(conf)
    path = Path(str(conf)) / PROJECT_PLUGINS
    for module in listed:
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - the user's module: its failure is named, not raised raw
            raise ConfigError(f"{path}: module {module} failed to import: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''} (it is imported from the folder you run "
                              f"in)") from None
    return listed


def load_plugins(conf: str | Path | None = None) -> list[str]:
    """What every vase command loads before it runs, the same way: installed packages' modules (`PLUGIN_GROUP`),
    then the user's project's (``conf``: its conf folder, `load_project_plugins`)."""
    return [*load_eval_action_plugins(), *load_project_plugins(conf)]


CONFIG_DIR_FLAGS = ("--config-dir", "-cd")
"""How a command is given the user's project's conf folder."""


def take_config_dir(argv: list[str]) -> tuple[list[str], Path | None]:
    """``argv`` without ``--config-dir DIR`` (``-cd DIR``, ``--config-dir=DIR``), and that folder, resolved.

    >>> take_config_dir(["experiment=demo"])
    (['experiment=demo'], None)

    Raises:
        ConfigError: the flag without a folder, given twice, or naming something that is not a folder.
    """
    rest: list[str] = []
    given: list[str] = []
    it = iter(argv)
    for a in it:
        if a in CONFIG_DIR_FLAGS:
            value = next(it, None)
            if value is None or value.startswith("-"):
                raise ConfigError(f"{a}: give your project's config folder (e.g. {a} conf)")
            given.append(value)
        elif a.startswith("--config-dir="):
            given.append(a.split("=", 1)[1])
        else:
            rest.append(a)
    if len(given) > 1:
        raise ConfigError(f"--config-dir is given {len(given)} times ({', '.join(given)}); give one folder")
    if not given:
        return rest, None
    folder = Path(given[0]).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"--config-dir {given[0]}: no such folder ({folder}); it is your project's conf/, with "
                          f"vase's group folders in it (experiment/, sweep/, callbacks/, ...)")
    return rest, folder


IMPORT_PLUGINS_FLAG = "--import-plugins"
"""A reader's flag (``vase runs``, ``vase verdict``): import the modules the *record's* project lists, from the folder
the record names, as the run itself did. Without it a record is read as data: a run folder received from someone
else (a shared result, an archive) runs none of its code when it is inspected."""


def load_reader_plugins(conf: Path | None, recorded: str | None, trust_record: bool) -> list[str]:
    """What a command that reads a run or sweep folder imports: installed packages' modules always (they are this
    environment's, not the record's); a project's only from the conf folder the user names now (``conf``:
    ``--config-dir``, its folder and the current one on the import path, as ``vase train`` imports them), or from the
    one the record names (``recorded``) where the user says so (`IMPORT_PLUGINS_FLAG`). Returns the names imported."""
    source = conf if conf is not None else (recorded if trust_record else None)
    if source is not None:
        for folder in dict.fromkeys([str(Path.cwd()), str(Path(source).resolve().parent)]):
            if folder not in sys.path:
                sys.path.insert(0, folder)  # the project's modules, as its own commands import them
    return load_plugins(source)


def register_eval_action(name: str, action: EvalAction, replace: bool = False) -> EvalAction:
    """Add an evaluation action from any package (its ``conf/action/<name>.yaml`` on Hydra's search path). A name
    already taken is refused unless ``replace``."""
    if name in EVAL_ACTIONS and not replace:
        raise ValueError(f"evaluation action {name!r} exists already ({EVAL_ACTIONS[name].run}); pass replace=True")
    if name in FILTER_ACTIONS:
        raise ValueError(f"{name!r} is a curation action of python -m vase.filter; give the evaluation action another name")
    EVAL_ACTIONS[name] = action
    return action


FILTER_ACTIONS = {
    "run": "filter a photo folder: quality classifier (if given), CLIP fragment filter, best view (the default)",
    "train_quality": "train the ResNet-50 good/bad classifier on a labelled folder (0/ bad, 1/ good)",
    "synthetic": "make synthetic museum photos, train the classifier on them, filter them",
}
"""``python -m vase.filter action=...``: the curation actions. conf/action holds every entry point's action files; each entry
point takes only its own names (`vase.config.preflight.preflight_overrides`)."""


def actions_help(actions: Mapping[str, EvalAction | str] = EVAL_ACTIONS, command: str = "python evaluate.py") -> str:
    """An entry point's actions, one line each."""
    width = max(map(len, actions))
    lines = (f"  {name:<{width}}  {what.help if isinstance(what, EvalAction) else what}\n" for name, what in actions.items())
    return f"Actions ({command} action=<name>):\n" + "".join(lines)
