"""Progress on long work where no bar can be seen: rendering, synthesis, held-out scoring and the other long loops
print plain lines into a log file (and a last one when they end); a terminal keeps tqdm's bar."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


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
    assert "\r" not in log.getvalue()
    assert isinstance(progress_bar(range(2), desc="x", file=_Terminal()), tqdm)


def test_synthesis_into_a_log_file_says_it_is_done_in_a_plain_line(tmp_path: Path) -> None:
    """The data synthesis a first run does, with its output going to a file as a job's would."""
    code = ("from vase.data.synthetic import generate; "
            f"generate({str(tmp_path / 'data')!r}, num=3, seed=0)")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "\r" not in p.stderr
    assert any(ln.startswith("synthesising vases: 3/3 vases (100 %)") and "- done in" in ln
               for ln in p.stderr.splitlines()), p.stderr[-2000:]
