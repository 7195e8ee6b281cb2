"""What a sweep's job folders hold, read back: overrides, the last stage's history, VQA, held-out reward, caption
metrics (one row per job), for the sweep summary and the ablation report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from vase.annotate.vocab import DIMENSIONS
from vase.eval.stats import heldout_difference
from vase.io import read_json
from vase.kernels import kernels_label
from vase.provenance import code_label
from vase.runs import RUN_FILE, read_status, status_of

CAPTION_KEYS = ("overall_score", "clip_score", "fid_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity")
LAST_STEPS = 20  # the reward of a job: the mean over its last steps (where training has got to)


def job_dirs(sweep_dir: Path) -> list[Path]:
    jobs = [d for d in sweep_dir.iterdir() if d.is_dir() and (d / ".hydra" / "overrides.yaml").is_file()]
    return sorted(jobs, key=lambda d: (not d.name.isdigit(), int(d.name) if d.name.isdigit() else 0, d.name))


def code_of_jobs(jobs: list[Path]) -> dict[str, list[str]]:
    """The code that made each job (`vase.provenance.code_label` of its run record's ``code``), each label with its jobs."""
    groups: dict[str, list[str]] = {}
    for job in jobs:
        groups.setdefault(code_label(read_status(job).get("code")), []).append(job.name)
    return groups


def code_line(groups: dict[str, list[str]]) -> str:
    """What a sweep's report says of the code that made its jobs (``groups``: `code_of_jobs`): one line naming it
    (reports put it last), or, when the jobs were made by different code, a warning naming which jobs each made
    (reports put it first: a difference between those jobs may be the code's, not the settings').

    >>> code_line({})
    'Code: no jobs.'
    """
    if not groups:
        return "Code: no jobs."
    if len(groups) == 1:
        label = next(iter(groups))
        return ("Code: not recorded (jobs made before vase recorded it)." if label == "unrecorded"
                else f"Code: every job by {label}.")
    parts = "; ".join(f"jobs {', '.join('#' + n for n in names)} by {label}" for label, names in groups.items())
    return (f"**Made by different code**: {parts}. A difference between these jobs may be the code's, not the "
            f"settings'; rerun them on one commit to compare.")


def machines_of_jobs(jobs: list[Path]) -> dict[str, list[str]]:
    """The CPU and kernels each job ran on (`vase.kernels.kernels_label` of its run record's ``machine``), each label
    with its jobs; jobs made before vase recorded it are left out."""
    groups: dict[str, list[str]] = {}
    for job in jobs:
        machine = read_status(job).get("machine")
        if machine:
            groups.setdefault(kernels_label(machine), []).append(job.name)
    return groups


def code_lines(groups: dict[str, list[str]], machines: dict[str, list[str]] | None = None
               ) -> tuple[list[str], list[str]]:
    """Where a report puts `code_line` (``groups``: `code_of_jobs`) and what it says of the machines its jobs ran on
    (``machines``: `machines_of_jobs`): (lines for its top, lines for its end). Jobs made by different code, or run on
    different CPUs or kernels: a warning at the top (a difference between them may be the code's or the machine's, not
    the settings'); made by one and run on one: a line each at the end, after the verdict.

    >>> code_lines({"abc": ["0", "1"]}, {"AMD EPYC, native kernels": ["0"], "Intel Xeon, native kernels": ["1"]})[0][0]
    '**Ran on different CPUs or kernels**: jobs #0 on AMD EPYC, native kernels; jobs #1 on Intel Xeon, native kernels. Their numbers may differ in the last bits for that alone (cpu_kernels=portable takes the same kernels on every x86 CPU).'
    """
    line = code_line(groups)
    head, tail = ([line, ""], []) if len(groups) > 1 else ([], ["", line])
    machines = machines or {}
    if len(machines) > 1:
        parts = "; ".join(f"jobs {', '.join('#' + n for n in names)} on {label}" for label, names in machines.items())
        head += [f"**Ran on different CPUs or kernels**: {parts}. Their numbers may differ in the last bits for that "
                 f"alone (cpu_kernels=portable takes the same kernels on every x86 CPU).", ""]
    elif machines:
        tail += [f"Machine: every job on {next(iter(machines))}."]
    return head, tail


def last_history(job: Path) -> tuple[str | None, list[dict[str, float]]]:
    """The history of the job's last stage (a GRPO follow-up's if it had one)."""
    follow = sorted(job.glob("train_history_*.json"))
    path = follow[-1] if follow else job / "train_history.json"
    if not path.is_file():
        return None, []
    stage = path.stem.removeprefix("train_history_") if follow else None
    return stage, read_json(path)


def unfinished(job: Path) -> str | None:
    """``<status>: <reason>`` for a job whose run record says it failed, was killed or interrupted; None otherwise
    (finished, still running, or no record)."""
    status = status_of(job) if (job / RUN_FILE).is_file() else ""
    if status not in ("failed", "killed", "interrupted"):
        return None
    return f"{status}: {read_status(job).get('reason') or 'its process ended without a word'}"


def job_row(job: Path) -> dict[str, Any]:
    """One job's row: overrides, status, mean reward (overall and per dimension), VQA accuracy, caption metrics."""
    overrides = [str(o) for o in OmegaConf.load(job / ".hydra" / "overrides.yaml")]
    row: dict[str, Any] = {"job": job.name, "overrides": " ".join(overrides), "override_list": overrides,
                           "status": "done", "metrics": {}}
    stage, hist = last_history(job)
    ended = unfinished(job)
    if ended:  # its record says how it ended, whatever files it left
        row["status"] = ended
    elif not hist:
        row["status"] = "no history (failed or still running)"
    rewards = [h for h in hist if "reward" in h][-LAST_STEPS:]
    config = OmegaConf.load(job / "config.yaml") if (job / "config.yaml").is_file() else None
    weights = OmegaConf.select(config, "reward.effective_weights") if config is not None else None
    for d, w in (weights or {}).items():  # the weights the reward used (after reward.normalize_weights)
        row[f"w/{d}"] = float(w)
    terms = OmegaConf.select(config, "reward.terms") if config is not None else None
    # every term's weight (a plot leaves out terms weighted 0 in every job); not a column of the summary
    row["term_weights"] = {name: float((weights or {}).get(name, t.get("weight", 0.0)) or 0.0)
                           for name, t in (terms or {}).items() if isinstance(t, DictConfig)}
    if rewards:
        row["reward"] = sum(h["reward"] for h in rewards) / len(rewards)
        # every part of the reward the history kept (dimensions, configured terms) and how often groups tied
        names = [k for k in rewards[-1] if k.startswith("reward/")
                 or k in ("frac_reward_zero_std", "frac_sum_ties_terms_differ", "kl")]
        for name in names:
            vals = [h[name] for h in rewards if name in h]
            row[name] = sum(vals) / len(vals)
    vqa_files = sorted(job.glob("vqa_*.json"))
    if vqa_files:
        vqa = read_json(vqa_files[-1]).get("vqa", {})  # the last stage's
        for protocol, s in vqa.items():
            for d, acc in s.get("accuracy", {}).items():
                row[f"vqa/{protocol}/{d}"] = acc
            row[f"vqa/{protocol}/mean"] = s.get("mean")
            if s.get("n"):  # items asked per dimension: what an interval of the accuracy needs
                row[f"vqa/{protocol}/n_per_dimension"] = int(s["n"]) // len(DIMENSIONS)
    held, start = heldout_of(job)
    if held:
        row["heldout/reward"] = held["total"]["mean"]
        for d, st in held["pass"].items():
            row[f"heldout/{d}_right"] = st["mean"]
            if start and d in start["pass"]:  # the change from where the stage started, on the same answers' ids
                row[f"heldout/{d}_right_vs_start"] = heldout_difference(held, start, f"{held['term_of_dimension'][d]}_pass")["diff"]
        for name, st in held["terms"].items():
            if name not in held["term_of_dimension"].values():
                row[f"heldout/{name}"] = st["mean"]
        row["heldout/n"] = held["n"]
    if (job / "results.json").is_file():
        results = read_json(job / "results.json")
        if results:
            last = list(results.values())[-1]
            row["metrics"] = {k: last[k] for k in (*CAPTION_KEYS, "n_pairs", "encoders") if k in last}
            row.update({k: last[k] for k in CAPTION_KEYS if k in last})
    return row


def heldout_of(job: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The held-out reward of a job's last stage and of where that stage started (``val.heldout``)."""
    def last(prefix: str) -> dict[str, Any] | None:
        files = sorted(job.glob(f"{prefix}*.json"), key=lambda f: (f.stem != prefix, f.stem))
        if prefix == "heldout_reward":
            files = [f for f in files if not f.stem.startswith("heldout_reward_start")]
        return read_json(files[-1]) if files else None

    return last("heldout_reward"), last("heldout_reward_start")


def rate_right(result: dict[str, Any], d: str) -> float | None:
    """The share of a held-out result's answers with dimension ``d`` right (None where ``d`` was not scored)."""
    s = result["pass"].get(d)
    return None if s is None else s["mean"]


def pass_field(result: dict[str, Any], d: str) -> str:
    """The field of each held-out item that says whether dimension ``d`` passed (its term's ``<term>_pass``)."""
    return f"{result['term_of_dimension'][d]}_pass"


def overrides_of(job: Path) -> dict[str, str]:
    out = {}
    for o in OmegaConf.load(job / ".hydra" / "overrides.yaml"):
        k, _, v = str(o).partition("=")
        out[k.lstrip("+~")] = v
    return out


def sft_vqa_of(job: Path) -> dict[str, Any] | None:
    """The held-out VQA of the SFT adapter this job started from (written beside the shared adapter)."""
    lineage = job / "adapter" / "vase_lineage.json"
    if not lineage.is_file():
        return None
    for adapter in read_json(lineage).get("merged_adapters", []):
        f = Path(adapter).parent / "vqa_sft.json"
        if f.is_file():
            return read_json(f).get("vqa")
    return None




def debug_preset_of(jobs: list[Path]) -> str | None:
    """The debug preset (``debug=fast``, ``overfit``, ...) the jobs of a sweep ran under, from Hydra's record of each
    job's choices (``.hydra/hydra.yaml``: set on the command line or by an experiment file); None when none did."""
    for job in jobs:
        record = job / ".hydra" / "hydra.yaml"
        if record.is_file():
            preset = OmegaConf.select(OmegaConf.load(record), "hydra.runtime.choices.debug", default=None)
            if preset not in (None, "null"):
                return str(preset)
    return None
