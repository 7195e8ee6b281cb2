"""The one lifecycle of every Hydra entry point: validate (or only check, with ``VASE_CHECK_CONFIG=1``), run, record
the outcome in the run record, and turn a vase error into one line and exit status 2."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import Any, NoReturn

from omegaconf import DictConfig, open_dict

from vase.allocator import set_cpu_allocator
from vase.config.renames import renamed_keys, say_deprecated
from vase.config.validate import validate
from vase.errors import ConfigError, Interrupted, VaseError, storage_problem
from vase.kernels import apply_portable_threads, pin_cpu_kernels
from vase.progress import quiet_bars_in_logs
from vase.runs import job_dir, job_overrides, read_status, record_machine_held, set_status, set_status_held

CHECK_ONLY_ENV = "VASE_CHECK_CONFIG"
"""With ``VASE_CHECK_CONFIG=1`` an entry point composes and validates its config, checks what the run reaches first
(the dataset, the checkpoint, a tracking server), says so and stops. ``VASE_CHECK_CONFIG=config`` checks the config's
keys and values alone: how the tests run every command of the docs, whose paths are a user's, without training."""


def check_only() -> str | None:
    """``"all"`` (``VASE_CHECK_CONFIG=1``), ``"config"`` (``=config``) or None: run for real."""
    value = os.environ.get(CHECK_ONLY_ENV, "").strip().lower()
    return "all" if value in ("1", "true", "yes") else "config" if value == "config" else None


def scratch_sweep_dir(argv: list[str]) -> None:
    """Under ``VASE_CHECK_CONFIG`` a sweep's folders (its record, each job's ``.hydra/`` and log) go to a scratch
    folder of vase's own, removed when the check ends: a check leaves no ``multiruns/<time>`` for someone globbing
    for the last sweep. Puts ``hydra.sweep.dir=<scratch>`` in ``argv`` in place of the user's own (checked by
    `preflight_overrides` already), just before the first override (argparse takes the overrides as one group, so
    not after a flag that follows them); a single run never reads it."""
    if check_only() is None:
        return
    scratch = tempfile.mkdtemp(prefix="vase-config-check-")  # ours: the only folder removed below
    atexit.register(shutil.rmtree, scratch, True)
    rest = [a for a in argv[1:] if not a.startswith("hydra.sweep.dir=")]
    at = next((i for i, a in enumerate(rest) if "=" in a and not a.startswith("-")), len(rest))
    argv[1:] = [*rest[:at], f"hydra.sweep.dir={scratch}", *rest[at:]]


def validated(cfg: DictConfig, reach: Callable[[DictConfig], list[str]] | None = None) -> bool:
    """Validate ``cfg`` (a bad value: one line and exit 2); True when the command should go on, False when
    ``VASE_CHECK_CONFIG=1`` asked only for the check (the run directory is marked ``checked``). With that check,
    ``reach(cfg)`` also checks what the run reaches first (``vase.pipeline.reach``: the dataset, the checkpoint, a
    tracking server), and its lines, what was checked and what was not, follow ``config ok``. Pins the CPU kernels
    ``cpu_kernels`` asks for first: validation imports the targets it checks, and with them torch; then
    ``cpu_allocator`` (`vase.allocator`)."""
    warning = or_exit(process_settings, cfg)
    if warning:
        print(warning, file=sys.stderr)
    # a config file written for a name 0.2 changed: its value under the new name, one line said (or refused)
    or_exit(renamed_keys, cfg, say_deprecated, job_overrides())
    every_stage(cfg)  # a debug preset's epochs and grad_accum on a follow-up stage too, before validation
    or_exit(validate, cfg)
    quiet_bars_in_logs()  # output to a file: no other library's \r bars in it
    apply_portable_threads()
    record_machine_held()
    mode = check_only()
    if mode is None:
        return True
    lines = or_exit(reach, cfg) if reach is not None and mode == "all" else []
    set_status_held("checked")
    print(f"config ok: {' '.join(job_overrides())}")
    for line in lines:
        print(line)
    return False


def process_settings(cfg: DictConfig) -> str | None:
    """What a process that computes takes from ``cfg`` before its first tensor: ``cpu_kernels``'s pins (they hold only
    if torch has not loaded yet) and ``cpu_allocator``. `validated` applies them in every job; the parallel launcher's
    sweep process, which trains the jobs' shared SFT itself, too. Returns `pin_cpu_kernels`' warning (torch was
    loaded before with other kernels), else None; a bad value raises ConfigError."""
    warning = pin_cpu_kernels(str(cfg.get("cpu_kernels") or "native"))
    set_cpu_allocator(str(cfg.get("cpu_allocator") or "system"))
    return warning


def every_stage(cfg: DictConfig) -> None:
    """Set ``every_stage``'s keys (``debug=fast``: epochs 1, grad_accum 1) on the follow-up stage too: the first
    stage's are set by the preset itself, and a follow-up kept its own (grad_accum 4: one optimizer step instead of
    the preset's two)."""
    extra = cfg.get("every_stage")
    if extra and isinstance(cfg.get("followup"), DictConfig):
        with open_dict(cfg):
            for key, value in extra.items():
                cfg.followup[key] = value


