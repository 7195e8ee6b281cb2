"""The tasks each entry point takes: ``evaluate.py task=...`` (evaluation tasks, one registry: `EVAL_TASKS`) and
``python -m vase.filter task=...`` (curation tasks, `FILTER_TASKS`), with their help.

An evaluation task is one module of `vase.pipeline.tasks` (its `EvalTask`, ``TASK``: what the early checks need to
know about it; and its ``run``) and its ``conf/task/<name>.yaml``. `vase.pipeline.evaluate.run_evaluation` dispatches
from this registry only. The registry imports nothing heavy: the task modules import their libraries inside ``run``,
so ``--help`` and the config check stay fast.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from vase.errors import ConfigError


@dataclass(frozen=True)
class EvalTask:
    """One ``evaluate.py task=<name>``.

    ``help``: its one line in ``python evaluate.py --help``. ``run``: ``"module:function"`` (a module of
    `TASK_PACKAGE` leaves it out: its own ``run``), the function taking the composed config and returning a dict (``scores`` / ``rows`` / ``table`` go to the loggers). ``loads_model``:
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
            raise ImportError(f"{module} has no function {name} (EvalTask.{field}={target!r})")
        return found

    def checks_model(self, cfg: Any) -> bool:
        return self.loads_model(cfg) if callable(self.loads_model) else bool(self.loads_model)

    def written(self, output: str | Path) -> list[Path]:
        out = Path(str(output))
        return [out.parent / w.format(name=out.name, stem=out.stem) for w in self.writes]


TASK_PACKAGE = "vase.pipeline.tasks"
"""The package whose modules are vase's evaluation tasks: ``<task>.py`` with ``TASK`` and ``run`` (its docstring)."""
FIRST_TASK = "generate"
"""The default task, listed first; the others follow by name."""


class EvalTasks(MutableMapping[str, EvalTask]):
    """``evaluate.py task=...``: the one registry of evaluation tasks. vase's own are the modules of `TASK_PACKAGE`,
    found by their names and imported when the registry is first read (each module's top imports nothing heavy); a
    package's own are added by `register_eval_task`."""

    def __init__(self, package: str) -> None:
        self.package = package
        self._tasks: dict[str, EvalTask] | None = None

    def _found(self) -> dict[str, EvalTask]:
        if self._tasks is None:
            pkg = importlib.import_module(self.package)
            names = sorted((m.name for m in pkgutil.iter_modules(pkg.__path__)
                            if not m.name.startswith("_") and m.name != "common"),
                           key=lambda n: (n != FIRST_TASK, n))
            found: dict[str, EvalTask] = {}
            for name in names:
                module = importlib.import_module(f"{self.package}.{name}")
                task = getattr(module, "TASK", None)
                if not isinstance(task, EvalTask):
                    raise ImportError(f"{module.__name__} is in {self.package} but has no TASK (an EvalTask): "
                                      f"every module there but common is an evaluation task")
                found[name] = task if task.run else replace(task, run=f"{module.__name__}:run")
            self._tasks = {**found, **(self._tasks or {})}
        return self._tasks

    def __getitem__(self, name: str) -> EvalTask:
        return self._found()[name]

    def __setitem__(self, name: str, task: EvalTask) -> None:
        self._found()[name] = task

    def __delitem__(self, name: str) -> None:
        del self._found()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())


EVAL_TASKS = EvalTasks(TASK_PACKAGE)
"""``evaluate.py task=...``: the one registry of evaluation tasks (``python evaluate.py --help`` lists them)."""


PLUGIN_GROUP = "vase.eval_tasks"
"""The entry-point group a package names its evaluation tasks' module in (``[project.entry-points."vase.eval_tasks"]``,
``count = "mypkg.tasks"``): ``evaluate.py`` imports each such module before it reads its command line, and the module
registers its tasks (`register_eval_task`)."""


def load_eval_task_plugins() -> list[str]:
    """Import the modules installed packages name under `PLUGIN_GROUP`; returns their names. A module that fails to
    import is one line naming it and its package (ConfigError), not a traceback."""
    loaded = []
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - another package's module: its failure is named, not raised raw
            package = ep.dist.name if ep.dist else "?"
            raise ConfigError(f"evaluation-task plugin {ep.name} = {ep.value} (package {package}) failed to import: "
                              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        loaded.append(ep.value)
    return loaded


def register_eval_task(name: str, task: EvalTask, replace: bool = False) -> EvalTask:
    """Add an evaluation task from any package (its ``conf/task/<name>.yaml`` on Hydra's search path). A name
    already taken is refused unless ``replace``."""
    if name in EVAL_TASKS and not replace:
        raise ValueError(f"evaluation task {name!r} exists already ({EVAL_TASKS[name].run}); pass replace=True")
    if name in FILTER_TASKS:
        raise ValueError(f"{name!r} is a curation task of python -m vase.filter; give the evaluation task another name")
    EVAL_TASKS[name] = task
    return task


FILTER_TASKS = {
    "run": "filter a photo folder: quality classifier (if given), CLIP fragment filter, best view (the default)",
    "train_quality": "train the ResNet-50 good/bad classifier on a labelled folder (0/ bad, 1/ good)",
    "synthetic": "make synthetic museum photos, train the classifier on them, filter them",
}
"""``python -m vase.filter task=...``: the curation tasks. conf/task holds every entry point's task files; each entry
point takes only its own names (`vase.config.preflight.preflight_overrides`)."""


def tasks_help(tasks: Mapping[str, EvalTask | str] = EVAL_TASKS, command: str = "python evaluate.py") -> str:
    """An entry point's tasks, one line each."""
    width = max(map(len, tasks))
    lines = (f"  {name:<{width}}  {what.help if isinstance(what, EvalTask) else what}\n" for name, what in tasks.items())
    return f"Tasks ({command} task=<name>):\n" + "".join(lines)
