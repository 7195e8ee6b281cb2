"""Many of vase's commands, each in its own process forked from one that has imported the heavy libraries once.

    python -m tests.forkrun JOBS.json RESULTS.json [--parallel 2] [--preload module ...]

``JOBS.json`` is a list of ``{"argv": [...], "out": path, "timeout": seconds}``; each job runs as ``python <argv...>``
would from the same folder and environment: a process of its own (forked, so nothing one job sets reaches another),
``sys.argv`` as Python sets it for a script or for ``-m``, stdin from /dev/null, stdout and stderr to ``out`` (in that
order, as a terminal would interleave them), its exit status the one Python would give (an uncaught exception: its
traceback and 1). ``RESULTS.json`` gets, per job in order, its exit status (-9: killed at its timeout) and seconds.

What is shared is only what the ``--preload`` modules import at their top (torch, Lightning, Hydra, vase's config
code): about 5 of the 6 seconds a config check (``VASE_CHECK_CONFIG``) takes, which the README-commands test pays for
each of its 70-odd commands. The parent runs no torch operation before it forks (so no thread pool is copied).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import runpy
import signal
import sys
import time
import traceback
from pathlib import Path


def _child(argv: list[str], out: str) -> None:
    """Run one job in this (forked) process and leave with its exit status; never returns."""
    code = 1
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]  # run_module puts the module's file in argv[0], as python -m does
                sys.modules.pop(argv[1], None)  # python -m runs a module not yet imported (a preload may have)
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv = list(argv)
                sys.path[0] = str(Path(argv[0]).resolve().parent)  # a script's folder leads sys.path, as python x.py
                runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - what Python itself does with an uncaught exception
            traceback.print_exc()
            code = 1
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def run_jobs(jobs: list[dict], parallel: int) -> list[dict]:
    """Fork each job, at most ``parallel`` at a time; each one's exit status (-9: killed at its timeout) and seconds."""
    done: list[dict] = [{"code": -9, "seconds": None}] * len(jobs)
    running: dict[int, tuple[int, float, float]] = {}  # pid -> (job index, start, deadline)
    pending = list(range(len(jobs)))
    while pending or running:
        while pending and len(running) < parallel:
            i = pending.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(jobs[i]["argv"], jobs[i]["out"])
            start = time.monotonic()
            running[pid] = (i, start, start + float(jobs[i].get("timeout", 600)))
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for p, (_, _, deadline) in running.items():
                if now > deadline:
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.05)
            continue
        i, start, _ = running.pop(pid)
        done[i] = {"code": os.waitstatus_to_exitcode(status), "seconds": round(time.monotonic() - start, 2)}
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jobs", type=Path)
    ap.add_argument("results", type=Path)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--preload", nargs="*", default=[])
    a = ap.parse_args()
    for module in a.preload:
        importlib.import_module(module)
    a.results.write_text(json.dumps(run_jobs(json.loads(a.jobs.read_text()), a.parallel)))


if __name__ == "__main__":
    main()
