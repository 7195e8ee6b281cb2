"""Progress on long work: a bar on a terminal, a plain line in a log.

`progress_bar` stands in for ``tqdm(...)``: on a terminal it is tqdm's bar; where the output is a file (a SLURM job, a
``nohup`` run, a sweep's job log) a bar would only write carriage returns, so it prints a plain line instead, at
least every ``EVERY_S`` seconds and once at the end: ``rendering views: 120/480 vases (25 %), 3.1 vase/s, ETA 1m56s``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

from tqdm import tqdm

EVERY_S = 30.0


def clock(seconds: float) -> str:
    """
    >>> clock(42.4), clock(125), clock(3725)
    ('42s', '2m05s', '1h02m')
    """
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class LogLines:
    """tqdm's interface (iterate, ``update``, ``close``) as plain lines in a log."""

    def __init__(self, iterable: Iterable[Any] | None = None, total: int | None = None, initial: int = 0,
                 desc: str = "", unit: str = "item", file: IO[str] | None = None, every_s: float = EVERY_S) -> None:
        self.iterable = iterable
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)  # type: ignore[arg-type]
        self.n = self._n0 = int(initial)
        self.desc, self.unit, self.every_s = desc, unit, float(every_s)
        self.file = file if file is not None else sys.stderr
        self._t0 = self._last = time.monotonic()
        self._closed = False

    def __iter__(self) -> Iterator[Any]:
        assert self.iterable is not None
        for x in self.iterable:
            yield x
            self.update(1)
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += int(n)
        now = time.monotonic()
        if self.total and self.n >= self.total:
            return  # the last line is close's, with its time: printed here too, it read twice in a row
        if now - self._last >= self.every_s:
            self._last = now
            print(self.line(), file=self.file, flush=True)

    def line(self) -> str:
        """
        >>> p = LogLines(total=4, desc="rendering views", unit="vase"); p.update(0); p.line()
        'rendering views: 0/4 vases (0 %)'
        """
        done = f"{self.n}/{self.total} {self.unit}s ({100 * self.n // max(1, self.total)} %)" if self.total \
            else f"{self.n} {self.unit}s"
        spent = time.monotonic() - self._t0
        rate = (self.n - self._n0) / spent if spent > 0 else 0.0
        out = f"{self.desc}: {done}"
        if rate > 0:
            out += f", {rate:.3g} {self.unit}/s"
            if self.total and self.n < self.total:
                out += f", ETA {clock((self.total - self.n) / rate)}"
        return out

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            print(f"{self.line()} - done in {clock(time.monotonic() - self._t0)}", file=self.file, flush=True)


def quiet_bars_in_logs(stream: IO[str] | None = None) -> bool:
    """Where the output is not a terminal (a file the user tails, a SLURM log): no other library's ``\\r`` bars in it
    (transformers' and the Hub's tqdm, through ``HF_HUB_DISABLE_PROGRESS_BARS``, read when transformers is imported,
    and transformers' own switch if it already is); vase's plain lines say the progress. A value the user set is
    kept. Returns whether it quietened them."""
    stream = stream if stream is not None else sys.stderr
    if getattr(stream, "isatty", lambda: False)() or "HF_HUB_DISABLE_PROGRESS_BARS" in os.environ:
        return False
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        # lazy: transformers (already imported here: only its switch is reached)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    return True


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, initial: int = 0, desc: str = "",
             unit: str = "item", file: IO[str] | None = None) -> Any:
    """A progress bar on a terminal (tqdm), plain lines in a log (`LogLines`); ``file``: where (stderr by default)."""
    stream = file if file is not None else sys.stderr
    if getattr(stream, "isatty", lambda: False)():
        return tqdm(iterable, total=total, initial=initial, desc=desc, unit=unit, file=stream)
    return LogLines(iterable, total=total, initial=initial, desc=desc, unit=unit, file=stream)


class LabelledLines:
    """A text stream whose every line starts with ``label``: what each job of a parallel sweep prints
    (``[#1] grpo: step 76/300 ...``), so that two jobs' lines in one terminal or log say whose they are. Never a
    terminal (`progress_bar` then prints plain lines: two jobs' bars on one line would overwrite each other).

    An empty line is left out (a bare label says nothing; a job's ``\\nSIGINT: ...`` breaks off a bar only on a
    terminal, which this never is).

    >>> import io
    >>> s = io.StringIO(); out = LabelledLines(s, "[#1] "); _ = out.write("a\\nb"); _ = out.write("c\\n\\n"); s.getvalue()
    '[#1] a\\n[#1] bc\\n'
    """

    def __init__(self, stream: IO[str], label: str) -> None:
        self.stream, self.label = stream, label
        self._at_start = True

    def write(self, text: str) -> int:
        out = []
        for piece in text.splitlines(keepends=True):
            if self._at_start and piece in ("\n", "\r\n"):
                continue
            if self._at_start:
                out.append(self.label)
            out.append(piece)
            self._at_start = piece.endswith(("\n", "\r"))
        self.stream.write("".join(out))
        if "\n" in text:
            self.stream.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
