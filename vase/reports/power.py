"""How small a caption-metric difference a held-out set can tell from noise, from a run's own paired results.

    python -m vase.reports.power logs/ablation_demo/multiruns/<time>/0/heldout_reward.json --n 96
    python -m vase.reports.power logs/demo/runs/<time>                  # a run folder: its paired files

For each metric, the standard deviation of the per-vase differences between the run and its start (FID: its
bootstrap standard error scaled to one vase) gives the smallest paired difference a two-sided test at 5 % detects
with 80 % power, on the run's own number of vases and on ``--n`` (default 96, about the paper's test set). Beside it,
the paper's own SFT -> RL gains (Table 3), so a reader sees whether each could be told from noise at that size.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.errors import ConfigError, DataError, VaseError
from vase.io import WRITTEN_BY, atomic_write_json, read_json, user_output
from vase.metrics.paired import METRICS, minimal_detectable
from vase.metrics.registry import is_percent, paired_keys
from vase.reports.leaderboard import PAPER_TABLE3

PAIRED_FILES = ("paired_captions.json", "heldout_reward.json")
TOOL = "vase.reports.power"


def paired_results(path: str | Path) -> dict[str, dict[str, Any]]:
    """The paired caption comparisons a results file (or a run folder's files) holds: label -> metric -> stats."""
    path = Path(path)
    files = [path] if path.is_file() else [p for name in PAIRED_FILES for p in sorted(path.rglob(name))]
    out = {}
    for f in files:
        obj = read_json(f)
        if not isinstance(obj, dict):
            raise DataError(f"{f}: holds a JSON {type(obj).__name__}, not a results object (a heldout_reward.json or "
                            f"a paired_captions.json)")
        comp = obj.get("metrics") if "metrics" in obj and "run" in obj else obj.get("captions_vs_start")
        if comp:
            label = f"{obj['run']} vs {obj['start']}" if "run" in obj and "metrics" in obj else str(f.parent.name)
            out[f"{label} ({f.name})"] = _checked(f, comp)
    if not out:
        raise DataError(f"{path}: no paired caption comparison found (a heldout_reward.json with captions_vs_start, "
                        f"or a paired_captions.json: runs with val.heldout=true and a start, or SFT then GRPO)")
    return out


def _checked(path: Path, comp: Any) -> dict[str, dict[str, Any]]:
    """A paired comparison whose every metric has a finite ``diff`` and ``sd`` and a whole ``n`` of at least 2; else
    one line naming the file, the metric and the field (never a figure computed from a bad number)."""
    if not isinstance(comp, dict):
        raise DataError(f"{path}: its paired comparison is a {type(comp).__name__}, not metric -> figures")
    for m, c in comp.items():
        for key in ("diff", "sd", "n"):
            v = c.get(key) if isinstance(c, dict) else None
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if not ok or (key == "sd" and v < 0) or (key == "n" and (v < 2 or int(v) != v)):
                want = "a whole number of at least 2" if key == "n" else "a finite number" + (
                    " >= 0" if key == "sd" else "")
                raise DataError(f"{path}: metric {m!r} has {key}={v!r}; it must be {want}")
    return comp


def paper_gains() -> dict[str, dict[str, float]]:
    """The paper's SFT -> RL change of each metric, 3B and 7B (Table 3)."""
    return {size: {m: PAPER_TABLE3[f"VaseVLM-{size}-RL"][m] - PAPER_TABLE3[f"VaseVLM-{size}-SFT"][m]
                   for m in METRICS if m in PAPER_TABLE3[f"VaseVLM-{size}-RL"]} for size in ("3B", "7B")}


def power_table(comp: dict[str, dict[str, Any]], n: int = 96, alpha: float = 0.05, power: float = 0.8) -> str:
    """Markdown: per metric the run's paired difference, the smallest detectable difference at its own size and at
    ``n``, and whether each of the paper's SFT -> RL gains exceeds the latter."""
    gains = paper_gains()

    def fmt(m: str, v: float) -> str:
        return f"{100 * v:.1f} pts" if is_percent(m) else f"{v:.3f}"

    lines = md.table(["metric", "this run's difference", "n", "detectable at n", f"detectable at n={n}",
                      "paper 3B SFT->RL", "paper 7B SFT->RL"])
    for m in ("fid_score", *paired_keys(comp)):
        c = comp.get(m)
        if not c:
            continue
        at_n = minimal_detectable(c["sd"], n, alpha, power)

        def paper(size: str, m: str = m, at_n: float = at_n) -> str:
            g = gains[size].get(m)
            if g is None:
                return "–"
            return f"{'+' if g >= 0 else '-'}{fmt(m, abs(g))} ({'distinguishable' if abs(g) >= at_n else 'below it'})"

        lines.append(md.row([m, f"{'+' if c['diff'] >= 0 else '-'}{fmt(m, abs(c['diff']))}", c["n"],
                             fmt(m, minimal_detectable(c["sd"], c["n"], alpha, power)), fmt(m, at_n), paper("3B"),
                             paper("7B")]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.reports.power", description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a heldout_reward.json / paired_captions.json, or a folder of runs")
    ap.add_argument("--n", type=int, default=96, help="a test-set size to size the detectable differences for")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--power", type=float, default=0.8)
    ap.add_argument("--json", help="also write the figures here (never over a file vase did not write)")
    ap.add_argument("--force", action="store_true", help="replace an existing --json file whatever wrote it")
    args = ap.parse_args(argv)
    try:
        if args.n < 2:
            raise ConfigError(f"--n {args.n}: a test-set size must be at least 2 vases (a standard deviation of "
                              f"per-vase differences needs two)")
        if not (0 < args.alpha < 1 and 0 < args.power < 1):
            raise ConfigError(f"--alpha {args.alpha} --power {args.power}: both must lie strictly between 0 and 1")
        json_out = user_output(args.json, "--json", TOOL, args.force) if args.json else None
        found = paired_results(args.results)
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    figures = {}
    for label, comp in found.items():
        print(f"\n{label}\n\n{power_table(comp, args.n, args.alpha, args.power)}")
        figures[label] = {m: {"diff": c["diff"], "n": c["n"], "sd": c["sd"],
                              "detectable": minimal_detectable(c["sd"], c["n"], args.alpha, args.power),
                              f"detectable_at_{args.n}": minimal_detectable(c["sd"], args.n, args.alpha, args.power)}
                          for m, c in comp.items()}
    if json_out is not None:
        atomic_write_json(json_out, {WRITTEN_BY: TOOL, "n": args.n, "alpha": args.alpha, "power": args.power,
                                     "figures": figures})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
