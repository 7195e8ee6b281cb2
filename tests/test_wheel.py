"""vase as a package a user's project depends on: a wheel built from this checkout, installed into a fresh virtual
environment outside it, runs its commands from an empty folder, composes the user's own project (the files of
docs/library.md, as written there) with the user's file winning over vase's, and writes nothing into the package."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.library_page import build_project, page_command, project_files
from tests.wheel import ENV, install_wheel
from vase import __version__
from vase.checks.wheel_check import tree_digest


def vase_version() -> str:
    return __version__


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheel, and a virtual environment holding it (`tests.wheel.install_wheel`)."""
    return install_wheel(tmp_path_factory.mktemp("wheel"))


def _run(installed: dict[str, Path], cwd: Path, *args: str, env: dict[str, str] | None = None,
         timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(installed["bin"] / args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**ENV, **(env or {})})


def test_the_wheel_carries_every_config_and_its_commands_run_from_an_empty_folder(installed: dict[str, Path],
                                                                                   tmp_path: Path) -> None:
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    configs = {f"vase/conf/{p.relative_to(ROOT / 'conf').as_posix()}" for p in (ROOT / "conf").rglob("*.yaml")}
    linked = {f"vase/conf/{g}/{p.name}" for g, d in (("experiment", "experiments"), ("sweep", "sweeps"))
              for p in (ROOT / d).glob("*.yaml")}
    assert configs | linked <= names and len(linked) > 20, sorted((configs | linked) - names)[:5]
    assert "hydra_plugins/vase_launchers/__init__.py" in names
    # the harnesses that run real tools against a checkout (vase/checks, ARCHITECTURE.md) are no part of the wheel
    assert not [n for n in names if n.startswith("vase/checks/")] and "vase/kernels.py" in names
    before = tree_digest(installed["package"])
    empty = tmp_path / "empty"
    empty.mkdir()
    p = _run(installed, empty, "vase", "--version")
    assert p.returncode == 0 and re.fullmatch(r"vase \S+ \(installed, .*\)\n", p.stdout), p.stdout + p.stderr
    assert str(installed["package"].resolve()) in p.stdout  # the wheel's vase, not this checkout's
    from vase.provenance import code_stamp

    # the commit the wheel was built from, written into it at build: a wheel named no commit (2026-12-03)
    assert f"(installed, built from commit {code_stamp()['commit'][:10]}" in p.stdout, p.stdout
    p = _run(installed, empty, "vase", "changelog", vase_version())
    assert p.returncode == 0 and p.stdout.startswith(f"## [{vase_version()}] - "), p.stdout[:300] + p.stderr
    meta = zipfile.ZipFile(installed["wheel"])
    (info,) = [n for n in meta.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = meta.read(info).decode()
    assert "Project-URL: Changelog, https://github.com/vase-project/vase/blob/main/CHANGELOG.md" in metadata
    assert "Project-URL: Documentation, " in metadata
    relative = re.findall(r"\]\((?!https?://|#)[^)]+\)", metadata.split("\n\n", 1)[1])
    assert not relative, relative[:3]  # the README as the description: every link leads somewhere off the checkout
    p = _run(installed, empty, "vase", "train", "--help")
    groups = dict(re.findall(r"^([\w/]+): (.*)$", p.stdout.split("== Config ==")[0], flags=re.M))
    assert p.returncode == 0 and "demo" in groups["experiment"] and "tau" in groups["sweep"], p.stdout[-2000:]
    # train's own groups: not evaluate's actions, nor vase's internal schema/, shared/, sweep/space
    assert not {"action", "schema", "shared", "sweep/space"} & set(groups) and p.stdout.startswith("usage: vase train ")
    p = _run(installed, empty, "vase-evaluate", "--help")
    assert p.returncode == 0 and "  vqa " in p.stdout and "  score " in p.stdout
    assert "Actions (vase-evaluate action=<name>)" in p.stdout and "python evaluate.py" not in p.stdout
    p = _run(installed, empty, "vase-train", "experiment=demo", env={"VASE_CHECK_CONFIG": "1"})
    assert p.returncode == 0 and "config ok: experiment=demo" in p.stdout, p.stderr[-2000:]
    # the configuration reference from the package's configs, into the folder run from (a FileNotFoundError traceback
    # once: it looked for a checkout's conf/)
    p = _run(installed, empty, "vase", "config-reference")
    page = empty / "configuration.md"
    assert p.returncode == 0 and page.is_file(), p.stdout + p.stderr[-2000:]
    from vase.docsgen.config_reference import PAGE

    assert page.read_text() == PAGE.read_text()  # the same reference as the checkout's docs page
    p = _run(installed, empty, "vase", "config-reference", "--check")
    assert p.returncode == 2 and p.stderr.startswith("error: --check compares a checkout's docs"), p.stderr
    page.unlink()
    p = _run(installed, empty, "vase", "nosuch")
    assert p.returncode == 2 and p.stderr.startswith("vase: 'nosuch' is no command; choose one of train, evaluate")
    assert tree_digest(installed["package"]) == before  # nothing written into the package


def test_the_wheel_s_requirements_resolve_from_the_package_index_alone(installed: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    """What ``pip install <wheel>`` on a clean machine would install, resolved from the package index with nothing
    installed counted (a dry run: the environment the other tests run in names this one's packages instead of
    copying gigabytes): every requirement is found, torch and torchvision at their pins among them."""
    import vase

    p = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q", "--report",
                        str(tmp_path / "report.json"), str(installed["wheel"])], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    got = {i["metadata"]["name"].lower(): i["metadata"]["version"]
           for i in json.loads((tmp_path / "report.json").read_text())["install"]}
    assert got["vase"] == vase.__version__ and got["torch"] == "2.14.1" and got["torchvision"] == "0.29.1", got
    assert {"hydra-core", "pytorch-lightning", "peft", "torchmetrics", "transformers", "wandb"} <= set(got)


def test_a_users_project_from_the_docs_runs_its_sweep_against_the_installed_wheel(installed: dict[str, Path],
                                                                                  tmp_path: Path) -> None:
    assert {"conf/sweep/my_lr.yaml", "conf/experiment/my_setup.yaml", "conf/callbacks/mine.yaml", "mylab/terms.py",
            "mylab/callbacks.py", "mylab/__init__.py", "mylab/metrics.py", "mylab/ext.py",
            "conf/plugins.yaml"} <= set(project_files())
    project = build_project(tmp_path / "myproject")
    before = tree_digest(installed["package"])
    command = " ".join(page_command("vase train --config-dir conf -m sweep=my_lr"))
    p = _run(installed, project, *command.split())
    assert p.returncode == 0, p.stderr[-3000:]
    verdict = next(ln for ln in p.stdout.splitlines() if ln.startswith("stage.module.optimizer.lr=0.001 against"))
    # the user's own term and caption metric, measured and judged (neither "not measured")
    assert "held-out amphora" in verdict and "held-out word_recall" in verdict and "not measured" not in verdict
    (page,) = (project / "logs" / "train" / "multiruns").glob("*/verdict.md")
    assert verdict.split(": ", 1)[1] in page.read_text()
    # the user's report kind (mylab.ext, from conf/plugins.yaml): its line in the log, its file beside verdict.md
    chat = (page.parent / "chat.txt").read_text()
    assert chat.startswith("stage.module.optimizer.lr=0.001 against") and f"chat: {chat.strip()}" in p.stdout
    jobs = sorted(page.parent.glob("[0-9]"))
    assert len(jobs) == 4 and all((j / "steps_seen.txt").read_text() == "2\n" for j in jobs)  # the user's callback
    assert (project / ".cache").is_dir() and not (project / "conf" / "logs").exists()
    assert tree_digest(installed["package"]) == before  # runs, caches and renders: all under the project
    # the sweep's record gives back the command that made it: the installed one, with the project's folder
    p = _run(installed, project, "vase", "runs", str(page.parent))
    again = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith("again:"))
    assert again.split("again:", 1)[1].strip() == (f"vase train --config-dir {project / 'conf'} -m "
                                                   + command.split(" -m ", 1)[1].strip()), p.stdout
    from vase.provenance import code_stamp

    # the record names the commit the wheel was built from (it said commit: null)
    assert f"  code:      {code_stamp()['commit'][:10]}" in p.stdout and f"installed vase {__version__}" in p.stdout


