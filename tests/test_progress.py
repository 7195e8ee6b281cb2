"""Progress on long work where no bar can be seen: rendering, synthesis, held-out scoring and the other long loops
print plain lines into a log file (and a last one when they end); a terminal keeps tqdm's bar."""

from __future__ import annotations

import io
from pathlib import Path

from tests.conftest import ROOT, run_python


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_loop_writing_to_a_file_prints_plain_lines_and_a_terminal_keeps_the_bar() -> None:
    from tqdm import tqdm

    from vase.progress import LogLines, progress_bar

    log = io.StringIO()
    bar = progress_bar(range(4), desc="rendering views", unit="vase", file=log)
    assert isinstance(bar, LogLines)
    bar.every_s = 0.0  # a line after every item here (30 s by default)
    assert list(bar) == [0, 1, 2, 3]
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("rendering views: 1/4 vases (25 %), ") and "ETA " in lines[0]
    assert lines[-1].startswith("rendering views: 4/4 vases (100 %)") and " - done in " in lines[-1]
    assert lines[-2].startswith("rendering views: 3/4 vases") and len(lines) == 4  # the last line once, not twice
    assert "\r" not in log.getvalue()
    assert isinstance(progress_bar(range(2), desc="x", file=_Terminal()), tqdm)


def test_synthesis_into_a_log_file_says_it_is_done_in_a_plain_line(tmp_path: Path) -> None:
    """The data synthesis a first run does, with its output going to a file as a job's would."""
    code = ("from vase.data.synthetic import generate; "
            f"generate({str(tmp_path / 'data')!r}, num=3, seed=0)")
    p = run_python(["-c", code], cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "\r" not in p.stderr
    assert any(ln.startswith("synthesising vases: 3/3 vases (100 %)") and "- done in" in ln
               for ln in p.stderr.splitlines()), p.stderr[-2000:]


def test_the_progress_line_prints_the_values_its_config_names_and_says_which_are_not_logged(capsys) -> None:
    """`callbacks.progress.shown` chooses what each plain progress line prints (the learning rate, here), each by
    its name after `train/`; a key the stage does not log is said once, with the keys it does log."""
    from types import SimpleNamespace

    import torch

    from vase.training.callbacks import LogProgress

    cb = LogProgress(every_s=0, always=True, stage="sft", shown=["train/loss", "train/lr", "train/lrr"])
    trainer = SimpleNamespace(is_global_zero=True, global_step=0, max_steps=10, estimated_stepping_batches=10,
                              callback_metrics={}, interrupted=False, current_epoch=0, max_epochs=1)
    cb.on_train_start(trainer, None)
    for step in (1, 2):
        trainer.global_step = step
        trainer.callback_metrics = {"train/loss": torch.tensor(1.5), "train/lr": torch.tensor(3e-4)}
        cb.on_train_batch_end(trainer, None, None, None, step)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sft: step 1/10, loss 1.5, lr 0.0003, ")
    assert out[1] == ("progress: train/lrr not logged by this stage (callbacks.progress.shown); it logs train/loss, "
                      "train/lr")
    assert out[2].startswith("sft: step 2/10, loss 1.5, lr 0.0003, ") and len(out) == 3


def test_a_stage_s_last_step_is_said_once_with_done(capsys) -> None:
    """The final progress line was printed twice (2026-12-03): the last step's line when it fell due, then the same
    step again with "done". Now the last step is said once, by the end's line."""
    from types import SimpleNamespace

    import torch

    from vase.training.callbacks import LogProgress

    cb = LogProgress(every_s=0, always=True, stage="grpo", shown=["train/loss"])
    trainer = SimpleNamespace(is_global_zero=True, global_step=0, max_steps=3, estimated_stepping_batches=3,
                              callback_metrics={}, interrupted=False, current_epoch=0, max_epochs=1)
    cb.on_train_start(trainer, None)
    for step in (1, 2, 3):
        trainer.global_step = step
        trainer.callback_metrics = {"train/loss": torch.tensor(0.5)}
        cb.on_train_batch_end(trainer, None, None, None, step)
    cb.on_train_end(trainer, None)
    out = capsys.readouterr().out.splitlines()
    assert [ln.split(",")[0] for ln in out] == ["grpo: step 1/3", "grpo: step 2/3", "grpo: step 3/3"], out
    assert out[-1].endswith(" - done")
