"""The report of a search-then-confirm sweep (``hypothesis.report: search_confirm``; `vase.search`): the search's
estimate of its best settings beside the confirmed ones, the gap between them, and a first line that says whether any
setting held the claim on every confirmation draw.

A search estimate is never reported as confirmed: a setting is confirmed only by its confirmation jobs, each of which
must have scored a different split than the search (``confirm`` on the search's draw, any split of another draw) and,
on the search's draw, vases the search's jobs never scored; a confirmation job that breaks either is refused
(DataError naming the job), and one that is missing or failed leaves its setting unconfirmed, never filled in from the
search."""

from __future__ import annotations

import math
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from vase import markdown as md
from vase.errors import DataError
from vase.io import atomic_write_json, read_json, save_figure, write_markdown
from vase.provenance import machine_stamp
from vase.reports.ablation import CAPTION_TARGETS
from vase.reports.jobs import code_lines, code_of_jobs, heldout_of, job_dirs, machines_of_jobs
from vase.runs import reading_records

STATE = "search.json"  # vase.runs.SEARCH_STATE reads it too (a test keeps the two one name)
TARGETS = CAPTION_TARGETS
"""The paper's claim: GRPO above its SFT start on these caption metrics."""


def claim_score(comparison: dict[str, dict[str, float]] | None, targets: Sequence[str] = TARGETS) -> float | None:
    """The search's objective from a job's ``captions_vs_start``: the weaker target's paired difference in standard
    errors (the 95 % interval's half-width / 1.96), so that both must rise for the score to; None when a target is
    missing (the job has no caption comparison).

    >>> claim_score({"lexical_similarity": {"diff": 0.02, "lo": 0.0, "hi": 0.04},
    ...              "overall_score": {"diff": -0.01, "lo": -0.03, "hi": 0.01}})
    -0.98
    """
    if not comparison or any(t not in comparison for t in targets):
        return None
    zs = []
    for t in targets:
        c = comparison[t]
        se = (float(c["hi"]) - float(c["lo"])) / (2 * 1.96)
        # an interval of no width (every resample the same difference): as sure as a score can say, kept finite
        zs.append(float(c["diff"]) / se if se > 0 else (0.0 if c["diff"] == 0 else math.copysign(1e6, c["diff"])))
    return round(min(zs), 6)


SHORT = {"lexical_similarity": "lexical", "overall_score": "overall"}
KEYS = {"multi_objective_aggregation": "aggregation", "max_steps": "steps"}


def _params(params: dict[str, Any]) -> str:
    """A setting in a few words: each key's last part (`KEYS` shortens two), floats to 3 digits."""
    def name(k: str) -> str:
        return KEYS.get(k.rsplit(".", 1)[-1], k.rsplit(".", 1)[-1])

    return ", ".join(f"{name(k)}={v:.3g}" if isinstance(v, float) else f"{name(k)}={v}" for k, v in params.items())


def _cell(c: dict[str, float] | None) -> str:
    if not c:
        return "–"
    star = "**" if c["lo"] > 0 else ""
    return f"{star}{c['diff']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]{star}"


def _draw_of(job: Path, key: str) -> str | None:
    cfg = job / ".hydra" / "config.yaml"
    return None if not cfg.is_file() else str(OmegaConf.select(OmegaConf.load(cfg), key, default=None))


def _rerun(job: Path) -> str:
    ov = job / ".hydra" / "overrides.yaml"
    args = [str(o) for o in OmegaConf.load(ov)] if ov.is_file() else []
    return "python train.py hydra.mode=RUN " + " ".join(f"'{a}'" if any(ch in a for ch in " ()[],'") else a
                                                         for a in args)


