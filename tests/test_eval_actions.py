"""The registry of evaluation actions (`vase.config.EVAL_ACTIONS`): the one place `run_evaluation` dispatches from, and
the recipe of ARCHITECTURE.md's "where to add" followed in a package of its own."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg, one_line, run_cli, run_python
from vase.config import validate


def test_every_registered_action_names_a_function_that_exists_and_a_conf_file() -> None:
    from vase.config import EVAL_ACTIONS

    modules = sorted(p.stem for p in (ROOT / "vase" / "pipeline" / "actions").glob("*.py")
                     if p.stem not in ("__init__", "common"))
    assert list(EVAL_ACTIONS)[0] == "generate" and sorted(EVAL_ACTIONS) == modules  # a module each, found by its name
    for name, action in EVAL_ACTIONS.items():
        assert action.run == f"vase.pipeline.actions.{name}:run" and callable(action.function()), name
        if action.precheck:
            assert callable(action.function("precheck")), name
        assert (ROOT / "conf" / "action" / f"{name}.yaml").is_file(), name


def test_a_module_in_the_action_package_without_an_action_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vase.config.entry_actions import EvalActions

    pkg = tmp_path / "myactions"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "count.py").write_text("from vase.config import EvalAction\nACTION = EvalAction('count')\ndef run(cfg):\n    return {}\n")
    (pkg / "helper.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="myactions.helper is in myactions but has no ACTION"):
        list(EvalActions("myactions"))
    (pkg / "helper.py").unlink()
    assert EvalActions("myactions")["count"].run == "myactions.count:run"


def test_a_registry_entry_naming_a_missing_function_says_which() -> None:
    from vase.config import EvalAction

    with pytest.raises(ImportError, match="vase.pipeline.evaluate has no function eval_nothing"):
        EvalAction("x", "vase.pipeline.evaluate:eval_nothing").function()


def test_a_task_added_in_a_package_of_its_own_runs_through_evaluate(tmp_path: Path, session_dirs: dict,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """ARCHITECTURE.md's recipe: one function, one registry entry, one conf/action/<name>.yaml (here on Hydra's
    search path from the package's own folder). The early checks come from the entry: a user's file where the task
    would write is refused before the function runs."""
    from vase.config import EVAL_ACTIONS

    pkg = tmp_path / "pkg" / "vase_extra_count"
    (pkg / "conf" / "action").mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        import json
        from pathlib import Path

        from vase.config import EvalAction, register_eval_action


        def eval_count(cfg):
            """How many vases the split holds."""
            out = Path(cfg.output)
            n = int(cfg.count.base) + 3
            out.write_text(json.dumps({"n": n}))
            return {"scores": {"n": n}, "output": str(out)}


        register_eval_action("count", EvalAction("count the vases of a split", "vase_extra_count:eval_count",
                                             writes=("{name}",)))
        '''))
    (pkg / "conf" / "action" / "count.yaml").write_text("# @package _global_\naction: count\ncount:\n  base: 10\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    try:
        __import__("vase_extra_count")
        from vase.pipeline.evaluate import run_evaluation

        out = tmp_path / "run" / "count.json"
        out.parent.mkdir()
        cfg = compose_cfg("evaluate", ["action=count", f"output={out}", "logger=none",
                                       f"hydra.searchpath=[file://{pkg / 'conf'}]"], tmp_path / "run", session_dirs)
        validate(cfg)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            assert run_evaluation(cfg)["scores"] == {"n": 13} and json.loads(out.read_text()) == {"n": 13}
        # where the user's action's file went, said by vase (the action itself prints nothing)
        assert printed.getvalue().splitlines() == [f"results: {out}"], printed.getvalue()

        users = tmp_path / "users" / "count.json"
        users.parent.mkdir()
        users.write_text("mine")
        cfg = compose_cfg("evaluate", ["action=count", f"output={users}", "logger=none",
                                       f"hydra.searchpath=[file://{pkg / 'conf'}]"], tmp_path / "run2", session_dirs)
        from vase.errors import ConfigError

        with pytest.raises(ConfigError, match="already exists and this run did not write it"):
            run_evaluation(cfg)
        assert users.read_text() == "mine"
        with pytest.raises(ValueError, match="exists already"):
            from vase.config import EvalAction, register_eval_action

            register_eval_action("count", EvalAction("again", "vase_extra_count:eval_count"))
    finally:
        EVAL_ACTIONS.pop("count", None)
        sys.modules.pop("vase_extra_count", None)


def test_evaluate_help_lists_the_tasks() -> None:
    p = run_python(["evaluate.py", "--help"], cwd=ROOT, timeout=120)
    assert p.returncode == 0
    from vase.config import EVAL_ACTIONS

    for action, what in EVAL_ACTIONS.items():
        assert f"  {action}" in p.stdout and what.help in p.stdout


def test_the_filter_and_evaluate_each_take_their_own_action_names(tmp_path: Path, session_dirs: dict) -> None:
    from vase.config import EVAL_ACTIONS, FILTER_ACTIONS

    line = one_line(run_cli(["-m", "vase.filter", "action=vqa"], tmp_path, session_dirs))
    assert "action='vqa'" in line and all(f"'{t}'" in line for t in FILTER_ACTIONS)
    line = one_line(run_cli(["evaluate.py", "action=synthetic"], tmp_path, session_dirs))
    assert "action='synthetic'" in line and all(f"'{t}'" in line for t in EVAL_ACTIONS)
    p = run_python(["-m", "vase.filter", "--help"], cwd=ROOT, timeout=120)
    assert p.returncode == 0 and all(f"  {t}" in p.stdout and w in p.stdout for t, w in FILTER_ACTIONS.items())


def test_an_installed_package_s_task_runs_from_the_command_line(tmp_path: Path) -> None:
    """A package names its module under the entry-point group "vase.eval_actions" (here a .dist-info folder on
    PYTHONPATH, as pip writes it); evaluate.py imports it, lists its task in --help and runs it with the task's conf
    file from the package's folder on Hydra's search path. A plugin that fails to import is one line naming it."""
    import os

    site = tmp_path / "site"
    (site / "vase_count_plugin" / "conf" / "action").mkdir(parents=True)
    (site / "vase_count_plugin" / "__init__.py").write_text(textwrap.dedent('''
        import json
        from pathlib import Path

        from vase.config import EvalAction, register_eval_action


        def eval_count(cfg):
            out = Path(cfg.output)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"n": int(cfg.count.base) + 1}))
            return {"scores": {"n": int(cfg.count.base) + 1}, "output": str(out)}


        register_eval_action("count", EvalAction("count the vases (a plugin's task)", "vase_count_plugin:eval_count",
                                             writes=("{name}",)))
        '''))
    conf = site / "vase_count_plugin" / "conf"
    (conf / "action" / "count.yaml").write_text("# @package _global_\n# python evaluate.py action=count\naction: count\n"
                                              "count:\n  base: 41\n")
    info = site / "vase_count_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vase-count-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vase.eval_actions]\ncount = vase_count_plugin\n")
    env = {**os.environ, "PYTHONPATH": str(site), "WANDB_MODE": "disabled"}
    out = tmp_path / "out" / "count.json"
    p = run_python(["evaluate.py", "action=count", f"hydra.searchpath=[file://{conf}]", f"output={out}", "logger=none",
                    f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(out.read_text()) == {"n": 42}
    p = run_python(["evaluate.py", "--help"], cwd=ROOT, env=env, timeout=300)
    assert "  count" in p.stdout and "count the vases (a plugin's task)" in p.stdout
    (site / "vase_count_plugin" / "__init__.py").write_text("raise RuntimeError('broken on purpose')\n")
    p = run_python(["evaluate.py", "action=count", f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env=env,
                   timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert ("evaluation-action plugin count = vase_count_plugin (package vase-count-plugin) failed to import: "
            "RuntimeError: broken on purpose") in p.stderr
