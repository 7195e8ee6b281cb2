"""Search, then confirm (vase.search, vase.reports.search_confirm): the search scores on one half of a draw's held-out
vases, its best settings are re-run on the other half and on draws it never used, and the report never calls a search
estimate confirmed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from tests.conftest import ROOT, run_python

ENV = {**os.environ, "WANDB_MODE": "disabled"}


def test_the_halves_and_the_draws_never_share_a_vase(tmp_path: Path) -> None:
    """The search half and the confirmation half of draw 0's held-out vases are disjoint and together all of them;
    the fresh draws (21, 22) share no vase with draw 0 (train or held out) or with each other, by id and by the model
    file's bytes."""
    from vase.data.synthetic import generate
    from vase.eval.heldout import split_vases

    sets = {d: generate(tmp_path / f"d{d}", num=40, seed=d, val_fraction=0.5, progress=False) for d in (0, 21, 22)}
    val0 = [r.id for r in sets[0]["val"]]
    search, confirm = split_vases(val0, "search"), split_vases(val0, "confirm")
    assert search and confirm and not search & confirm and search | confirm == set(val0)
    assert abs(len(search) - len(confirm)) <= 1
    assert split_vases(list(reversed(val0)), "search") == search  # the order of the records does not matter

    def vases(d: int, split: str | None = None) -> tuple[set[str], set[str]]:
        recs = [r for s in ("train", "val") if split in (None, s) for r in sets[d][s]]
        return ({r.id for r in recs},
                {hashlib.sha256((tmp_path / f"d{d}" / r.model).read_bytes()).hexdigest() for r in recs})

    for a, b in ((0, 21), (0, 22), (21, 22)):
        ids_a, glb_a = vases(a)
        ids_b, glb_b = vases(b, "val")
        assert not ids_a & ids_b and not glb_a & glb_b, (a, b)


# --- the sweeper, driven by a stand-in launcher: every job's result is noise, whatever the setting -----------------

class NoiseLauncher:
    """Stands in for Hydra's launcher: each job writes what a vase job writes (its overrides, its config's draw, a
    held-out result on the split it was given) with paired differences that are pure noise (the searched ``knob``
    cannot matter: it only picks the noise, as a seed does). ``kill_at``: the job number at which the process dies."""

    def __init__(self, sweep_dir: Path, kill_at: int | None = None, effect: float = 0.0,
                 fail_at: int | None = None) -> None:
        self.sweep_dir, self.kill_at, self.effect, self.launched = sweep_dir, kill_at, effect, []
        self.fail_at = fail_at

    def launch(self, job_overrides: list[list[str]], initial_job_idx: int) -> list[JobReturn]:
        from vase.eval.heldout import split_vases

        out = []
        for n, overrides in enumerate(job_overrides, start=initial_job_idx):
            if n == self.kill_at:
                raise KeyboardInterrupt  # the process is gone mid-job
            self.launched.append(n)
            if n == self.fail_at:  # the job ends with an error: no result
                out.append(JobReturn(overrides=overrides, status=JobStatus.FAILED,
                                     _return_value=RuntimeError("out of memory")))
                continue
            ov = dict(o.split("=", 1) for o in overrides)
            draw = ov["data.synthetic.seed"]
            job = self.sweep_dir / str(n)
            (job / ".hydra").mkdir(parents=True, exist_ok=True)
            (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
            (job / ".hydra" / "config.yaml").write_text(f"data:\n  synthetic:\n    seed: {draw}\n")
            ids = sorted(split_vases([f"d{draw}-v{i}" for i in range(120)], ov["val.heldout_split"]))
            rng = np.random.default_rng(int(hashlib.sha256(f"{ov['knob']}|{ov['seed']}|{draw}".encode()).hexdigest()[:8],
                                            16))
            comp = {}
            for m in ("lexical_similarity", "overall_score"):
                d = rng.normal(self.effect, 0.05, len(ids))
                half = 1.96 * d.std(ddof=1) / np.sqrt(len(ids))
                comp[m] = {"diff": float(d.mean()), "lo": float(d.mean() - half), "hi": float(d.mean() + half),
                           "n": len(ids)}
            (job / "heldout_reward.json").write_text(json.dumps(
                {"n": len(ids), "split": {"name": ov["val.heldout_split"], "salt": "vase"}, "vase_ids": ids,
                 "captions_vs_start": comp}))
            out.append(JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=None))
        return out


