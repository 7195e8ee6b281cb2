"""The reward ablation's transfer to QA, reported beside its held-out verdict, never as it (`vase.reports.ablation`
decides on held-out answers): each job's VQA accuracy per dimension against its SFT start and weight 0, the targets on
it where the sweep asks for them, and the small formatting helpers both read (`who`, `percent_points`,
`diff_points`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.annotate.vocab import DIMENSIONS
from vase.choices import DRAW_KEY, PAPER_WEIGHT, PROTOCOL_LABELS
from vase.eval.stats import paired_difference
from vase.io import read_json
from vase.reports.jobs import sft_vqa_of


def target_word(v: bool | None) -> str:
    """A target's result as every report says it: None is not decided (one run, or nothing to set against)."""
    return "not decided" if v is None else "held" if v else "not held"


def who(group: str) -> str:
    return f"seed {group}" if "draw" not in group else group


def vqa_verdict(dim: str, xs: list[float], groups: dict[str, dict[float, Path]], jobs: list[Path],
                 ov: dict[Path, dict[str, str]], others: list[str], targets: bool) -> dict[str, Any] | None:
    """Targets (i) and (ii) on held-out VQA (option likelihood where the jobs have it, else open answers), and its
    table: the verdict of sweeps without held-out reward, and the transfer-to-QA report of those with it."""
    jobs = [j for j in jobs if sorted(j.glob("vqa_*.json"))]
    if not jobs:
        return None
    vqa = {j: read_json(sorted(j.glob("vqa_*.json"))[-1])["vqa"] for j in jobs}
    sft_of = {j: sft_vqa_of(j) for j in jobs}  # each job's own SFT (one shared by all, or one per seed or draw)
    sft = mean_sft_vqa([sft_of[j] for j in jobs])
    protocols = [p for p in ("ll", "open", "mc") if any(p in v for v in vqa.values())]
    decide = "ll" if "ll" in protocols else "open"

    def acc(j: Path | None, protocol: str, d: str) -> float | None:
        return None if j is None or j not in vqa else vqa[j].get(protocol, {}).get("accuracy", {}).get(d)

    def items(v: dict[str, Any] | None, d: str) -> dict[str, float] | None:
        return ((v or {}).get(decide) or {}).get("items", {}).get(d)

    n_items = max((v.get(decide, {}).get("n", 0) for v in vqa.values()), default=0) // max(1, len(DIMENSIONS))
    verdict: dict[str, Any] = {"protocol": decide}
    # a table per draw of the data, each with its own SFT (a mean over draws hid a drop on one of them), and per
    # value of anything else the sweep varied (an aggregation, a bonus): never a mean over two settings
    draws = sorted({ov[j].get(DRAW_KEY, "-") for j in jobs})
    tables: dict[str, list[Path]] = {}
    for j in jobs:
        parts = ([f"data draw {ov[j].get(DRAW_KEY, '-')}"] if len(draws) > 1 else []) \
            + [f"{k}={ov[j].get(k, '-')}" for k in others]
        tables.setdefault(", " + ", ".join(parts) if parts else "", []).append(j)
    lines = []
    for title, mine in sorted(tables.items()):
        lines += _vqa_table(dim, xs, protocols, mean_sft_vqa([sft_of[j] for j in mine]),
                            {j: {p: {d: acc(j, p, d) for d in DIMENSIONS} for p in protocols} for j in mine}, ov,
                            title)
    if sft and decide in sft and len(xs) < 2:  # one weight: nothing to set it against
        verdict["i"] = None
        name = "Target (i)" if targets else f"Transfer: {dim} accuracy"
        lines.append(f"\n**{name}**, {PROTOCOL_LABELS[decide]}, needs two values of the swept weight; this sweep ran "
                     f"{dim} weight {xs[0]:g} only: not decided.")
    elif sft and decide in sft:
        per_group = {}
        for g, at in groups.items():
            jmax, j0 = at.get(max(xs)), at.get(min(xs))
            own = next((sft_of[j] for j in at.values() if sft_of.get(j)), sft)
            row = {"at_max": acc(jmax, decide, dim), "at_0": acc(j0, decide, dim), "sft": own[decide]["accuracy"].get(dim)}
            a, b, c = (items(vqa.get(jmax), dim), items(vqa.get(j0), dim), items(own, dim))
            if a and b and c:  # item-level answers: decide on paired intervals, not on points
                row["max_minus_0"] = paired_difference(a, b)
                row["max_minus_sft"] = paired_difference(a, c)
            per_group[g] = row

        def held(v: dict[str, Any]) -> bool:
            if "max_minus_0" in v:
                return v["max_minus_0"]["lo"] > 0 and v["max_minus_sft"]["lo"] > 0
            return (v["at_max"] is not None and v["at_0"] is not None and v["at_max"] > v["at_0"]
                    and v["at_max"] > v["sft"])

        # one run's intervals cover its questions, not another run: a decision needs two runs or more
        verdict["i"] = all(held(v) for v in per_group.values()) if len(per_group) > 1 else None
        verdict["i_rule"] = ("paired 95 % bootstrap intervals exclude 0" if all("max_minus_0" in v for v in
                             per_group.values()) else "point estimates (no item-level answers to pair)")
        verdict["i_per_seed"] = per_group
        name = "Target (i)" if targets else f"Transfer: {dim} accuracy"
        lines.append(f"\n**{name}**, {PROTOCOL_LABELS[decide]}: {dim} accuracy at weight {max(xs):g} above weight "
                     f"{min(xs):g} and above SFT on every seed (two runs or more), on {verdict['i_rule']}: "
                     f"**{target_word(verdict['i'])}** ("
                     + "; ".join(f"{who(g)}: {percent_points(v['at_max'])} vs {percent_points(v['at_0'])} and SFT {percent_points(v['sft'])}"
                                 + diff_points(v) for g, v in per_group.items()) + ").")
        if PAPER_WEIGHT in xs and n_items:
            ii, line = _vqa_at_paper_weights(groups, vqa, {j: sft_of[j] or sft for j in jobs}, decide, n_items,
                                             targets, items)
            verdict.update(ii)
            lines.append(line)
    return {"verdict": verdict, "lines": lines}