def search_confirm_verdict(sweep_dir: str | Path) -> dict[str, Any]:
    """The verdict of a search-then-confirm sweep from its ``search.json`` and its jobs' held-out results."""
    sweep_dir = Path(sweep_dir)
    if not (sweep_dir / STATE).is_file():
        raise DataError(f"{sweep_dir}: no {STATE}; this is no search-then-confirm sweep (hydra/sweeper=search_confirm)")
    state = read_json(sweep_dir / STATE)
    targets, key = list(state["targets"]), state["draw_key"]
    search_draw = str(state["search"]["draw"])
    trials = []
    search_vases: set[str] = set()
    for t in state["trials"]:
        held, start = heldout_of(sweep_dir / t["job"]) if t.get("job") else (None, None)
        comp = (held or {}).get("captions_vs_start")
        for h in (held, start):
            search_vases |= set((h or {}).get("vase_ids") or [])
        trials.append({**t, "comparison": comp, "score": claim_score(comp, targets),
                       "n": (held or {}).get("n"), "rerun": _rerun(sweep_dir / t["job"]) if t.get("job") else None})
    by_number = {t["number"]: t for t in trials}
    draws = [str(d) for d in state["confirm"]["draws"]]
    settings = []
    for number in state.get("chosen", []):
        t = by_number[number]
        per_draw: dict[str, Any] = {}
        for c in (c for c in state["confirmations"] if c["trial"] == number):
            job = sweep_dir / c["job"]
            held, _ = heldout_of(job) if job.is_dir() else (None, None)
            row: dict[str, Any] = {"job": c["job"], "split": c["split"], "seed": c["seed"], "comparison": None,
                                   "n": None, "rerun": _rerun(job) if job.is_dir() else None}
            if held is not None:
                split = (held.get("split") or {}).get("name", "all")
                if split == "search":
                    raise DataError(f"{job}: scored on the search split; a search estimate is not a confirmation "
                                    f"(job {c['job']} of trial {number})")
                drawn = _draw_of(job, key)
                if drawn is not None and drawn != str(c["draw"]):
                    raise DataError(f"{job}: ran on {key}={drawn}, where its confirmation is of draw {c['draw']}")
                if drawn == search_draw:
                    shared = set(held.get("vase_ids") or []) & search_vases
                    if shared or not held.get("vase_ids"):
                        raise DataError(f"{job}: {len(shared)} of its held-out vases were scored by the search "
                                        f"(e.g. {sorted(shared)[:1]}): a confirmation on the search's draw must use "
                                        f"vases the search never saw" if shared else
                                        f"{job}: names no held-out vases; cannot show it shares none with the search")
                row["comparison"], row["n"] = held.get("captions_vs_start"), held.get("n")
            row["held"] = bool(row["comparison"]) and all(row["comparison"][m]["lo"] > 0 for m in targets)
            per_draw[str(c["draw"])] = row
        missing = [d for d in draws if not (per_draw.get(d) or {}).get("comparison")]
        held_all = not missing and all(per_draw[d]["held"] for d in draws)
        found = [per_draw[d]["comparison"] for d in draws if d not in missing]
        gap = {m: (sum(c[m]["diff"] for c in found) / len(found) - t["comparison"][m]["diff"])
               for m in targets} if found and t["comparison"] else {}
        worst = min(((claim_score(per_draw[d]["comparison"], targets), d) for d in draws if d not in missing),
                    default=(None, None))
        settings.append({"trial": number, "params": t["params"], "search": t["comparison"], "search_n": t["n"],
                         "search_score": t["score"], "per_draw": per_draw, "missing": missing, "held": held_all,
                         "gap": gap, "worst_score": worst[0], "worst_draw": worst[1]})
    held = [s for s in settings if s["held"]]
    ranked = sorted((s for s in settings if s["worst_score"] is not None), key=lambda s: -s["worst_score"])
    return {"targets": targets, "draw_key": key, "search": state["search"], "confirm": state["confirm"],
            "space": state["space"], "salt": state.get("salt"), "trials": trials, "settings": settings,
            "held": bool(held), "holding": [s["trial"] for s in held],
            "closest": ranked[0]["trial"] if ranked else None,
            "complete": bool(settings) and not any(s["missing"] for s in settings)}