def _sweeper(sweep_dir: Path, launcher: NoiseLauncher, **kw: Any) -> Any:
    from vase.search import SearchConfirmSweeper

    sw = SearchConfirmSweeper(**{"n_trials": 10, "top_k": 2, "n_startup_trials": 3,
                                 "params": {"knob": "interval(0.0, 1.0)"}, **kw})
    sw.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}}, "seed": 1})
    sw.launcher = launcher
    return sw


def test_a_search_over_a_setting_that_cannot_matter_confirms_nothing_and_shows_the_winners_curse(tmp_path: Path
                                                                                                   ) -> None:
    """Ten settings whose results are noise: the search's best looks better than it is (its estimate is the best of
    ten), its re-runs on vases and draws it never saw do not hold the claim, the first line says so, and the gap
    between the search's estimate and the confirmed one is negative."""
    from vase.reports.search_confirm import search_confirm_verdict, write_search_verdict

    launcher = NoiseLauncher(tmp_path)
    _sweeper(tmp_path, launcher).sweep([])
    state = json.loads((tmp_path / "search.json").read_text())
    assert len(state["trials"]) == 10 and len(state["chosen"]) == 2
    assert launcher.launched == list(range(10 + 2 * 3))  # 10 trials, then 2 settings x 3 draws
    best = max(state["trials"], key=lambda t: t["score"])
    assert state["chosen"][0] == best["number"]
    splits = {(c["draw"], c["split"], c["seed"]) for c in state["confirmations"]}
    assert splits == {(0, "confirm", 101), (21, "all", 101), (22, "all", 101)}
    got = write_search_verdict(tmp_path, {})
    md = (tmp_path / "search_confirm.md").read_text()
    assert md.splitlines()[0] == got["lines"][0]
    assert md.startswith("**Search, then confirm: the claim did not hold**") and "The closest, trial" in md
    v = search_confirm_verdict(tmp_path)
    assert not v["held"] and all(not s["held"] for s in v["settings"])
    top = v["settings"][0]
    assert all(top["gap"][m] < 0 for m in v["targets"])  # the winner's curse, measured
    assert (tmp_path / "search_confirm.png").stat().st_size > 0


def test_a_real_effect_is_confirmed_on_every_draw(tmp_path: Path) -> None:
    """The same search where every setting truly helps: confirmed, and the first line names the settings."""
    from vase.reports.search_confirm import write_search_verdict

    _sweeper(tmp_path, NoiseLauncher(tmp_path, effect=0.03), n_trials=4, top_k=1).sweep([])
    line = write_search_verdict(tmp_path, {})["lines"][0]
    assert line.startswith("**Search, then confirm: the claim held**") and "trial " in line


def test_a_killed_search_resumes_where_it_was_cut_and_proposes_what_it_would_have(tmp_path: Path) -> None:
    """Killed during trial 4, the same sweep keeps trials 0-3, runs trial 4 again with its own setting, and proposes
    the same settings as a search that was never cut."""
    whole = tmp_path / "whole"
    _sweeper(whole, NoiseLauncher(whole)).sweep([])
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        _sweeper(cut, NoiseLauncher(cut, kill_at=4)).sweep([])
    state = json.loads((cut / "search.json").read_text())
    assert [t["state"] for t in state["trials"]] == ["complete"] * 4 + ["running"]
    again = NoiseLauncher(cut)
    _sweeper(cut, again).sweep([])
    assert again.launched[0] == 4 and 3 not in again.launched  # the finished trials are kept
    a, b = (json.loads((d / "search.json").read_text()) for d in (whole, cut))
    assert [t["params"] for t in a["trials"]] == [t["params"] for t in b["trials"]]
    assert a["chosen"] == b["chosen"]


