"""``run_training``: what ``python train.py`` runs, top to bottom: claim the run's folder, load the model (merging
an SFT adapter first), build the data, then for each stage (``stage``, and ``followup`` if set) build, fit, evaluate;
then report. Everything takes a plain DictConfig, so tests drive it with Hydra's compose API.

The command that runs it: `vase.cli.train` (``vase train``, ``python train.py``).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

import vase.config  # noqa: F401  (registers the config resolvers, e.g. vase.wandb_offline)
from vase import runs
from vase.config import Decoding, swept_keys
from vase.errors import ConfigError
from vase.eval.captions import evaluate_captions
from vase.eval.heldout import heldout_reward
from vase.eval.scoring import build_scorer
from vase.eval.stats import dashboard_columns, heldout_metrics
from vase.eval.vqa import evaluate_vqa
from vase.io import atomic_write_json, atomic_write_text, file_lock, read_json
from vase.loggers import (
    build_loggers,
    check_loggers,
    log_config,
    log_end_metrics,
    log_eval_rows,
    log_hypothesis_start,
    say_unsent,
)
from vase.metrics.paired import caption_terms, compare_captions, format_comparison
from vase.metrics.registry import extra_metrics
from vase.models.checkpoint import check_adapter
from vase.models.loading import check_model, load_model_and_processor
from vase.pipeline.build import (
    build_callbacks,
    build_datamodule,
    build_stage_module,
    build_trainer,
    check_accelerator,
    check_ckpt_path,
    check_training_data,
    slurm_master_address,
    slurm_placement,
    slurm_task_line,
)
from vase.pipeline.finish import write_run_report
from vase.pipeline.learned import learned_heads
from vase.pipeline.sft_cache import shared_sft_adapter
from vase.reports.hypothesis import hypothesis_of
from vase.reports.verdict_view import comparison_at_job_end, hypothesis_columns
from vase.rewards.reward import effective_weights

log = logging.getLogger("vase")


def _sweep_comparison(cfg: DictConfig, out_dir: Path) -> dict[str, float]:
    """A sweep's job against its baseline job, where that has finished (W&B can take it only now); {} outside a sweep
    and for the shared SFT a job trains first in the cache, which is no job of the sweep."""
    swept = swept_keys()
    hc = HydraConfig.get() if swept else None
    job_dir = OmegaConf.select(hc, "runtime.output_dir", default=None) if hc is not None else None
    if not job_dir or Path(str(job_dir)).resolve() != Path(out_dir).resolve():
        return {}
    return comparison_at_job_end(hc.sweep.dir, out_dir, hypothesis_of(cfg), swept)


def _refuse_before_loading(cfg: DictConfig) -> None:
    """Each input a run would fail on later, refused in one line before any model loads."""
    check_training_data(cfg, cfg.stage.name)  # nothing trains on nothing
    check_accelerator(cfg.trainer)  # trainer=gpu on a machine without one
    check_loggers(cfg)  # a tracking server that does not answer, a broken store
    extra_metrics(cfg.metrics.get("extra"))  # a caption metric that is none, or does not import
    check_model(cfg.model)  # a checkpoint folder missing a file or with a damaged shard, an unreachable hub id
    if cfg.get("init_adapter"):
        check_adapter(str(cfg.init_adapter))  # a run folder given for its adapter
    if cfg.get("ckpt_path"):
        check_ckpt_path(str(cfg.ckpt_path))  # a missing or unsafe checkpoint


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """Prepare data, build the model and stage module, fit, evaluate before/after, and write the report.

    With ``followup`` set (a second stage config, e.g. GRPO after SFT), the first stage's adapter is merged and the
    second stage trains a fresh adapter on top, in the same run; its outputs go to ``<run>/<followup name>/``.
    """
    if runs.finished_sweep_job(cfg.paths.output_dir, str(cfg.get("resume") or "never")):
        return _kept(Path(cfg.paths.output_dir))
    # the hypothesis's measures lead the dashboards' end columns; a hypothesis block that is not one: one line, now
    hypothesis_metrics = hypothesis_columns(hypothesis_of(cfg))
    _refuse_before_loading(cfg)
    slurm_master_address()  # a job over several SLURM nodes whose names do not resolve: the address from SLURM
    placement = slurm_task_line()
    if placement:
        print(placement, flush=True)
    out_dir, init_adapter = _start(cfg)
    log.info("loading model %s", cfg.model.name_or_path)
    # an initial adapter (e.g. from SFT) is merged first, as the paper merged LoRA before RL; the new stage's
    # adapter then trains on top and its reference (adapter off) is the merged model
    model, processor = load_model_and_processor(cfg.model, adapter=init_adapter, merge=True)
    merged = [str(init_adapter)] if init_adapter else []
    shared_sft = None if cfg.get("init_adapter") or not init_adapter else Path(init_adapter)  # vase's cache: writable
    datamodule = build_datamodule(cfg, processor, cfg.stage.name)
    loggers = build_loggers(cfg)
    log_config(loggers, cfg, out_dir / "config.yaml")
    log_hypothesis_start(loggers, hypothesis_metrics)  # MLflow's comparison plots the first metric a run logs
    ev = _Evaluation(cfg, processor, out_dir, loggers)

    stages = [(cfg.stage, out_dir)]
    if cfg.get("followup"):
        stages.append((cfg.followup, out_dir / str(cfg.followup.name)))
    module = trainer = None
    for i, (stage, stage_dir) in enumerate(stages):
        if i > 0:
            model = module.model.merge_and_unload()  # the previous stage's adapter becomes part of the base
            merged.append(str(stages[i - 1][1] / "adapter"))
            datamodule = build_datamodule(cfg, processor, stage.name, int(stage.batch_size))
        ev.trained = trained_with(stage)
        lineage = {"base": str(cfg.model.name_or_path), "merged_adapters": list(merged), "trained": ev.trained}
        module = build_stage_module(stage, model, processor, cfg, lineage)
        ckpt = Path(cfg.ckpt_path) if i == 0 and cfg.get("ckpt_path") else runs.resume_checkpoint(
            out_dir, stage_dir, str(cfg.get("resume") or "never"))
        if ckpt is not None and not cfg.get("ckpt_path"):
            print(f"resuming {stage.name} from {ckpt} (resume=auto; resume=never starts afresh){slurm_placement()}")
        trainer = build_trainer(cfg, stage, build_callbacks(cfg, None if i == 0 else stage_dir), loggers, stage_dir,
                                first=i == 0, ckpt=ckpt)
        if i == 0 and trainer.is_global_zero:
            ev.captions(module, datamodule, "untrained", before=True)
        trainer.fit(module, datamodule=datamodule, ckpt_path=str(ckpt) if ckpt else None, weights_only=True)
        ev.histories[str(stage.name)] = list(module.history)
        atomic_write_json(out_dir / ("train_history.json" if i == 0 else f"train_history_{stage.name}.json"),
                          module.history)
        if trainer.is_global_zero:
            ev.vqa_after(module, datamodule, str(stage.name))
            # the held-out reward of this stage and of where it started (its adapter off: the merged model it
            # trained on top of), on the task it trained; a shared SFT's answers are cached beside it
            ev.heldout_after(module, datamodule, stage, "" if i == 0 else f"_{stage.name}", bool(merged),
                             shared_sft if i == 0 else None)
            ev.captions(module, datamodule, str(stage.name), before=False)

    if trainer is not None and trainer.is_global_zero:
        metrics = end_metrics(ev.results, ev.histories)
        last = str(stages[-1][0].name)
        if last in ev.heldout:  # the held-out verdict per dimension against the start, and the captions' metrics
            metrics.update(heldout_metrics(ev.heldout[last], ev.heldout_start.get(last)))
        metrics.update(_sweep_comparison(cfg, out_dir))
        log_end_metrics(loggers, cfg, metrics, shown=dashboard_columns(metrics, hypothesis_metrics))
    if trainer is not None and trainer.is_global_zero and ev.results:
        write_run_report(cfg, out_dir, ev.results, ev.histories, ev.generations, datamodule.val_set, module, loggers,
                         ev.scorer)
    say_unsent(loggers, out_dir)  # an MLflow server that stopped answering: what it lacks, and the command to send it
    runs.set_status(out_dir, "finished")
    return {"results": ev.results, "history": ev.histories.get(str(cfg.stage.name), []), "histories": ev.histories,
            "vqa": ev.vqa, "output_dir": str(out_dir), "module": module}


def trained_with(stage: DictConfig) -> dict[str, str]:
    """How a stage trained, as every results file of the model it made records it (``trained``) and its adapter's
    lineage keeps it: the stage, and for GRPO the advantages' aggregation (what a reward weight meant).

    >>> trained_with(OmegaConf.create({"name": "grpo", "module": {"multi_objective_aggregation": "normalize_then_sum"}}))
    {'stage': 'grpo', 'multi_objective_aggregation': 'normalize_then_sum'}
    """
    out = {"stage": str(stage.name)}
    if str(stage.name) == "grpo":
        out["multi_objective_aggregation"] = str(stage.module.get("multi_objective_aggregation")
                                                 or "sum_then_normalize")
    return out


def _number(v: Any) -> float | None:
    """A history value as a float (numpy and torch scalars too), or None."""
    try:
        return None if v is None or isinstance(v, bool) else float(v)
    except (TypeError, ValueError):
        return None


def end_metrics(results: dict[str, dict[str, Any]], histories: dict[str, list[dict[str, Any]]],
                last: int = 20) -> dict[str, float]:
    """What a run ended at, for dashboards' run tables (``hp/*``): the last evaluated model's caption scores, and
    the last stage's mean training loss or reward over its last ``last`` steps."""
    out: dict[str, float] = {}
    if results:
        row = list(results.values())[-1]
        for k in ("clip_score", "r_at_5", "fid_score", "lexical_similarity", "overall_score"):
            if _number(row.get(k)) is not None:
                out[f"hp/{k}"] = _number(row[k])
    history = list(histories.values())[-1] if histories else []
    for key in ("reward", "loss"):
        values = [v for v in (_number(h.get(key)) for h in history[-last:]) if v is not None]
        if values:
            out[f"hp/train_{key}_last{last}"] = sum(values) / len(values)
    return out


