"""A sweep's end as a transaction: the summary, the verdict and the dashboards are its parts, and the sweep's record
says ``finished`` only once every part is written.

While the end runs, the record says so (``end.state: writing``, with a reason a reader sees should the process be
gone). A part that fails is one line naming the path and what was not written; the files' parts (summary, verdict)
stop the end there (the dashboards are views of those files), a dashboard's part costs that dashboard alone. Then the
record says the end did not finish (``failed``, with the parts written and the parts not), the exit is 1, and the same
command run again finishes only the end: its finished jobs are kept (none trains again), the files are written again
and each dashboard part not yet written is (`SweepEnd.todo`); a dashboard part written before is not sent twice.

Ctrl-C during the end interrupts it every time (`CtrlC`): the record says ``interrupted``, the exit is 130, and what
the end had written is named. A library that swallows the KeyboardInterrupt (a thread's join, a ``__del__``) cannot
swallow the stop: the handler's flag is checked after every part and before the record says ``finished``.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from vase.errors import VaseError, first_line, storage_problem
from vase.io import atomic_write_text
from vase.runs import RUN_FILE, note_record, read_status, set_status

PARTS = {"summary": "the summary (summary.md, .json, .csv, sweep.png)",
         "verdict": "the verdict (verdict.md, verdict.json and its report kind's files)",
         "wandb": "the W&B summary run", "tensorboard": "TensorBoard's view of the jobs",
         "mlflow": "the MLflow parent run"}
"""The parts of a sweep's end, in the order they run, and what each writes."""
FILE_PARTS = ("summary", "verdict")
"""Parts whose files the later parts read: a failure there stops the end."""
WRITING = ("its end (summary, verdict, dashboards) did not finish unless its process is still writing it: the same "
           "command finishes the end and trains nothing again")
ERRORS_FILE = "sweep_end_error.txt"
"""Where an unexpected error of a part keeps its traceback (the line on the terminal names it)."""


class CtrlC:
    """SIGINT during a sweep's end, heard every time: the handler notes it and raises KeyboardInterrupt, and `check`
    raises it again after a part in which a library swallowed it. A SIGINT the sweep was started with ignored (a
    shell's background job) stays ignored; outside the main thread nothing is installed."""

    def __init__(self) -> None:
        self.heard = False
        self._before: Any = None

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
            self._before = signal.signal(signal.SIGINT, self._on)
        return self

    def _on(self, signum: int, frame: Any) -> None:
        self.heard = True
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.heard:
            raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)


def jobs_key(sweep_dir: Path) -> list[list[Any]]:
    """Which jobs an end was written over: each job folder's name, status and end time. A part written over other
    jobs (a failed job run again since) is written again."""
    jobs = sorted((d for d in sweep_dir.iterdir() if (d / RUN_FILE).is_file()), key=lambda d: (len(d.name), d.name))
    return [[d.name, (r := read_status(d)).get("status"), r.get("ended")] for d in jobs]


