"""A run's first stage, checking (`check_run`: every input, before any model loads), and building a stage's objects
from the config: its data module, its LightningModule, its callbacks, its trainer."""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from vase.errors import ConfigError
from vase.io import load_tensors
from vase.loggers import check_loggers
from vase.metrics.registry import extra_metrics
from vase.models.checkpoint import check_adapter
from vase.models.loading import check_model
from vase.reports.hypothesis import hypothesis_of
from vase.reports.verdict_view import hypothesis_columns

log = logging.getLogger("vase")


def check_run(cfg: DictConfig) -> list[str]:
    """Each input a run would fail on later, refused in one line before any model loads (a hypothesis block that
    is not one first); returns the hypothesis's measures, which lead the dashboards' end columns."""
    hypothesis_metrics = hypothesis_columns(hypothesis_of(cfg))
    check_training_data(cfg, cfg.stage.name)  # nothing trains on nothing
    check_accelerator(cfg.trainer)  # trainer=gpu on a machine without one
    check_loggers(cfg)  # a tracking server that does not answer, a broken store
    extra_metrics(cfg.metrics.get("extra"))  # a caption metric that is none, or does not import
    check_model(cfg.model)  # a checkpoint folder missing a file or with a damaged shard, an unreachable hub id
    if cfg.get("init_adapter"):
        check_adapter(str(cfg.init_adapter))  # a run folder given for its adapter
    if cfg.get("ckpt_path"):
        check_ckpt_path(str(cfg.ckpt_path))  # a missing or unsafe checkpoint
    return hypothesis_metrics


def slurm_placement(env: dict[str, str] | None = None) -> str:
    """`` (node rank N)`` inside a SLURM task, else empty: where a line a task prints came from."""
    env = os.environ if env is None else env
    return f" (node rank {env['SLURM_NODEID']})" if "SLURM_NODEID" in env and "SLURM_PROCID" in env else ""


def slurm_task_line(env: dict[str, str] | None = None) -> str | None:
    """One line saying where this SLURM task runs (node rank, global rank, world size, the rendezvous address), or
    None outside SLURM."""
    env = os.environ if env is None else env
    if "SLURM_PROCID" not in env or "SLURM_NODEID" not in env:
        return None
    return (f"SLURM task: node rank {env['SLURM_NODEID']} of {env.get('SLURM_JOB_NUM_NODES', '?')} nodes, global "
            f"rank {env['SLURM_PROCID']} of {env.get('SLURM_NTASKS', '?')} tasks, on {env.get('SLURMD_NODENAME', '?')}, "
            f"master {env.get('MASTER_ADDR', '(from the node list)')}")


def slurm_master_address(env: dict[str, str] | None = None, run: Any = None) -> str | None:
    """In a SLURM job over several nodes, the address of its first node for DDP's rendezvous (``MASTER_ADDR``), when
    that node's name does not resolve: Lightning takes the first name of ``SLURM_NODELIST`` as the address, and a
    cluster whose node names are not in DNS (several ``slurmd`` on one host, some private clusters) fails there. The
    allocation knows the address (``scontrol show node``: ``NodeAddr``); it is set and returned. None where nothing
    is needed: one node, ``MASTER_ADDR`` already given, or a name that resolves."""
    env = os.environ if env is None else env
    if env.get("MASTER_ADDR") or int(env.get("SLURM_JOB_NUM_NODES", env.get("SLURM_NNODES", "1")) or 1) < 2:
        return None
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist or shutil.which("scontrol") is None:
        return None
    run = run or (lambda args: subprocess.run(args, capture_output=True, text=True, timeout=30))
    names = run(["scontrol", "show", "hostnames", nodelist]).stdout.split()
    if not names:
        return None
    try:
        socket.gethostbyname(names[0])
        return None
    except OSError:
        pass
    found = re.search(r"NodeAddr=(\S+)", run(["scontrol", "show", "node", names[0], "-o"]).stdout)
    if found is None:
        return None
    env["MASTER_ADDR"] = found.group(1)
    log.info("SLURM: node %s does not resolve; MASTER_ADDR=%s from the allocation", names[0], found.group(1))
    return found.group(1)


def build_datamodule(cfg: DictConfig, processor: Any, stage: str, batch_size: int | None = None) -> Any:
    """The data module of a stage (its batches: prompts for GRPO), prepared (data made or checked, views rendered)
    and set up for fitting."""
    extra = {} if batch_size is None else {"batch_size": int(batch_size)}
    datamodule = instantiate(cfg.data, processor=processor, stage=str(stage), **extra, _convert_="partial")
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def check_training_data(cfg: DictConfig, stage: str) -> None:
    """Before any model loads: the run's data must give the stage something to train on (a DataError naming the data
    otherwise: an empty ms-swift JSONL, a ``train.json`` of ``[]``, a split filtered to nothing)."""
    datamodule = instantiate(cfg.data, processor=None, stage=str(stage), _convert_="partial")
    datamodule.prepare_data()
    datamodule.check_trainable()
    if str(stage) == "grpo":
        said = short_answers_line(datamodule.answer_words(), cfg.reward.get("terms", {}).get("penalty"), cfg.data.mix)
        if said:
            log.warning(said)


