"""``vase init <dir>``: a working project on vase in a new folder: conf groups with one example each (an SFT-then-GRPO
experiment, a sweep with a hypothesis over the project's own reward term, a callback), a package with a reward term,
a caption metric and an evaluation action (registered through conf/plugins.yaml), a pyproject.toml pinning this vase,
a .gitignore for what runs write, and tests that use vase.testing (their own pytest passes, a debug sweep included).

    vase init mylab && cd mylab && pytest
"""

from __future__ import annotations

import argparse
import keyword
import re
import subprocess
import sys
from pathlib import Path

import vase
from vase.errors import VaseError
from vase.io import atomic_write_text

FILES = {
    "README.md": """# {name}

A project on [vase](https://github.com/vase-project/vase) {version}, made by `vase init`.

```bash
pip install -e ".[test]"                                      # this project's package, and pytest for its tests
pytest                                                        # its tests: configs checked, a debug sweep decided
vase train --config-dir conf experiment=my_setup              # SFT, then GRPO with {pkg}'s reward term
vase train --config-dir conf -m sweep=my_sweep                # does the term's weight move what it rewards?
vase evaluate --config-dir conf action=count output=out/count.json   # {pkg}'s own evaluation action
```

Runs go under `logs/`, tiny models and data under `.cache/` (both in .gitignore). Every run's record names this
project's commit and changes beside vase's (`vase runs logs/...`): `vase init` made it a git repository with a first
commit (where git knows who you are; otherwise `git commit -m "vase init"` once it does).
""",
    ".gitignore": "logs/\n.cache/\nout/\n__pycache__/\n*.egg-info/\n",
    "pyproject.toml": """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["vase=={version}"]

[project.optional-dependencies]
test = ["pytest>=8"]

[tool.setuptools]
packages = ["{pkg}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
""",
    "conf/plugins.yaml": "# the modules every vase command imports first: they register what this project adds\n"
                         "modules: [{pkg}.actions]\n",
    "conf/experiment/my_setup.yaml": """# @package _global_
# SFT, then GRPO on it in the same run, scored on held-out answers by vase's terms and by {pkg}'s own:
#   vase train --config-dir conf experiment=my_setup
defaults:
  - /stage@followup: grpo
  - override /callbacks: mine
val:
  heldout: true
reward:
  terms:
    amphora:
      _target_: {pkg}.terms.SaysAmphora
      weight: 0.5
metrics:
  extra: [{pkg}.metrics:WORD_RECALL]
""",
    "conf/sweep/my_sweep.yaml": """# @package _global_
# Does {pkg}'s reward term move what it rewards on held-out answers? GRPO at its weight 0 and 0.5 from one shared SFT:
#   vase train --config-dir conf -m sweep=my_sweep
defaults:
  - /shared/grpo_from_sft
hypothesis:
  compare: reward.terms.amphora.weight
  baseline: 0.0
  moves: [heldout/amphora, heldout/total]
  replicates: [seed]
reward:
  terms:
    amphora:
      _target_: {pkg}.terms.SaysAmphora
      weight: 0.0
hydra:
  mode: MULTIRUN
  sweeper:
    params:
      reward.terms.amphora.weight: 0.0,0.5
      seed: 1
""",
    "conf/callbacks/mine.yaml": """# vase's callbacks and {pkg}'s own (experiment=my_setup picks this: callbacks=mine)
defaults:
  - default
  - _self_
steps_seen:
  _target_: {pkg}.callbacks.StepsSeen
  path: ${{paths.output_dir}}/steps_seen.txt
""",
    "conf/action/count.yaml": """# @package _global_
# {pkg}'s own evaluation action (registered by {pkg}/actions.py, which conf/plugins.yaml names):
#   vase evaluate --config-dir conf action=count output=out/count.json
action: count
count:
  base: 41
""",
    "{pkg}/__init__.py": '"""{name}: a project on vase."""\n',
    "{pkg}/terms.py": '''"""{pkg}'s reward terms."""

from vase.api import RewardTerm


class SaysAmphora(RewardTerm):
    """1 where the answer names an amphora."""

    def __call__(self, completions, targets, **batch):
        return [float("amphora" in c.lower()) for c in completions]
''',
    "{pkg}/metrics.py": '''"""{pkg}'s caption metrics (metrics.extra: [{pkg}.metrics:WORD_RECALL]; a hypothesis move heldout/word_recall)."""

import numpy as np

from vase.api import CaptionMetric


def word_recall(preds, refs):
    """Each caption's share of its reference's distinct words."""
    return np.array([len(set(p.split()) & set(r.split())) / max(len(set(r.split())), 1) for p, r in zip(preds, refs)],
                    dtype=float)


WORD_RECALL = CaptionMetric("word_recall", "Recall", "the share of the reference's words the caption has", 66,
                            terms=word_recall, default=False)
''',
    "{pkg}/callbacks.py": '''"""{pkg}'s Lightning callbacks."""

from pathlib import Path

import pytorch_lightning as pl


class StepsSeen(pl.Callback):
    """Writes how many optimizer steps the run took, when training ends."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_end(self, trainer, pl_module) -> None:
        Path(self.path).write_text(f"{{trainer.global_step}}\\n")
''',
    "{pkg}/actions.py": '''"""{pkg}'s evaluation actions, registered when vase imports this module (conf/plugins.yaml)."""

import json
from pathlib import Path

from vase.api import EvalAction, register_eval_action


def count(cfg):
    """A template: writes count.base + 1 to the output file."""
    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = int(cfg.count.base) + 1
    out.write_text(json.dumps({{"n": n}}))
    return {{"scores": {{"n": n}}, "output": str(out)}}


register_eval_action("count", EvalAction("{pkg}'s template action: count.base + 1", "{pkg}.actions:count",
                                         writes=("{{name}}",)))
''',
    "tests/test_project.py": '''"""{name}'s configs checked as vase checks them, and its sweep decided on a debug run (vase.testing)."""

import json

from vase.testing import compose, run, sweep_of
from {pkg}.terms import SaysAmphora


def test_the_reward_term_scores_answers():
    assert SaysAmphora(weight=0.5)(["An amphora, black-figure.", "A krater."], [{{}}, {{}}]) == [1.0, 0.0]


def test_my_setup_is_a_valid_run(tmp_path):
    cfg = compose("conf", ["experiment=my_setup"], tmp_path)
    assert cfg.reward.terms.amphora.weight == 0.5 and cfg.followup.name == "grpo"


def test_the_action_runs(tmp_path):
    out = tmp_path / "count.json"
    p = run(["action=count", f"output={{out}}", "logger=none"], tmp_path / "logs", entry="evaluate")
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(out.read_text()) == {{"n": 42}}


def test_my_sweep_ends_with_its_verdict(tmp_path):
    p = run(["-m", "sweep=my_sweep", "debug=fast", "logger=none"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "reward.terms.amphora.weight=0.5 against reward.terms.amphora.weight=0.0" in p.stdout
    assert (sweep_of(tmp_path) / "verdict.md").is_file()
''',
}
"""The files of a new project: path -> text, ``{{name}}``, ``{{pkg}}`` and ``{{version}}`` filled in."""