def test_the_users_file_wins_and_a_bad_project_is_one_line(installed: dict[str, Path], tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "conf" / "experiment").mkdir(parents=True)
    (project / "conf" / "experiment" / "demo.yaml").write_text("# @package _global_\nseed: 77\n")
    p = _run(installed, project, "vase", "train", "--config-dir", "conf", "experiment=demo", "--cfg", "job")
    assert p.returncode == 0 and re.search(r"^seed: 77$", p.stdout, flags=re.M), p.stdout[-1500:] + p.stderr[-1500:]
    assert f"note: {project / 'conf' / 'experiment' / 'demo.yaml'} (yours) is used in place of vase's experiment/demo" \
        in p.stderr
    p = _run(installed, project, "vase", "train", "experiment=demo", "--cfg", "job")
    assert re.search(r"^seed: 42$", p.stdout, flags=re.M)  # without --config-dir: vase's own
    p = _run(installed, project, "vase", "train", "--config-dir", "nowhere", "experiment=demo")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        f"config error: --config-dir nowhere: no such folder ({project / 'nowhere'}); it is your project's conf/, "
        f"with vase's group folders in it (experiment/, sweep/, callbacks/, ...)"]
    (project / "conf" / "sweep").mkdir()
    (project / "conf" / "sweep" / "typo.yaml").write_text(
        "# @package _global_\nval:\n  heldout: true\nreward:\n  terms:\n    mine:\n      _target_: mypkg.trems.X\n"
        "      weight: 0.5\n")
    p = _run(installed, project, "vase", "train", "--config-dir", "conf", "sweep=typo", "debug=fast", "logger=none",
             env={"VASE_CHECK_CONFIG": "1"})
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith(
        "config error: reward.terms.mine._target_='mypkg.trems.X' cannot be imported: ModuleNotFoundError: No module "
        "named 'mypkg'"), p.stderr[-1500:]


