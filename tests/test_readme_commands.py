"""Every command the README shows composes and validates as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def readme_commands(text: str | None = None) -> list[str]:
    """Every ``python ...`` command in the fenced shell blocks of ``text``, by default the README and the docs pages
    (continuation lines joined, comments cut)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", _pages() if text is None else text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith(VASE_COMMANDS) and not line.startswith(READS_USER_DATA):
                out.append(line)
    return out


def readme_python_block(marker: str) -> str:
    """The fenced Python block (README or docs) that opens with the comment ``# <marker>``."""
    return re.search(rf"```python\n# {re.escape(marker)}\n(.*?)```", _pages(), re.S).group(1)


VASE_COMMANDS = ("python train.py", "python evaluate.py", "python -m vase.")
"""vase's own commands; a page's other shell lines (``python -m venv ...`` for MLflow's server) are not vase's to check."""
READS_USER_DATA = ("python -m vase.data.check ",)
"""Commands that read a user's dataset and nothing else (their one-line errors: tests/test_troubleshooting.py)."""
ARGPARSE_TOOLS = ("vase.data.export", "vase.mlflow_journal", "vase.runs")
"""Commands the pages show that are no Hydra app: they take their own flags and have no config to check."""


def _argparse_tool(cmd: str) -> bool:
    words = cmd.split()
    return words[1:2] == ["-m"] and words[2] in ARGPARSE_TOOLS


PRELOAD = ("hydra", "vase.config", "vase.loggers", "vase.sacct", "vase.data.datamodule", "vase.training.grpo",
           "vase.training.sft", "vase.training.callbacks", "vase.rewards.terms")
"""What the commands' config checks import (torch, Lightning, the ``_target_`` modules they validate against), loaded
once in the process the commands are forked from (tests/forkrun.py): each check then costs its own work, not 5 s of
imports. Nothing here may import a ``hydra_plugins`` module (vase.launchers, vase.search): Hydra's plugin scan runs
each of those again in the job, and a class defined twice breaks ``super()``; a real run imports them once, there."""


def _command_args(cmd: str, tmp_path: Path) -> list[str]:
    """The command's arguments as the shell gives them, its log and cache folders in ``tmp_path``."""
    args = [re.sub(r"<(\w+)>", r"\1", a) for a in shlex.split(cmd)[1:]]  # <time>, <run>, ... -> a plain name
    hydra_app = not _argparse_tool(cmd)
    if "--cfg" not in args and "--info" not in args and hydra_app:
        args += [f"paths.log_dir={tmp_path / 'logs'}", f"paths.cache_dir={tmp_path / 'cache'}"]
    return args


def check_commands(cmds: list[str], tmp_path: Path, env: dict, shell: str | None = None) -> list[tuple[int, str]]:
    """Each command's exit status and output, two at a time, each a process of its own forked from one that imported
    what the checks import (tests/forkrun.py; ``python <args>`` from the checkout with ``env`` otherwise). With
    ``shell``, lines a page gives to set a shell up: bash runs them first, then the ``python`` they put on the path
    starts the commands. The slowest five are printed (pytest shows them with ``-rP`` or on a failure)."""
    out = tmp_path / "commands"
    out.mkdir()
    jobs = [{"argv": _command_args(c, tmp_path), "out": str(out / f"{i}.log"), "timeout": 600}
            for i, c in enumerate(cmds)]
    (out / "jobs.json").write_text(json.dumps(jobs))
    run = ["-m", "tests.forkrun", str(out / "jobs.json"), str(out / "codes.json"), "--parallel", "2", "--preload",
           *PRELOAD]
    argv = [sys.executable, *run] if shell is None else ["bash", "-c", f"{shell}\nexec python {shlex.join(run)}"]
    subprocess.run(argv, cwd=ROOT, env=env, check=True, timeout=3600)
    done = json.loads((out / "codes.json").read_text())
    for d, c in sorted(zip(done, cmds), key=lambda x: -(x[0]["seconds"] or 1e9))[:5]:
        print(f"{d['seconds']} s: {c}")
    return [(d["code"], Path(job["out"]).read_text()) for d, job in zip(done, jobs)]