def package_name(folder: str) -> str:
    """A Python package name from a folder's name.

    >>> package_name("my-lab"), package_name("2vases"), package_name("class")
    ('my_lab', 'p2vases', 'class_')
    """
    name = re.sub(r"\W+", "_", folder).strip("_").lower() or "project"
    if name[0].isdigit():
        name = f"p{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


def init(folder: str | Path, package: str | None = None) -> list[Path]:
    """Write a new project into ``folder`` (new, or empty); returns the files written.

    Raises:
        VaseError: the folder holds files (a user's folder is only ever read), or the package name is no identifier.
    """
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise VaseError(f"{folder}: {'holds files' if folder.is_dir() else 'is a file'}; vase init writes a new "
                        f"project only into a new or empty folder")
    pkg = package or package_name(folder.resolve().name)
    if not pkg.isidentifier() or keyword.iskeyword(pkg):
        raise VaseError(f"--package {pkg!r}: not a Python package name")
    values = {"name": folder.resolve().name, "pkg": pkg, "version": vase.__version__}
    written = []
    for path, text in FILES.items():
        written.append(atomic_write_text(folder / path.format(**values), text.format(**values)))
    return written


def first_commit(folder: Path) -> str:
    """Make the new project a git repository with its files as the first commit, so every run's record names the
    project's commit; returns the line that says what was done. Inside another repository, without git, or where
    git does not know the user (no user.name/email), it commits nothing and says how to."""
    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None

    top = git("rev-parse", "--show-toplevel")
    if top is None:
        return "git: not found; without a repository every run's record says 'not a git checkout' for this project"
    if top.returncode == 0 and top.stdout.strip():
        return f"git: {folder} lies in the repository {top.stdout.strip()}; commit it there"
    made = git("init", "-q")
    if made is None or made.returncode != 0:
        return f"git: git init failed ({(made.stderr.strip().splitlines() or ['?'])[-1] if made else '?'})"
    git("add", "-A")
    done = git("commit", "-q", "-m", f"vase init: a project on vase {vase.__version__}")
    if done is not None and done.returncode == 0:
        return "git: a repository with the project as its first commit (every run's record names its commit)"
    return (f"git: a repository, nothing committed (git said: {(done.stderr.strip().splitlines() or ['?'])[-1] if done else '?'}); "
            f"run git commit -m 'vase init' once git knows who you are, or every run's record says 'not a git "
            f"checkout'")


def main() -> int:
    """``vase init <dir> [--package NAME]``: a new project on vase (conf, a package, pyproject.toml, tests)."""
    ap = argparse.ArgumentParser(prog="vase init", description=main.__doc__.splitlines()[0])
    ap.add_argument("folder", help="a new (or empty) folder for the project")
    ap.add_argument("--package", help="the Python package's name (default: from the folder's name)")
    a = ap.parse_args(sys.argv[1:])
    if not a.folder.strip():  # '' is the current folder to Path: it wrote there, naming no folder
        print("error: give the new project's folder (vase init mylab): an empty name names none", file=sys.stderr)
        return 2
    try:
        written = init(a.folder, a.package)
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files into {a.folder}; next: cd {a.folder} && pip install -e '.[test]' && pytest "
          f"(its tests run a debug sweep to its verdict), then vase train --config-dir conf experiment=my_setup")
    print(first_commit(Path(a.folder)))
    return 0