def test_a_failed_trial_is_named_and_the_same_command_runs_it_again(tmp_path: Path) -> None:
    """A trial whose job fails is kept as failed (the search goes on past it, the sampler told), and taking the sweep
    up again runs that trial again with its own setting, as a grid sweep runs its failed jobs."""
    sw = _sweeper(tmp_path, NoiseLauncher(tmp_path, fail_at=2), n_trials=4, top_k=1)
    sw.sweep([])
    state = json.loads((tmp_path / "search.json").read_text())
    assert [t["state"] for t in state["trials"]] == ["complete", "complete", "failed", "complete"]
    assert len(sw.failed) == 1
    again = NoiseLauncher(tmp_path)
    _sweeper(tmp_path, again, n_trials=4, top_k=1).sweep([])
    after = json.loads((tmp_path / "search.json").read_text())
    assert after["trials"][2]["params"] == state["trials"][2]["params"] and after["trials"][2]["state"] == "complete"
    assert again.launched[0] == 2 and 0 not in again.launched  # that trial again, the finished ones kept
    if after["chosen"] == state["chosen"]:  # the confirmation was done already
        assert again.launched == [2]
    else:  # trial 2 is now the best: its confirmation runs in new folders, never an earlier job's
        assert again.launched[1:] == [7, 8, 9]


def test_the_report_refuses_to_call_a_search_estimate_confirmed(tmp_path: Path) -> None:
    """A confirmation job that scored the search half, or vases the search scored, is refused naming the job; a
    confirmation that is missing leaves its setting unconfirmed (never filled in from the search)."""
    from vase.errors import DataError
    from vase.reports.search_confirm import search_confirm_verdict

    _sweeper(tmp_path, NoiseLauncher(tmp_path, effect=0.03), n_trials=3, top_k=1).sweep([])
    state = json.loads((tmp_path / "search.json").read_text())
    on_search_draw = next(c for c in state["confirmations"] if c["draw"] == 0)
    path = tmp_path / on_search_draw["job"] / "heldout_reward.json"
    good = json.loads(path.read_text())
    assert search_confirm_verdict(tmp_path)["held"]

    path.write_text(json.dumps({**good, "split": {"name": "search"}}))
    with pytest.raises(DataError, match="a search estimate is not a confirmation"):
        search_confirm_verdict(tmp_path)
    search_ids = json.loads((tmp_path / "0" / "heldout_reward.json").read_text())["vase_ids"]
    path.write_text(json.dumps({**good, "vase_ids": good["vase_ids"] + search_ids[:1]}))
    with pytest.raises(DataError, match=f"/{on_search_draw['job']}: 1 of its held-out vases were scored by the search"):
        search_confirm_verdict(tmp_path)

    path.write_text(json.dumps(good))
    fresh = next(c for c in state["confirmations"] if c["draw"] == 22)
    (tmp_path / fresh["job"] / "heldout_reward.json").unlink()  # that job failed: it left no result
    v = search_confirm_verdict(tmp_path)
    assert not v["held"] and v["settings"][0]["missing"] == ["22"]
    from vase.reports.search_confirm import report_lines

    assert "unconfirmed on 22" in report_lines(v)[0] and "no (missing: 22)" in "\n".join(report_lines(v))


@pytest.mark.parametrize("kw, said", [
    ({"confirm_draws": [21]}, "confirm_draws=['21']: give at least two different data draws"),
    ({"confirm_draws": [0, 21]}, "0 is the search's own draw"),
    ({"top_k": 20}, "top_k=20: more settings to confirm than the search tries"),
    ({"params": {"seed": "choice(1, 2)"}}, "hydra.sweeper.params.seed: the sweeper sets seed itself"),
    ({"params": {"knob": "0.5"}}, "hydra.sweeper.params.knob='0.5': give a range to search"),
])
def test_a_search_that_cannot_confirm_is_refused_before_any_job(tmp_path: Path, kw: dict[str, Any],
                                                               said: str, capsys: pytest.CaptureFixture) -> None:
    """One line and exit 2 (they were Hydra's 16-line traceback, exit 1)."""
    launcher = NoiseLauncher(tmp_path)
    with pytest.raises(SystemExit) as e:
        _sweeper(tmp_path, launcher, **kw).sweep([])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("config error: ") and said in err[0], err
    assert launcher.launched == []


