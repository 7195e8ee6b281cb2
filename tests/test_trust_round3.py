"""Trust, round 3 (issue 23): nothing silent, nothing late, and the README's commands never rot. Each test failed on
the code before the issue (the hostile-id tests are in test_hostile_ids.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_trust import _one_line, _run
from tests.test_user_paths import _user_dataset, tree_hash
from vase.errors import DataError

# ------------------------------------------------------------------ every README command composes and validates


def _pages() -> str:
    """The README and every page of the documentation site, as one text."""
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])


def readme_commands() -> list[str]:
    """Every ``python ...`` command in the fenced shell blocks of the README and the docs pages (continuation lines
    joined, comments cut)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", _pages(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith("python "):
                out.append(line)
    return out


def readme_python_block(marker: str) -> str:
    """The fenced Python block (README or docs) that opens with the comment ``# <marker>``."""
    return re.search(rf"```python\n# {re.escape(marker)}\n(.*?)```", _pages(), re.S).group(1)


def _check_command(cmd: str, tmp_path: Path, env: dict) -> tuple[str, subprocess.CompletedProcess]:
    args = [re.sub(r"<(\w+)>", r"\1", a) for a in shlex.split(cmd)[1:]]  # <time>, <run>, ... -> a plain name
    hydra_app = args[:2] not in (["-m", "vase.data.export"], ["-m", "vase.mlflow_journal"])  # argparse tools
    if "--cfg" not in args and "--info" not in args and hydra_app:
        args += [f"paths.log_dir={tmp_path / 'logs'}", f"paths.cache_dir={tmp_path / 'cache'}"]
        if "sweep=optuna" in args:  # optuna needs a number from each trial, and a check returns none: one job
            args = [a for a in args if a != "-m"] + ["hydra.mode=RUN"]
    return cmd, subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=600)


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_every_readme_command_composes_and_validates(tmp_path: Path) -> None:
    """Each entry point's command from the README runs to its config check (VASE_CHECK_CONFIG=1: compose, validate,
    stop), sweeps as sweeps; the README's own reward-term module is on the path for the command that names it. A
    command the pages repeat (the README's and a docs page's) is checked once."""
    cmds = list(dict.fromkeys(readme_commands()))
    entry = {c.split()[1] if c.split()[1] != "-m" else c.split()[2] for c in cmds}
    assert {"train.py", "evaluate.py", "vase.filter", "vase.reconstruct"} <= entry and len(cmds) >= 20
    pkg = tmp_path / "userpkg" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "terms.py").write_text(readme_python_block("mypkg/terms.py"))
    env = {**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "userpkg"), os.environ.get("PYTHONPATH", "")])}
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda c: _check_command(c, tmp_path, env), cmds))
    failed = [f"{c}\n    -> {(p.stdout + p.stderr).strip().splitlines()[-1:] }" for c, p in results if p.returncode]
    assert not failed, "README commands that no longer compose:\n" + "\n".join(failed)
    checked = sum("config ok:" in p.stdout for _, p in results)
    assert checked >= len([c for c in cmds if "--cfg" not in c and "--info" not in c])


def test_ci_runs_lint_the_default_suite_and_the_slow_suite_and_says_what_each_took(tmp_path: Path) -> None:
    """A README command that rots is caught by make test; what only the slow suite exercises (the curation end to end,
    sweeps, the learning check) is caught because CI runs it too, stopping at the first failure. .ci/run is run here
    with a stand-in ``make`` first on PATH: the parts in order, each one's seconds printed, and on a failure the parts
    so far and a non-zero exit."""
    calls = tmp_path / "calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "make").write_text(f'#!/bin/sh\necho "$1" >> {calls}\n[ "$1" = "$FAIL_AT" ] && exit 3\nexit 0\n')
    (fake / "make").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    ok = subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True, timeout=60,
                        env={**env, "FAIL_AT": ""})
    assert ok.returncode == 0, ok.stderr
    assert calls.read_text().split() == ["setup", "lint", "docs", "test", "test-slow"]
    for part in ("setup", "lint", "docs", "test", "test-slow"):
        assert re.search(rf"^=== CI part: {part} took \d+ s$", ok.stdout, re.M), ok.stdout
    assert re.search(r"^CI parts: setup=\d+s lint=\d+s docs=\d+s test=\d+s test-slow=\d+s; total \d+ s \(exit 0\)$",
                     ok.stdout, re.M), ok.stdout
    calls.unlink()
    bad = subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True, timeout=60,
                         env={**env, "FAIL_AT": "test"})
    assert bad.returncode == 3 and calls.read_text().split() == ["setup", "lint", "docs", "test"]
    assert re.search(r"^CI parts: setup=\d+s lint=\d+s docs=\d+s; total \d+ s \(exit 3\)$", bad.stdout, re.M)
    make = (ROOT / "Makefile").read_text()
    assert '-m pytest -m "not slow"' in make and "-m pytest -m slow" in make  # pytest exits 5 when nothing ran


