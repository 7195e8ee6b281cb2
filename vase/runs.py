"""Run directories: one per process, never shared, found again by a rerun of the same command.

``hydra.run.dir`` and ``hydra.sweep.dir`` resolve through `run_dir` (``${vase.run_dir:<base>,<resume>}``):

- a new directory is created exclusively (``<base>/<time>``; a second process in the same second gets
  ``<time>_1``), so two runs started together never write into one folder;
- with ``resume=auto`` a run that was killed (its folder holds a checkpoint, its status is not ``finished`` and no
  live process holds its lock) and that was started with the same overrides into the same config (config files
  edited since make another run: `config_digest`) is taken up again instead: rerunning the command resumes it
  (see `resume_checkpoint`).

Each run holds an advisory lock on ``<run>/.vase-run.lock`` for as long as its process lives (the kernel drops it
when the process dies, even by SIGKILL), and records its task, overrides and status in ``<run>/.vase-run.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from vase.errors import ConfigError
from vase.io import atomic_write_bytes, atomic_write_json, file_lock
from vase.kernels import cpu_record, portable_pinned

RUN_FILE = ".vase-run.json"
LOCK_FILE = ".vase-run.lock"
CHECKPOINT = Path("checkpoints") / "last.ckpt"
# what a run directory may hold besides vase's outputs: Hydra's own files
_HYDRA_FILES = {".hydra", RUN_FILE, LOCK_FILE}
# overrides that say how to start, not what to train: a rerun with or without them is the same run
_NOT_IDENTITY = ("resume", "ckpt_path", "hydra.", "paths.output_dir")
LOG_DIR_ENV = "VASE_LOG_DIR"
"""Where runs go when set: the default of ``paths.log_dir`` and of every check's and tool's output folder."""

_held: dict[Path, int] = {}  # run directories this process holds, with the locked file descriptor
_memo: dict[tuple[str, ...], str] = {}  # resolver arguments -> the directory chosen, stable within a process
_multirun: dict[str, Any] = {}  # the running multirun's overrides and sweeper (note_multirun)


def machine_stamp() -> dict[str, Any]:
    """Where, when and by which code (`code_stamp`) a result was made, stored with it, so that a table built from it
    names the machine and the code."""
    try:
        # lazy: torch
        import torch

        torch_version = str(torch.__version__)
    except ImportError:  # pragma: no cover - torch is a dependency
        torch_version = "absent"
    return {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "machine": platform.machine(),
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "torch": torch_version, **cpu_record(), "code": code_stamp()}


_SOURCE = Path(__file__).resolve().parent.parent
"""Where vase's code lives: a git checkout (an editable install, a clone), or site-packages (a wheel)."""
CODE_PACKAGES = ("torch", "transformers", "peft", "trl")


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(_SOURCE), *args], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.decode(errors="replace") if p.returncode == 0 else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


PATCH_FILE = "code.patch"
"""A dirty run's changes to its commit, in its folder: ``git apply`` on that commit gives the code that ran."""
PATCH_CAP = 5_000_000
"""The largest patch a run folder keeps (bytes); over it the record says how large the changes were and keeps none."""


@functools.lru_cache(maxsize=1)
def _changes() -> tuple[str, list[str]]:
    """This checkout's changes to its commit: ``git diff HEAD --binary`` and the files git does not track yet, read
    once per process for both the code stamp's hash and the run's patch."""
    listing = _git("ls-files", "--others", "--exclude-standard", "-z") or ""
    return _git("diff", "HEAD", "--binary") or "", sorted(n for n in listing.split("\0") if n)


BUILD_FILE = Path(__file__).resolve().parent / "BUILD.json"
"""An installed wheel's stamp of the commit it was built from (written by setup.py at build time)."""


