"""A sweep's TensorBoard view, written at its end into each job's run: the swept keys as HPARAMS' columns, each job's
comparison with the baseline as its first metrics, the verdict as its text (`tensorboard_sweep_columns`), and the tags
the jobs logged read back (`tensorboard_tags`). The loggers of one run, and what they log: `vase.loggers`."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

from vase.config.naming import short_key
from vase.io import inert_markdown


def tensorboard_tags(runs: list[Path], prefix: str = "hp/") -> list[str]:
    """The scalar tags starting with ``prefix`` that TensorBoard runs (folders of event files) logged, sorted.
    TensorBoard's reader says each file it moves to ("Directory watcher advancing from ...") on the root logger: kept
    out of the sweep's log."""
    tags: set[str] = set()
    quiet = logging.getLogger("tensorboard")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        for run in runs:
            ea = EventAccumulator(str(run), size_guidance={"scalars": 0, "images": 1, "tensors": 1, "histograms": 1})
            ea.Reload()
            tags |= {t for t in ea.Tags()["scalars"] if t.startswith(prefix)}
    finally:
        quiet.setLevel(level)
    return sorted(tags)


def tensorboard_sweep_columns(runs: list[Path], params: list[dict[str, Any]], compared: list[str],
                              metrics: list[str], comparisons: list[dict[str, float]],
                              every: list[dict[str, Any]] | None = None,
                              verdict: str | None = None) -> list[tuple[Path, str]]:
    """A sweep's TensorBoard hparams view, written at its end into each job's run (``runs``, with its swept values
    ``params``: ``sweep/<key>`` -> value): the swept keys as the columns, those the hypothesis compares first (ticked;
    its replicates, a seed, after them); each job's comparison with the baseline (``comparisons``:
    ``vs_baseline/<move>``, ``_low``, ``_high``) logged in its run and shown as the first metrics, then ``metrics``
    (the end metrics the jobs logged, the hypothesis's first). ``every``: the swept values of all the sweep's jobs,
    where ``runs`` are some of them (the columns' types are the same for each). ``verdict``: the sweep's verdict in one
    line, as each run's text ``sweep/verdict`` (TensorBoard's TEXT page; a debug-sized sweep's starts with "too short
    to decide"). A job whose folder cannot be written costs that job's columns only: returned with why, no thread's
    traceback printed."""
    # lazy: torch's TensorBoard writer (torch): only sweeps that logged to TensorBoard need it
    from torch.utils.tensorboard import SummaryWriter

    shown = list(dict.fromkeys([*(k for c in comparisons for k in c), *metrics]))  # each value, its low, its high
    every = params if every is None else every
    seen = list(dict.fromkeys(k for p in every for k in p))
    keys = [*(k for k in seen if k in compared), *(k for k in seen if k not in compared)]
    infos = []
    for key in keys:
        values = [p[key] for p in every if key in p]
        if all(isinstance(v, bool) for v in values):
            kind = api_pb2.DATA_TYPE_BOOL
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            kind = api_pb2.DATA_TYPE_FLOAT64
        else:
            kind = api_pb2.DATA_TYPE_STRING
        # TensorBoard puts the columns marked as differing first (by name): the compared keys; a replicate comes after
        infos.append(api_pb2.HParamInfo(name=key, display_name=column_title(key), type=kind, differs=key in compared))
    data = plugin_data_pb2.HParamsPluginData(version=0, experiment=api_pb2.Experiment(
        hparam_infos=infos, metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=m), display_name=column_title(m))
                                          for m in shown]))
    exp = Summary(value=[Summary.Value(tag="_hparams_/experiment", metadata=SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="hparams", content=data.SerializeToString())))])
    lost: list[tuple[Path, str]] = []
    for run, comparison in zip(runs, comparisons):
        why = unwritable(run)
        if why is None:
            why = in_writer_thread(lambda r=run, c=comparison: write_columns(SummaryWriter(str(r)), c, exp, verdict))
        if why is not None:
            lost.append((run, why))
    return lost


def column_title(name: str) -> str:
    """A column's title in TensorBoard's HPARAMS views, short enough that the parallel coordinates' axis titles do not
    run into each other: a swept key as run names shorten it, a comparison with the baseline as a difference (its
    bounds "low" and "high"), the end metrics without their prefix.

    >>> column_title("sweep/reward.weights.shape"), column_title("vs_baseline/heldout/shape_right_low")
    ('w_shape', 'Δ shape_right low')
    >>> column_title("sweep_replicate/data.synthetic.seed")
    'synthetic.seed'
    >>> column_title("vs_baseline/kl"), column_title("hp/heldout/shape_vs_start")
    ('Δ kl', 'shape_vs_start')
    """
    for swept in ("sweep/", "sweep_replicate/"):
        if name.startswith(swept):
            return short_key(name[len(swept):])
    if name.startswith("vs_baseline/"):
        move = name[len("vs_baseline/"):].removeprefix("heldout/")
        for bound in ("low", "high"):
            if move.endswith(f"_{bound}"):
                return f"Δ {move[:-len(bound) - 1]} {bound}"
        return f"Δ {move}"
    return name.removeprefix("hp/").removeprefix("heldout/")


def write_columns(w: Any, comparison: dict[str, float], exp: Any, verdict: str | None = None) -> None:
    try:
        for key, value in comparison.items():
            w.add_scalar(key, value, 0)
        if verdict:
            w.add_text("sweep/verdict", inert_markdown(verdict), 0)  # TensorBoard renders tags a value carries
        w._get_file_writer().add_summary(exp)
    finally:
        w.close()


def unwritable(folder: Path) -> str | None:
    """Why a file cannot be made in ``folder`` (read-only, full, missing), or None: asked before a writer whose
    thread would fail with a traceback instead."""
    try:
        fd, name = tempfile.mkstemp(prefix=".vase-probe-", dir=folder)
    except OSError as e:
        return f"{folder}: {e.strerror or e}"
    os.close(fd)
    os.unlink(name)  # the probe this call made, nothing else
    return None


def in_writer_thread(write: Any) -> str | None:
    """Run ``write`` (which starts and joins a writer thread); an error in it or in its thread comes back as one line
    (None when there was none), the thread's traceback not printed."""
    caught: list[str] = []
    before = threading.excepthook
    threading.excepthook = lambda a: caught.append(f"{a.exc_type.__name__}: {a.exc_value}")
    try:
        write()
    except OSError as e:
        caught.append(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))
    finally:
        threading.excepthook = before
    return caught[0] if caught else None

