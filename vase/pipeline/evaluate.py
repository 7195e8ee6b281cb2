"""What ``evaluate.py`` runs: `run_evaluation` dispatches ``task`` from the registry of evaluation tasks
(`vase.config.EVAL_TASKS`, which says what each needs checked first) to its function here, one per task
(``eval_<task>``). Only ``evaluate.py`` imports this module; captioning a split and scoring it, which training also
does, is `vase.eval.captions.evaluate_captions`.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig

import vase.config  # noqa: F401  (registers the config resolvers)
from vase.choices import MIN_EVAL_VASES
from vase.config import EVAL_TASKS, Decoding
from vase.data.check import check_dataset, format_report
from vase.data.layouts import read_keyed
from vase.errors import ConfigError, DataError
from vase.eval.captions import evaluate_captions
from vase.eval.invrender import run_invrender
from vase.io import atomic_directory, atomic_write_json, atomic_write_text, is_within
from vase.loggers import build_loggers, check_loggers, log_config, log_eval_rows, log_results_table, say_unsent
from vase.metrics.registry import extra_metrics
from vase.models.checkpoint import LINEAGE_FILE, check_adapter
from vase.models.loading import check_model, load_model_and_processor, pixel_bounds, resolve_model_path
from vase.prompt_tasks.invrender import PROMPT, VaseParams

log = logging.getLogger("vase")


def adapter_trained(cfg: DictConfig) -> dict[str, Any] | None:
    """How ``cfg.adapter`` trained, from its lineage (``trained``: the stage and GRPO's aggregation), for the results
    files of an evaluation; None without an adapter or for one saved before vase recorded it."""
    if not cfg.get("adapter"):
        return None
    lineage = Path(str(cfg.adapter)) / LINEAGE_FILE
    try:
        return json.loads(lineage.read_text()).get("trained") if lineage.is_file() else None
    except (OSError, ValueError):  # a lineage that cannot be read records nothing; loading the adapter says why
        return None


def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    """Run ``cfg.task``, an evaluation task of the registry (`vase.config.EVAL_TASKS`): its own precheck, outputs
    that are not a user's, the tracking server, the model and the split checked first (as the entry says), then
    its function; its scores, rows and table go to the loggers."""
    _seed(int(cfg.seed))
    task = EVAL_TASKS.get(str(cfg.task))
    if task is None:  # validate() refuses such a task first
        raise ConfigError(f"task={cfg.task!r} is not an evaluation task; choose one of {', '.join(EVAL_TASKS)}")
    if task.precheck:
        task.function("precheck")(cfg)  # a task's own, more telling refusal of its inputs
    refuse_foreign_outputs(written_files(cfg), cfg.paths.output_dir)
    if cfg.get("metrics"):
        extra_metrics(cfg.metrics.get("extra"))  # a caption metric that is none, or does not import: one line, now
    if task.logs:
        check_loggers(cfg)  # a tracking server that does not answer: one line now, not after the evaluation
    if task.checks_model(cfg):
        check_model(cfg.model)  # a broken checkpoint or an unreachable hub id: one line, before anything loads
    if cfg.get("adapter"):
        check_adapter(str(cfg.adapter), "adapter")  # a folder that is not an adapter, or one of its lineage gone: the same
    if task.reads_split:  # nothing evaluates on nothing: said before a load
        datamodule = instantiate(cfg.data, processor=None, _convert_="partial")
        datamodule.prepare_data()
        datamodule.check_evaluable(str(cfg.split), cfg.data.get("limit_val") if cfg.split == "val" else None,
                                   MIN_EVAL_VASES if str(cfg.task) == "generate" else 1)
    out = task.function()(cfg)
    if not task.logs:
        return out
    loggers = build_loggers(cfg)
    log_config(loggers, cfg, Path(str(cfg.paths.output_dir)) / ".hydra" / "config.yaml")
    for lg in loggers:
        if out.get("scores"):
            lg.log_metrics({f"{cfg.split}/{k}": float(v) for k, v in out["scores"].items() if isinstance(v, (int, float))})
        if out.get("rows"):
            log_eval_rows([lg], str(cfg.split), {}, out["rows"])
        if out.get("table"):
            log_results_table([lg], out["table"])
    say_unsent(loggers, cfg.paths.output_dir)  # an MLflow server that stopped answering: what it lacks, and how to send it
    return out


def written_files(cfg: DictConfig) -> list[Path]:
    """The result files a task writes beside ``output`` (its registry entry's ``writes``). Resumable generation logs
    (``*.jsonl``) are not listed: a rerun continues them."""
    task = EVAL_TASKS[str(cfg.task)]
    return task.written(cfg.output) if task.writes else []


def refuse_foreign_outputs(files: list[Path], run_dir: str | Path) -> None:
    """A result file that already exists outside this run's own (new) directory was not written by this run: it may
    be the user's, so it is never replaced. Raises ConfigError naming it, before any work is done."""
    for f in files:
        if (f.exists() or f.is_symlink()) and not is_within(f, run_dir):
            raise ConfigError(f"output: {f} already exists and this run did not write it; vase never replaces such a "
                              f"file: choose another output=... (or move the file away)")


def _seed(seed: int) -> None:
    """Seed python, numpy and torch without importing Lightning (task=score should start fast)."""
    # lazy: torch
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _dataset_and_model(cfg: DictConfig) -> tuple[Any, Any, Any]:
    model, processor = load_model_and_processor(cfg.model, adapter=cfg.get("adapter"),
                                                merge=bool(cfg.get("merge_adapter")))
    datamodule = instantiate(cfg.data, processor=processor, _convert_="partial")
    datamodule.prepare_data()
    limit = cfg.data.get("limit_val") if cfg.split == "val" else None
    return datamodule.dataset(cfg.split, limit), model, processor


def eval_generate(cfg: DictConfig) -> dict[str, Any]:
    # lazy: torch, torchmetrics
    from vase.eval.scoring import build_scorer, write_results
    from vase.metrics.caption_metrics import markdown_table

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset, model, processor = _dataset_and_model(cfg)
    scorer = build_scorer(cfg.metrics)
    decoding = Decoding.of(cfg.generation)
    scores, rows = evaluate_captions(model, processor, dataset, scorer, out.parent, out.stem,
                                     int(cfg.generation.max_new_tokens), int(cfg.generation.batch_size),
                                     bool(cfg.metrics.get("image_score", True)), write=False, decoding=decoding)
    write_results(out, str(cfg.name), scores, {"name": str(cfg.name), "split": cfg.split, "adapter": cfg.get("adapter"),
                                               "trained": adapter_trained(cfg), "decoding": decoding.record(),
                                               "pixels": pixel_bounds(processor)})
    print("\n" + markdown_table({str(cfg.name): scores}))
    return {"scores": scores, "rows": rows, "output": str(out), "table": {str(cfg.name): scores}}


def eval_score(cfg: DictConfig) -> dict[str, Any]:
    """Score one generated-captions file, or a list of them, against a ground-truth file (the paper's JSON or our
    JSONL). The encoders load once; with ``metrics.embedding_cache`` the references are encoded once ever."""

    # lazy: torch, torchmetrics
    from vase.eval.scoring import build_scorer, load_captions, match, write_results
    from vase.metrics.caption_metrics import markdown_table

    files = score_inputs(cfg)
    ref = load_captions(cfg.ground_truth)
    gens = [load_captions(f) for f in files]  # every file read and checked before any model loads
    matched = []
    for f, gen in zip(files, gens):
        ids, preds, refs, counts = match(gen, ref, str((cfg.get("score") or {}).get("duplicates", "last")))
        ex = counts["examples"]
        print(f"{f}: matched {counts['matched']} pairs; unmatched: {counts['unmatched_generated']} generated "
              f"{_first(ex['unmatched_generated'])}, {counts['unmatched_reference']} ground truth "
              f"{_first(ex['unmatched_reference'])}; repeated keys: {counts['repeated_generated']} generated "
              f"{_first(ex['repeated_generated'])}, {counts['repeated_reference']} ground truth (last caption kept) "
              f"{_first(ex['repeated_reference'])}; without a key: {counts['no_key_generated']} / "
              f"{counts['no_key_reference']}")
        if not ids:
            raise DataError(f"no key of {f} matches one of {cfg.ground_truth} (keys are the first two '_'-separated "
                            f"parts of the first image name, or the row's id): nothing to score")
        matched.append((f, preds, refs, counts))
    scorer = build_scorer(cfg.metrics)
    out = Path(cfg.output)
    if len(files) == 1:
        f, preds, refs, counts = matched[0]
        scores = {**scorer.score(preds, refs), "encoders": scorer.encoders}
        write_results(out, str(cfg.name), scores, {**counts, "name": str(cfg.name), "generated": f,
                                                   "ground_truth": str(cfg.ground_truth)})
        print("\n" + markdown_table({str(cfg.name): scores}))
        flat = {k: v for k, v in counts.items() if isinstance(v, int)}
        return {"scores": {**scores, **flat}, "output": str(out), "table": {str(cfg.name): scores}}
    stems = [Path(f).stem for f in files]
    names = stems if len(set(stems)) == len(stems) else files
    table: dict[str, dict[str, Any]] = {}
    for name, (f, preds, refs, counts) in zip(names, matched):
        table[name] = {**scorer.score(preds, refs), **counts, "generated": f, "encoders": scorer.encoders}
    atomic_write_json(out, {"ground_truth": str(cfg.ground_truth), "results": table})
    md = markdown_table({n: {k: v for k, v in row.items() if not isinstance(v, (dict, str))} for n, row in table.items()})
    atomic_write_text(out.with_suffix(".md"), md)
    print("\n" + md)
    return {"scores": {}, "output": str(out), "table": table}


def score_inputs(cfg: DictConfig) -> list[str]:
    """task=score's generated files; without them, or with an output that would overwrite one of its inputs, it is
    refused (DataError) before anything loads."""
    if not cfg.get("generated") or not cfg.get("ground_truth"):
        raise DataError("task=score needs generated=<file> (or generated=[a,b,...]) and ground_truth=<file>")
    files = [str(f) for f in cfg.generated] if isinstance(cfg.generated, (list, ListConfig)) else [str(cfg.generated)]
    inputs = {Path(f).resolve() for f in [*files, str(cfg.ground_truth)]}
    if Path(cfg.output).resolve() in inputs or Path(cfg.output).with_suffix(".md").resolve() in inputs:
        raise DataError(f"output={cfg.output} would overwrite a caption file it scores; choose another output path")
    return files


def _first(keys: list[str]) -> str:
    return f"(e.g. {', '.join(keys)})" if keys else ""


def eval_vqa(cfg: DictConfig) -> dict[str, Any]:
    """Answer each vase's six questions (open-ended and/or multiple choice) and report accuracy per dimension."""
    # lazy: torch, pytorch_lightning
    from vase.eval.vqa import evaluate_vqa, vqa_table

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset, model, processor = _dataset_and_model(cfg)
    v = cfg.vqa
    scores = evaluate_vqa(model, processor, dataset, instantiate(cfg.reward, _convert_="partial"),
                          float(cfg.reward.tau), out, str(cfg.name), str(v.protocol), int(v.num_choices),
                          int(cfg.generation.batch_size), int(v.max_new_tokens),
                          {"split": cfg.split, "adapter": cfg.get("adapter"), "trained": adapter_trained(cfg)}, bool(v.get("zoom", False)),
                          int(v.get("zoom_calls", 1)), Decoding.of(cfg.generation))
    print("\n" + vqa_table(scores, str(cfg.name)))
    flat = {f"vqa/{p}/{d}": a for p, s in scores.items() for d, a in s["accuracy"].items()}
    flat.update({f"vqa/{p}/mean": s["mean"] for p, s in scores.items()})
    return {"scores": flat, "vqa": scores, "output": str(out)}


def eval_leaderboard(cfg: DictConfig) -> dict[str, Any]:
    # lazy: torch, torchmetrics
    from vase.metrics.caption_metrics import markdown_table
    from vase.reports.leaderboard import build_leaderboard, write_leaderboard

    rows = build_leaderboard([str(r) for r in cfg.get("runs") or []], bool(cfg.leaderboard.include_paper))
    paths = write_leaderboard(rows, Path(cfg.output).parent)
    print("\n" + markdown_table(rows))
    print(f"leaderboard written to {paths['md']}")
    return {"rows_by_model": rows, "table": rows, "paths": {k: str(p) for k, p in paths.items()}}


def eval_export(cfg: DictConfig) -> dict[str, Any]:
    """A standalone merged Hugging Face checkpoint (base + the adapter and every adapter under it, with the processor)
    that transformers loads without peft: ``python evaluate.py task=export adapter=<run>/adapter output=<new dir>``."""
    if not cfg.get("adapter"):
        raise DataError("task=export needs adapter=<run>/adapter (the adapter to merge into the base model)")
    out = Path(str(cfg.output))
    if out.suffix == ".json":
        raise DataError(f"task=export writes a checkpoint directory: pass output=<new directory>, not {out}")
    if out.exists():
        raise DataError(f"{out}: already exists; export writes a new directory and never replaces one")
    base = resolve_model_path(cfg.model)
    model, processor = load_model_and_processor(cfg.model, adapter=str(cfg.adapter), merge=True)
    lineage = Path(str(cfg.adapter)) / LINEAGE_FILE
    merged = json.loads(lineage.read_text()).get("merged_adapters", []) if lineage.is_file() else []
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        # also the layout older tools read (transformers < 5, ms-swift, vLLM): the image processor's own
        # preprocessor_config.json and chat_template.json, beside transformers 5's processor_config.json
        processor.image_processor.save_pretrained(tmp)
        template = getattr(processor, "chat_template", None) or getattr(processor.tokenizer, "chat_template", None)
        if template and not (tmp / "chat_template.json").is_file():
            atomic_write_json(tmp / "chat_template.json", {"chat_template": template})
        # generation_config.json is the base's (the hub's sampling settings): vase's own decoding and pixel bounds,
        # which its evaluations used, are recorded here
        atomic_write_json(tmp / "vase_export.json", {
            "base": base, "adapters": [*merged, str(cfg.adapter)], "trained": adapter_trained(cfg),
            "decoding": Decoding.of(cfg.generation).record(),
            "pixels": pixel_bounds(processor),
            "generation_config": "the base checkpoint's, unchanged; vase evaluates with the decoding above"})
    print(f"merged checkpoint written to {out}")
    return {"output": str(out)}


def eval_check(cfg: DictConfig) -> dict[str, Any]:
    """Check ``data.root`` in its layout (vase.data.check): check.json and check.md in the run directory."""
    report = check_dataset(cfg.data.root, str(cfg.data.get("layout", "auto")), list(cfg.data.views),
                           cache_dir=cfg.render.get("cache_dir") or cfg.paths.cache_dir)
    out_dir = Path(cfg.paths.output_dir)
    atomic_write_json(out_dir / "check.json", report)
    text = format_report(report)
    atomic_write_text(out_dir / "check.md", text)
    print(text, end="")
    return {"check": report}


def eval_vaseeval(cfg: DictConfig) -> dict[str, Any]:
    """VaseEval (vase.eval.vaseeval): reconstruction metrics of each method's GLBs against ``gt_dir``; writes the
    JSON to ``output``, a markdown table and a contact sheet beside it."""
    # lazy: torch
    from vase.eval.vaseeval import Settings, contact_sheet, markdown_table, run_vaseeval

    v = cfg.vaseeval
    if not cfg.get("gt_dir"):
        raise ConfigError("gt_dir is not set: the folder of ground-truth GLBs (task=vaseeval)")
    settings = Settings(samples=int(v.samples), seed=int(v.seed), chamfer=str(v.chamfer), align=str(v.align),
                        f_threshold=float(v.f_threshold), normals=str(v.normals), views=tuple(v.views),
                        resolution=int(v.resolution), lpips_weights=v.lpips.weights, lpips_net=str(v.lpips.net),
                        sheet_items=int(v.sheet_items))
    captions = None
    if v.get("captions"):
        keyed = read_keyed(Path(v.captions), "a caption")
        captions = {k: (x if isinstance(x, str) else x.get("caption", "")) for k, vals in keyed.items() for x in vals[-1:]}
    clip = None
    if v.get("clip", True):
        # lazy: torch, torchmetrics
        from vase.metrics.encoders import build_clip_encoder

        clip = build_clip_encoder(cfg.metrics.clip)
    methods = {str(k): str(p) for k, p in (cfg.methods or {}).items()}
    out = Path(cfg.output)
    for src in [cfg.gt_dir, *methods.values()]:  # the meshes compared are only read: results go elsewhere
        if is_within(out.parent, src):
            raise ConfigError(f"output={out} lies inside {src}, a folder of meshes VaseEval only reads; "
                              f"write the results elsewhere")
    result = run_vaseeval(cfg.gt_dir, methods, settings, clip, captions)
    sheet = contact_sheet(result, out.with_name(out.stem + "_sheet.png"), settings.sheet_items)
    result.pop("_renders", None)
    result["contact_sheet"] = str(sheet) if sheet else None
    atomic_write_json(out, result)
    table = markdown_table(result)
    atomic_write_text(out.with_suffix(".md"), table)
    print(table, end="")
    return {"vaseeval": result}


def eval_attributes(cfg: DictConfig) -> dict[str, Any]:
    """The six-head attribute baseline (vase.metrics.attributes): frozen features of the views
    (``attributes.features``), heads trained on the train split, scored on ``split`` by the open-ended VQA rule; a
    majority-class row gives the level to beat."""
    # lazy: torch, torchmetrics, pytorch_lightning
    from vase.eval.vqa import score_vqa, vqa_table
    from vase.metrics.attributes import fit_heads, majority_rows, predict_rows

    a = cfg.attributes
    datamodule = instantiate(cfg.data, _convert_="partial")
    datamodule.prepare_data()
    train, evald = datamodule.dataset("train"), datamodule.dataset(cfg.split)
    model, encoder, ex = fit_heads(a, train, evald, int(cfg.seed))
    reward = instantiate(cfg.reward, _convert_="partial")
    tau = float(cfg.reward.tau)
    scores = {"open": score_vqa(predict_rows(model, ex, evald.records), reward, tau)["open"]}
    chance = {"open": score_vqa(majority_rows(train.records, evald.records), reward, tau)["open"]}
    out = Path(cfg.output)
    # lazy: torch, torchmetrics, pytorch_lightning
    from vase.metrics.attributes import save_heads

    heads = save_heads(model, encoder, out.with_name("attribute_heads.pt"))
    result = {"name": "six-head baseline", "split": cfg.split, "vqa": scores, "majority_class": chance,
              "encoder": encoder, "checkpoint": str(heads)}
    atomic_write_json(out, result)
    table = vqa_table(scores, "six-head baseline") + "\n".join(vqa_table(chance, "majority class").splitlines()[2:]) + "\n"
    atomic_write_text(out.with_suffix(".md"), table)
    print("\n" + table)
    flat = {f"vqa/open/{d}": v for d, v in scores["open"]["accuracy"].items()}
    flat["vqa/open/mean"] = scores["open"]["mean"]
    return {"scores": flat, "vqa": scores, "output": str(out)}


def eval_invrender(cfg: DictConfig) -> dict[str, Any]:
    """Inverse rendering (vase.eval.invrender): the model (or the oracle / a random predictor) answers generator
    parameters as JSON; vase builds, renders and scores them against each vase of ``split``."""
    # lazy: torch, pytorch_lightning
    from vase.eval.generate import GenerationItem, generate_rows, visuals_of

    v = cfg.invrender
    predictor = str(cfg.predictor)
    out = Path(cfg.output)
    answers = None
    if predictor == "model":
        dataset, model, processor = _dataset_and_model(cfg)
        items = [GenerationItem(rec.id, visuals_of(dataset, i), PROMPT,
                                json.dumps(asdict(VaseParams.of_record(rec)))) for i, rec in enumerate(dataset.records)]
        rows = generate_rows(model, processor, items, out.parent / "answers_invrender.jsonl",
                             batch_size=int(cfg.generation.batch_size), max_new_tokens=int(v.max_new_tokens),
                             decoding=Decoding.of(cfg.generation))
        answers = {r["id"]: r["caption"] for r in rows}
    else:
        datamodule = instantiate(cfg.data, _convert_="partial")
        datamodule.prepare_data()
        dataset = datamodule.dataset(cfg.split, cfg.data.get("limit_val") if cfg.split == "val" else None)
    result = run_invrender(dataset, Path(cfg.data.root), predictor, tuple(v.views), int(v.resolution),
                           int(cfg.seed), answers)
    if predictor == "model":
        result["decoding"] = Decoding.of(cfg.generation).record()
    atomic_write_json(out, result)
    s = result["summary"]

    def fmt(x: Any) -> str:
        return "n/a" if x is None else f"{x:.4f}"

    table = ("| predictor | silhouette IoU ↑ | Chamfer ↓ | colour distance ↓ | unparseable | n |\n|---|---|---|---|---|---|\n"
             f"| {predictor} | {fmt(s['iou'])} | {fmt(s['chamfer_distance'])} | {fmt(s['colour_distance'])} | "
             f"{s['unparseable']} | {s['n']} |\n")
    atomic_write_text(out.with_suffix(".md"), table)
    print("\n" + table)
    return {"scores": {f"invrender/{k}": x for k, x in s.items() if isinstance(x, (int, float))}, "output": str(out)}