def _built() -> dict[str, Any]:
    """The commit an installed wheel was built from (`BUILD_FILE`), marked ``installed``; {} without one."""
    try:
        stamp = json.loads(BUILD_FILE.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(stamp, dict) or not stamp.get("commit"):
        return {}
    return {"commit": str(stamp["commit"]), "dirty": bool(stamp.get("dirty")), "diff": stamp.get("diff"),
            "installed": True}


@functools.lru_cache(maxsize=1)
def _code() -> dict[str, Any]:
    top = _git("rev-parse", "--show-toplevel")
    commit = _git("rev-parse", "HEAD") if top and Path(top.strip()).resolve() == _SOURCE else None
    out: dict[str, Any] = {"commit": commit.strip() if commit else None, "dirty": None, "diff": None}
    if not commit:  # not a checkout: an installed wheel names the commit it was built from
        out.update(_built())
    elif commit:
        diff, untracked = _changes()
        digest = hashlib.sha256(diff.encode())
        for name in untracked:  # files git does not track yet are code too
            with contextlib.suppress(OSError):
                digest.update(name.encode() + b"\0" + (_SOURCE / name).read_bytes())
        out["dirty"] = bool(diff or untracked)
        out["diff"] = digest.hexdigest()[:12] if out["dirty"] else None
    return {**out, "vase": _version("vase"), **{p: _version(p) for p in CODE_PACKAGES}}


@functools.lru_cache(maxsize=1)
def code_patch() -> bytes | None:
    """This checkout's changes to its commit as one patch (``git diff HEAD --binary``, then each untracked file as a
    new file), or None where the tree is clean or not a checkout; stops once over `PATCH_CAP` (the caller sees the
    size). Read from the checkout only: git's index and tree are left as they are."""
    if not _code().get("dirty") or _code().get("installed"):  # a wheel's changes were not shipped with it
        return None
    diff, untracked = _changes()
    parts = [diff.encode()]
    size = len(parts[0])
    for name in untracked:
        if size > PATCH_CAP:
            break
        try:  # --no-index exits 1 where the files differ, as a new file always does
            p = subprocess.run(["git", "-C", str(_SOURCE), "diff", "--no-index", "--binary", "--", "/dev/null", name],
                               capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode in (0, 1):
            parts.append(p.stdout)
            size += len(p.stdout)
    return b"".join(parts)


def keep_patch(path: Path) -> dict[str, Any]:
    """Write a dirty checkout's `code_patch` into the run folder ``path`` (`PATCH_FILE`) and say what was kept: ``{}``
    for a clean tree, ``{"patch": "code.patch"}``, or ``{"patch": None, "patch_bytes": n}`` over the cap."""
    patch = code_patch()
    if patch is None:
        return {}
    if len(patch) > PATCH_CAP:
        return {"patch": None, "patch_bytes": len(patch)}
    atomic_write_bytes(path / PATCH_FILE, patch)
    return {"patch": PATCH_FILE}


PROJECT_ENV = "VASE_PROJECT"
"""The user's project a command composes from (``--config-dir``): set by `vase.cli.project.use_project`, carried in
the environment to a sweep's jobs, whatever launcher runs them."""
PROJECT_PATCH = "project.patch"
"""A run's copy of the user's project's changes to its commit: ``git apply`` on that commit gives the code that ran."""


def _git_in(folder: Path, *args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.decode(errors="replace") if p.returncode == 0 else None


def project_stamp(folder: str | Path | None = None) -> dict[str, Any] | None:
    """The user's project a run was composed from (``folder``, by default `PROJECT_ENV`'s): its folder and, where it
    is a git checkout, its commit, whether its tree has changes and a hash of them (``git diff HEAD`` and the files
    git does not track yet); None outside a project."""
    folder = folder if folder is not None else os.environ.get(PROJECT_ENV)
    if not folder:
        return None
    root = Path(folder)
    out: dict[str, Any] = {"folder": str(root), "commit": None, "dirty": None, "diff": None}
    commit = _git_in(root, "rev-parse", "HEAD")
    if commit:
        diff = _git_in(root, "diff", "HEAD", "--binary") or ""
        untracked = sorted(n for n in (_git_in(root, "ls-files", "--others", "--exclude-standard", "-z") or "")
                           .split("\0") if n)
        digest = hashlib.sha256(diff.encode())
        for name in untracked:
            with contextlib.suppress(OSError):
                digest.update(name.encode() + b"\0" + (root / name).read_bytes())
        out.update(commit=commit.strip(), dirty=bool(diff or untracked),
                   diff=digest.hexdigest()[:12] if diff or untracked else None)
    return out


def keep_project_patch(path: Path, project: dict[str, Any]) -> dict[str, Any]:
    """Write a dirty project's changes to its commit into the run folder ``path`` (`PROJECT_PATCH`: ``git diff HEAD``,
    then each untracked file as a new file; at most `PATCH_CAP`) and say what was kept, as `keep_patch` does for
    vase's own code."""
    if not project.get("dirty"):
        return {}
    root = Path(project["folder"])
    parts = [(_git_in(root, "diff", "HEAD", "--binary") or "").encode()]
    for name in sorted(n for n in (_git_in(root, "ls-files", "--others", "--exclude-standard", "-z") or "").split("\0")
                       if n):
        if sum(map(len, parts)) > PATCH_CAP:
            break
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # --no-index exits 1 where the files differ
            parts.append(subprocess.run(["git", "-C", str(root), "diff", "--no-index", "--binary", "--", "/dev/null",
                                         name], capture_output=True, timeout=30).stdout)
    patch = b"".join(parts)
    if len(patch) > PATCH_CAP:
        return {"patch": None, "patch_bytes": len(patch)}
    atomic_write_bytes(path / PROJECT_PATCH, patch)
    return {"patch": PROJECT_PATCH}


def project_label(project: dict[str, Any] | None) -> str:
    """
    >>> project_label({"folder": "/p", "commit": "3f2a9c1d0e77", "dirty": True, "diff": "a1b2"})
    '3f2a9c1d0e (changes a1b2)'
    >>> project_label({"folder": "/p", "commit": None})
    'not a git checkout'
    """
    if not project or not project.get("commit"):
        return "not a git checkout"
    return project["commit"][:10] + (f" (changes {project['diff']})" if project.get("dirty") else "")


def code_stamp() -> dict[str, Any]:
    """Which code made a result, stored with it: vase's git commit, whether its tree had changes (and a hash of them:
    ``git diff HEAD`` and the untracked files), vase's version, the torch, transformers, peft and trl versions, and
    ``cpu_kernels``. An installed wheel names the commit it was built from (``installed``: true; `BUILD_FILE`); a
    package with no stamp has ``commit`` None and its version names it. Computed once per process."""
    return {**_code(), "cpu_kernels": "portable" if portable_pinned() else "native"}


def code_label(code: dict[str, Any] | None) -> str:
    """One short name for a code stamp: ``3f2a9c1d0e (changes a1b2c3d4e5f6)``; an installed wheel's, with its
    version; ``vase 0.1.0`` where nothing names the commit.

    >>> code_label({"commit": "3f2a9c1d0e77", "dirty": True, "diff": "a1b2c3d4e5f6", "vase": "0.1.0"})
    '3f2a9c1d0e (changes a1b2c3d4e5f6)'
    >>> code_label({"commit": None, "vase": "0.1.0"}), code_label(None)
    ('vase 0.1.0', 'unrecorded')
    >>> code_label({"commit": "3f2a9c1d0e77", "dirty": False, "installed": True, "vase": "0.2.0"})
    '3f2a9c1d0e, installed vase 0.2.0'
    """
    if not code:
        return "unrecorded"
    if not code.get("commit"):
        return f"vase {code.get('vase') or '?'}"
    changes = f" (changes {code['diff']})" if code.get("dirty") and code.get("diff") else (
        " (changes)" if code.get("dirty") else "")
    return code["commit"][:10] + changes + (f", installed vase {code.get('vase') or '?'}" if code.get("installed") else "")


def run_key(overrides: list[str], digest: str = "") -> str:
    """A short hash of the overrides that define a run (``resume=`` and ``ckpt_path=`` left out) and of the config
    they were composed into (``digest``, `config_digest`): a config file edited since is another run.

    >>> run_key(["seed=1", "resume=never"]) == run_key(["seed=1"]) != run_key(["seed=2"])
    True
    >>> run_key(["seed=1"], "a") != run_key(["seed=1"], "b")
    True
    """
    kept = sorted(o for o in overrides if not o.lstrip("+~").startswith(_NOT_IDENTITY))
    return hashlib.sha256("\n".join([*kept, digest] if digest else kept).encode()).hexdigest()[:12]


def config_digest(cfg: Any) -> str:
    """A hash of a composed config as written (interpolations unresolved, so a time or a run folder does not enter
    it), without Hydra's own node and the keys that only say how to resume: what the config files and overrides made
    of the run. A killed run is taken up again only when the config it would now run equals the one it ran."""
    if not isinstance(cfg, DictConfig):
        return ""
    keep = [k for k in cfg.keys() if k != "hydra" and not str(k).startswith(_NOT_IDENTITY)]
    text = OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, keep), resolve=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def job_overrides() -> list[str]:
    """The command-line (and sweep) overrides of the running Hydra job; [] outside Hydra."""
    try:
        return list(HydraConfig.get().overrides.task)
    except (ValueError, AttributeError):
        return []


def _rank() -> int:
    for var in ("RANK", "LOCAL_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "0") not in ("", "0"):
            return int(os.environ[var])
    return 0


def read_status(path: str | Path) -> dict[str, Any]:
    """The run record of a run directory ({} where there is none or it does not parse)."""
    try:
        return json.loads((Path(path) / RUN_FILE).read_text())
    except (OSError, ValueError):
        return {}


def _try_lock(path: Path) -> int | None:
    try:
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a folder that cannot be written (read-only, full): its lock file, if any, read as it is
        try:
            fd = os.open(path / LOCK_FILE, os.O_RDONLY)
        except FileNotFoundError:  # no process ever held it: nobody holds it now (the folder's fd, to close)
            return os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def claim(path: str | Path, resume: str = "auto", overrides: list[str] | None = None, key: str | None = None) -> Path:
    """Hold ``path`` as this process's run directory for as long as the process lives.

    Raises ConfigError when another live process holds it, or when it holds an earlier run that this one would
    overwrite: a finished run, or an interrupted one with ``resume=never``. Calling it again for a directory this
    process holds does nothing.
    """
    path = Path(path).resolve()
    if path in _held or _rank() != 0:
        return path
    path.mkdir(parents=True, exist_ok=True)
    fd = _try_lock(path)
    status = read_status(path)
    try:
        _refuse_earlier(path, status, fd is None, resume)
    except ConfigError:
        if fd is not None:
            os.close(fd)
        raise
    _held[path] = fd
    overrides = job_overrides() if overrides is None else overrides
    code = code_stamp()
    if status.get("code") and code_label(status["code"]) != code_label(code):
        if status["code"].get("patch") and (path / PATCH_FILE).is_file():  # the first code's changes stay readable
            os.replace(path / PATCH_FILE, path / f"before-{PATCH_FILE}")
            status["code"]["patch"] = f"before-{PATCH_FILE}"
    record = {**status, "pid": os.getpid(), "status": "running", "key": status.get("key") or key or run_key(overrides),
              "overrides": status.get("overrides", overrides), "started": status.get("started", time.time()),
              "code": {**code, **keep_patch(path)}}
    project = project_stamp()
    if project is not None:  # a run composed from a user's project: its code, beside vase's
        record["project"] = {**project, **keep_project_patch(path, project)}
    record.pop("reason", None)
    if status.get("code") and code_label(status["code"]) != code_label(code):
        record["code_before"] = status["code"]  # resumed by other code than started it: both are named
    if status.get("status"):  # taken up again: how the earlier process ended (a "running" one was killed)
        record["resumed_from"] = "killed" if status["status"] == "running" else status["status"]
    atomic_write_json(path / RUN_FILE, record)
    return path


def _refuse_earlier(path: Path, status: dict[str, Any], live: bool, resume: str | None) -> None:
    """Refuse a run directory that another live process holds, or whose earlier run this one would overwrite (a
    finished run; an interrupted one with ``resume=never``)."""
    if live:
        raise ConfigError(f"run directory {path} is in use by another running process (pid {status.get('pid', '?')});"
                          f" wait for it, or choose another folder (hydra.run.dir=...)")
    earlier = status.get("status")
    if earlier == "finished" or (earlier and resume == "never"):
        how = "" if earlier == "finished" else "; resume=auto continues it"
        raise ConfigError(f"run directory {path} holds an earlier {'finished' if earlier == 'finished' else 'interrupted'}"
                          f" run, which this one would overwrite{how}; choose a new folder (hydra.run.dir=...)")


def set_status(path: str | Path, status: str, reason: str | None = None, **fields: Any) -> None:
    """Record ``status`` (``running``, ``finished``, ``failed``, ``interrupted``, ``checked``) and, for a failure, its
    one-line ``reason`` for a run directory this process holds; ``fields``: more of the record (a sweep's ``end``)."""
    path = Path(path).resolve()
    if path in _held:
        record = {**read_status(path), **fields, "status": status, "ended": time.time()}
        record.pop("reason", None)
        if reason:
            record["reason"] = reason
        atomic_write_json(path / RUN_FILE, record)


def note_record(path: str | Path, **fields: Any) -> None:
    """Write ``fields`` into the record of a run directory this process holds, its status as it is (a sweep's end
    being written: its ``reason`` says so to a reader should the process be gone)."""
    path = Path(path).resolve()
    if path in _held:
        atomic_write_json(path / RUN_FILE, {**read_status(path), **fields})


def set_status_held(status: str, reason: str | None = None) -> None:
    """Record ``status`` for every run directory this process holds that is still ``running`` (a sweep's finished
    jobs keep theirs): ``failed`` with its reason when an error stopped it (neither ``resume=auto`` nor a reader takes
    it for live; one that had saved a checkpoint is still resumed), ``checked`` when only its config was checked."""
    for path in list(_held):
        if read_status(path).get("status", "running") == "running":
            set_status(path, status, reason)


def record_machine_held() -> None:
    """Record, in the run record of every run directory this process holds, the machine and kernels its numbers come
    from (`vase.kernels.cpu_record`) and the code stamp as it stands now: called once the kernels are pinned and
    torch has loaded (the record was first written while Hydra composed the config, before either)."""
    for path in list(_held):
        record = read_status(path)
        if record:
            atomic_write_json(path / RUN_FILE, {**record, "code": {**record.get("code", {}), **code_stamp()},
                                                "machine": cpu_record()})


def job_dir() -> Path | None:
    """The run directory of the Hydra job this process runs (None outside one)."""
    try:
        return Path(HydraConfig.get().runtime.output_dir).resolve()
    except ValueError:
        return None


def status_of(path: str | Path) -> str:
    """A run directory's status as a reader should see it: its record's, except that a run recorded ``running``
    whose process is gone (no live process holds its lock: killed, or the machine went down) is ``killed``, and a
    sweep whose end was being written then is ``failed`` (its end did not finish)."""
    path = Path(path)
    record = read_status(path)
    status = record.get("status", "")
    if status != "running" or Path(path).resolve() in _held:
        return status
    fd = _try_lock(path)
    if fd is None:
        return "running"
    os.close(fd)
    # a sweep whose end was being written when its process stopped (a full disk that kept its record from saying
    # more, or a kill): its end did not finish, which its record's reason says
    return "failed" if (record.get("end") or {}).get("state") == "writing" else "killed"


def record_lost(path: str | Path, reason: str) -> bool:
    """Record a run whose process is gone without a word (`status_of`: ``killed``), or that failed before it had a
    record (e.g. an import error before the run began), as ``failed`` with ``reason``: what the launcher of a sweep
    job learns when the job ends without a result. Returns whether it did."""
    path = Path(path)
    if (path / RUN_FILE).is_file() and status_of(path) != "killed":
        return False
    path.mkdir(parents=True, exist_ok=True)  # a sweep job's own folder (hydra.sweep.dir/<n>)
    atomic_write_json(path / RUN_FILE, {**read_status(path), "status": "failed", "ended": time.time(),
                                        "reason": reason})
    return True


def list_runs(root: str | Path) -> list[dict[str, Any]]:
    """Every run directory under ``root`` (any depth) with its status as `status_of` sees it, newest first."""
    rows = []
    for record in Path(root).rglob(RUN_FILE):
        d = record.parent
        st = read_status(d)
        rows.append({"run": str(d), "status": status_of(d), "reason": st.get("reason", ""),
                     "started": st.get("started", 0), "overrides": " ".join(st.get("overrides", []))})
    return sorted(rows, key=lambda r: r["started"], reverse=True)


def release(path: str | Path) -> None:
    """Give up the lock on a run directory (tests; a process's locks go with it anyway)."""
    fd = _held.pop(Path(path).resolve(), None)
    if fd is not None:
        os.close(fd)


def _resumable(base: Path, key: str, sweep: bool = False) -> Path | None:
    """The newest run under ``base`` started with overrides hashing to ``key`` that was interrupted with a
    checkpoint (a sweep: with any job begun) and that no live process holds; it is claimed before it is returned."""
    candidates = []
    for d in base.iterdir() if base.is_dir() else []:
        st = read_status(d)
        begun = any(d.glob(f"*/{RUN_FILE}")) if sweep else any(d.glob(f"**/{CHECKPOINT}"))
        if st.get("key") == key and st.get("status") not in ("finished", "checked") and begun:
            candidates.append((st.get("started", 0), d))
    for _, d in sorted(candidates, reverse=True):
        fd = _try_lock(d)
        if fd is not None:
            os.close(fd)  # claim() takes it again, under the directory lock nobody else can slip between
            return claim(d, "auto")
    return None


def root_digest(*, _root_: Any) -> str:
    """``${vase.config_digest:}``: `config_digest` of the config it is resolved in."""
    return config_digest(_root_)


def run_dir(base: str, resume: str = "never", kind: str = "run", digest: str = "") -> str:
    """``${vase.run_dir:<base>,<resume>[,run|sweep[,<digest>]]}``: this process's run directory under ``base``, or
    with ``sweep`` its multirun's folder (see the module docstring); ``digest``: a run's config's
    (``${vase.config_digest:}``). A sweep rerun with ``resume=auto`` takes up the newest
    unfinished sweep of the same command when its sweeper sends the same jobs again (the grid sweeper; an optuna
    search starts a new folder)."""
    memo_key = (str(base), str(resume), str(kind))
    if memo_key in _memo:
        return _memo[memo_key]
    if str(resume) not in ("auto", "never"):
        raise ConfigError(f"resume={resume!r} must be auto or never")
    root = Path(base)
    root.mkdir(parents=True, exist_ok=True)
    # one claim at a time, so two reruns never take one killed run (the lock file sits beside the folder of runs)
    with file_lock(root.parent / f".{root.name}.lock"):
        chosen = None
        # a multirun's folder is chosen before Hydra sets a config for its jobs: the multirun noted its own
        overrides = list(_multirun.get("overrides", [])) if kind == "sweep" else job_overrides()
        # the config's digest: a sweep's noted when it started (its jobs' configs differ by design), a run's given
        key = run_key(overrides, str(_multirun.get("digest", "")) if kind == "sweep" else str(digest))
        if kind == "sweep" and not str(_multirun.get("sweeper", "")).endswith(("BasicSweeper", "SearchConfirmSweeper")):
            resume = "never"  # only the grid sweeper and search-then-confirm (search.json) send the same jobs again
        if resume == "auto" and _rank() == 0:
            chosen = _resumable(root, key, sweep=kind == "sweep")
            if chosen is not None and kind == "sweep" and sweep_jobs_finished(chosen):
                print(f"finishing the end of the sweep {chosen}: its jobs all finished and are kept, none trains "
                      f"again (same command; resume=never starts afresh)")
            elif chosen is not None:
                how = read_status(chosen).get("resumed_from") or "interrupted"
                print(f"resuming the {how} run {chosen} (same command; resume=never starts afresh)")
        if chosen is None:
            stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
            for n in range(1000):
                candidate = root / (stamp if n == 0 else f"{stamp}_{n}")
                try:
                    candidate.mkdir()
                except FileExistsError:
                    continue
                chosen = claim(candidate, overrides=overrides, key=key)
                break
            else:
                raise ConfigError(f"{root}: could not create a new run directory for {stamp}")
    _memo[memo_key] = str(chosen)
    return str(chosen)


def note_multirun(overrides: list[str], sweeper: str, config: Any = None) -> None:
    """What a multirun was started with (its command-line overrides, its sweeper's class and its config's digest),
    noted when it starts (``SweepSummary.on_multirun_start``), before Hydra resolves its folder: a rerun of the same
    grid sweep into the same config with ``resume=auto`` takes up its unfinished folder."""
    _multirun.update(overrides=list(overrides), sweeper=str(sweeper), digest=config_digest(config))


def finished_sweep_job(path: str | Path, resume: str) -> bool:
    """In a sweep taken up again (``resume=auto``): whether this job's folder holds its finished run, which is kept
    and not trained again. A folder holding another job's run (the sweep changed since) is refused."""
    try:
        multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:
        return False
    status = read_status(path)
    if resume != "auto" or not multirun or not status:
        return False
    if status.get("key") != run_key(job_overrides()):
        raise ConfigError(f"sweep job folder {path} holds a run of other overrides ({' '.join(status.get('overrides', []))}"
                          f"); the sweep changed since it was started: rerun with resume=never for a new sweep")
    return status.get("status") == "finished"


SEARCH_STATE = "search.json"
"""A search-then-confirm sweep's progress beside its jobs (`vase.search`): its trials and confirmation jobs."""


def sweep_jobs_finished(sweep_dir: str | Path) -> bool:
    """Whether every job of a sweep finished (and it has one). A job begun is one with a record or Hydra's folder (a
    job killed before its record was written is unfinished); a search-then-confirm sweep (`SEARCH_STATE`) has
    finished its jobs only when every trial it asks for and every confirmation job is complete: one killed between two
    trials has no unfinished job folder, and its search is not over."""
    sweep_dir = Path(sweep_dir)
    begun = [d for d in sweep_dir.iterdir() if d.is_dir() and ((d / RUN_FILE).is_file() or (d / ".hydra").is_dir())]
    if not begun or not all(read_status(d).get("status") == "finished" for d in begun):
        return False
    search = sweep_dir / SEARCH_STATE
    if not search.is_file():
        return True
    try:
        state = json.loads(search.read_text())
    except (OSError, ValueError):
        return False  # unreadable: not known to be over, so the search takes it up (and says what is wrong)
    trials, confirms = state.get("trials") or [], state.get("confirmations") or []
    wanted = int((state.get("search") or {}).get("n_trials") or 0)
    ended = ("complete", "failed")  # as the sweeper counts them: a failed one ended (a rerun tries it again)
    searched = sum(t.get("state") in ended for t in trials) >= wanted
    chose = bool(confirms) or not any(t.get("state") == "complete" for t in trials)  # nothing to confirm: none chosen
    return searched and chose and all(c.get("state") in ended for c in confirms)


def finish_sweep(sweep_dir: str | Path) -> bool:
    """Mark a sweep ``finished`` when every job in it finished; otherwise it stays open, and the same command with
    ``resume=auto`` takes it up again. Returns whether it finished. (A sweep's end marks it only once its end is
    written: `vase.reports.sweep_end`.)"""
    done = sweep_jobs_finished(sweep_dir)
    set_status(sweep_dir, "finished" if done else "interrupted")
    return done


def resume_checkpoint(out_dir: str | Path, stage_dir: str | Path, resume: str) -> Path | None:
    """The checkpoint a stage of the run in ``out_dir`` continues from: ``<stage_dir>/checkpoints/last.ckpt`` when
    ``resume=auto`` and the run did not finish (a rerun of a killed command, or a requeued SLURM job), else None."""
    ckpt = Path(stage_dir) / CHECKPOINT
    if resume != "auto" or not ckpt.is_file() or read_status(out_dir).get("status") == "finished":
        return None
    return ckpt


def check_given_dir(path: str | Path, key: str = "hydra.run.dir", resume: str | None = None) -> None:
    """A run directory given on the command line must be new, empty, or an earlier vase run that this one may take
    up: never a user's folder, a finished run or a live one.

    Called before Hydra writes anything there (Hydra's own ``.hydra/`` and ``*.log`` files do not count), so a
    refused command leaves the folder as it was: Hydra's files there still describe the run that made them."""
    path = Path(path)
    if not path.is_dir():
        return
    status = read_status(path)
    if status:
        if _rank() == 0:  # another rank of the same run (DDP, a SLURM task) joins rank 0's folder
            fd = _try_lock(path)
            if fd is not None:
                os.close(fd)
            _refuse_earlier(path.resolve(), status, fd is None, resume)
        return
    foreign = sorted(p.name for p in path.iterdir() if p.name not in _HYDRA_FILES and not p.name.endswith(".log"))
    if foreign:
        raise ConfigError(f"{key}={path} already holds files vase did not write ({', '.join(foreign[:3])}"
                          f"{', ...' if len(foreign) > 3 else ''}); choose an empty or new folder")


def log_root(launch_dir: str | Path = ".") -> Path:
    """The folder runs go under: ``$VASE_LOG_DIR`` when set (as ``paths.log_dir`` defaults to it), else
    ``<launch_dir>/logs``."""
    env = os.environ.get(LOG_DIR_ENV, "").strip()
    return Path(env) if env else Path(launch_dir) / "logs"


def load_record(path: str | Path) -> dict[str, Any]:
    """A run folder's record, strictly: ConfigError naming the file where it is missing, not JSON or not a record
    (`read_status` reads leniently, for a run being written)."""
    f = Path(path) / RUN_FILE
    try:
        record = json.loads(f.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: not a vase run (no {RUN_FILE} in it)") from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{f}: not a readable run record ({e}); the run's other files are as it left "
                          f"them") from None
    if not isinstance(record, dict) or not isinstance(record.get("status"), str):
        raise ConfigError(f"{f}: not a vase run record (no status in it); the run's other files are as it left them")
    return record


PACKAGE_CONF = (Path(__file__).resolve().parent / "conf").resolve()
"""vase's own configs (`vase.config.CONF_DIR`): a run composed from another primary folder ran a user's project."""


def _entry_and_overrides(path: Path, record: dict[str, Any]) -> tuple[str, list[str], bool, str | None, str | None]:
    """The entry point, the overrides, whether it was a sweep (``-m``), the user's project folder it was composed
    from (``--config-dir``; None for vase's own) and the folder it was started from, from Hydra's own record of the
    run: a run's ``.hydra/``, a sweep's ``multirun.yaml``."""
    sweep = (path / "multirun.yaml").is_file()
    hydra_file = path / ("multirun.yaml" if sweep else ".hydra/hydra.yaml")
    overrides = [str(o) for o in record.get("overrides") or []]
    entry = ""
    project = launched = None
    if hydra_file.is_file():
        saved = OmegaConf.load(hydra_file)
        entry = str(OmegaConf.select(saved, "hydra.job.name", default="") or "")
        launched = OmegaConf.select(saved, "hydra.runtime.cwd", default=None)
        main = [str(src.get("path")) for src in OmegaConf.select(saved, "hydra.runtime.config_sources", default=None)
                or [] if src.get("provider") == "main" and src.get("schema") == "file"]
        if main and Path(main[0]).resolve() != PACKAGE_CONF:
            project = main[0]
        if sweep:
            overrides = [str(o) for o in OmegaConf.select(saved, "hydra.overrides.task", default=None) or overrides]
    if not sweep and (path / ".hydra" / "overrides.yaml").is_file():
        overrides = [str(o) for o in OmegaConf.load(path / ".hydra" / "overrides.yaml")]
    return entry, overrides, sweep, project, None if launched is None else str(launched)


def project_conf_of(path: str | Path) -> str | None:
    """The user's project conf folder a run or sweep was composed from (``--config-dir``), from Hydra's record of it;
    None for vase's own configs or a folder Hydra recorded nothing in."""
    folder = Path(path)
    if not (folder / "multirun.yaml").is_file() and not (folder / ".hydra" / "hydra.yaml").is_file():
        return None
    return _entry_and_overrides(folder, read_status(folder))[3]


def describe_run(path: str | Path) -> str:
    """One run's (or sweep's) record, for people: how it ended, the code that made it, whether the code checked out
    now differs, its overrides, and the command that makes it again (the entry point from Hydra's record of the job,
    at the commit that made it, with its changes applied from the patch it kept). ConfigError for a broken record or
    a folder whose entry point Hydra did not record."""
    path = Path(path)
    record = load_record(path)
    entry, overrides, sweep, project_dir, launched = _entry_and_overrides(path, record)
    if not entry:
        raise ConfigError(f"{path}: Hydra's record of the run (.hydra/hydra.yaml, or multirun.yaml for a sweep) is "
                          f"missing, so its entry point is unknown; its overrides: {' '.join(overrides) or '(none)'}")
    script = {"train": "train.py", "evaluate": "evaluate.py"}.get(entry, f"-m vase.{entry}")
    code = record.get("code") if isinstance(record.get("code"), dict) else None

    def when(t: Any) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if isinstance(t, (int, float)) and t else "?"

    lines = [str(path), f"  status:    {status_of(path)}" + (f" ({record['reason']})" if record.get("reason") else ""),
             f"  started:   {when(record.get('started'))}, ended: {when(record.get('ended'))}",
             f"  code:      {code_label(code)}"]
    if code:
        lines.append("             " + ", ".join(f"{k} {code[k]}" for k in ("vase", *CODE_PACKAGES, "cpu_kernels")
                                               if code.get(k)))
        now = code_label(code_stamp())
        if now != code_label(code):
            lines.append(f"  now:       the code here is {now}, not the run's: its numbers need the run's code "
                         f"('again' checks it out)")
    if record.get("code_before"):
        lines.append(f"  resumed:   it started under other code, {code_label(record['code_before'])}")
    project = record.get("project") if isinstance(record.get("project"), dict) else None
    if project:
        lines.append(f"  project:   {project['folder']} at {project_label(project)}")
        now = project_label(project_stamp(project["folder"]))
        if project.get("commit") and now != project_label(project):
            lines.append(f"  now:       your project is at {now}, not the run's: its numbers need the run's project "
                         f"code ('again' checks it out)")
    lines.append(f"  overrides: {' '.join(overrides) or '(none)'}")
    lines.append(f"  again:     {_again(path, entry, script, overrides, sweep, project_dir, launched, code, project)}")
    patch = path / str(code.get("patch")) if code and code.get("patch") else None
    if code and code.get("dirty") and not (patch is not None and patch.is_file()):
        why = (f"over the {PATCH_CAP // 1_000_000} MB a run keeps ({code['patch_bytes']:,} bytes)"
               if code.get("patch_bytes") else "not kept (made before runs kept their patch)"
               if not code.get("patch") else f"its {code['patch']} is gone")
        lines.append(f"             (its tree had changes not in that commit, hash {code.get('diff')}, {why}: the same "
                     f"numbers need those changes too)")
    return "\n".join(lines)


def _again(path: Path, entry: str, script: str, overrides: list[str], sweep: bool, project: str | None,
           launched: str | None, code: dict[str, Any] | None, stamp: dict[str, Any] | None = None) -> str:
    """The command that makes a run again, runnable from where the user stands: the checkout's git commands name
    the checkout (``git -C``) and the run's own launch folder is gone to first (its relative paths meant that), where
    either is not the current folder; a checkout's entry point by its path from there. A run of a user's project
    (``stamp``: its record's ``project``) checks the project out at its commit first, with its changes applied."""
    here = Path.cwd().resolve()
    git = "git" if _SOURCE == here else f"git -C {_quoted(str(_SOURCE))}"
    go = f"cd {_quoted(launched)} && " if launched and Path(launched).resolve() != here else ""
    start = Path(launched).resolve() if launched else here
    # a user's project (--config-dir) or an installed wheel: the installed command, from the project's folder
    if project:
        program = f"vase {entry} --config-dir {_quoted(project)}"
    elif code and (not code.get("commit") or code.get("installed")) and entry in ("train", "evaluate"):
        program = f"vase {entry}"
    else:
        where = Path(script) if script.startswith("-m ") or start == _SOURCE else _SOURCE / script
        program = f"python {_quoted(str(where))}"
    command = f"{program} {'-m ' if sweep else ''}{' '.join(_quoted(o) for o in overrides)}".rstrip()
    checkout = f"{git} checkout {code['commit'][:10]} && " if code and code.get("commit") and not code.get(
        "installed") else ""  # an installed wheel: its version is installed again (pip), not checked out
    patch = path / str(code.get("patch")) if code and code.get("patch") else None
    apply = f"{git} apply {_quoted(str(patch.resolve()))} && " if patch is not None and patch.is_file() else ""
    mine = ""
    if stamp and stamp.get("commit"):
        where = _quoted(str(stamp["folder"]))
        mine = f"git -C {where} checkout {stamp['commit'][:10]} && "
        kept = path / str(stamp.get("patch")) if stamp.get("patch") else None
        if kept is not None and kept.is_file():
            mine += f"git -C {where} apply {_quoted(str(kept.resolve()))} && "
    return f"{mine}{checkout}{apply}{go}{command}"


def _quoted(override: str) -> str:
    """An override as a shell takes it: quoted where it holds what a shell would read.

    >>> _quoted("seed=1"), _quoted("methods={a: b}")
    ('seed=1', "'methods={a: b}'")
    """
    return f"'{override}'" if any(c in override for c in " {}[]()*?$&;|<>\"'!") else override


def main(argv: list[str] | None = None) -> int:
    """``python -m vase.runs [ROOT ...]``: every run under the roots (default ``$VASE_LOG_DIR`` or ``logs``) with how it ended: running,
    finished, failed (with its reason), interrupted (saved on a signal), killed (its process gone without a word),
    checked (its config only). Given one run's folder, its record: the code that made it and the command that makes
    it again."""
    prog = sys.argv[0] if sys.argv[0].startswith("vase ") else "python -m vase.runs"  # as the user typed it
    ap = argparse.ArgumentParser(prog=prog, description=main.__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*", default=[str(log_root())],
                    help=f"folders of runs (default: ${LOG_DIR_ENV} when set, else logs)")
    args = ap.parse_args(argv)
    for root in args.roots:
        where = Path(root)
        if not where.exists():
            return _error(f"{root}: no such folder" + (" (no run has been made here yet)" if root == str(log_root())
                                                       else ""))
        if not where.is_dir():
            return _error(f"{root}: a file, not a run's folder or a folder of runs")
    if len(args.roots) == 1 and (Path(args.roots[0]) / RUN_FILE).exists():
        try:
            print(describe_run(args.roots[0]))
        except (ConfigError, OSError) as e:
            return _error(str(e))
        return 0
    rows = [r for root in args.roots for r in list_runs(root)]
    if not rows:
        return _error(f"no vase runs under {', '.join(args.roots)} (no {RUN_FILE} at any depth)", 1)
    width = max(len(r["run"]) for r in rows)
    broken = []
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["started"])) if r["started"] else "?"
        try:
            load_record(r["run"])
        except ConfigError as e:
            broken.append(str(e))
            print(f"{r['run']:<{width}}  {when}  {'unreadable':<11}  its {RUN_FILE} is broken")
            continue
        why = f"  {r['reason']}" if r["reason"] else ""
        print(f"{r['run']:<{width}}  {when}  {r['status']:<11}{why}")
    if broken:
        return _error(f"{len(broken)} run record(s) unreadable; the first: {broken[0]}", 1)
    return 0


def _error(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
