"""vase's commands for the tests, each in its own process forked from one server that imported the heavy libraries
once (torch, Lightning, transformers, Hydra, vase's entry points): `tests.forkrun`'s jobs, one at a time on request.

    python -m tests.forkserver torch pytorch_lightning ...     # the modules to import first; then one job per line

Each request is one line of JSON on the server's stdin, ``{"argv", "env", "cwd", "out", "err", "timeout"}``; the job
runs as ``python <argv...>`` would, from ``cwd`` with exactly ``env`` (the server's own environment is not the job's),
its stdout and stderr to the files ``out`` and ``err``, and the server answers with one line, ``{"code", "seconds",
"timed_out"}`` (a job that kills itself with SIGKILL is -9 and not timed out). A job sees nothing another set: each is a fresh fork of the server.

A forked job gets its torch threads from its own ``OMP_NUM_THREADS`` (``torch.set_num_threads``, else the count a new
process takes). What it cannot have is what the libraries read once, as they load: ``cpu_kernels=portable``'s pins
and any other variable of `IMPORT_TIME` that differs from the server's; such a job starts a process of its own
(`fork_ok`), as does a test of process groups or signals (``tests.conftest.run_python``'s ``fresh``).

A config check (``VASE_CHECK_CONFIG``) takes about 10 s in a new process on 2 cores, of which about 6.5 s is importing
torch, transformers and Lightning: the suite ran over a hundred of them.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

PRELOAD = ("torch", "pytorch_lightning", "transformers", "hydra", "omegaconf", "vase.config", "vase.cli.train",
           "vase.cli.evaluate", "vase.runs.describe")
"""What the server imports before it forks: what a vase command spends its first seconds on."""


IMPORT_TIME = ("OMP_", "MKL_", "KMP_", "GOMP_", "ATEN_", "ONEDNN_", "DNNL_", "TORCH", "PYTORCH_", "CUDA", "HF_",
               "TRANSFORMERS_", "HUGGINGFACE_", "PYTHON")
"""Prefixes of the variables some library reads as it loads (``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` aside, which
a job's process sets itself)."""
OWN_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _child(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str, threads: int) -> None:
    """One job in this (forked) process, as ``python <argv...>`` in ``cwd`` with ``env``; never returns."""
    code = 1
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        asked = env.get("OMP_NUM_THREADS", "")
        sys.modules["torch"].set_num_threads(int(asked) if asked.isdigit() and int(asked) > 0 else threads)
        for fd, path in ((1, out), (2, err)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the job's stdin, /dev/null
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the job's own files
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]
                sys.path[0] = cwd  # python -m puts the folder it runs in first
                sys.modules.pop(argv[1], None)
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            elif argv[0] == "-c":
                sys.argv = ["-c", *argv[2:]]
                sys.path[0] = ""
                exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 - as python -c
            else:
                sys.argv = list(argv)
                sys.path[0] = str(Path(cwd, argv[0]).resolve().parent)
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


def _serve() -> None:
    for module in sys.argv[1:]:
        importlib.import_module(module)
    threads = sys.modules["torch"].get_num_threads()  # what a new process takes without OMP_NUM_THREADS
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what a preloaded module prints goes to the server's stderr, never into the answers
    print("ready", file=answers)
    for line in sys.stdin:
        job = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(job["argv"], job["env"], job["cwd"], job["out"], job["err"], threads)
        start = time.monotonic()
        deadline = start + float(job.get("timeout", 600))
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                code, timed_out = -9, True
                break
            time.sleep(0.02)
        print(json.dumps({"code": code, "seconds": round(time.monotonic() - start, 2), "timed_out": timed_out}),
              file=answers)


class ForkServer:
    """A running `tests.forkserver` (one per test worker) and the one job it runs at a time."""

    def __init__(self, root: Path, scratch: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in OWN_THREADS}
        self.env, self.scratch, self.lock, self.n = env, scratch, threading.Lock(), 0
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.forkserver", *PRELOAD], cwd=root, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("tests.forkserver did not start")

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        with self.lock:
            self.n += 1
            out, err = self.scratch / f"{self.n}.out", self.scratch / f"{self.n}.err"
            job = {"argv": [str(a) for a in argv], "env": {k: str(v) for k, v in env.items()}, "cwd": str(cwd),
                   "out": str(out), "err": str(err), "timeout": timeout}
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError("tests.forkserver stopped")
        answered = json.loads(answer)
        code = answered["code"]
        said = subprocess.CompletedProcess(argv, code, out.read_text(errors="replace"), err.read_text(errors="replace"))
        out.unlink()
        err.unlink()
        if answered["timed_out"]:
            raise subprocess.TimeoutExpired(argv, timeout, said.stdout, said.stderr)
        return said

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


    def fork_ok(self, argv: list[str], env: dict[str, Any]) -> bool:
        """Whether a job may run forked: not one that asks for portable kernels, nor one whose environment differs
        from the server's in a variable read as the libraries load (`IMPORT_TIME`)."""
        if any("cpu_kernels=portable" in str(a) for a in argv):
            return False
        keys = {k for k in [*env, *self.env] if k.startswith(IMPORT_TIME) and k not in (*OWN_THREADS, "PYTHONUNBUFFERED")}
        return all(env.get(k) == self.env.get(k) for k in keys)


if __name__ == "__main__":
    _serve()
