"""The layer contracts: ARCHITECTURE.md states them, .importlinter enforces them, and a violation is caught."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _contract_layers() -> list[str]:
    cp = configparser.ConfigParser()
    cp.read(ROOT / ".importlinter")
    return [line.strip() for line in cp["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]


def test_architecture_md_lists_the_layers_the_contract_enforces() -> None:
    block = re.search(r"```layers\n(.*?)```", (ROOT / "ARCHITECTURE.md").read_text(), re.DOTALL)
    assert block, "ARCHITECTURE.md needs its ```layers block"
    assert [line.strip() for line in block.group(1).splitlines() if line.strip()] == _contract_layers()
    named = {p.strip() for line in _contract_layers() for p in line.split("|")}
    parts = {f"vase.{p.stem if p.is_file() else p.name}" for p in (ROOT / "vase").iterdir()
             if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert parts == named, f"parts with no layer: {sorted(parts - named)}; layers naming no part: {sorted(named - parts)}"


def test_architecture_md_lists_vase_config_s_layers_and_every_module_has_one() -> None:
    """vase.config's own contract: ARCHITECTURE.md shows its layers, each module of the package sits in one, and each
    says in its docstring's first line what it holds."""
    cp = configparser.ConfigParser()
    cp.read(ROOT / ".importlinter")
    contract = cp["importlinter:contract:config"]
    assert contract["containers"].strip() == "vase.config"
    layers = [line.strip() for line in contract["layers"].splitlines() if line.strip()]
    block = re.search(r"```layers vase.config\n(.*?)```", (ROOT / "ARCHITECTURE.md").read_text(), re.DOTALL)
    assert block and [line.strip() for line in block.group(1).splitlines() if line.strip()] == layers
    named = {p.strip() for line in layers for p in line.split("|")}
    modules = {p.stem for p in (ROOT / "vase" / "config").glob("*.py") if p.stem != "__init__"}
    assert modules == named, f"modules with no layer: {sorted(modules - named)}; layers naming none: {sorted(named - modules)}"
    for name in modules:
        text = (ROOT / "vase" / "config" / f"{name}.py").read_text()
        assert text.startswith('"""') and len(text.splitlines()) <= 400, name