def short_answers_line(words: list[int], penalty: Any, mix: str) -> str | None:
    """One line where the format penalty's length bounds would penalise most of the task's own reference answers (a
    one-word prompt task under the default ``min_words: 5``): GRPO would then push completions away from the form
    the task asks for. None where the penalty is off or the answers fit.

    >>> short_answers_line([1, 1, 1, 7], {"weight": 1.0, "length": 0.1, "min_words": 5, "max_words": 80}, "shape_word")
    "reward.terms.penalty: 3 of data.mix=shape_word's 4 training answers (75 %) are shorter than its min_words=5 (median 1 word), so GRPO is penalised for answering as the task's answers do; set reward.terms.penalty.min_words=1 (or length=0)"
    >>> short_answers_line([6, 9], {"weight": 1.0, "length": 0.1, "min_words": 5, "max_words": 80}, "caption") is None
    True
    """
    if not penalty or not words or not float(penalty.get("weight", 0) or 0) or not float(penalty.get("length", 0) or 0):
        return None
    lo, hi = int(penalty.get("min_words", 0) or 0), int(penalty.get("max_words", 0) or 0)
    short = [w for w in words if w < lo]
    long = [w for w in words if hi and w > hi]
    median = sorted(words)[len(words) // 2]
    if 2 * len(short) > len(words):
        return (f"reward.terms.penalty: {len(short)} of data.mix={mix}'s {len(words)} training answers "
                f"({100 * len(short) // len(words)} %) are shorter than its min_words={lo} (median {median} "
                f"word{'s' if median != 1 else ''}), so GRPO is penalised for answering as the task's answers do; set "
                f"reward.terms.penalty.min_words={max(1, min(words))} (or length=0)")
    if 2 * len(long) > len(words):
        return (f"reward.terms.penalty: {len(long)} of data.mix={mix}'s {len(words)} training answers "
                f"({100 * len(long) // len(words)} %) are longer than its max_words={hi} (median {median} words), so "
                f"GRPO is penalised for answering as the task's answers do; set reward.terms.penalty.max_words="
                f"{max(words)} (or length=0)")
    return None


def build_stage_module(stage: DictConfig, model: Any, processor: Any, cfg: DictConfig,
                       lineage: dict[str, Any] | None = None) -> Any:
    """The LightningModule of one stage, with the processor and lineage its adapter is saved with; GRPO also gets
    the reward and its accumulation count."""
    extra: dict[str, Any] = {"processor": processor, "lineage": lineage}
    if stage.name == "grpo":
        extra.update(reward=instantiate(cfg.reward, _convert_="partial"), grad_accum=int(stage.grad_accum))
    return instantiate(stage.module, model=model, **extra, _convert_="partial")


def build_callbacks(cfg: DictConfig, stage_dir: Path | None = None) -> list[Any]:
    """The callbacks of a stage; a later stage (``stage_dir`` given) writes its checkpoints and adapter there."""
    out = []
    for node in (cfg.get("callbacks") or {}).values():
        if not (isinstance(node, DictConfig) and "_target_" in node):
            continue
        kwargs = {"dirpath": str(stage_dir / Path(str(node.dirpath)).name)} if stage_dir and node.get("dirpath") else {}
        out.append(instantiate(node, **kwargs))
    return out


def _epochs_to_continue(ckpt: Path | None, max_epochs: int, max_steps: int, given: bool = True) -> int | None:
    """Where a checkpoint already completed ``max_epochs`` but stopped short of ``max_steps`` (a finished run
    continued with a larger ``trainer.max_steps``), the epoch cap to train on to ``max_steps`` with: -1 (none).
    ``given``: the user named it (``ckpt_path=``); else ``resume=auto`` found it in the run's folder."""
    if ckpt is None:
        return None
    # read here, before Lightning does, so a file that would run code is one line (mmap: nothing copied)
    try:
        state = load_tensors(ckpt, "ckpt_path", mmap=True)
    except ConfigError as e:
        if given:
            raise
        why = str(e).removeprefix(f"ckpt_path={ckpt}: ")
        raise ConfigError(f"{ckpt}: the checkpoint this run would resume from (resume=auto found it in the run's "
                          f"folder) is unusable: {why}; resume=never starts afresh in a new folder, and this one is "
                          f"kept as it is") from None
    if max_steps <= 0 or max_epochs < 0:
        return None
    done = int(state["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"])
    step = int(state.get("global_step", 0))
    if done >= max_epochs and step < max_steps:
        log.warning("the checkpoint at step %d already finished stage.epochs=%d; training on to "
                    "trainer.max_steps=%d", step, max_epochs, max_steps)
        return -1
    return None


def check_ckpt_path(path: str | Path) -> None:
    """``ckpt_path=`` (a Lightning checkpoint to continue from), read before the model loads: a missing file, a
    folder, bytes that are no torch file, a pickle that would run code, or a file without Lightning's training state
    are one line naming the key (the pickle was refused 41 s in, after the model had loaded). mmap: nothing copied."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ConfigError(f"ckpt_path={path}: no such file; give a checkpoint a run saved (<run>/checkpoints/last.ckpt)")
    if not path.is_file():
        raise ConfigError(f"ckpt_path={path}: a folder, not a checkpoint file; give <run>/checkpoints/last.ckpt")
    state = load_tensors(path, "ckpt_path", mmap=True)
    if not isinstance(state, dict) or "state_dict" not in state or "loops" not in state:
        raise ConfigError(f"ckpt_path={path}: not a Lightning training checkpoint (no state_dict and loops in it); give "
                          f"a checkpoint a run saved (<run>/checkpoints/last.ckpt); an adapter goes to init_adapter=")


def check_accelerator(trainer: DictConfig) -> int | None:
    """A trainer that asks for CUDA GPUs (``trainer=gpu``, DeepSpeed's) on a machine with none or too few: one line,
    before the model loads (Lightning said it as a wrapped MisconfigurationException after the load). Returns the
    GPUs found, or None when the trainer asks for none."""
    accelerator = str(trainer.get("accelerator", "cpu")).lower()
    strategy = trainer.get("strategy")
    deepspeed = "deepspeed" in str(strategy.get("_target_", "") if isinstance(strategy, DictConfig) else strategy).lower()
    if accelerator not in ("gpu", "cuda") and not deepspeed:
        return None
    # lazy: torch (a trainer that needs none never asks)
    import torch

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    devices = trainer.get("devices", 1)
    wanted = devices if isinstance(devices, int) and not isinstance(devices, bool) and devices > 0 else 1
    if have < wanted:
        found = "no CUDA GPU (torch.cuda.is_available() is False)" if have == 0 else f"{have} CUDA GPU(s)"
        asked = f"trainer.accelerator={accelerator}" + (" with DeepSpeed" if deepspeed else "")
        raise ConfigError(f"{asked} asks for {wanted} CUDA GPU(s), and this machine has {found}; use trainer=cpu "
                          f"(or trainer=ddp trainer.accelerator=cpu for several processes), or run on a GPU machine")
    return have


def build_trainer(cfg: DictConfig, stage: DictConfig, callbacks: list[Any], loggers: list[Any], root: Path,
                  first: bool, ckpt: Path | None = None) -> Any:
    """The Lightning trainer for a stage. GRPO optimises manually (it accumulates and clips itself); ``ckpt`` is the
    checkpoint it will resume from, if any."""
    # the training loader shards itself across ranks (vase.data.loader.ResumableSampler), exactly on resume too
    kwargs: dict[str, Any] = {"callbacks": callbacks, "logger": loggers or False, "default_root_dir": str(root),
                              "use_distributed_sampler": False}
    epochs, steps = int(cfg.trainer.get("max_epochs", stage.epochs) or -1), int(cfg.trainer.get("max_steps", -1) or -1)
    if not first:
        # a later stage has its own length, but never runs past the trainer's cap (debug=fast caps every stage)
        cap, own = steps, int(stage.get("max_steps", -1))
        steps = min(s for s in (cap, own) if s > 0) if max(cap, own) > 0 else -1
        epochs = int(stage.epochs)
        kwargs.update(max_epochs=epochs, max_steps=steps)
    more = _epochs_to_continue(ckpt, epochs, steps, given=first and bool(cfg.get("ckpt_path")))
    if more is not None:
        kwargs["max_epochs"] = more
    strategy = cfg.trainer.get("strategy")
    if "deepspeed" not in str(strategy.get("_target_", "") if isinstance(strategy, DictConfig) else strategy).lower():
        # lazy: torch
        from vase.training.checkpointing import (
            AtomicCheckpointIO,  # torch and Lightning: loaded when a trainer is built
        )

        kwargs["plugins"] = [AtomicCheckpointIO()]  # DeepSpeed writes its own sharded checkpoint directories
    if not sys.stdout.isatty():  # a file: vase's plain progress lines (LogProgress), never Rich's frames
        from pytorch_lightning.callbacks import ModelSummary  # lazy: Lightning

        kwargs["enable_progress_bar"] = False
        if cfg.trainer.get("enable_model_summary", True) is not False and not any(
                isinstance(c, ModelSummary) for c in callbacks):
            kwargs["callbacks"] = [*callbacks, ModelSummary(max_depth=1)]  # plain text, not Rich's box table
    if stage.name == "grpo":
        kwargs.update(accumulate_grad_batches=1, gradient_clip_val=None)
    else:
        kwargs.update(accumulate_grad_batches=int(stage.grad_accum))
    return instantiate(cfg.trainer, **kwargs, _convert_="partial")
