"""The registry of evaluation tasks (`vase.config.EVAL_TASKS`): the one place `run_evaluation` dispatches from, and
the recipe of ARCHITECTURE.md's "where to add" followed in a package of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg, one_line, run_cli
from vase.config import validate


def test_every_registered_task_names_a_function_that_exists_and_a_conf_file() -> None:
    from vase.config import EVAL_TASKS

    modules = sorted(p.stem for p in (ROOT / "vase" / "pipeline" / "tasks").glob("*.py")
                     if p.stem not in ("__init__", "common"))
    assert list(EVAL_TASKS)[0] == "generate" and sorted(EVAL_TASKS) == modules  # a module each, found by its name
    for name, task in EVAL_TASKS.items():
        assert task.run == f"vase.pipeline.tasks.{name}:run" and callable(task.function()), name
        if task.precheck:
            assert callable(task.function("precheck")), name
        assert (ROOT / "conf" / "task" / f"{name}.yaml").is_file(), name


def test_a_module_in_the_task_package_without_a_task_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vase.config.entry_tasks import EvalTasks

    pkg = tmp_path / "mytasks"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "count.py").write_text("from vase.config import EvalTask\nTASK = EvalTask('count')\ndef run(cfg):\n    return {}\n")
    (pkg / "helper.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="mytasks.helper is in mytasks but has no TASK"):
        list(EvalTasks("mytasks"))
    (pkg / "helper.py").unlink()
    assert EvalTasks("mytasks")["count"].run == "mytasks.count:run"


def test_a_registry_entry_naming_a_missing_function_says_which() -> None:
    from vase.config import EvalTask

    with pytest.raises(ImportError, match="vase.pipeline.evaluate has no function eval_nothing"):
        EvalTask("x", "vase.pipeline.evaluate:eval_nothing").function()


def test_a_task_added_in_a_package_of_its_own_runs_through_evaluate(tmp_path: Path, session_dirs: dict,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """ARCHITECTURE.md's recipe: one function, one registry entry, one conf/task/<name>.yaml (here on Hydra's
    search path from the package's own folder). The early checks come from the entry: a user's file where the task
    would write is refused before the function runs."""
    from vase.config import EVAL_TASKS

    pkg = tmp_path / "pkg" / "vase_extra_count"
    (pkg / "conf" / "task").mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        import json
        from pathlib import Path

        from vase.config import EvalTask, register_eval_task


        def eval_count(cfg):
            """How many vases the split holds."""
            out = Path(cfg.output)
            n = int(cfg.count.base) + 3
            out.write_text(json.dumps({"n": n}))
            return {"scores": {"n": n}, "output": str(out)}


        register_eval_task("count", EvalTask("count the vases of a split", "vase_extra_count:eval_count",
                                             writes=("{name}",)))
        '''))
    (pkg / "conf" / "task" / "count.yaml").write_text("# @package _global_\ntask: count\ncount:\n  base: 10\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    try:
        __import__("vase_extra_count")
        from vase.pipeline.evaluate import run_evaluation

        out = tmp_path / "run" / "count.json"
        out.parent.mkdir()
        cfg = compose_cfg("evaluate", ["task=count", f"output={out}", "logger=none",
                                       f"hydra.searchpath=[file://{pkg / 'conf'}]"], tmp_path / "run", session_dirs)
        validate(cfg)
        assert run_evaluation(cfg)["scores"] == {"n": 13} and json.loads(out.read_text()) == {"n": 13}

        users = tmp_path / "users" / "count.json"
        users.parent.mkdir()
        users.write_text("mine")
        cfg = compose_cfg("evaluate", ["task=count", f"output={users}", "logger=none",
                                       f"hydra.searchpath=[file://{pkg / 'conf'}]"], tmp_path / "run2", session_dirs)
        from vase.errors import ConfigError

        with pytest.raises(ConfigError, match="already exists and this run did not write it"):
            run_evaluation(cfg)
        assert users.read_text() == "mine"
        with pytest.raises(ValueError, match="exists already"):
            from vase.config import EvalTask, register_eval_task

            register_eval_task("count", EvalTask("again", "vase_extra_count:eval_count"))
    finally:
        EVAL_TASKS.pop("count", None)
        sys.modules.pop("vase_extra_count", None)


def test_evaluate_help_lists_the_tasks() -> None:
    p = subprocess.run([sys.executable, "evaluate.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    from vase.config import EVAL_TASKS

    for task, what in EVAL_TASKS.items():
        assert f"  {task}" in p.stdout and what.help in p.stdout


def test_the_filter_and_evaluate_each_take_their_own_task_names(tmp_path: Path, session_dirs: dict) -> None:
    from vase.config import EVAL_TASKS, FILTER_TASKS

    line = one_line(run_cli(["-m", "vase.filter", "task=vqa"], tmp_path, session_dirs))
    assert "task='vqa'" in line and all(f"'{t}'" in line for t in FILTER_TASKS)
    line = one_line(run_cli(["evaluate.py", "task=synthetic"], tmp_path, session_dirs))
    assert "task='synthetic'" in line and all(f"'{t}'" in line for t in EVAL_TASKS)
    p = subprocess.run([sys.executable, "-m", "vase.filter", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and all(f"  {t}" in p.stdout and w in p.stdout for t, w in FILTER_TASKS.items())


def test_an_installed_package_s_task_runs_from_the_command_line(tmp_path: Path) -> None:
    """A package names its module under the entry-point group "vase.eval_tasks" (here a .dist-info folder on
    PYTHONPATH, as pip writes it); evaluate.py imports it, lists its task in --help and runs it with the task's conf
    file from the package's folder on Hydra's search path. A plugin that fails to import is one line naming it."""
    import os

    site = tmp_path / "site"
    (site / "vase_count_plugin" / "conf" / "task").mkdir(parents=True)
    (site / "vase_count_plugin" / "__init__.py").write_text(textwrap.dedent('''
        import json
        from pathlib import Path

        from vase.config import EvalTask, register_eval_task


        def eval_count(cfg):
            out = Path(cfg.output)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"n": int(cfg.count.base) + 1}))
            return {"scores": {"n": int(cfg.count.base) + 1}, "output": str(out)}


        register_eval_task("count", EvalTask("count the vases (a plugin's task)", "vase_count_plugin:eval_count",
                                             writes=("{name}",)))
        '''))
    conf = site / "vase_count_plugin" / "conf"
    (conf / "task" / "count.yaml").write_text("# @package _global_\n# python evaluate.py task=count\ntask: count\n"
                                              "count:\n  base: 41\n")
    info = site / "vase_count_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vase-count-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vase.eval_tasks]\ncount = vase_count_plugin\n")
    env = {**os.environ, "PYTHONPATH": str(site), "WANDB_MODE": "disabled"}
    out = tmp_path / "out" / "count.json"
    p = subprocess.run([sys.executable, "evaluate.py", "task=count", f"hydra.searchpath=[file://{conf}]",
                        f"output={out}", "logger=none", f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(out.read_text()) == {"n": 42}
    p = subprocess.run([sys.executable, "evaluate.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=env)
    assert "  count" in p.stdout and "count the vases (a plugin's task)" in p.stdout
    (site / "vase_count_plugin" / "__init__.py").write_text("raise RuntimeError('broken on purpose')\n")
    p = subprocess.run([sys.executable, "evaluate.py", "task=count", f"paths.log_dir={tmp_path / 'logs'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert ("evaluation-task plugin count = vase_count_plugin (package vase-count-plugin) failed to import: "
            "RuntimeError: broken on purpose") in p.stderr