def _first_line(v: dict[str, Any]) -> str:
    targets = " and ".join(v["targets"])
    draws = ", ".join(f"{v['draw_key']}={d}" for d in v["confirm"]["draws"])
    n_done = sum(1 for t in v["trials"] if t.get("score") is not None)
    if not v["settings"]:
        return (f"**Search, then confirm: nothing confirmed** - no trial of the search finished with a caption "
                f"comparison ({n_done} of {len(v['trials'])} scored), so no setting was re-run.")
    by = {s["trial"]: s for s in v["settings"]}
    if v["held"]:
        names = "; ".join(f"trial {n} ({_params(by[n]['params'])})" for n in v["holding"])
        return (f"**Search, then confirm: the claim held** - GRPO above its SFT start on {targets}, both paired 95 % "
                f"intervals above 0 on every confirmation draw ({draws}), by {names}.")
    s = by[v["closest"]] if v["closest"] is not None else v["settings"][0]
    line = (f"**Search, then confirm: the claim did not hold** - none of the {len(v['settings'])} best of "
            f"{n_done} searched settings had GRPO above its SFT start on {targets} (both paired 95 % intervals above "
            f"0) on every confirmation draw ({draws})")
    if s["worst_draw"] is None:
        return line + f"; none has a confirmation result yet (missing: {', '.join(s['missing'])})."
    c = s["per_draw"][s["worst_draw"]]["comparison"]
    return (line + f". The closest, trial {s['trial']} ({_params(s['params'])}), on its worst draw "
            f"({v['draw_key']}={s['worst_draw']}): " + ", ".join(f"{SHORT.get(m, m)} {_cell(c[m])}".replace("**", "")
                                                               for m in v["targets"])
            + (f"; unconfirmed on {', '.join(s['missing'])} (no result)" if s["missing"] else "") + ".")


def report_lines(v: dict[str, Any]) -> list[str]:
    """search_confirm.md: the verdict first, then the confirmed settings beside their search estimates, every trial,
    and the splits and seeds to rerun any row."""
    targets, draws = v["targets"], [str(d) for d in v["confirm"]["draws"]]
    sd = str(v["search"]["draw"])
    lines = [_first_line(v), ""]
    lines += ["## The best settings: the search's estimate and the confirmed ones", "",
              "Each cell: GRPO minus its SFT start on the held-out captions, paired over vases, with its 95 % interval "
              "(bold: above 0). Search: the search half of draw " + sd + ", the trial's own run; confirmed: a new run "
              f"(seed {v['confirm']['seed']}) on vases the search never saw. Gap: the mean confirmed difference minus "
              "the search's (the winner's curse is a negative gap).", ""]
    head = ["trial", "setting", "metric", f"search (draw {sd}, search half)"]
    head += [f"draw {d} ({'confirm half' if d == sd else 'all held out'})" for d in draws] + ["gap", "held"]
    lines += md.table(head)
    for s in v["settings"]:
        for i, m in enumerate(targets):
            cells = [str(s["trial"]) if i == 0 else "", _params(s["params"]) if i == 0 else "", SHORT.get(m, m),
                     _cell((s["search"] or {}).get(m))]
            cells += [_cell(((s["per_draw"].get(d) or {}).get("comparison") or {}).get(m)) for d in draws]
            cells += [f"{s['gap'][m]:+.3f}" if m in s["gap"] else "–",
                      ("**yes**" if s["held"] else "no" + (" (missing: " + ", ".join(s["missing"]) + ")"
                                                          if s["missing"] else "")) if i == 0 else ""]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "![search then confirm](search_confirm.png)", "",
              "## Every trial of the search", "",
              f"Objective: {', '.join(targets)}'s weaker paired difference in standard errors (the search's score; "
              "both must rise for it to). Sampler: " + str(v["search"].get("sampler", "")) + ".", "",
              *md.table(["trial", "job", "setting", *(SHORT.get(m, m) for m in targets), "score"])]
    for t in v["trials"]:
        comp = t.get("comparison") or {}
        lines.append(f"| {t['number']} | {t.get('job', '–')} | {_params(t['params'])} | "
                     + " | ".join(_cell(comp.get(m)) for m in targets)
                     + f" | {'–' if t.get('score') is None else format(t['score'], '+.2f')} |")
    lines += ["", "## Splits, seeds and how to rerun a row", "",
              f"- search: draw {sd} ({v['draw_key']}), the `search` half of its held-out vases "
              f"(`val.heldout_split=search`, salt `{v['salt']}`), training seed {v['search']['seed']}, "
              f"{v['search']['n_trials']} trials;",
              f"- confirmation: the `confirm` half of draw {sd} and every held-out vase of draws "
              f"{', '.join(d for d in draws if d != sd)}, training seed {v['confirm']['seed']}; the two halves share no "
              "vase (checked on each job's own list of vases);",
              "- search space: " + "; ".join(f"`{k}`: {val}" for k, val in v["space"].items()) + ".", "",
              "Each row's job, as one command:", ""]
    for t in v["trials"]:
        if t.get("rerun"):
            lines.append(f"- trial {t['number']} (job {t['job']}): `{t['rerun']}`")
    for s in v["settings"]:
        for d, r in s["per_draw"].items():
            if r.get("rerun"):
                lines.append(f"- trial {s['trial']} confirmed on draw {d} (job {r['job']}): `{r['rerun']}`")
    return lines