def test_the_contracts_pass_and_an_upward_import_breaks_them(tmp_path: Path) -> None:
    ok = subprocess.run([str(LINT), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout[-3000:]
    # the same package with one import running up a layer (data -> eval, as datamodule once imported eval.zoom)
    shutil.copytree(ROOT / "vase", tmp_path / "vase", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    mod = tmp_path / "vase" / "data" / "datamodule.py"
    mod.write_text(mod.read_text() + "\n\ndef _upward():\n    from vase.eval.zoom import zoom_rows\n\n    return zoom_rows\n")
    bad = subprocess.run([str(LINT), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": str(LINT.parent)})
    assert bad.returncode != 0
    assert "vase.data.datamodule -> vase.eval.zoom" in bad.stdout and "BROKEN" in bad.stdout
    # and inside vase.config: a low module reaching up to the validation
    mod.write_text(mod.read_text().rsplit("\n\ndef _upward", 1)[0] + "\n")
    low = tmp_path / "vase" / "config" / "naming.py"
    low.write_text(low.read_text() + "\n\ndef _upward():\n    from vase.config.validate import validate\n\n    return validate\n")
    bad = subprocess.run([str(LINT), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": str(LINT.parent)})
    assert bad.returncode != 0 and "vase.config.naming -> vase.config.validate" in bad.stdout
    assert "Layers: each part imports only parts below it KEPT" in bad.stdout
    # and a circle inside one layer (two modules of vase.reports importing each other), which no layer forbids
    low.write_text(low.read_text().rsplit("\n\ndef _upward", 1)[0] + "\n")
    stats = tmp_path / "vase" / "reports" / "verdict_stats.py"
    stats.write_text(stats.read_text() + "\n\ndef _back():\n    from vase.reports.verdict_view import read_verdict\n\n"
                     "    return read_verdict\n")
    bad = subprocess.run([str(LINT), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": str(LINT.parent)})
    assert bad.returncode != 0 and "No import circle" in bad.stdout and "BROKEN" in bad.stdout, bad.stdout[-3000:]
    assert "Layers: each part imports only parts below it KEPT" in bad.stdout
    assert "vase.reports." in bad.stdout and "- .verdict_stats -> .verdict_view (1 import)" in bad.stdout


def test_every_data_task_is_built_by_registered_tasks() -> None:
    """data.mix's values (checked by the config) and the registry agree; each names tasks that have a builder."""
    from vase.prompt_tasks import DATA_MIXES, SAMPLES

    assert all(name in SAMPLES for names in DATA_MIXES.values() for name in names)


def test_each_vqa_protocol_is_a_tasks_and_the_runner_only_dispatches(monkeypatch: pytest.MonkeyPatch) -> None:
    """val.vqa's protocols (checked by the config) are the tasks' protocols; the runner holds no task code: a
    protocol swapped in the registry is what it asks and how it judges."""
    from types import SimpleNamespace

    from vase.choices import VQA_PROTOCOLS
    from vase.eval import vqa
    from vase.prompt_tasks import VQA, mc, qa
    from vase.prompt_tasks.base import EvalProtocol

    assert tuple(VQA) == VQA_PROTOCOLS
    assert (VQA["open"], VQA["mc"], VQA["ll"]) == (qa.OPEN, mc.LETTER, mc.LIKELIHOOD)
    assert [p.choice for p in VQA.values()] == [False, True, True]
    runner = (ROOT / "vase" / "eval" / "vqa.py").read_text()
    assert "parse_choice" not in runner and "QUESTIONS" not in runner and "dimension_similarity(" not in runner

    odd = EvalProtocol("open", lambda rec, dim, n: (f"Say {dim}.", "yes", {}),
                       judge=lambda row, sim, tau: row["caption"] == "yes")
    rec = SimpleNamespace(id="v1")
    ds = SimpleNamespace(records=[rec], views=(), layout="vase")
    monkeypatch.setitem(VQA, "open", odd)
    monkeypatch.setattr(vqa, "visuals_of", lambda d, i: None)  # no images needed here
    monkeypatch.setattr(vqa, "prompt_context", lambda d, i, dim=None: "")
    items = vqa.vqa_items(ds, "open")
    assert [it.prompt for it in items][:2] == ["Say fabric.", "Say technique."] and items[0].reference == "yes"
    rows = [{"protocol": "open", "dimension": it.extra["dimension"], "caption": c, "reference": it.reference}
            for it, c in zip(items, ["yes", "no", "yes", "yes", "yes", "yes"])]
    assert vqa.score_vqa(rows, SimpleNamespace(dimension_similarity=None), 0.5)["open"]["accuracy"]["technique"] == 0


def test_every_task_has_its_own_config_file() -> None:
    """conf/action/<name>.yaml for each of evaluate.py's and the photo filter's actions, each opening with its own entry
    point's command and naming itself; no name belongs to both."""
    from omegaconf import OmegaConf

    from vase.config import EVAL_ACTIONS, FILTER_ACTIONS

    files = {p.stem: p for p in (ROOT / "conf" / "action").glob("*.yaml")}
    assert set(files) == set(EVAL_ACTIONS) | set(FILTER_ACTIONS) and not set(EVAL_ACTIONS) & set(FILTER_ACTIONS)
    for name, path in files.items():
        command = "python evaluate.py" if name in EVAL_ACTIONS else "python -m vase.filter"
        assert command in path.read_text().split("\ntask:")[0], name  # its command, before its keys
        assert OmegaConf.load(path).action == name


AFTER_HYDRA_SCAN = ("hydra_plugins.vase_launchers",)
"""Imported inside a function because Hydra's scan of ``hydra_plugins`` must run first (its sweepers subclass what the
scan loads; the module's docstring): lazy for its order, with a ``# lazy:`` comment that says so."""


def test_imports_sit_at_the_top_except_heavy_libraries_which_say_so() -> None:
    """An import inside a function loads a slow or optional library (directly, or through a part of vase that loads
    one at its top) that the file does not load already, and a ``# lazy:`` comment says so; everything else (the
    standard library, light libraries, light parts of vase) is imported at the top, where the import graph shows."""
    from tests.imports import PACKAGE, ROOT, heavy_at_load, imports_of, is_stdlib, lazy_comment

    problems = []
    lazy = total = 0
    for path in [*sorted(PACKAGE.rglob("*.py")), ROOT / "train.py", ROOT / "evaluate.py"]:
        imps = imports_of(path)
        lines = path.read_text().splitlines()
        at_top = frozenset().union(*(heavy_at_load(m) for i in imps if not i.lazy for m in i.modules))
        for imp in imps:
            total += 1
            if not imp.lazy:
                continue
            lazy += 1
            where = f"{path.relative_to(ROOT)}:{imp.line}: {lines[imp.line - 1].strip()}"
            heavy = frozenset().union(*(heavy_at_load(m) for m in imp.modules)) - at_top
            if any(m in AFTER_HYDRA_SCAN for m in imp.modules):  # lazy for its order, not its weight: said so
                if not lazy_comment(path, imp, lines):
                    problems.append(f"{where} (imported after Hydra's scan: say so in a '# lazy:' comment)")
                continue
            if all(is_stdlib(m) for m in imp.modules) or not heavy:
                problems.append(f"{where} (nothing heavy: import it at the top)")
            elif not lazy_comment(path, imp, lines):
                problems.append(f"{where} (lazy for {', '.join(sorted(heavy))}: say so in a '# lazy:' comment)")
    assert not problems, "\n".join(problems)
    assert lazy < total / 4, (lazy, total)


def test_the_import_rule_catches_a_light_lazy_import_and_an_unexplained_heavy_one(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import imports

    bad = tmp_path / "vase" / "bad.py"
    bad.parent.mkdir()
    bad.write_text("import os\n\n\ndef f():\n    import json\n\n    import torch\n\n    # lazy: trimesh\n"
                   "    import trimesh\n    return json, torch, trimesh, os\n")
    monkeypatch.setattr(imports, "ROOT", tmp_path)
    monkeypatch.setattr(imports, "PACKAGE", tmp_path / "vase")
    imports._first_party.cache_clear()
    try:
        imps = [i for i in imports.imports_of(bad) if i.lazy]
        assert [i.modules for i in imps] == [("json",), ("torch",), ("trimesh",)]
        assert imports.is_stdlib("json") and imports.heavy_at_load("torch") == {"torch"}
        assert [imports.lazy_comment(bad, i) for i in imps] == [False, False, True]
    finally:
        imports._first_party.cache_clear()


def _named_in_architecture_md() -> tuple[set[str], set[str]]:
    """The dotted ``vase.*`` names and the ``vase/...`` paths ARCHITECTURE.md writes in backticks."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    ticks = re.findall(r"`([^`\s]+)`", text)
    dotted = {t for t in ticks if re.fullmatch(r"vase(\.\w+)+", t)}
    paths = {t for t in ticks if re.fullmatch(r"vase/[\w/]+(\.py)?", t)}
    return dotted, paths


def test_every_module_architecture_md_names_exists_and_every_package_is_named() -> None:
    """A name in ARCHITECTURE.md is a module, a package or a name one of them holds; a file it names (``x.py`` in
    a part's row, ``vase/...`` anywhere) exists; and every package of vase has its row."""
    import importlib

    dotted, paths = _named_in_architecture_md()
    def spec(module: str) -> object | None:
        try:
            return importlib.util.find_spec(module)
        except ModuleNotFoundError:  # a name inside a module, not a submodule
            return None

    for name in sorted(dotted):
        module, attr = name, None
        while module and spec(module) is None:
            module, _, attr = module.rpartition(".")
        assert module and (attr is None or hasattr(importlib.import_module(module), attr)), name
    for path in sorted(paths):
        assert (ROOT / path).exists(), path
    text = (ROOT / "ARCHITECTURE.md").read_text()
    rows = re.findall(r"^\| (`[^|]+`|base) \| ([^\n]*)\|$", text, re.M)
    assert rows
    files = {f for _, holds in rows for f in re.findall(r"`(\w+\.py)`", holds)}
    for file in files:
        assert list((ROOT / "vase").rglob(file)) or (ROOT / file).exists(), f"ARCHITECTURE.md names {file}: no such file"
    packages = {p.parent.relative_to(ROOT).as_posix().replace("/", ".") for p in (ROOT / "vase").glob("*/__init__.py")}
    named = {m for part, _ in rows for m in re.findall(r"`(vase\.\w+)`", part)}
    base = next(holds for part, holds in rows if part == "base")
    named |= {f"vase.{m}" for m in re.findall(r"`(\w+)`", base)}
    assert packages <= named, f"packages without a row in ARCHITECTURE.md: {sorted(packages - named)}"


# modules that share a name across folders, each saying what the other is (a prompt task and its runner; a package's
# base): any other shared name is two jobs that could be confused
SHARED_NAMES = {"base.py": ("vase/prompt_tasks", "vase/reconstruct"), "invrender.py": ("vase/prompt_tasks", "vase/eval"),
                "zoom.py": ("vase/prompt_tasks", "vase/eval"), "train.py": ("vase/pipeline", "vase/cli"),
                "evaluate.py": ("vase/pipeline", "vase/cli")}


def test_no_two_modules_share_a_name_unless_each_names_the_other() -> None:
    import ast
    from collections import defaultdict

    where = defaultdict(list)
    for p in (ROOT / "vase").rglob("*.py"):
        # a module of vase.pipeline.actions is named by the task it runs (the registry finds it so), and says so first
        if p.parent.name == "actions" and p.parent.parent.name == "pipeline" and p.name not in ("common.py", "__init__.py"):
            doc = ast.get_docstring(ast.parse(p.read_text())) or ""
            assert doc.startswith(f"``evaluate.py action={p.stem}``"), f"{p}: its docstring starts with its action"
            continue
        if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts:
            where[p.name].append(p)
    shared = {n: ps for n, ps in where.items() if len(ps) > 1}
    assert set(shared) == set(SHARED_NAMES), {n: [str(p.relative_to(ROOT)) for p in ps] for n, ps in shared.items()}
    for name, ps in shared.items():
        assert sorted(p.parent.relative_to(ROOT).as_posix() for p in ps) == sorted(SHARED_NAMES[name])
        for p in ps:
            other = next(q for q in ps if q != p)
            dotted = other.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
            assert dotted in (ast.get_docstring(ast.parse(p.read_text())) or ""), f"{p} does not name {dotted}"


def test_no_module_imports_another_s_private_names() -> None:
    """A name with a leading underscore is its module's own: another module that needs it needs a public name."""
    import ast

    found = []
    for path in [*(ROOT / "vase").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), ROOT / "train.py",
                 ROOT / "evaluate.py"]:
        if "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vase"):
                found += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, found


def test_every_markdown_table_is_built_by_the_one_helper() -> None:
    """vase.markdown writes every table's rule (``|---|``): a string holding one anywhere else in vase's code (not a
    docstring) is a table built by hand."""
    import ast
    import re

    found = []
    for path in (ROOT / "vase").rglob("*.py"):
        if path.name == "markdown.py" or "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        found += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                  and re.search(r"\|\s*:?-{3}", n.value)]
    assert not found, found


MODULE_LINES, FUNCTION_LINES = 600, 80
"""One room, one job: no module of vase over 600 lines, no function over 80 (issue "one room, one job, round 3" left
none; two modules had crept back over by 2026-12-07)."""


def _over_limits(path: Path) -> list[str]:
    import ast

    text = path.read_text()
    over = [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(text.splitlines())} lines"] \
        if len(text.splitlines()) > MODULE_LINES else []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.end_lineno - node.lineno + 1 > FUNCTION_LINES:
            over.append(f"{path.name}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    return over


def test_no_module_over_600_lines_and_no_function_over_80(tmp_path: Path) -> None:
    over = [o for p in sorted([*(ROOT / "vase").rglob("*.py"), *(ROOT / "hydra_plugins").rglob("*.py")])
            for o in _over_limits(p)]
    assert over == [], f"split these by job (ARCHITECTURE.md): {over}"
    planted = tmp_path / "big.py"  # the check itself finds both kinds
    planted.write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES + "\n" * (MODULE_LINES - FUNCTION_LINES))
    assert [o.split(": ", 1)[1] for o in _over_limits(planted)] == [f"{MODULE_LINES + 1} lines",
                                                                  f"{FUNCTION_LINES + 1} lines"]