def _kept(out_dir: Path) -> dict[str, Any]:
    """A finished job of a sweep taken up again: kept as it is, its results read back from its folder (what a
    sweeper's objective and the sweep summary read)."""
    print(f"keeping the finished sweep job {out_dir} (resume=auto; its results stand)")
    histories = {p.stem.removeprefix("train_history").lstrip("_") or "first": read_json(p)
                 for p in sorted(out_dir.glob("train_history*.json"))}
    results = out_dir / "results.json"
    return {"results": read_json(results) if results.is_file() else {}, "history": histories.get("first", []),
            "histories": histories, "vqa": {p.stem.removeprefix("vqa_"): read_json(p) for p in out_dir.glob("vqa_*.json")},
            "output_dir": str(out_dir), "module": None, "kept": True}


def _start(cfg: DictConfig) -> tuple[Path, str | None]:
    """The shared SFT adapter (trained now or read from the cache), the seed, this run's own folder (claimed: an
    earlier run there is not overwritten) and its config.yaml; returns the folder and the adapter to merge first."""
    shared_init = None
    if not cfg.get("init_adapter") and cfg.get("sft_init"):
        # before seeding: whether the shared adapter is trained now or read from the cache, this run's own random
        # streams start from the same seed
        shared_init = str(shared_sft_adapter(cfg, run_training))
        log.info("starting from the shared SFT adapter %s", shared_init)
    learned_heads(cfg)  # reward.terms.learned.checkpoint=train: trained on this run's training vases (GRPO runs)
    pl.seed_everything(int(cfg.seed), workers=True)
    out_dir = runs.claim(cfg.paths.output_dir, str(cfg.get("resume") or "never"))
    if cfg.get("reward") is not None:
        # what the reward really uses: config.yaml, W&B and the sweep summary show it beside the weights given
        with open_dict(cfg):
            cfg.reward.effective_weights = effective_weights(cfg.reward)
    atomic_write_text(out_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    return out_dir, cfg.get("init_adapter") or shared_init


class _Evaluation:
    """The evaluations a run asks for (``val.*``) and what they found, stage by stage."""

    def __init__(self, cfg: DictConfig, processor: Any, out_dir: Path, loggers: list[Any]) -> None:
        self.cfg, self.processor, self.out_dir, self.loggers = cfg, processor, out_dir, loggers
        self.ev = cfg.get("val", {}) or {}
        self.label = cfg.model.get("label", "model")
        self.decoding = Decoding.of(self.ev, "val")  # every answer's decoding: the config's, not the checkpoint's
        self.results: dict[str, dict[str, Any]] = {}
        self.generations: dict[str, list[dict[str, Any]]] = {}
        self.histories: dict[str, list[dict[str, float]]] = {}
        self.vqa: dict[str, dict[str, Any]] = {}
        self.heldout: dict[str, dict[str, Any]] = {}
        self.heldout_start: dict[str, dict[str, Any]] = {}  # each stage's starting point (its adapter off)
        self.trained: dict[str, str] | None = None  # how the model being evaluated trained (trained_with)
        self.scorer = None
        if self.ev.get("before") or self.ev.get("after"):
            # loading encoders initialises modules from the global RNG: keep it off the seeded training stream, so
            # a run trains the same whichever metrics it reports
            with torch.random.fork_rng(devices=[]):
                self.scorer = build_scorer(cfg.metrics)

    def captions(self, module: Any, datamodule: Any, tag: str, before: bool) -> None:
        """Caption the validation set and score it (``val.before`` / ``val.after``)."""
        if not self.ev.get("before" if before else "after"):
            return
        ev = self.ev
        name = f"{self.label} ({tag})"
        self.results[name], self.generations[name] = evaluate_captions(
            module.model, self.processor, datamodule.val_set, self.scorer, self.out_dir, tag,
            int(ev.max_new_tokens), int(ev.batch_size), bool(self.cfg.metrics.get("image_score", True)),
            decoding=self.decoding, extra=None if before else {"trained": self.trained})
        log_eval_rows(self.loggers, tag, self.results[name], self.generations[name])

    def heldout_after(self, module: Any, datamodule: Any, stage: DictConfig, suffix: str, merged: bool,
                      shared_sft: Path | None) -> None:
        """``val.heldout``: the stage's own mix of tasks (or ``val.heldout_mix``) answered for every validation vase
        and scored by the run's reward terms (``heldout_reward<suffix>.json``), and, for a stage trained on top of
        merged adapters, the same for its starting point (``heldout_reward_start<suffix>.json``): the paired baseline
        of every comparison."""
        if not self.ev.get("heldout"):
            return
        ev = self.ev
        reward = instantiate(self.cfg.reward, _convert_="partial")
        mix = str(ev.get("heldout_mix") or datamodule.mix)
        tokens = int(ev.get("heldout_max_new_tokens") or stage.module.get("max_completion_length")
                     or ev.max_new_tokens)
        # a model trained with zoom data (data.zoom) answers with the tool offered, and again without it
        zoom = int(ev.get("heldout_zoom_calls") or 0) if getattr(datamodule, "zoom", False) else 0
        # one half of the held-out vases (a search scores on one, its confirmation on the other), or all of them
        split = {"split": str(ev.get("heldout_split") or "all"), "split_salt": str(ev.get("heldout_split_salt", "vase"))}
        self.heldout[str(stage.name)] = heldout_reward(
            module.model, self.processor, datamodule.val_set, reward, mix, self.out_dir / f"heldout_reward{suffix}.json",
            f"{self.label} ({stage.name})", int(ev.batch_size), tokens, zoom_calls=zoom, decoding=self.decoding,
            extra={"trained": self.trained}, **split)
        self.caption_terms(self.heldout[str(stage.name)], self.out_dir / f"heldout_reward{suffix}.json")
        if zoom:  # the same adapter answering without the tool: the paired baseline of what the tool itself adds
            heldout_reward(module.model, self.processor, datamodule.val_set, reward, mix,
                           self.out_dir / f"heldout_without_tool{suffix}.json", f"{self.label} ({stage.name}, no tool)",
                           int(ev.batch_size), tokens, decoding=self.decoding, extra={"trained": self.trained}, **split)
        if merged and hasattr(module.model, "disable_adapter"):
            answers = None
            if shared_sft is not None:  # every job of a sweep starts from this SFT: its answers are made once
                answers = shared_sft.parent / f"heldout_start_{mix}_t{tokens}{self.decoding.tag()}.jsonl"
            with file_lock(answers.with_suffix(".lock")) if answers else contextlib.nullcontext(), \
                    module.model.disable_adapter():
                start = heldout_reward(module.model, self.processor, datamodule.val_set, reward, mix,
                                       self.out_dir / f"heldout_reward_start{suffix}.json", f"{self.label} (start)",
                                       int(ev.batch_size), tokens, answers=answers, decoding=self.decoding, **split)
            self.heldout_start[str(stage.name)] = start
            self.captions_vs_start(self.heldout[str(stage.name)], start, self.out_dir / f"heldout_reward{suffix}.json")
        res = self.heldout[str(stage.name)]
        for lg in self.loggers:
            lg.log_metrics({**{f"val/{stage.name}/heldout/{d}_right": s["mean"] for d, s in res["pass"].items()},
                            **{f"val/{stage.name}/heldout/{n}": s["mean"] for n, s in res["terms"].items()},
                            f"val/{stage.name}/heldout/reward": res["total"]["mean"]})

    def caption_terms(self, run: dict[str, Any], path: Path) -> None:
        """Each held-out caption's term of every per-vase caption metric (the paper's and ``metrics.extra``'s), kept
        in ``heldout_reward*.json`` as ``caption_terms`` (metric -> answer id -> value): what a hypothesis's
        ``heldout/<caption metric>`` pairs between two jobs of a sweep."""
        if not run.get("caption_answers"):
            return
        if self.scorer is None:
            with torch.random.fork_rng(devices=[]):  # as in __init__: the encoders stay off the training stream
                self.scorer = build_scorer(self.cfg.metrics)
        run["caption_terms"] = caption_terms(self.scorer, run["caption_answers"], run["caption_references"],
                                             weights=self.cfg.metrics.get("weights"))
        atomic_write_json(path, run)

    def captions_vs_start(self, run: dict[str, Any], start: dict[str, Any], path: Path) -> None:
        """The held-out captions of this stage against its start's on the paper's caption metrics, each a paired
        interval over vases with the difference the set can detect (vase.metrics.paired): written into
        ``heldout_reward*.json`` (``captions_vs_start``) and its table, and logged."""
        if not (run.get("caption_answers") and start.get("caption_answers")):
            return
        if self.scorer is None:
            with torch.random.fork_rng(devices=[]):  # as in __init__: the encoders stay off the training stream
                self.scorer = build_scorer(self.cfg.metrics)
        comp = compare_captions(self.scorer, run["caption_answers"], start["caption_answers"],
                                run["caption_references"], weights=self.cfg.metrics.get("weights"))
        run["captions_vs_start"] = comp
        atomic_write_json(path, run)
        md = path.with_suffix(".md")
        atomic_write_text(md, md.read_text() + "\nThe held-out captions on the paper's metrics, against the start "
                          "(paired over vases; 'detectable': the smallest difference this set, and one of the "
                          "paper's size, finds at 80 % power):\n\n" + format_comparison(comp))
        for lg in self.loggers:
            lg.log_metrics({f"val/heldout_captions/{m}_diff": c["diff"] for m, c in comp.items()})

    def vqa_after(self, module: Any, datamodule: Any, stage: str) -> None:
        """Per-dimension VQA on the validation set (``val.vqa``), written to ``vqa_<stage>.json``."""
        if not self.ev.get("vqa"):
            return
        ev, cfg = self.ev, self.cfg
        reward = instantiate(cfg.reward, _convert_="partial")
        self.vqa[stage] = evaluate_vqa(
            module.model, self.processor, datamodule.val_set, reward, float(cfg.reward.tau),
            self.out_dir / f"vqa_{stage}.json", f"{self.label} ({stage})", str(ev.vqa),
            int(ev.get("vqa_choices", 4)), int(ev.batch_size), int(ev.get("vqa_max_new_tokens", 24)),
            decoding=self.decoding, extra={"trained": self.trained})
        for lg in self.loggers:
            lg.log_metrics({f"val/{stage}/vqa/{p}/{d}": a for p, sc in self.vqa[stage].items()
                            for d, a in sc["accuracy"].items()})


def objective(out: dict[str, Any], key: str) -> float:
    """The number a sweeper optimises (``optimized_metric``): a caption metric of the last evaluated stage
    (``overall_score``, ``r_at_1``, ...), ``vqa/<open|mc>/<dimension|mean>`` of the last stage's VQA, or
    ``train/reward`` (mean GRPO reward over the last 20 steps)."""
    if key == "train/reward":
        rewards = [h["reward"] for h in out.get("history", []) if "reward" in h][-20:]
        if rewards:
            return float(sum(rewards) / len(rewards))
    elif key.startswith("vqa/"):
        _, protocol, dim = (key.split("/") + ["", ""])[:3]
        if out.get("vqa"):
            s = list(out["vqa"].values())[-1].get(protocol, {})
            value = s.get("mean") if dim == "mean" else s.get("accuracy", {}).get(dim)
            if value is not None:
                return float(value)
    elif out.get("results"):
        row = list(out["results"].values())[-1]
        if key in row:
            return float(row[key])
    raise ConfigError(f"optimized_metric={key!r}: this run has no such value (a caption metric needs val.after=true, "
                      f"vqa/... needs val.vqa, train/reward needs stage=grpo)")