def _plot(path: Path, v: dict[str, Any]) -> None:
    import matplotlib  # lazy: matplotlib is heavy and only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    targets, draws = v["targets"], [str(d) for d in v["confirm"]["draws"]]
    sd = str(v["search"]["draw"])
    rows = max(1, len(v["settings"]))
    fig, axes = plt.subplots(rows, len(targets), figsize=(5.2 * len(targets), 2.6 * rows + 0.8), squeeze=False)
    labels = [f"search\n(draw {sd})"] + [f"draw {d}\n({'confirm half' if d == sd else 'fresh'})" for d in draws]
    for r, s in enumerate(v["settings"]):
        for c, m in enumerate(targets):
            ax = axes[r][c]
            cells = [(s["search"] or {}).get(m)] + [((s["per_draw"].get(d) or {}).get("comparison") or {}).get(m)
                                                    for d in draws]
            for x, cell in enumerate(cells):
                if not cell:
                    ax.text(x, 0, "missing", ha="center", va="bottom", fontsize=8, color="grey")
                    continue
                colour = "tab:orange" if x == 0 else ("tab:green" if cell["lo"] > 0 else "tab:blue")
                ax.errorbar([x], [cell["diff"]], yerr=[[cell["diff"] - cell["lo"]], [cell["hi"] - cell["diff"]]],
                            fmt="o", color=colour, capsize=4)
            ax.axhline(0, color="black", lw=0.8)
            ax.set_xticks(range(len(labels)), labels, fontsize=8)
            ax.set_xlim(-0.5, len(labels) - 0.5)
            ax.set_title(f"trial {s['trial']}: {SHORT.get(m, m)}, GRPO minus its SFT start", fontsize=9)
        axes[r][0].set_ylabel("\n".join(textwrap.wrap(_params(s["params"]), 34)), fontsize=7)
    fig.suptitle(_first_line(v).replace("**", "").split(" - ")[0], fontsize=11)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def write_search_verdict(sweep_dir: Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """The ``search_confirm`` report kind: search_confirm.md / .json / .png; None when the sweep wrote no search."""
    sweep_dir = Path(sweep_dir)
    if not (sweep_dir / STATE).is_file():
        return None
    v = search_confirm_verdict(sweep_dir)
    lines = report_lines(v)
    jobs = job_dirs(sweep_dir)
    v["code"] = code_of_jobs(jobs)
    v["machines"] = machines_of_jobs(jobs)
    v["machine"] = machine_stamp()
    # what make readme-tables puts into the findings page: the verdict and the best settings (headings in bold)
    shown = lines[: lines.index("![search then confirm](search_confirm.png)")]
    v["table"] = "\n".join(f"**{ln[3:].strip()}**" if ln.startswith("## ") else ln for ln in shown).strip()
    head, tail = code_lines(v["code"], v["machines"])
    write_markdown(sweep_dir / "search_confirm.md",
                      "\n".join([lines[0], *head, *lines[1:], *tail]) + "\n")
    atomic_write_json(sweep_dir / "search_confirm.json", v)
    _plot(sweep_dir / "search_confirm.png", v)
    return {"lines": [lines[0]], "files": [sweep_dir / "search_confirm.md", sweep_dir / "search_confirm.png"]}


def main(argv: list[str] | None = None) -> int:
    """``python -m vase.reports.search_confirm <sweep folder>``: the report again from a finished (or cut) sweep."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m vase.reports.search_confirm <multirun folder of sweep=search_claim>", file=sys.stderr)
        return 2
    with reading_records():
        got = write_search_verdict(Path(argv[0]), {})
    if got is None:
        print(f"error: {argv[0]}: no {STATE}; this is no search-then-confirm sweep", file=sys.stderr)
        return 2
    print("\n".join(line.replace("**", "") for line in got["lines"]))
    print(f"search_confirm: {got['files'][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