@pytest.mark.parametrize("argv, said", [
    (["hydra.sweeper.n_trials=0"], "config error: hydra.sweeper: n_trials, batch and top_k must be at least 1"),
    (["hydra.sweeper.sampler_sed=1"], "config error: hydra.sweeper.sampler_sed: SearchConfirmSweeper has no setting "
                                      "'sampler_sed'; did you mean 'sampler_seed'?"),
    (["+hydra.sweeper.sampler_sed=1"], "config error: hydra.sweeper.sampler_sed: no such setting of the "
                                       "search-then-confirm sweeper"),
    (["debug=fast", "hydra.sweeper.n_trials=2", "hydra.sweeper.top_k=1"],
     "config error: data.limit_val=2 leaves 1 held-out vase(s) in the confirm half and 1 in the search's"),
])
def test_the_search_sweepers_refusals_are_one_line_and_exit_2(argv: list[str], said: str, tmp_path: Path) -> None:
    p = run_python(["train.py", "-m", "sweep=search_claim", *argv, "logger=none", f"paths.log_dir={tmp_path}"],
                   cwd=ROOT, env=ENV, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith(said), p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "Set the environment variable HYDRA_FULL_ERROR" not in p.stderr


@pytest.mark.slow
def test_the_documented_command_searches_confirms_and_resumes_after_a_kill(tmp_path: Path) -> None:
    """``python train.py -m sweep=search_claim`` in its quick form, killed (SIGKILL) during its second trial and run
    again: the first trial is kept, the search and its confirmation finish, the log's last verdict line is the
    report's first line, and every job scored the split it was given, the confirm half sharing no vase with the
    search's."""
    # the quick form exactly as the Ablations page gives it (it once failed after a model load: debug=fast keeps 2
    # held-out vases, 1 a half)
    line = next(ln for ln in (ROOT / "docs" / "ablation.md").read_text().splitlines() if ln.endswith("# the quick form"))
    documented = line.split("#")[0].split()
    assert documented[:4] == ["python", "train.py", "-m", "sweep=search_claim"], line
    cmd = [sys.executable, *documented[1:], "logger=csv", f"paths.log_dir={tmp_path / 'logs'}",
           f"paths.cache_dir={tmp_path / 'cache'}"]
    p = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    root = tmp_path / "logs" / "search_claim" / "multiruns"
    deadline = time.time() + 600
    while time.time() < deadline and p.poll() is None:
        if any((d / "1" / ".hydra").is_dir() for d in root.glob("*")):
            break
        time.sleep(0.5)
    assert p.poll() is None, p.stdout.read()[-3000:] if p.stdout else ""
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    sweep = next(root.glob("*"))
    first = json.loads((sweep / "0" / "heldout_reward.json").read_text())
    done = run_python(cmd, cwd=ROOT, env=ENV, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resuming the" in done.stdout and f"run {sweep}" in done.stdout, done.stdout[:2000]
    assert "search: trial 0 (" not in done.stdout + done.stderr  # kept, not run again
    assert json.loads((sweep / "0" / "heldout_reward.json").read_text()) == first
    md = (sweep / "search_confirm.md").read_text()
    verdict = md.splitlines()[0].replace("**", "")
    assert verdict.startswith("Search, then confirm: the claim") and verdict in done.stdout
    state = json.loads((sweep / "search.json").read_text())
    assert [t["state"] for t in state["trials"]] == ["complete", "complete"]
    assert "sweep=search_claim" in (sweep / "multirun.yaml").read_text()  # as Hydra's own sweepers leave it
    held = {c["job"]: json.loads((sweep / c["job"] / "heldout_reward.json").read_text())
            for c in state["confirmations"]}
    assert sorted(h["split"]["name"] for h in held.values()) == ["all", "all", "confirm"]
    search_ids = {i for t in state["trials"]
                  for i in json.loads((sweep / t["job"] / "heldout_reward.json").read_text())["vase_ids"]}
    confirm_ids = next(set(h["vase_ids"]) for h in held.values() if h["split"]["name"] == "confirm")
    assert search_ids and confirm_ids and not search_ids & confirm_ids
