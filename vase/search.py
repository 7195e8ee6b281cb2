"""Search, then confirm: an Optuna search scored on one half of a data draw's held-out vases, its best settings re-run
on vases and data draws the search never saw (``hydra/sweeper: search_confirm``; ``python train.py -m
sweep=search_claim``).

Picking the best of many settings on the same vases it is then reported on overstates its effect (the winner's curse).
So the search and the report never share a vase:

- **search**: ``n_trials`` settings proposed by a seeded TPE sampler over ``params`` (Optuna's sweep syntax:
  ``interval``, ``tag(log, interval(...))``, ``choice``), each a training job on the search draw
  (``<draw_key>=<search_draw>``) scored on the ``search`` half of its held-out vases (``val.heldout_split``):
  the objective is the claim's weaker member, ``min`` over the targets of (difference / standard error) of the
  paired difference against the job's own start;
- **confirm**: the ``top_k`` best settings re-run with a fresh training seed (``confirm_seed``) on the ``confirm``
  half of the search draw and on every vase held out of each ``confirm_draws`` draw (draws the search never used);
- **report** (``vase.reports.search_confirm``, the hypothesis's ``report: search_confirm``): the search's estimate and
  the confirmed ones side by side, with the gap, and a first line that says whether any setting held the claim on
  every confirmation draw.

Progress lives in ``search.json`` beside the jobs (written atomically after every job): the same command with
``resume=auto`` takes a killed search up again, keeping finished trials and re-running the one that was cut.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from vase.config import check_only
from vase.errors import ConfigError, config_exit
from vase.io import atomic_write_json, read_json
from vase.launchers import note_failed
from vase.reports.jobs import heldout_of
from vase.reports.search_confirm import STATE, TARGETS, claim_score

log = logging.getLogger("vase")

FIXED = ("seed", "val.heldout_split")  # set by the sweeper for each job: never searched or given


def targets_of(config: Any) -> list[str]:
    """The caption metrics the claim is judged on: the hypothesis's moves (``heldout/<metric>``) under ``report:
    search_confirm``, else `TARGETS`."""
    q = OmegaConf.select(config, "hypothesis", default=None) if isinstance(config, DictConfig) else None
    moves = [str(m) for m in q.get("moves") or []] if q is not None and q.get("report") == "search_confirm" else []
    return [m.split("/", 1)[1] for m in moves] or list(TARGETS)


def space_of(params: dict[str, Any]) -> dict[str, Any]:
    """The search space from ``params`` (key: Optuna-style sweep), as Optuna distributions; ConfigError naming the
    key for a value that is no range or choice, or a key the sweeper sets itself."""
    import optuna  # lazy: optuna

    parser = OverridesParser.create()
    out: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key in FIXED:
            raise ConfigError(f"hydra.sweeper.params.{key}: the sweeper sets {key} itself for each job (the search's "
                              f"and the confirmation's seeds, the held-out halves); search other keys")
        try:
            ov: Override = parser.parse_overrides([f"{key}={value}"])[0]
        except Exception as e:  # noqa: BLE001 - Hydra's grammar error, as one line naming the key
            raise ConfigError(f"hydra.sweeper.params.{key}={value!r}: {str(e).splitlines()[0]}") from None
        v = ov.value()
        if isinstance(v, IntervalSweep):
            log_scale = "log" in v.tags
            if isinstance(v.start, int) and isinstance(v.end, int):
                out[key] = optuna.distributions.IntLogUniformDistribution(v.start, v.end) if log_scale else \
                    optuna.distributions.IntUniformDistribution(v.start, v.end)
            else:
                out[key] = (optuna.distributions.LogUniformDistribution if log_scale else
                            optuna.distributions.UniformDistribution)(float(v.start), float(v.end))
        elif isinstance(v, ChoiceSweep):
            out[key] = optuna.distributions.CategoricalDistribution(list(ov.sweep_iterator()))
        else:
            raise ConfigError(f"hydra.sweeper.params.{key}={value!r}: give a range to search, interval(a, b), "
                              f"tag(log, interval(a, b)) or choice(a, b, ...)")
    if not out:
        raise ConfigError("hydra.sweeper.params: the search has nothing to search; give at least one key with "
                          "interval(...) or choice(...)")
    return out


def _value(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


class SearchConfirmSweeper(Sweeper):
    """Hydra sweeper: search on one half of a draw's held-out vases, confirm the best on the other half and on fresh
    draws (the module's docstring)."""

    def __init__(self, n_trials: int = 10, batch: int = 1, top_k: int = 2, sampler_seed: int = 42,
                 n_startup_trials: int = 4, draw_key: str = "data.synthetic.seed", search_draw: Any = 0,
                 confirm_draws: Sequence[Any] = (21, 22), confirm_seed: int = 101,
                 params: dict[str, Any] | None = None, **unknown: Any) -> None:
        self.unknown = sorted(unknown)  # a misspelt setting: named in one line when the sweep starts (check)
        self.n_trials, self.batch, self.top_k = int(n_trials), int(batch), int(top_k)
        self.sampler_seed, self.n_startup_trials = int(sampler_seed), int(n_startup_trials)
        self.draw_key, self.search_draw = str(draw_key), search_draw
        self.confirm_draws = list(confirm_draws or [])
        self.confirm_seed = int(confirm_seed)
        self.params = dict(params or {})
        self.failed: list[JobReturn] = []

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    def check(self) -> None:
        """The sweeper's own settings, before any job runs: one line naming the key."""
        key = "hydra.sweeper"
        if self.unknown:
            known = [p for p in inspect.signature(SearchConfirmSweeper.__init__).parameters if p not in ("self",
                                                                                                     "unknown")]
            raise ConfigError(f"{key}.{self.unknown[0]}: no such setting of the search-then-confirm sweeper; it has "
                              f"{', '.join(known)}")
        if self.n_trials < 1 or self.batch < 1 or self.top_k < 1:
            raise ConfigError(f"{key}: n_trials, batch and top_k must be at least 1 (got {self.n_trials}, {self.batch},"
                              f" {self.top_k})")
        if self.top_k > self.n_trials:
            raise ConfigError(f"{key}.top_k={self.top_k}: more settings to confirm than the search tries "
                              f"(n_trials={self.n_trials})")
        draws = [str(d) for d in self.confirm_draws]
        if len(draws) < 2 or len(set(draws)) != len(draws):
            raise ConfigError(f"{key}.confirm_draws={draws}: give at least two different data draws the search never "
                              f"uses (what holds on one draw need not hold on another)")
        if str(self.search_draw) in draws:
            raise ConfigError(f"{key}.confirm_draws: {self.search_draw} is the search's own draw "
                              f"({self.draw_key}={self.search_draw}); confirm on draws the search never used")
        if self.draw_key in self.params:
            raise ConfigError(f"hydra.sweeper.params.{self.draw_key}: the data draw is the search's "
                              f"(hydra.sweeper.search_draw) or the confirmation's, never searched")
        space_of(self.params)
        limit = OmegaConf.select(self.config, "data.limit_val", default=None) if hasattr(self, "config") else None
        if isinstance(limit, int) and limit // 2 < 2:  # the confirm half holds limit // 2 of the held-out vases
            raise ConfigError(f"data.limit_val={limit} leaves {limit // 2} held-out vase(s) in the confirm half and "
                              f"{(limit + 1) // 2} in the search's; a paired comparison needs 2 in each: give "
                              f"data.limit_val=4 or more (debug=fast keeps 2), or null for every held-out vase")

    # --- the sweep ----------------------------------------------------------------------------------------------
    def sweep(self, arguments: list[str]) -> list[JobReturn]:
        try:  # a refusal is one line and exit 2, before any job (Hydra would print it under its traceback, exit 1)
            fixed, searched, space = self._checked(arguments)
        except ConfigError as e:
            config_exit(e)
        return self._run(fixed, searched, space)

    def _checked(self, arguments: list[str]) -> tuple[list[str], dict[str, str], dict[str, Any]]:
        """`check`, then the command line's overrides: the fixed ones, the searched ones and the search space."""
        self.check()
        parser = OverridesParser.create()
        given = parser.parse_overrides(arguments)
        searched = {o.get_key_element(): o.get_value_element_as_str() for o in given if o.is_sweep_override()}
        fixed = [o.input_line for o in given if not o.is_sweep_override()]
        for k in (*searched, *(o.get_key_element() for o in given if not o.is_sweep_override())):
            if k.lstrip("+~") in (*FIXED, self.draw_key):
                raise ConfigError(f"{k}: the search-then-confirm sweeper sets {k.lstrip('+~')} itself for each job; "
                                  f"set hydra.sweeper.search_draw / confirm_draws / confirm_seed instead")
        return fixed, searched, space_of({**self.params, **searched})

    def _run(self, fixed: list[str], searched: dict[str, str], space: dict[str, Any]) -> list[JobReturn]:
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        seed = int(OmegaConf.select(self.config, "seed", default=0) or 0)
        if check_only():  # VASE_CHECK_CONFIG: one search job and one confirmation job checked; nothing trains
            first = {k: _first(d) for k, d in space.items()}
            return [*self._launch([self._job(fixed, first, self.search_draw, "search", seed)], 0),
                    *self._launch([self._job(fixed, first, self.confirm_draws[0], "all", self.confirm_seed)], 1)]
        if "hydra" in self.config and "overrides" in self.config.hydra:  # as Hydra's sweepers leave it
            OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        state = self._state(sweep_dir, {**self.params, **searched}, fixed, seed)
        return [*self._search(state, sweep_dir, space, fixed, seed), *self._confirm(state, sweep_dir, fixed)]

    def _job(self, fixed: list[str], params: dict[str, Any], draw: Any, split: str, seed: int) -> list[str]:
        """One job's overrides: the command line's, the setting's, the draw, the held-out split and the seed."""
        return [*fixed, *(f"{k}={_value(v)}" for k, v in params.items()), f"{self.draw_key}={draw}",
                f"val.heldout_split={split}", f"seed={seed}"]

    def _state(self, sweep_dir: Path, space: dict[str, Any], fixed: list[str], seed: int) -> dict[str, Any]:
        """``search.json``, read back when the sweep is taken up again, with this run's settings written in; a trial
        that failed runs again with its setting, as a grid's failed job would."""
        path = sweep_dir / STATE
        state = read_json(path) if path.is_file() else {}
        state.update({
            "targets": targets_of(self.config),
            "objective": "min over the targets of paired difference / standard error",
            "space": {k: str(v) for k, v in space.items()}, "fixed": fixed, "draw_key": self.draw_key,
            "search": {"draw": self.search_draw, "split": "search", "seed": seed, "n_trials": self.n_trials,
                       "sampler": f"TPE, seed {self.sampler_seed}, {self.n_startup_trials} random first"},
            "confirm": {"draws": [self.search_draw, *self.confirm_draws], "seed": self.confirm_seed,
                        "top_k": self.top_k,
                        "splits": {str(self.search_draw): "confirm", **{str(d): "all" for d in self.confirm_draws}}},
            "salt": str(OmegaConf.select(self.config, "val.heldout_split_salt", default="vase")),
        })
        state.setdefault("trials", [])
        state.setdefault("confirmations", [])
        for t in state["trials"]:
            if t.get("state") == "failed":
                t["state"] = "running"
        atomic_write_json(path, state)
        return state

    def _search(self, state: dict[str, Any], sweep_dir: Path, space: dict[str, Any], fixed: list[str],
                seed: int) -> list[JobReturn]:
        """The trials, ``batch`` at a time, until ``n_trials`` have a result (or failed)."""
        logging.getLogger("alembic").setLevel(logging.WARNING)  # optuna's storage imports it and it talks at INFO
        import optuna  # lazy: optuna (2.3 s); Hydra imports this sweeper's module on every run, a search or not

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(direction="maximize")
        for t in state["trials"]:  # a search taken up again: what it learned is given back to the sampler
            if t.get("state") == "complete":
                _record(study, t["params"], space, t["score"])
        returns: list[JobReturn] = []
        # a trial cut by a kill (or failed): the same setting, the same job folder (its run resumes from its checkpoint)
        pending = [t for t in state["trials"] if t.get("state") != "complete"]
        while sum(t.get("state") in ("complete", "failed") for t in state["trials"]) < self.n_trials:
            room = self.n_trials - len(state["trials"]) + len(pending)
            batch, pending = pending[: self.batch], pending[self.batch:]
            while len(batch) < min(self.batch, room):
                # seeded by the trial's number: a search taken up again proposes what it would have proposed
                study.sampler = optuna.samplers.TPESampler(seed=self.sampler_seed + len(state["trials"]),
                                                           n_startup_trials=self.n_startup_trials)
                trial = study.ask(space)
                t = {"number": len(state["trials"]), "params": dict(trial.params), "state": "running",
                     "optuna": trial.number}
                state["trials"].append(t)
                batch.append(t)
            atomic_write_json(sweep_dir / STATE, state)
            for t in batch:
                t.setdefault("job", str(t["number"]))
                t["overrides"] = self._job(fixed, t["params"], self.search_draw, "search", seed)
                log.info("search: trial %d (%d of %d%s): %s", t["number"], t["number"] + 1, self.n_trials,
                         ", again: it was cut" if (sweep_dir / t["job"]).is_dir() else "",
                         ", ".join(f"{k}={_value(v)}" for k, v in t["params"].items()))
            rets = self._launch([t["overrides"] for t in batch], batch[0]["number"])
            returns += rets
            for t, ret in zip(batch, rets):
                score = None
                if ret.status == JobStatus.COMPLETED:
                    score = claim_score(_comparison(sweep_dir / t["job"]), state["targets"])
                t["score"], t["state"] = score, "complete" if score is not None else "failed"
                asked = [x for x in study.trials if x.params == t["params"] and x.state.name == "RUNNING"]
                if asked:
                    study.tell(asked[0].number, score, state=optuna.trial.TrialState.COMPLETE
                               if score is not None else optuna.trial.TrialState.FAIL)
                else:  # a trial cut by a kill, run again: the new study never asked it
                    _record(study, t["params"], space, score)
                log.info("search: trial %d scored %s (job %s)", t["number"], "-" if score is None else f"{score:+.2f}",
                         t["job"])
            atomic_write_json(sweep_dir / STATE, state)
        return returns

    def _confirm(self, state: dict[str, Any], sweep_dir: Path, fixed: list[str]) -> list[JobReturn]:
        """The ``top_k`` best distinct settings, a fresh seed, vases the search never saw: the confirm half of the
        search's draw and every held-out vase of each confirmation draw."""
        best = sorted((t for t in state["trials"] if t["state"] == "complete"), key=lambda t: -t["score"])
        chosen: list[dict[str, Any]] = []
        for t in best:
            if all(t["params"] != c["params"] for c in chosen):
                chosen.append(t)
            if len(chosen) == self.top_k:
                break
        state["chosen"] = [t["number"] for t in chosen]
        jobs: list[dict[str, Any]] = []
        have = {(c["trial"], str(c["draw"])): c for c in state["confirmations"]}
        # a new confirmation job never takes an earlier one's folder (a search taken up again may choose anew)
        number = max([self.n_trials - 1, *(int(c["job"]) for c in state["confirmations"])]) + 1
        for t in chosen:
            for draw in [self.search_draw, *self.confirm_draws]:
                split = "confirm" if str(draw) == str(self.search_draw) else "all"
                c = have.get((t["number"], str(draw)))
                if c is None:
                    c = {"trial": t["number"], "draw": draw, "split": split, "seed": self.confirm_seed,
                         "job": str(number), "state": "pending",
                         "overrides": self._job(fixed, t["params"], draw, split, self.confirm_seed)}
                    number += 1
                jobs.append(c)
        kept = {(c["trial"], str(c["draw"])) for c in jobs}
        state["confirmations"] = jobs + [c for c in state["confirmations"] if (c["trial"], str(c["draw"])) not in kept]
        atomic_write_json(sweep_dir / STATE, state)
        todo = sorted((c for c in jobs if c["state"] != "complete"), key=lambda c: int(c["job"]))
        if todo:
            log.info("confirm: the %d best setting(s) (trials %s) on %d draws, %d job(s)", len(chosen),
                     ", ".join(str(t["number"]) for t in chosen), 1 + len(self.confirm_draws), len(todo))
        returns: list[JobReturn] = []
        for i in range(0, len(todo), self.batch):  # contiguous job numbers per launch
            groups: list[list[dict[str, Any]]] = []
            for c in todo[i: i + self.batch]:
                if groups and int(groups[-1][-1]["job"]) + 1 == int(c["job"]):
                    groups[-1].append(c)
                else:
                    groups.append([c])
            for g in groups:
                rets = self._launch([c["overrides"] for c in g], int(g[0]["job"]))
                returns += rets
                for c, ret in zip(g, rets):
                    ok = ret.status == JobStatus.COMPLETED and _comparison(sweep_dir / c["job"]) is not None
                    c["state"] = "complete" if ok else "failed"
            atomic_write_json(sweep_dir / STATE, state)
        return returns

    def _launch(self, overrides: list[list[str]], first: int) -> list[JobReturn]:
        """Run jobs numbered from ``first``; a failed one is kept aside (the sweep goes on, its report names it)."""
        rets = list(self.launcher.launch(overrides, initial_job_idx=first))
        for ret in rets:
            if ret.status == JobStatus.FAILED:
                note_failed(ret, self.failed)
        return rets


def _first(dist: Any) -> Any:
    """A value a distribution allows (its first choice, or its low end): what a config check composes."""
    return dist.choices[0] if hasattr(dist, "choices") else dist.low


def _record(study: Any, params: dict[str, Any], space: dict[str, Any], score: float | None) -> None:
    """A trial's result given to the study (a finished trial of a search taken up again; FAIL when ``score`` is None)."""
    import optuna  # lazy: optuna

    with warnings.catch_warnings():  # optuna 2 calls add_trial and create_trial experimental; they are what resumes
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.add_trial(optuna.trial.create_trial(
            params={k: params[k] for k in space if k in params},
            distributions={k: space[k] for k in space if k in params}, value=score,
            state=optuna.trial.TrialState.COMPLETE if score is not None else optuna.trial.TrialState.FAIL))


def _comparison(job: Path) -> dict[str, Any] | None:
    """A job's held-out captions against its start (``captions_vs_start``), or None."""
    if not job.is_dir():
        return None
    held, _ = heldout_of(job)
    return (held or {}).get("captions_vs_start")