def test_the_version_is_set_once_and_the_changelog_and_the_docs_follow_it() -> None:
    import vase

    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from hooks import on_config, version
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert version() == vase.__version__ and on_config({})["site_name"] == f"vase {vase.__version__}"
    assert re.search(r"^version = attr: vase.__version__$", (ROOT / "setup.cfg").read_text(), flags=re.M)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.M)
    assert sections[0] == "Unreleased"  # what has landed since the last release
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", s) for s in sections[1:]), sections  # each a version
    assert vase.__version__ in sections, f"CHANGELOG.md has no section for {vase.__version__}"
    # the renames 0.2 made are accepted until the next minor version, which the deprecation lines name
    from vase.config.renames import UNTIL

    major, minor = map(int, vase.__version__.split(".")[:2])
    assert vase.__version__ >= "0.2.0" and UNTIL == f"{major}.{minor + 1}", (vase.__version__, UNTIL)


OUTSIDE_REQUIREMENTS = {
    "datasets": ("vase/integrations/trl.py",),  # TRL's, with the bench extra (pip install vase[bench])
    "deepspeed": ("vase/training/callbacks.py",),  # trainer=deepspeed_zero2|3, with the deepspeed extra
    "griffe": ("vase/docsgen/docstrings.py",),  # the docs' generators, with the dev extra
    "hy3dgen": ("vase/reconstruct/hunyuan3d_driver.py",),  # runs in Hunyuan3D's own environment
    "swift": ("vase/integrations/swift_plugin.py",),  # loaded by ms-swift, in its environment
}
"""The third-party imports the wheel's own requirements need not provide, and the only files that may make them."""


def _requirement_closure() -> set[str]:
    """The distributions ``pip install <wheel>`` brings: setup.cfg's install_requires and what they require, read
    from this environment's metadata (their extras' requirements left out, as pip leaves them)."""
    import configparser
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    todo = [Requirement(line.strip()).name for line in cfg["options"]["install_requires"].splitlines()
            if line.strip() and not line.strip().startswith("#")]
    seen: set[str] = set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        todo += [r.name for r in map(Requirement, reqs) if r.marker is None or r.marker.evaluate({"extra": ""})]
    return seen


def test_every_package_vase_imports_comes_with_the_wheel_s_requirements() -> None:
    """Each third-party module imported anywhere in vase/ (at the top or inside a function) belongs to a distribution
    that ``pip install <wheel>`` installs: setup.cfg's install_requires or what they require. The wheel once
    required too little: vase's sweepers subclass hydra-optuna-sweeper's, which only the dev extra brought, so a
    wheel installed from the package index could not train (make wheel-check found it; the wheel test beside this
    one borrows the checkout's environment, which has the dev extra). `OUTSIDE_REQUIREMENTS` names the exceptions."""
    import ast
    import importlib.util
    from importlib.metadata import distributions

    from packaging.utils import canonicalize_name

    brought = _requirement_closure()
    owner = {}  # each installed file's distribution: its folder resolved once, its metadata read once, not for each of its files (53 s -> 1 s)
    for d in distributions():
        base, name = Path(d.locate_file("")).resolve(), canonicalize_name(d.metadata["Name"])
        owner.update({os.path.normpath(base / f): name for f in d.files or []})
    wrong: dict[str, set[str]] = {}
    found: dict[str, str | None] = {}  # a module's distribution, looked up once
    for py in sorted((ROOT / "vase").rglob("*.py")):
        where = py.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in ("vase", "hydra_plugins.vase_launchers") or top in sys.stdlib_module_names:
                    continue
                if where in OUTSIDE_REQUIREMENTS.get(top, ()):
                    continue
                if name not in found:
                    try:
                        spec = importlib.util.find_spec(name)
                    except (ImportError, ValueError):
                        spec = None
                    origin = spec.origin if spec is not None and spec.origin not in (None, "built-in", "frozen") else None
                    found[name] = owner.get(str(Path(origin).resolve())) if origin else None
                dist = found[name]
                if dist not in brought and dist != "vase":
                    wrong.setdefault(f"{name} ({dist or 'no installed distribution'})", set()).add(where)
    assert not wrong, {k: sorted(v)[:3] for k, v in wrong.items()}