def test_the_filter_and_evaluate_each_take_their_own_task_names(tmp_path: Path, session_dirs: dict) -> None:
    from vase.config import EVAL_TASKS, FILTER_TASKS

    line = _one_line(_run(["-m", "vase.filter", "task=vqa"], tmp_path, session_dirs))
    assert "task='vqa'" in line and all(f"'{t}'" in line for t in FILTER_TASKS)
    line = _one_line(_run(["evaluate.py", "task=synthetic"], tmp_path, session_dirs))
    assert "task='synthetic'" in line and all(f"'{t}'" in line for t in EVAL_TASKS)
    p = subprocess.run([sys.executable, "-m", "vase.filter", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and all(f"  {t}" in p.stdout and w in p.stdout for t, w in FILTER_TASKS.items())


# ------------------------------------------------------------------ nothing silent, nothing late


@pytest.mark.parametrize(("overrides", "expected"), [
    (["data.limit_train=0"], "data.limit_train=0 must be at least 1, or null for no limit"),
    (["data.limit_val=0", "evaluate.after=true"], "data.limit_val=0 leaves no vase to evaluate"),
    (["stage.module.optimizer.lrr=1"],  # the same line as the + form (test_trust)
     "stage.module.optimizer.lrr: AdamW takes no argument 'lrr', so nothing would read it; did you mean 'lr'?"),
    (["stage=grpo", "stage.module.num_generation=1"],
     "stage.module.num_generation: GRPOModule takes no argument 'num_generation', so nothing would read it; did you "
     "mean 'num_generations'?"),
    (["stage.num_generations=1"], "stage.num_generations: stage has no key 'num_generations'"),
    (["callbacks.mine._target_=x.Y"], "(a new entry is added with +callbacks.mine._target_=...)"),
    (["stage=grpo", "+reward.terms.mine._target_=nope.Mod", "+reward.terms.mine.weight=1"],
     "reward.terms.mine._target_='nope.Mod' cannot be imported: ModuleNotFoundError: No module named 'nope'"),
])
def test_bad_values_and_keys_are_one_line_before_anything_loads(overrides: list[str], expected: str,
                                                                 tmp_path: Path, session_dirs: dict) -> None:
    p = _run(["train.py", "logger=none", *overrides], tmp_path, session_dirs)
    line = _one_line(p)
    assert line.startswith("config error: ") and expected in line, line
    assert "sweep job" not in p.stderr and "loading model" not in p.stdout + p.stderr
    # a run stopped by its config is marked failed, never left 'running' for resume=auto or a reader to take as live
    statuses = [json.loads(f.read_text())["status"] for f in (tmp_path / "logs").rglob(".vase-run.json")]
    assert all(s == "failed" for s in statuses), statuses


def test_a_refused_run_directory_keeps_the_files_of_the_run_that_made_it(tmp_path: Path,
                                                                         session_dirs: dict) -> None:
    done = tmp_path / "finished"
    (done / ".hydra").mkdir(parents=True)
    for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        (done / ".hydra" / name).write_text(f"the finished run's {name}\n")
    (done / "train.log").write_text("the finished run's log\n")
    (done / ".vase-run.json").write_text(json.dumps({"status": "finished", "key": "abc", "overrides": ["seed=1"]}))
    before = tree_hash(done)
    line = _one_line(_run(["train.py", "logger=none", f"hydra.run.dir={done}"], tmp_path, session_dirs))
    assert "holds an earlier finished run" in line
    after = tree_hash(done)
    assert {k: v for k, v in after.items() if not k.endswith(".vase-run.lock")} == before


def test_a_decompression_bomb_is_one_line_naming_the_file_and_the_limit(synthetic_root: Path,
                                                                        tmp_path: Path) -> None:
    from PIL import Image

    from vase.config import one_line
    from vase.data.dataset import load_views

    root = _user_dataset(synthetic_root, tmp_path / "user", views=True)
    bomb = next((root / "images" / "front").glob("*.png"))
    Image.new("1", (20000, 20000)).save(bomb)  # 400 megapixels, 1-bit: small on disk, too large to decode safely
    with pytest.raises(DataError) as e:
        load_views(root, bomb.stem)
    msg = str(e.value)
    assert str(bomb) in msg and "too large to decode safely" in msg and f"{2 * Image.MAX_IMAGE_PIXELS:,}" in msg
    # raised in a DataLoader worker, it comes back wrapped in the worker's traceback: the one line is the original
    import torch.utils.data as tud

    class Views(tud.Dataset):
        def __len__(self) -> int:
            return 1

        def __getitem__(self, i: int):
            return load_views(root, bomb.stem)

    with pytest.raises(DataError) as wrapped:
        next(iter(tud.DataLoader(Views(), num_workers=1, collate_fn=lambda x: x)))
    assert "Traceback" in str(wrapped.value) and one_line(wrapped.value) == msg


def test_the_filter_names_symlink_loops_and_dangling_links(tmp_path: Path) -> None:
    from vase.images import open_photo

    d = tmp_path / "photos"
    (d / "sub").mkdir(parents=True)
    os.symlink("b.jpg", d / "a.jpg")
    os.symlink("a.jpg", d / "b.jpg")
    os.symlink("nowhere.jpg", d / "dangling.jpg")
    os.symlink(d, d / "sub" / "loop")  # a folder link that leads back above itself
    os.symlink(d / "sub", d / "folder")
    assert open_photo(d / "a.jpg").reason.startswith("symbolic link loop")
    assert open_photo(d / "dangling.jpg").reason == "dangling symbolic link (its target 'nowhere.jpg' does not exist)"
    assert open_photo(d / "sub" / "loop").reason.startswith("symbolic link loop (a link to a folder that holds it)")
    assert open_photo(d / "folder").reason == "symbolic link to a folder, not to an image file"


# ------------------------------------------------------------------ a killed sweep resumes by rerunning


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_a_killed_sweep_resumes_by_rerunning_it(tmp_path: Path, session_dirs: dict) -> None:
    """A grid sweep killed (SIGKILL) in its second job, rerun as it was: the same sweep folder, the finished job kept
    byte for byte and not retrained, the killed one resumed from its checkpoint, the summary over both."""
    logs = tmp_path / "logs"
    cmd = [sys.executable, "train.py", "-m", "stage.module.lora.r=4,8", "debug=fast", "trainer.max_steps=4",
           "callbacks.checkpoint.every_n_train_steps=2", "logger=none", "evaluate.before=false",
           "evaluate.after=false", "report=false", "render.resolution=64", "+callbacks.signal._target_=tests.signals.SignalAt",
           f"paths.log_dir={logs}", f"paths.cache_dir={session_dirs['cache']}"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                           env={**env, "VASE_TEST_SIGNAL_AT": "3:9", "VASE_TEST_SIGNAL_JOB": "1"})
    assert first.returncode == -9, first.stderr[-2000:]
    (sweep,) = list((logs / "train" / "multiruns").iterdir())
    status = {j: json.loads((sweep / j / ".vase-run.json").read_text())["status"] for j in ("0", "1")}
    assert status == {"0": "finished", "1": "running"} and (sweep / "1" / "checkpoints" / "last.ckpt").is_file()
    kept = {k: v for k, v in tree_hash(sweep / "0").items() if not k.endswith((".lock", ".vase-run.json"))}

    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert list((logs / "train" / "multiruns").iterdir()) == [sweep]
    assert f"keeping the finished sweep job {sweep / '0'}" in second.stdout
    assert "resuming sft from" in second.stdout and second.stdout.count("resuming sft from") == 1
    assert {k: v for k, v in tree_hash(sweep / "0").items() if not k.endswith((".lock", ".vase-run.json"))} == kept
    history = json.loads((sweep / "1" / "train_history.json").read_text())
    assert [int(h["step"]) for h in history] == [0, 1, 2, 3]  # each step once: none lost, none repeated
    assert json.loads((sweep / "1" / ".vase-run.json").read_text())["status"] == "finished"
    assert json.loads((sweep / ".vase-run.json").read_text())["status"] == "finished"
    assert len(json.loads((sweep / "summary.json").read_text())["jobs"]) == 2


def test_a_config_error_loads_no_torch(tmp_path: Path) -> None:
    """A bad value is refused in about a second: nothing on that path (the Hydra callbacks every run loads, the
    preflight checks) imports torch or Lightning."""
    p = subprocess.run([sys.executable, "-X", "importtime", "train.py", "reward.tau=1.7",
                        f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "config error: reward.tau=1.7" in p.stderr
    heavy = sorted({ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if "import time:" in ln
                    and ln.split("|")[-1].strip().split(".")[0] in ("torch", "pytorch_lightning", "transformers")})
    assert not heavy, heavy[:5]
