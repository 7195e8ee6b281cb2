"""Callbacks: save the LoRA adapter in peft format, atomically, when training ends (and every N epochs); resumable
checkpoints; throughput (seconds per step, tokens a second, peak memory, MFU); a plain progress line in logs; what a
run read (model, data, each rank's first batch)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

from vase.errors import Interrupted
from vase.io import atomic_directory, atomic_write_json
from vase.models.checkpoint import LINEAGE_FILE
from vase.progress import clock


def save_adapter(model: Any, processor: Any, dirpath: str | Path, lineage: dict[str, Any] | None = None) -> Path:
    """Write a peft adapter (and the processor, so the directory loads on its own) to ``dirpath`` atomically.

    ``lineage`` records what the adapter sits on: the base model and the adapters merged into it first (an SFT
    adapter under a GRPO one), so that loading the adapter alone rebuilds the right model.
    """
    dirpath = Path(dirpath)
    with atomic_directory(dirpath, replace=True) as tmp:
        model.save_pretrained(tmp)
        if processor is not None:
            processor.save_pretrained(tmp)
        if lineage:
            (tmp / LINEAGE_FILE).write_text(json.dumps(lineage, indent=1))
    return dirpath


class SaveAdapter(pl.Callback):
    """Save ``pl_module.model`` (a peft model), with the module's processor and lineage, to ``dirpath`` at the end of
    training and every ``every_n_epochs``."""

    def __init__(self, dirpath: str, every_n_epochs: int = 0) -> None:
        self.dirpath = dirpath
        self.every_n_epochs = every_n_epochs

    def _save(self, trainer: pl.Trainer, pl_module: pl.LightningModule, name: str | None = None) -> None:
        target = Path(self.dirpath) if name is None else Path(self.dirpath).with_name(name)
        gather: Any = contextlib.nullcontext()
        if getattr(trainer.strategy, "zero_stage_3", False):
            # ZeRO-3 keeps each weight partitioned across ranks: gather the adapter's weights on every rank (a
            # collective), so rank 0 writes whole tensors rather than empty shards
            # lazy: deepspeed: optional, present only where this path runs
            import deepspeed

            params = [p for n, p in pl_module.model.named_parameters() if p.requires_grad or "lora_" in n]
            gather = deepspeed.zero.GatheredParameters(params, modifier_rank=None)
        with gather:
            if trainer.is_global_zero:
                # the module carries its processor and lineage (base model, adapters merged under it)
                save_adapter(pl_module.model, getattr(pl_module, "processor", None), target,
                             getattr(pl_module, "lineage", None))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.every_n_epochs and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self._save(trainer, pl_module, f"adapter-epoch{trainer.current_epoch + 1}")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._save(trainer, pl_module)


class TrainingInterrupted(Interrupted):
    """Training stopped on a signal after its checkpoint was saved; the message says where and how to resume.

    ``hand_over``: the scheduler's own handler for the signal (submitit's SIGUSR2 requeue), which `exit` runs once
    training has unwound: run from inside the training step, its requeue let SLURM kill the other ranks while this one
    was still tearing DDP down, and the torn connection, raised in place of submitit's exit, was recorded as the job's
    failure before the requeued job ran (a two-node preemption failed so, now and then)."""

    def __init__(self, message: str, signum: int, hand_over: Any = None) -> None:
        super().__init__(message, signum)
        self.hand_over = hand_over

    def exit(self) -> None:
        """Give the signal to the scheduler's handler, which requeues and exits; else exit as the signal asks.

        The requeue is a call to the scheduler's controller (``scontrol requeue``), which a busy controller can time out
        (SLURM's "Socket timed out on send/recv operation"): it is tried again, up to `REQUEUE_TRIES` times with a
        growing wait, each failure said in one line, before the job is given up as failed."""
        if self.hand_over is not None:
            for attempt in range(1, REQUEUE_TRIES + 1):
                try:
                    self.hand_over(self.signum, None)
                    break
                except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                    if attempt == REQUEUE_TRIES:
                        print(f"the scheduler did not requeue the job after {attempt} tries ({e}); the checkpoint is "
                              "saved: rerun the same command to resume", file=sys.stderr, flush=True)
                        raise
                    wait = REQUEUE_WAIT_S * attempt
                    print(f"requeue try {attempt} of {REQUEUE_TRIES} failed ({e}); trying again in {wait:.0f} s",
                          file=sys.stderr, flush=True)
                    time.sleep(wait)
        sys.exit(128 + self.signum)


REQUEUE_TRIES = 4
REQUEUE_WAIT_S = 5.0
"""How often, and with what first wait (then twice, three times it), `TrainingInterrupted.exit` asks the scheduler's
handler to requeue the job when its call to the controller fails."""


class ResumeCheckpoint(pl.Callback):
    """Write ``<dirpath>/last.ckpt`` every ``every_n_train_steps`` optimizer steps, when training ends, and when the
    process is asked to stop.

    The file is replaced atomically (the trainer's checkpoint IO is `AtomicCheckpointIO`), so a run killed at
    any moment leaves the previous checkpoint whole; rerunning the same command resumes it (``resume=auto``), as
    does ``python train.py ckpt_path=<dirpath>/last.ckpt``, with the same weights, optimizer, scheduler, random
    states, data position and history (see `vase.training.checkpointing`).

    On SIGINT (Ctrl-C) or SIGTERM (``kill``, SLURM preemption) the step in progress finishes, the checkpoint is
    written, one line says where, and `TrainingInterrupted` ends the run; a second Ctrl-C stops at once. Where
    another handler was installed first (submitit's SIGUSR2 requeue under ``cluster=slurm``), it runs after the save,
    once training has unwound (`TrainingInterrupted.exit`).
    """

    FILENAME = "last.ckpt"
    SIGNALS = ("SIGINT", "SIGTERM", "SIGUSR2")

    def __init__(self, dirpath: str, every_n_train_steps: int = 50) -> None:
        if every_n_train_steps < 0:
            raise ValueError(f"callbacks.checkpoint.every_n_train_steps={every_n_train_steps} must be >= 0")
        self.dirpath = dirpath
        self.every_n_train_steps = every_n_train_steps
        self._saved_at = -1
        self._last_step = 0
        self._signal: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def path(self) -> Path:
        return Path(self.dirpath) / self.FILENAME

    def _save(self, trainer: pl.Trainer) -> None:
        # every rank calls it (DeepSpeed gathers its shards collectively); the full state, not weights only
        trainer.save_checkpoint(self.path, weights_only=False)
        self._saved_at = trainer.global_step

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._signal is not None and signum == signal.SIGINT:
            self._restore_handlers()
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, the last periodic checkpoint stands
        if self._signal is not None:  # the same request again (a sweep's SIGTERM after its Ctrl-C): said once
            return
        self._signal = signum
        print(f"\n{signal.Signals(signum).name}: saving a checkpoint when the current step ends "
              "(Ctrl-C again stops at once)", file=sys.stderr, flush=True)

    def _restore_handlers(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last_step = trainer.global_step
        self._signal = None
        for name in self.SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            previous = signal.getsignal(signum)
            if name == "SIGUSR2" and not callable(previous):
                continue  # only where a scheduler's requeue handler listens for it (submitit)
            try:
                self._previous[signum] = signal.signal(signum, self._on_signal)
            except ValueError:  # not the main thread: signals stay with whoever has them
                return

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step
        if step == self._last_step:
            return  # mid-accumulation: only a finished optimizer step is a place to save or stop
        self._last_step = step
        n = self.every_n_train_steps
        # with gradient accumulation several batches end at one step: save once, after the optimizer stepped
        if n and step > 0 and step % n == 0 and step != self._saved_at:
            self._save(trainer)
        # any rank's signal stops every rank (a collective, so all of them save together)
        if trainer.strategy.reduce_boolean_decision(self._signal is not None, all=False):
            signum = self._signal or signal.SIGTERM
            if step != self._saved_at:
                self._save(trainer)
            previous = self._previous.get(signum)
            self._restore_handlers()
            message = f"saved step {step} to {self.path}; rerun the same command to resume"
            if trainer.is_global_zero:
                print(message, file=sys.stderr, flush=True)
            # e.g. submitit requeues the job now that the checkpoint is on disk: after training unwinds (every rank's
            # DDP teardown done), in TrainingInterrupted.exit
            hand_over = previous if callable(previous) and signum == getattr(signal, "SIGUSR2", None) else None
            raise TrainingInterrupted(message, signum, hand_over)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore_handlers()
        if trainer.global_step != self._saved_at:
            self._save(trainer)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._restore_handlers()


PEAK_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 70e12}
"""Dense bf16 peak FLOP/s by GPU name (the vendors' figures), for model-FLOPs utilisation."""


class Throughput(pl.Callback):
    """How fast a stage trains: seconds per optimizer step, tokens a second, peak accelerator memory and, on a GPU of
    known peak, the model-FLOPs utilisation (``6 * parameters * tokens`` per step, the usual convention: it counts
    neither activation recomputation nor the weight gradients LoRA skips). The first ``skip`` optimizer steps
    (warm-up, compilation) are left out. Logged as ``perf/*`` and written to ``<dirpath>/throughput.json``.

    A module that knows its own token count sets ``tokens_last_batch`` (GRPO: prompts and completions); otherwise the
    batch's attention mask is counted. A module that times the parts of its step keeps their running sums in
    ``phase_seconds`` (GRPO: vision, decode, reward, reference, policy, optimizer); the summary gives each per timed
    step as ``phases_s_per_step``, so a slow step says where its time went.
    """

    def __init__(self, dirpath: str | Path, skip: int = 1) -> None:
        self.dirpath = Path(dirpath)
        self.skip = int(skip)
        self._steps: list[dict[str, float]] = []
        self._pending = {"seconds": 0.0, "tokens": 0.0}

    @staticmethod
    def _sync(trainer: pl.Trainer) -> None:
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize()

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
                             ) -> None:
        self._sync(trainer)
        self._t0 = time.perf_counter()
        self._step0 = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._sync(trainer)
        tokens = getattr(pl_module, "tokens_last_batch", None)
        if tokens is None and isinstance(batch, dict) and "attention_mask" in batch:
            tokens = int(batch["attention_mask"].sum())
        self._pending["seconds"] += time.perf_counter() - self._t0
        self._pending["tokens"] += float(tokens or 0)
        if trainer.global_step > self._step0:  # one optimizer step (or mu, for GRPO) ended with this batch
            self._steps.append({"step": float(trainer.global_step), "optimizer_steps": float(trainer.global_step
                                - self._step0), **self._pending,
                                "phases": dict(getattr(pl_module, "phase_seconds", None) or {})})
            self._pending = {"seconds": 0.0, "tokens": 0.0}
            if len(self._steps) > self.skip:
                last = self._steps[-1]
                pl_module.log("perf/s_per_step", last["seconds"] / last["optimizer_steps"], on_step=True, batch_size=1)
                pl_module.log("perf/tokens_per_s", last["tokens"] / max(last["seconds"], 1e-9), on_step=True,
                              batch_size=1)

    def summary(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        timed = self._steps[self.skip:]
        seconds = sum(s["seconds"] for s in timed)
        tokens = sum(s["tokens"] for s in timed)
        out: dict[str, Any] = {"optimizer_steps_timed": int(sum(s["optimizer_steps"] for s in timed)),
                               "skipped": f"the first {self.skip} step(s)", "device": str(trainer.strategy.root_device)}
        steps = out["optimizer_steps_timed"]
        if timed:
            out["s_per_step"] = seconds / steps
            out["tokens_per_s"] = tokens / seconds if seconds else None
            out["tokens_per_step"] = tokens / steps
            before = self._steps[self.skip - 1]["phases"] if self.skip > 0 else {}
            after = timed[-1]["phases"]
            if after:
                out["phases_s_per_step"] = {k: (v - before.get(k, 0.0)) / steps for k, v in after.items()}
        params = sum(p.numel() for p in pl_module.parameters())
        out["parameters"] = params
        if trainer.strategy.root_device.type == "cuda":
            name = torch.cuda.get_device_name(trainer.strategy.root_device)
            out["gpu"] = name
            out["peak_memory_gib"] = torch.cuda.max_memory_allocated(trainer.strategy.root_device) / 2**30
            peak = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
            if peak and timed and seconds:
                out["mfu"] = 6 * params * tokens / seconds / peak
        return out

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:
            atomic_write_json(self.dirpath / "throughput.json", self.summary(trainer, pl_module))


class LogProgress(pl.Callback):
    """A plain progress line where no progress bar can be seen: when the output is not a terminal (a SLURM job, a
    ``nohup`` run, a sweep's job log), a stage prints ``<stage>: step k/K, loss .., reward .., s/step, ETA`` every
    ``every_s`` seconds (and every ``every_n_steps`` optimizer steps, when that is above 0), and once when it ends. A
    terminal keeps Lightning's bar (``always=True`` prints the lines there too). ``shown``: the logged values a line
    prints, each by the name after its first ``/`` (``train/lr`` prints as ``lr``); one the stage never logs is named
    once, with the values it does log."""

    SHOWN = ("train/loss", "train/reward", "train/kl")

    def __init__(self, every_s: float = 30.0, every_n_steps: int = 0, always: bool = False, stage: str = "",
                 shown: Any = SHOWN) -> None:
        self.every_s = float(every_s)
        self.every_n_steps = int(every_n_steps)
        self.always = bool(always)
        self.stage = stage
        self.shown = tuple(str(k) for k in ([shown] if isinstance(shown, str) else shown))
        self._missing_said = False

    def _on(self, trainer: pl.Trainer) -> bool:
        return trainer.is_global_zero and (self.always or not sys.stdout.isatty())

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._t0 = self._last = time.monotonic()
        self._step0 = trainer.global_step
        self._said = trainer.global_step

    @staticmethod
    def _total(trainer: pl.Trainer) -> int:
        """The stage's optimizer steps: ``max_steps``, else Lightning's estimate; 0 when unknown."""
        total = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else trainer.estimated_stepping_batches
        return int(total) if total not in (None, float("inf")) else 0

    def line(self, trainer: pl.Trainer, pl_module: pl.LightningModule, end: bool = False) -> str:
        """The progress line as it stands now; ``end``: the stage's last, with no ETA, and saying what ended it where
        that came before ``trainer.max_steps`` (the epoch cap)."""
        step = trainer.global_step
        total = self._total(trainer)
        done = step - self._step0
        spent = time.monotonic() - self._t0
        parts = [f"step {step}/{total}" if total else f"step {step}"]
        metrics = trainer.callback_metrics
        for key in self.shown:
            if key in metrics:
                parts.append(f"{key.split('/', 1)[-1]} {float(metrics[key]):.4g}")
        if done > 0:
            per = spent / done
            parts.append(f"{per:.2f} s/step")
            if total and step < total and not end:
                parts.append(f"ETA {clock(per * (total - step))}")
        name = self.stage or type(pl_module).__name__.removesuffix("Module").lower()  # sft, grpo
        if end and total and step < total and not trainer.interrupted:
            parts.append(f"stopped by the epoch cap ({trainer.current_epoch} epoch(s), trainer.max_epochs="
                         f"{trainer.max_epochs}) before step {total}")
        return f"{name}: " + ", ".join(parts) + f" ({clock(spent)} spent)"

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if not self._on(trainer) or trainer.global_step == self._said:
            return
        if trainer.global_step >= self._total(trainer) > 0:
            return  # the last step's line is on_train_end's, with "done": printed here too, it read twice in a row
        now = time.monotonic()
        due = now - self._last >= self.every_s or self._said == self._step0 or (  # the first step: it has started
            self.every_n_steps > 0 and trainer.global_step % self.every_n_steps == 0)
        if due:
            print(self.line(trainer, pl_module), flush=True)
            self._last, self._said = now, trainer.global_step
            self._say_missing(trainer)

    def _say_missing(self, trainer: pl.Trainer) -> None:
        """Once, after the first line: the keys of ``shown`` beyond the defaults (KL is GRPO's alone) that this stage
        does not log, with those it does, so a value asked for (or misspelt) is never silently absent."""
        if self._missing_said:
            return
        self._missing_said = True
        logged = sorted(k for k in trainer.callback_metrics if "/" in k)
        missing = [k for k in self.shown if k not in trainer.callback_metrics and k not in self.SHOWN]
        if missing:
            print(f"progress: {', '.join(missing)} not logged by this stage (callbacks.progress.shown); it logs "
                  f"{', '.join(logged) or 'nothing yet'}", flush=True)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._on(trainer):
            print(self.line(trainer, pl_module, end=True) + " - done", flush=True)


def files_digest(folder: str | Path, sample: int = 1 << 20) -> str:
    """A digest of what a folder holds (a checkpoint, a dataset): each file's path under it, its size, and its first
    and last ``sample`` bytes (0: names and sizes alone, for a dataset of thousands of files); cheap on a 15 GB
    checkpoint, and apart for two folders of other weights or files. A path that is no folder (a hub id) digests as
    its name."""
    root = Path(folder)
    h = hashlib.sha256()
    if not root.is_dir():
        h.update(str(folder).encode())
        return h.hexdigest()[:16]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        size = path.stat().st_size
        h.update(f"{path.relative_to(root)}\0{size}\0".encode())
        if sample <= 0:
            continue
        with open(path, "rb") as f:
            h.update(f.read(sample))
            if size > 2 * sample:
                f.seek(-sample, 2)
                h.update(f.read(sample))
    return h.hexdigest()[:16]


def batch_digest(batch: Any) -> dict[str, str]:
    """Each tensor of a batch as a digest of its shape and bytes (and the samples' ids, where the batch has them)."""
    out: dict[str, str] = {}
    for key in sorted(batch) if isinstance(batch, dict) else []:
        value = batch[key]
        if isinstance(value, torch.Tensor):
            data = value.detach().cpu().contiguous()
            out[key] = f"{list(data.shape)} " + hashlib.sha256(data.view(torch.uint8).numpy().tobytes()).hexdigest()[:16]
        elif key == "ids":
            out[key] = ",".join(map(str, value))
    return out


def start_state(pl_module: Any) -> dict[str, Any]:
    """What a step's result depends on besides its inputs, as the step starts: torch's threads, the CPUs the process
    may run on, a digest of torch's random state and of the trainable parameters in memory (an adapter's fresh
    initialisation, which no file holds; only the trainable ones: cheap beside a frozen 7B)."""
    def digest(tensors: Any) -> str:
        h = hashlib.sha256()
        for t in tensors:
            h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        return h.hexdigest()[:16]

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out: dict[str, Any] = {"threads": int(torch.get_num_threads()), "cpus": cpus,
                           "rng_digest": digest([torch.random.get_rng_state()])}
    if pl_module is not None:
        out["trainable_digest"] = digest(p for _, p in sorted(pl_module.named_parameters()) if p.requires_grad)
    return out


class InputsRecord(pl.Callback):
    """What a run read, written as its first step starts: the model folder and its digest (`files_digest`), the data
    root and its digest (its files' names and sizes: the batch's digest sees their contents), this rank's first
    batch (`batch_digest`) and what else the step depends on (`start_state`: threads, CPUs, random state, the
    trainable weights in memory), to ``<dirpath>/rank<r>.json`` (a later stage's in its own folder), and that step's
    loss once it is known. A resumed start writes
    ``rank<r>-from<step>.json`` beside it: the first start's record stays. Two runs that should agree (one node
    against two, a preempted run against one that was not) and part at a step then say which of those they read
    differently."""

    def __init__(self, dirpath: str, model: str, data: str | None = None) -> None:
        self.dirpath, self.model, self.data = Path(dirpath), str(model), data
        self._written = False
        self._record: dict[str, Any] | None = None
        self._path = self.dirpath / "rank0.json"
        self._kept = 0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if self._written:
            return
        self._written = True
        step = int(trainer.global_step)
        name = f"rank{trainer.global_rank}" + (f"-from{step}" if step else "")
        self._record = {
            "step": step, "model": self.model, "model_digest": files_digest(self.model),
            "data": self.data, "data_digest": files_digest(self.data, sample=0) if self.data else None,
            "first_batch": batch_digest(batch), **start_state(pl_module)}
        self._path = self.dirpath / f"{name}.json"
        self._kept = len(getattr(pl_module, "history", None) or [])  # a resumed start's history holds earlier steps
        atomic_write_json(self._path, self._record)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        """Once this rank's first step is in its history, its loss joins the record (``loss``, and the step the
        history gives it, ``loss_step``: a GRPO step is kept under the step count after its optimizer step): which
        rank's losses a run's ``train_history.json`` holds can then be read off (rank 0's)."""
        record = self._record
        history = getattr(pl_module, "history", None) or []
        if record is None or "loss" in record or len(history) <= self._kept:
            return
        first = history[self._kept]
        record["loss"], record["loss_step"] = float(first["loss"]), float(first.get("step", record["step"]))
        atomic_write_json(self._path, record)
