"""A run's record for people: read strictly (`load_record`), told (`describe_run`: how it ended, the code and the
project that made it, and the command that makes it again) and listed (`main`: ``vase runs`` / ``python -m vase.runs``,
every run under a folder with how it ended)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from vase import provenance
from vase.errors import ConfigError
from vase.provenance import CODE_PACKAGES, PATCH_CAP, code_label, code_stamp, project_label, project_stamp
from vase.runs import LOG_DIR_ENV, RUN_FILE, list_runs, log_root, read_status, reading_records, status_of


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


PACKAGE_CONF = (Path(__file__).resolve().parent.parent / "conf").resolve()
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
        saved = raw_yaml(hydra_file)
        entry = str(_at(saved, "hydra.job.name") or "")
        entry = entry if entry.isidentifier() else ""  # a module of vase's, never a path or an interpolation
        launched = _at(saved, "hydra.runtime.cwd")
        main = [str(src.get("path")) for src in _at(saved, "hydra.runtime.config_sources") or []
                if isinstance(src, dict) and src.get("provider") == "main" and src.get("schema") == "file"]
        if main and Path(main[0]).resolve() != PACKAGE_CONF:
            project = main[0]
        if sweep:
            overrides = [str(o) for o in _at(saved, "hydra.overrides.task") or overrides]
    if not sweep and (path / ".hydra" / "overrides.yaml").is_file():
        overrides = [str(o) for o in raw_yaml(path / ".hydra" / "overrides.yaml") or []]
    return entry, overrides, sweep, project, None if launched is None else str(launched)


def raw_yaml(path: Path) -> Any:
    """A YAML file of a record as plain data: its ``${...}`` left as written, never resolved (a resolver of vase's may
    make a folder); ConfigError naming the file where it does not parse."""
    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as e:  # noqa: BLE001 - a record's file: one line naming it
        raise ConfigError(f"{path}: not readable YAML ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                          f"; the run's other files are as it left them") from None


def _at(data: Any, dotted: str) -> Any:
    """``data``'s value at ``a.b.c`` (None where any part is missing)."""
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


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
    if code and code.get("dirty") and code.get("installed"):
        lines.append("             (the installed wheel was built from a tree with changes not in that commit, which "
                     "a wheel does not carry: the same numbers need that wheel)")
    elif code and code.get("dirty") and not (patch is not None and patch.is_file()):
        why = (f"over the {PATCH_CAP // 1_000_000} MB a run keeps ({code['patch_bytes']:,} bytes)"
               if code.get("patch_bytes") else "not kept (made before runs kept their patch)"
               if not code.get("patch") else f"its {code['patch']} is gone")
        lines.append(f"             (its tree had changes not in that commit{_hash(code)}, {why}: the same "
                     f"numbers need those changes too)")
    return "\n".join(lines)


def _hash(code: dict[str, Any]) -> str:
    """``, hash <h>`` for a code stamp that has its changes' hash, else nothing (never ``hash None``)."""
    return f", hash {code['diff']}" if code.get("diff") else ""


def _again(path: Path, entry: str, script: str, overrides: list[str], sweep: bool, project: str | None,
           launched: str | None, code: dict[str, Any] | None, stamp: dict[str, Any] | None = None) -> str:
    """The command that makes a run again, runnable from where the user stands: the checkout's git commands name
    the checkout (``git -C``) and the run's own launch folder is gone to first (its relative paths meant that), where
    either is not the current folder; a checkout's entry point by its path from there. A run of a user's project
    (``stamp``: its record's ``project``) checks the project out at its commit first, with its changes applied."""
    here = Path.cwd().resolve()
    git = "git" if provenance.SOURCE == here else f"git -C {_quoted(str(provenance.SOURCE))}"
    go = f"cd {_quoted(launched)} && " if launched and Path(launched).resolve() != here else ""
    start = Path(launched).resolve() if launched else here
    # a user's project (--config-dir) or an installed wheel: the installed command, from the project's folder
    if project:
        program = f"vase {entry} --config-dir {_quoted(project)}"
    elif code and (not code.get("commit") or code.get("installed")) and entry in ("train", "evaluate"):
        program = f"vase {entry}"
    else:
        where = Path(script) if script.startswith("-m ") or start == provenance.SOURCE else provenance.SOURCE / script
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
    with reading_records():
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    """`main`, reading."""
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