def test_vase_init_writes_a_project_whose_own_tests_pass_against_the_installed_wheel(installed: dict[str, Path],
                                                                                     tmp_path: Path,
                                                                                     session_dirs: dict) -> None:
    """A user wrote 334 lines by hand to start a project (2026-12-03): vase init writes it, and the project's own
    pytest (its configs composed and checked as vase train does, its evaluation action, a debug sweep over its own
    reward term to verdict.md) passes against the installed wheel. A folder with files in it is refused."""
    who = {"GIT_AUTHOR_NAME": "A User", "GIT_AUTHOR_EMAIL": "user@example.org", "GIT_COMMITTER_NAME": "A User",
           "GIT_COMMITTER_EMAIL": "user@example.org"}
    p = _run(installed, tmp_path, "vase", "init", "mylab", env=who)
    assert p.returncode == 0, p.stderr[-2000:]
    project = tmp_path / "mylab"
    pyproject = (project / "pyproject.toml").read_text()
    assert f'dependencies = ["vase=={vase_version()}"]' in pyproject
    # pytest comes with the project's test extra, and its tests import its package from the folder (pythonpath)
    assert 'test = ["pytest>=8"]' in pyproject and 'pythonpath = ["."]' in pyproject and "pip install -e" in p.stdout
    assert "logs/" in (project / ".gitignore").read_text()
    # a git repository whose first commit holds every file: each run's record names the project's commit
    assert p.stdout.strip().splitlines()[-1].startswith("git: a repository with the project as its first commit")
    log = subprocess.run(["git", "-C", str(project), "log", "--format=%s"], capture_output=True, text=True)
    assert log.stdout.strip() == f"vase init: a project on vase {vase_version()}", log.stdout + log.stderr
    assert not subprocess.run(["git", "-C", str(project), "status", "--porcelain"], capture_output=True,
                              text=True).stdout.strip()
    # where git does not know the user: the files and a repository, nothing committed, and how to commit, in one line
    nobody = {"HOME": str(tmp_path), "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1",
              "GIT_CONFIG_KEY_0": "user.useConfigOnly", "GIT_CONFIG_VALUE_0": "true"}  # git guesses no one
    p = _run(installed, tmp_path, "vase", "init", "other", env=nobody)
    said = p.stdout.strip().splitlines()[-1]
    assert p.returncode == 0 and said.startswith("git: a repository, nothing committed (git said: "), p.stdout
    assert "run git commit -m 'vase init' once git knows who you are" in said and (tmp_path / "other" / ".git").is_dir()
    p = subprocess.run([str(installed["bin"] / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                       capture_output=True, text=True, timeout=1500,
                       env={**ENV, "VASE_TEST_CACHE": str(session_dirs["cache"])})
    assert p.returncode == 0 and "4 passed" in p.stdout, p.stdout[-3000:] + p.stderr[-2000:]
    p = _run(installed, tmp_path, "vase", "init", "mylab")
    assert p.returncode == 2 and p.stderr.strip() == ("error: mylab: holds files; vase init writes a new project only "
                                                      "into a new or empty folder"), p.stderr


def test_a_release_built_from_a_clean_clone_says_its_tree_was_clean(tmp_path: Path) -> None:
    """``make dist``'s build (``python -m build``: the sdist, then the wheel from it) from a clean clone of this
    commit stamps both as clean: the sdist's release tree, made in the checkout, was once counted as a change, so
    every record of a released vase said "(changes)"."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    p = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(clone)],
                       cwd=clone, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (wheel,) = (tmp_path / "dist").glob("vase-*.whl")
    (sdist,) = (tmp_path / "dist").glob("vase-*.tar.gz")
    with zipfile.ZipFile(wheel) as z:
        in_wheel = json.loads(z.read("vase/BUILD.json"))
    import tarfile

    with tarfile.open(sdist) as t:
        (member,) = [m for m in t.getmembers() if m.name.endswith("/vase/BUILD.json")]
        in_sdist = json.loads(t.extractfile(member).read())
    assert in_wheel == in_sdist == {"commit": head, "dirty": False, "built_from": "checkout"}
    assert not subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True,
                              text=True).stdout.strip()