class SweepEnd:
    """One sweep's end: which parts are written (``done``: a part's name -> True, or for TensorBoard the jobs whose
    columns are written), which failed and why, what waits to be sent (``unsent``); the record kept in step."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir
        self.jobs = jobs_key(sweep_dir)
        before = read_status(sweep_dir).get("end") or {}
        self.done: dict[str, Any] = dict(before.get("done") or {}) if before.get("jobs") == self.jobs else {}
        for part in FILE_PARTS:  # the files are written again by every end: a dashboard reads this end's
            self.done.pop(part, None)
        self.failed: dict[str, str] = {}
        self.unsent: dict[str, str] = {}
        self.without: dict[str, str] = {}  # a part written without a job's share, which no rerun brings back
        self.record_error: str | None = None
        self.ctrl_c = CtrlC()

    def state(self, state: str) -> dict[str, Any]:
        return {"state": state, "jobs": self.jobs, "done": self.done, "failed": self.failed, "unsent": self.unsent}

    def begin(self) -> None:
        """The record says the end is being written (best effort: a disk already full is said at the end)."""
        self._record(lambda: note_record(self.sweep_dir, reason=WRITING, end=self.state("writing")))

    def todo(self, part: str) -> bool:
        """Whether ``part`` is still to be written (a dashboard written by an earlier end of the same jobs is not)."""
        return part in FILE_PARTS or self.done.get(part) is not True

    def run(self, part: str, work: Callable[[], Any]) -> tuple[bool, Any]:
        """Run one part: ``(True, what it returned)``, or ``(False, None)`` with the failure kept for the one line. A
        file part that fails stops the rest (`stopped`)."""
        try:
            got = work()
        except OSError as e:
            self.failed[part] = storage_problem(e) or f"{type(e).__name__}: {e}"
            return False, None
        except VaseError as e:
            self.failed[part] = first_line(e, 400)
            return False, None
        except Exception as e:  # noqa: BLE001 - a bug or another library's error: one line, its traceback kept
            self.failed[part] = f"{type(e).__name__}: {first_line(e, 300)}{self._keep_traceback()}"
            return False, None
        finally:
            self.ctrl_c.check()  # a Ctrl-C a library swallowed during the part stops the end here
        self.done[part] = True
        return True, got

    def fail(self, part: str, why: str, done: Any = None) -> None:
        """A part that ran but did not write all it should (``done``: what it did write, kept for the next end)."""
        self.failed[part] = why
        if done is not None:
            self.done[part] = done

    def stopped(self) -> bool:
        return any(p in self.failed for p in FILE_PARTS)

    def _keep_traceback(self) -> str:
        try:
            path = atomic_write_text(self.sweep_dir / ERRORS_FILE, traceback.format_exc())
        except OSError:
            return ""
        return f" (its traceback: {path})"

    def _record(self, write: Callable[[], None]) -> None:
        try:
            write()
        except OSError as e:
            self.record_error = storage_problem(e) or f"{type(e).__name__}: {e}"

    def not_written(self) -> list[str]:
        """What the end did not write: after a file part failed, every part not written; else the failed ones."""
        if self.stopped():
            return [PARTS[p] for p in PARTS if self.done.get(p) is not True]
        return [PARTS[p] for p in self.failed]

    def interrupted(self) -> NoReturn:
        """Ctrl-C during the end: the record says interrupted, one line says what was written, exit 130."""
        written = [p for p in PARTS if self.done.get(p) is True]
        why = (f"stopped by Ctrl-C while its end was written (written: {', '.join(written) or 'nothing'}); the same "
               f"command finishes the end and trains nothing again")
        self._record(lambda: set_status(self.sweep_dir, "interrupted", why, end=self.state("interrupted")))
        print(f"interrupted (Ctrl-C): the sweep {self.sweep_dir} {why.removeprefix('stopped by Ctrl-C ')}"
              + (f". Its record could not say so: {self.record_error}" if self.record_error else ""),
              file=sys.stderr, flush=True)
        raise SystemExit(130)

    def close(self, complete: bool, failed_jobs: list[str]) -> None:
        """The end's last step: the record says finished (every job finished, every part written), or why not; one
        line for what was not written; exit 1 when anything failed (a job or a part)."""
        self.ctrl_c.check()
        if self.failed:
            line = (f"the sweep's end did not finish in {self.sweep_dir}: "
                    + "; ".join(f"{p}: {why}" for p, why in self.failed.items())
                    + f". Not written: {', '.join(self.not_written())}. Its jobs are kept: once that is fixed, the same "
                      f"command writes the rest of the end and trains nothing again")
            self._record(lambda: set_status(self.sweep_dir, "failed", line, end=self.state("failed")))
        elif complete:
            (self.sweep_dir / ERRORS_FILE).unlink(missing_ok=True)  # an earlier end's traceback, of a part now written
            without = "; ".join(self.without.values())
            waits = "; ".join([*self.unsent.values(), *([f"without: {without}"] if without else [])])
            self._record(lambda: set_status(self.sweep_dir, "finished", waits or None, end=self.state("written")))
            if without:
                print(f"note: the sweep's end was written without {without}: the dashboards show the other jobs",
                      file=sys.stderr, flush=True)
        else:
            self._record(lambda: set_status(self.sweep_dir, "interrupted", None, end=self.state("written")))
        if self.failed:
            print(f"error: {line}" + (f". Its record could not say so: {self.record_error}" if self.record_error
                                      else ""), file=sys.stderr, flush=True)
            raise SystemExit(1)
        if self.record_error:
            print(f"error: the sweep's end was written in {self.sweep_dir} but its record was not: "
                  f"{self.record_error}; the same command marks it finished and trains nothing again",
                  file=sys.stderr, flush=True)
            raise SystemExit(1)
        if failed_jobs:
            print(f"error: {len(failed_jobs)} sweep job(s) failed ({'; '.join(failed_jobs)}); the summary covers the "
                  f"finished ones. The same command runs only the failed jobs and completes the report",
                  file=sys.stderr, flush=True)
            raise SystemExit(1)