def _vqa_at_paper_weights(groups: dict[str, dict[float, Path]], vqa: dict[Path, Any], base_of: dict[Path, Any],
                          decide: str, n_items: int, targets: bool,
                          items: Callable[[dict[str, Any] | None, str], dict[str, float] | None]
                          ) -> tuple[dict[str, Any], str]:
    """Target (ii) on VQA, or the transfer at the paper's weights: no dimension below each job's own SFT beyond its
    paired interval (where the answers have items; else by more than one item). The verdict's keys and its line."""
    worst: dict[str, float] = {}
    fell: dict[str, bool] = {}
    fell_where: list[str] = []
    for g, at in groups.items():
        j = at.get(PAPER_WEIGHT)
        if j is None or j not in vqa:
            continue
        base = base_of[j]
        for d in DIMENSIONS:
            a, b = vqa[j].get(decide, {}).get("accuracy", {}).get(d), base[decide]["accuracy"].get(d)
            if a is not None and b is not None:
                worst[d] = min(worst.get(d, 1.0), a - b)
            ia, ib = items(vqa[j], d), items(base, d)
            if ia and ib:  # fell below SFT by more than its interval: the whole interval under 0
                diff = paired_difference(ia, ib)
                fell[d] = fell.get(d, False) or diff["hi"] < 0
                if diff["hi"] < 0:
                    fell_where.append(f"{d} on {who(g)}: {100 * diff['diff']:+.1f} "
                                      f"[{100 * diff['lo']:+.1f}, {100 * diff['hi']:+.1f}]")
    held = not any(fell.values()) if fell else all(v >= -1.0 / n_items - 1e-9 for v in worst.values())
    rule = ("no dimension's paired 95 % interval lies wholly below SFT" if fell
            else "no dimension below SFT by more than one held-out item")
    drops = ", ".join(f"{d} {100 * v:+.1f}" for d, v in worst.items())
    if fell_where:
        drops += "; below SFT beyond the interval: " + "; ".join(fell_where)
    name = "Target (ii)**, at the paper's weights" if targets else "Transfer at the paper's weights**"
    line = (f"\n**{name}: {rule} ({100 / n_items:.1f} points an item): **{'held' if held else 'not held'}** "
            f"(worst change per dimension, points: {drops}).")
    return {"ii": held, "ii_rule": rule, "ii_worst_drop": worst, "ii_fell": fell_where}, line


def _vqa_table(dim: str, xs: list[float], protocols: list[str], sft: dict[str, Any] | None,
               acc: dict[Path, dict[str, dict[str, float | None]]], ov: dict[Path, dict[str, str]],
               title: str = "") -> list[str]:
    """A table per protocol: SFT's accuracy per dimension, then GRPO's at each weight (mean over the seeds given)."""
    weight = {j: float(next(v for k, v in ov[j].items() if k.startswith("reward.weights."))) for j in acc}
    lines = []
    for protocol in protocols:
        lines += ["", f"## {PROTOCOL_LABELS[protocol]}{title}", "",
                  *md.table(["run", *(d.capitalize() for d in DIMENSIONS), "Mean"])]
        if sft and protocol in sft:
            a = sft[protocol]["accuracy"]
            lines.append("| SFT | " + " | ".join(f"{100 * a[d]:.1f} %" for d in DIMENSIONS if d in a)
                         + f" | {100 * sft[protocol]['mean']:.1f} % |")
        for x in xs:
            vals = []
            for d in DIMENSIONS:
                got = [v for j in acc if weight[j] == x and (v := acc[j][protocol][d]) is not None]
                vals.append(sum(got) / len(got) if got else None)
            ok = [v for v in vals if v is not None]
            lines.append(f"| GRPO, {dim} weight {x:g} | " + " | ".join(percent_points(v) for v in vals)
                         + f" | {100 * sum(ok) / max(1, len(ok)):.1f} % |")
    return lines


def mean_sft_vqa(sfts: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The mean of the distinct SFT baselines among ``sfts`` (jobs sharing one SFT count it once); None if none."""
    distinct = [v for k, v in enumerate(sfts) if v and v not in sfts[:k]]
    return _mean_vqa(distinct) if distinct else None


def _mean_vqa(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of several VQA score dicts (several SFT baselines, one per seed), per protocol and dimension."""
    out: dict[str, Any] = {}
    for protocol in {p for s in scores for p in s}:
        sel = [s[protocol] for s in scores if protocol in s]
        dims = {d for s in sel for d in s["accuracy"]}
        acc = {d: sum(s["accuracy"][d] for s in sel if d in s["accuracy"]) / sum(d in s["accuracy"] for s in sel)
               for d in dims}
        out[protocol] = {"accuracy": acc, "mean": sum(acc.values()) / max(1, len(acc))}
    return out


def diff_points(v: dict[str, Any]) -> str:
    if "max_minus_0" not in v:
        return ""
    a, b = v["max_minus_0"], v["max_minus_sft"]
    return (f" (differences, points, 95 % CI: {100 * a['diff']:+.1f} [{100 * a['lo']:+.1f}, {100 * a['hi']:+.1f}] "
            f"and {100 * b['diff']:+.1f} [{100 * b['lo']:+.1f}, {100 * b['hi']:+.1f}], {a['n']} items)")


def percent_points(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f} %"
