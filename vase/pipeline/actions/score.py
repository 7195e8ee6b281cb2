"""``evaluate.py action=score``: score caption files (the paper's JSON or our JSONL) against a ground-truth file,
matched as the paper's scorer matches them, with counts of what did not match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig

from vase.config import EvalAction
from vase.errors import DataError
from vase.io import atomic_write_json
from vase.pipeline.actions.common import write_table

ACTION = EvalAction("score caption files: generated=G.json ground_truth=T.json output=OUT.json",
                precheck="vase.pipeline.actions.score:score_inputs")


def run(cfg: DictConfig) -> dict[str, Any]:
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
    write_table(out, md)
    return {"scores": {}, "output": str(out), "table": table}


def score_inputs(cfg: DictConfig) -> list[str]:
    """action=score's generated files; without them, or with an output that would overwrite one of its inputs, it is
    refused (DataError) before anything loads."""
    if not cfg.get("generated") or not cfg.get("ground_truth"):
        raise DataError("action=score needs generated=<file> (or generated=[a,b,...]) and ground_truth=<file>")
    files = [str(f) for f in cfg.generated] if isinstance(cfg.generated, (list, ListConfig)) else [str(cfg.generated)]
    inputs = {Path(f).resolve() for f in [*files, str(cfg.ground_truth)]}
    if Path(cfg.output).resolve() in inputs or Path(cfg.output).with_suffix(".md").resolve() in inputs:
        raise DataError(f"output={cfg.output} would overwrite a caption file it scores; choose another output path")
    return files


def _first(keys: list[str]) -> str:
    return f"(e.g. {', '.join(keys)})" if keys else ""
