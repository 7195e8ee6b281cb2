"""cpu_kernels: portable pins torch's, oneDNN's and MKL's code paths before torch loads, so a CPU run computes the
same numbers whatever the CPU's widest instructions are (the demo's table on every x86 CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_end_to_end import assert_the_demo_learns, run_side_by_side

ROOT = Path(__file__).resolve().parents[1]

# the ops a tiny run's numbers pass through: softmax (torch's own vectorised kernels), a matrix product (MKL), a
# convolution and GELU (oneDNN); printed as one hash of their outputs' bytes and torch's kernel level
_OPS = """
import hashlib, sys
from vase.runs import pin_cpu_kernels
pin_cpu_kernels(sys.argv[1])
import torch
g = torch.Generator().manual_seed(0)
x = torch.randn(257, 4099, generator=g)
w = torch.randn(4099, 333, generator=g)
img = torch.randn(2, 3, 56, 56, generator=g)
k = torch.randn(16, 3, 5, 5, generator=g)
outs = [torch.softmax(x * 3.1, -1), torch.log_softmax(x, -1), x @ w,
        torch.nn.functional.gelu(torch.nn.functional.conv2d(img, k))]
h = hashlib.sha256(b"".join(o.contiguous().numpy().tobytes() for o in outs)).hexdigest()[:16]
print(torch.backends.cpu.get_cpu_capability(), h)
"""


def _ops(mode: str, **env: str) -> tuple[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")}
    p = subprocess.run([sys.executable, "-c", _OPS, mode], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**clean, **env})
    assert p.returncode == 0, p.stderr[-2000:]
    capability, digest = p.stdout.split()
    return capability, digest


def test_portable_kernels_give_the_same_numbers_whatever_the_machine_offers() -> None:
    native_cap, native = _ops("native")
    # the widest kernels a user's machine might run, as this machine can offer them
    wide = {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "ALL"}
    cap_a, a = _ops("portable")
    cap_b, b = _ops("portable", **wide)
    assert cap_a == cap_b == "AVX2"
    assert a == b  # pinned: the environment's kernel choice no longer reaches the numbers
    if native_cap != "AVX512":
        pytest.skip(f"this CPU's widest kernels are {native_cap}: no wider path to tell apart from AVX2")
    # the check can fail: on this CPU the native kernels compute other last bits than the portable ones
    assert native != a


@pytest.mark.parametrize("entry", ["train.py", "evaluate.py"])
def test_each_entry_point_pins_before_torch_loads(entry: str) -> None:
    """The pins only act if set before torch is imported: each entry point sets them before it validates (which
    imports the config's targets, and with them torch)."""
    probe = ("import os, runpy, sys\n"
             "import vase.config.entry as e\n"
             "pin = e.pin_cpu_kernels\n"
             "def spy(mode):\n"
             "    print('torch loaded at pin:', 'torch' in sys.modules, flush=True)\n"
             "    return pin(mode)\n"
             "e.pin_cpu_kernels = spy\n"
             f"sys.argv = [{entry!r}, 'cpu_kernels=portable']\n"
             "try:\n"
             f"    runpy.run_path({entry!r}, run_name='__main__')\n"
             "finally:\n"
             "    import torch\n"
             "    print('capability:', torch.backends.cpu.get_cpu_capability(), flush=True)\n")
    p = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "VASE_CHECK_CONFIG": "1"})
    assert "torch loaded at pin: False" in p.stdout, p.stdout + p.stderr[-2000:]
    assert "capability: AVX2" in p.stdout and "torch was loaded before" not in p.stderr


def test_a_bad_kernel_setting_is_one_line() -> None:
    p = subprocess.run([sys.executable, "train.py", "cpu_kernels=fast"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "VASE_CHECK_CONFIG": "1"})
    assert p.returncode == 2 and p.stderr.strip() == "config error: cpu_kernels='fast' must be one of " \
                                                      "['native', 'portable']"


@pytest.mark.slow
def test_the_demo_prints_the_same_table_under_two_kernel_settings(tmp_path: Path) -> None:
    """make demo twice, each from its own empty cache, under two kernel settings of the environment: AVX2, and the
    widest the CPU has (as a machine with AVX-512 FP16 picks them by itself). The demo pins cpu_kernels=portable, so
    both print the same table: every model's every metric, and the same GRPO history, byte for byte (the check that a
    GRPO command run twice gives the same history). The first run is also the README's demo on seed 42, which must
    learn (`assert_the_demo_learns`)."""
    clean = {n: v for n, v in os.environ.items() if n not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")}
    # two settings that, unpinned, compute other last bits on an AVX-512 CPU (test above); the two runs side by side,
    # a thread each (the same thread count in both, as the same command on one machine would have)
    settings = [{"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
                {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "ALL"}]
    run_side_by_side([[sys.executable, "train.py", "experiment=demo", "logger=none", f"hydra.run.dir={tmp_path / f'run{k}'}",
                       f"paths.cache_dir={tmp_path / f'cache{k}'}", f"paths.log_dir={tmp_path / f'logs{k}'}"]
                      for k in range(2)], envs=[{**clean, **env} for env in settings])

    def results(k: int) -> tuple[dict, bytes]:
        run = tmp_path / f"run{k}"
        machine = json.loads((run / "paired_captions.json").read_text())["machine"]
        assert machine["cpu_kernels"] == "portable" and machine["cpu_capability"] == "AVX2", machine
        return json.loads((run / "results.json").read_text()), (run / "train_history_grpo.json").read_bytes()

    plain, wide = results(0), results(1)
    assert_the_demo_learns(tmp_path / "run0")  # the README's demo, seed 42, learns (seeds 1 and 2: test_end_to_end)
    assert len(plain[0]) == 3 and plain[0] == wide[0]  # untrained, SFT and GRPO: every metric
    assert plain[1] == wide[1]
