"""Run directories: one per process, never shared, found again by a rerun of the same command.

``hydra.run.dir`` and ``hydra.sweep.dir`` resolve through `run_dir` (``${vase.run_dir:<base>,<resume>}``):

- a new directory is created exclusively (``<base>/<time>``; a second process in the same second gets
  ``<time>_1``), so two runs started together never write into one folder;
- with ``resume=auto`` a run that was killed (its folder holds a checkpoint, its status is not ``finished`` and no
  live process holds its lock) and that was started with the same overrides into the same config (config files
  edited since make another run: `config_digest`) is taken up again instead: rerunning the command resumes it
  (see `resume_checkpoint`).

Each run holds an advisory lock on ``<run>/.vase-run.lock`` for as long as its process lives (the kernel drops it
when the process dies, even by SIGKILL), and records its task, overrides and status in ``<run>/.vase-run.json``
(with where it comes from: `vase.provenance`). The record told and listed for people: `vase.runs.describe`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from vase.errors import ConfigError
from vase.io import atomic_write_json, file_lock
from vase.kernels import cpu_record
from vase.provenance import (
    PATCH_FILE,
    code_label,
    code_stamp,
    keep_patch,
    keep_project_patch,
    project_stamp,
)

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


def claim(path: str | Path, resume: str = "auto", overrides: list[str] | None = None, key: str | None = None,
          setting: str = "hydra.run.dir") -> Path:
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
        _refuse_earlier(path, status, fd is None, resume, setting)
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


def _refuse_earlier(path: Path, status: dict[str, Any], live: bool, resume: str | None,
                    key: str = "hydra.run.dir") -> None:
    """Refuse a run directory that another live process holds, or whose earlier run this one would overwrite (a
    finished run; an interrupted one with ``resume=never``); ``key``: the setting that chose the folder."""
    if live:
        raise ConfigError(f"run directory {path} is in use by another running process (pid {status.get('pid', '?')});"
                          f" wait for it, or choose another folder ({key}=...)")
    earlier = status.get("status")
    if earlier == "finished" or (earlier and resume == "never"):
        how = "" if earlier == "finished" else "; resume=auto continues it"
        raise ConfigError(f"run directory {path} holds an earlier {'finished' if earlier == 'finished' else 'interrupted'}"
                          f" run, which this one would overwrite{how}; choose a new folder ({key}=...)")


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


def record_lost(path: str | Path, reason: str, status: str = "failed") -> bool:
    """Record a run whose process is gone without a word (`status_of`: ``killed``), or that failed before it had a
    record (e.g. an import error before the run began), as ``failed`` (or ``status``: ``interrupted``, for a job its
    sweep stopped) with ``reason``: what the launcher of a sweep job learns when the job ends without a result.
    Returns whether it did."""
    path = Path(path)
    if (path / RUN_FILE).is_file() and status_of(path) != "killed":
        return False
    path.mkdir(parents=True, exist_ok=True)  # a sweep job's own folder (hydra.sweep.dir/<n>)
    atomic_write_json(path / RUN_FILE, {**read_status(path), "status": status, "ended": time.time(),
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


_reading: list[bool] = []  # non-empty while a reader reads run or sweep folders (`reading_records`)


@contextlib.contextmanager
def reading_records() -> Iterator[None]:
    """While a command reads run or sweep folders (``vase runs``, ``vase verdict``): a record's
    ``${vase.run_dir:...}`` is refused, not resolved. Resolving it makes and claims the folder it names, and a record
    received from someone else is data, not a recipe for where to write."""
    _reading.append(True)
    try:
        yield
    finally:
        _reading.pop()


def root_digest(*, _root_: Any) -> str:
    """``${vase.config_digest:}``: `config_digest` of the config it is resolved in."""
    return config_digest(_root_)


def run_dir(base: str, resume: str = "never", kind: str = "run", digest: str = "") -> str:
    """``${vase.run_dir:<base>,<resume>[,run|sweep[,<digest>]]}``: this process's run directory under ``base``, or
    with ``sweep`` its multirun's folder (see the module docstring); ``digest``: a run's config's
    (``${vase.config_digest:}``). A sweep rerun with ``resume=auto`` takes up the newest
    unfinished sweep of the same command when its sweeper sends the same jobs again (the grid sweeper; an optuna
    search starts a new folder)."""
    if _reading:
        raise ConfigError(f"a record names ${{vase.run_dir:{base},...}}, a folder to make: reading a run makes none")
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


def hold_sweep_dir(path: str | Path, resume: str = "auto") -> Path:
    """A sweep folder the user chose (``hydra.sweep.dir=...``, on the command line or in a file), held and recorded as
    a folder `run_dir` chooses is: a new, empty or earlier sweep's folder of vase's (never a user's files, never one a
    running sweep holds), claimed with the multirun's key (`note_multirun`), so that its end is recorded and the same
    command takes it up again. Called at the multirun's start, before Hydra writes there; ConfigError otherwise."""
    held = Path(path).resolve()
    if held in _held:
        return held
    check_given_dir(held, "hydra.sweep.dir", resume)
    overrides = list(_multirun.get("overrides", []))
    return claim(held, resume, overrides=overrides, key=run_key(overrides, str(_multirun.get("digest", ""))),
                 setting="hydra.sweep.dir")


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
            _refuse_earlier(path.resolve(), status, fd is None, resume, key)
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
