"""What a training run is evaluated on, stage by stage (``val.*``): captions before and after, the held-out reward
of each stage and of its start, VQA; and what each found, which the run's end (`vase.pipeline.finish`) reports.
`RunEvaluation` is the one object `vase.pipeline.train.run_training` asks."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from vase.config import Decoding
from vase.eval.captions import evaluate_captions
from vase.eval.heldout import heldout_reward
from vase.eval.scoring import build_scorer
from vase.eval.vqa import evaluate_vqa
from vase.io import atomic_write_json, atomic_write_text, file_lock
from vase.loggers import log_eval_rows
from vase.metrics.paired import caption_terms, compare_captions, format_comparison


class RunEvaluation:
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

    def after_stage(self, module: Any, datamodule: Any, stage: DictConfig, first: bool, merged: bool,
                    shared_sft: Path | None) -> None:
        """Everything a stage is evaluated on once it has trained (rank 0): VQA (``val.vqa``), the held-out reward
        of the stage and of where it started (its adapter off: the merged model it trained on top of; a shared
        SFT's answers are cached beside it), and the captions (``val.after``)."""
        self.vqa_after(module, datamodule, str(stage.name))
        self.heldout_after(module, datamodule, stage, "" if first else f"_{stage.name}", merged,
                           shared_sft if first else None)
        self.captions(module, datamodule, str(stage.name), before=False)

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