RECIPES = ROOT / "docs" / "recipes.md"


def _pages() -> str:
    """The README and every page of the documentation site, as one text."""
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_every_readme_command_composes_and_validates(tmp_path: Path) -> None:
    """Each entry point's command from the README runs to its config check (VASE_CHECK_CONFIG=1: compose, validate,
    stop), sweeps as sweeps; the README's own reward-term module is on the path for the command that names it. A
    command the pages repeat (the README's and a docs page's) is checked once."""
    recipes = set(readme_commands(RECIPES.read_text()))  # in a fresh shell: the test below
    cmds = [c for c in dict.fromkeys(readme_commands()) if c not in recipes]
    entry = {c.split()[1] if c.split()[1] != "-m" else c.split()[2] for c in cmds}
    assert {"train.py", "evaluate.py", "vase.filter", "vase.reconstruct"} <= entry and len(cmds) >= 20
    pkg = tmp_path / "userpkg" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "terms.py").write_text(readme_python_block("mypkg/terms.py"))
    env = {**os.environ, "VASE_CHECK_CONFIG": "config", "WANDB_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "userpkg"), os.environ.get("PYTHONPATH", "")])}
    results = check_commands(cmds, tmp_path, env)

    def example_path(c: str, code: int, text: str) -> bool:
        """A tool that reads a folder the page names as an example (`python -m vase.runs <a run of 2026-11-29>`)
        took its arguments and refused the folder a fresh clone lacks in its one line (rc 2), as it should."""
        last = (text.strip().splitlines() or [""])[-1]
        return _argparse_tool(c) and code == 2 and last.startswith("error: ") and "no such folder" in last \
            and last.split(":")[1].strip() in c

    failed = [f"{c}\n    -> {text.strip().splitlines()[-1:]}" for c, (code, text) in zip(cmds, results)
              if code and not example_path(c, code, text)]
    assert not failed, "README commands that no longer compose:\n" + "\n".join(failed)
    checked = sum("config ok:" in text for _, text in results)
    assert checked >= len([c for c in cmds if "--cfg" not in c and "--info" not in c and not _argparse_tool(c)])


@pytest.mark.slow  # a fresh shell starting every recipe: make test-slow
def test_every_recipe_runs_as_written_in_a_fresh_shell(tmp_path: Path) -> None:
    """The recipes page said its commands run "as written from a fresh clone", and in a new shell `python` was not
    found (the environment was not active). Now the page opens with the lines that set a shell up: bash runs them in
    an environment with nothing of this one's (no venv on the path, no PYTHONPATH), and each recipe runs to its
    config check with the `python` they give."""
    page = RECIPES.read_text()
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", page, re.S) if "source .venv/bin/activate" in b]
    # `make setup` built this checkout's .venv already: the shell's own lines are the rest
    shell = "\n".join(ln.split(" #")[0].strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("make "))
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "VASE_CHECK_CONFIG": "config", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    (tmp_path / "home").mkdir()
    which = subprocess.run(["bash", "-c", f"{shell}\ncommand -v python"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=60)
    assert which.stdout.strip() == str(ROOT / ".venv" / "bin" / "python"), which.stdout + which.stderr
    cmds = list(dict.fromkeys(readme_commands(page)))
    assert len(cmds) >= 15
    results = check_commands(cmds, tmp_path, env, shell=shell)
    failed = [f"{c}\n    -> {text.strip().splitlines()[-1:]}" for c, (code, text) in zip(cmds, results) if code]
    assert not failed, "recipes that do not run as written:\n" + "\n".join(failed)
    hydra = [c for c in cmds if "--cfg" not in c and "--info" not in c and not _argparse_tool(c)]
    assert sum("config ok:" in text for _, text in results) >= len(hydra)