def one_line(e: BaseException) -> str:
    """The message of a vase error as one line: an error raised in a DataLoader worker comes back wrapped in the
    worker's traceback ("Caught DataError in DataLoader worker process 0. Original Traceback ..."), whose last line
    is the original message.

    >>> one_line(ValueError("Caught DataError in DataLoader worker process 0.\\nOriginal Traceback (most recent "
    ...                     "call last):\\n  File x\\nvase.errors.DataError: /d/a.png: too large"))
    '/d/a.png: too large'
    """
    msg = str(e)
    if "\nOriginal Traceback" not in msg:
        return msg
    last = [x for x in msg.splitlines() if x.strip()][-1]
    head, _, rest = last.partition(": ")
    return rest if rest and " " not in head else last


def run_entry(body: Any, cfg: DictConfig) -> Any:
    """The one run lifecycle of every Hydra entry point (train.py, evaluate.py, ``python -m vase.filter``,
    ``vase.reconstruct``, ``vase.retrieval``), after `validated`: ``body(cfg)``, then the job's run record says
    ``finished``. A vase error (a bad value, a bad input file): one line, the record ``failed`` with it, exit 2. A stop
    on a signal after saving (`Interrupted`): ``interrupted``, re-raised. Any other exception:
    ``failed`` with its one-line reason, re-raised (its traceback is the report). A process killed outright leaves
    ``running``, which readers see as ``killed`` (`vase.runs.status_of`)."""
    job = job_dir()
    try:
        out = or_exit(body, cfg)
    except Interrupted as e:
        if job is not None:  # where it saved, and how to go on: the record says it, as the run's line did
            set_status(job, "interrupted", one_line(e))
        raise
    except KeyboardInterrupt:  # Ctrl-C outside training (which saves and raises Interrupted): evaluating, a report
        interrupted_exit("the run")
    except Exception as e:
        if job is not None:
            with contextlib.suppress(OSError):  # a record that cannot be written must not hide the error itself
                set_status(job, "failed", f"{type(e).__name__}: {one_line(e)}")
        raise
    if job is not None and read_status(job).get("status") == "running":
        set_status(job, "finished")
    return out


def interrupted_exit(what: str, by: str = "Ctrl-C") -> NoReturn:
    """Ctrl-C (or ``by``: SIGTERM): every run folder this process holds that is still running (a sweep's job and the
    sweep's own) records ``interrupted``; one line says so and how to go on; exit 130 (a shell's code for SIGINT; 143
    for SIGTERM), no traceback."""
    with contextlib.suppress(OSError):
        set_status_held("interrupted", f"stopped by {by}")
    print(f"interrupted ({by}): {what} stopped; its record says interrupted, and the same command takes it up again "
          f"(resume=auto: what was saved is kept)", file=sys.stderr, flush=True)
    raise SystemExit(143 if by == "SIGTERM" else 130)


def or_exit(check: Any, *args: Any) -> Any:
    """Run ``check(*args)`` and return what it returns; on a vase error (a bad config value, a bad input file) print
    its one line to stderr, mark the run directories this process holds as failed, and exit with status 2, the same
    for every entry point."""
    # a log file that cannot be written (a full disk) is said in the one line below, not in a traceback per record
    logging.raiseExceptions = False
    try:
        return check(*args)
    except VaseError as e:
        set_status_held("failed", one_line(e))
        print(f"{'config error' if isinstance(e, ConfigError) else 'error'}: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
    except RuntimeError as e:
        line = out_of_memory(e)
        if line is None:
            raise
        set_status_held("failed", line)
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        line = storage_problem(e)
        if line is None:
            raise
        with contextlib.suppress(OSError):  # the run record may not fit on a full disk either
            set_status_held("failed", line)
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)


def out_of_memory(e: BaseException) -> str | None:
    """The one line for a GPU out of memory (torch's ``OutOfMemoryError``, or the ``CUDA out of memory`` RuntimeError
    of older builds): what ran out and the settings that lower memory, each with its key; None for any other error.

    >>> out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total)"))[:62]
    'the GPU ran out of memory (CUDA out of memory. Tried to alloca'
    >>> out_of_memory(RuntimeError("shapes do not match")) is None
    True
    """
    text = str(e)
    if type(e).__name__ != "OutOfMemoryError" and "out of memory" not in text.lower():
        return None
    first = (text.strip().splitlines() or [""])[0].split(" Including non-PyTorch memory")[0][:160].rstrip(". ")
    return (f"the GPU ran out of memory ({first}); lower it, one step at a time: stage.module.gradient_checkpointing=true, "
            f"model.dtype=bfloat16, a smaller stage.batch_size with a larger stage.grad_accum (the same effective "
            f"batch), for GRPO a smaller stage.module.max_completion_length or stage.module.num_generations, then "
            f"trainer=deepspeed_zero2 or deepspeed_zero3 over several GPUs; resume=auto continues from the last "
            f"checkpoint")

