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
from vase.checks.kernel_probe import WIDEST, first_difference, read_trace
from vase.kernels import KERNEL_ENV, PORTABLE_THREADS, cpu_identity

ROOT = Path(__file__).resolve().parents[1]

# the ops a tiny run's numbers pass through: softmax (torch's own vectorised kernels), a matrix product (MKL), a
# convolution and GELU (oneDNN); printed as one hash of their outputs' bytes and torch's kernel level
_OPS = """
import hashlib, sys
from vase.kernels import pin_cpu_kernels, mkl_branch
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
print(torch.backends.cpu.get_cpu_capability(), h, mkl_branch())
"""


CLEAN = {k: v for k, v in os.environ.items() if k not in KERNEL_ENV}
"""This environment without any kernel setting: a machine as a user starts it."""

WIDER_THAN_AVX2 = "avx512f" in cpu_identity()["flags"]
"""Whether this CPU has kernels wider than AVX2 (torch's, oneDNN's and MKL's AVX-512 paths need avx512f): where it
has none, a setting asking for the widest is AVX2 itself."""


def _ops(mode: str, **env: str) -> tuple[str, str, str]:
    p = subprocess.run([sys.executable, "-c", _OPS, mode], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**CLEAN, **env})
    assert p.returncode == 0, p.stderr[-2000:]
    capability, digest, branch = p.stdout.split()
    return capability, digest, branch


def test_portable_kernels_give_the_same_numbers_whatever_the_machine_offers() -> None:
    native_cap, native, _ = _ops("native")
    # the widest kernels a user's machine might run, as this machine can offer them, and a large server's threads
    cap_a, a, branch_a = _ops("portable")
    cap_b, b, branch_b = _ops("portable", **WIDEST)
    assert cap_a == cap_b == "AVX2"
    # MKL says which branch it runs: the pinned one, not AUTO (what MKL_CBWR=AVX2 gave on an AMD CPU)
    assert branch_a == branch_b == "COMPATIBLE,STRICT"
    assert a == b  # pinned: the environment's kernel choice no longer reaches the numbers
    if native_cap != "AVX512":
        pytest.skip(f"this CPU's widest kernels are {native_cap}: no wider path to tell apart from AVX2")
    # the check can fail: on this CPU the native kernels compute other last bits than the portable ones
    assert native != a


_THREADS = """
import hashlib, sys
from vase.kernels import apply_portable_threads, pin_cpu_kernels
pin_cpu_kernels(sys.argv[1])
import torch
g = torch.Generator().manual_seed(0)
x, w = torch.randn(772, 128, generator=g), torch.randn(128, 128, generator=g)
b = torch.randn(128, generator=g)
torch.set_num_threads(16)  # a large server's default
wide = hashlib.sha256(torch.addmm(b, x, w).numpy().tobytes()).hexdigest()[:16]
apply_portable_threads()  # what train.py and evaluate.py do once the config is valid
pinned = hashlib.sha256(torch.addmm(b, x, w).numpy().tobytes()).hexdigest()[:16]
print(torch.get_num_threads(), wide, pinned)
"""


def test_portable_fixes_the_threads_whatever_the_cores_since_mkl_splits_sums_by_thread() -> None:
    """The probe's finding (q_proj's product, [772, 128]): under COMPATIBLE,STRICT the same product on 16 threads and
    on 2 gives other bits, so ``portable`` fixes torch's threads at `PORTABLE_THREADS`; ``native`` leaves them."""
    p = subprocess.run([sys.executable, "-c", _THREADS, "portable"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=CLEAN)
    assert p.returncode == 0, p.stderr[-2000:]
    threads, wide, pinned = p.stdout.split()
    assert int(threads) == PORTABLE_THREADS
    assert wide != pinned  # the check can fail: 16 threads and 2 compute this product's sums in other orders
    n = subprocess.run([sys.executable, "-c", _THREADS, "native"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=CLEAN)
    assert n.returncode == 0 and n.stdout.split()[0] == "16", n.stderr[-2000:]


def test_mkl_honours_a_vendors_branch_only_on_that_vendors_cpus() -> None:
    """Why the pin is COMPATIBLE: MKL_CBWR=AVX2 (vase's pin until 2026-12-01) is honoured on Intel CPUs and ignored on
    others, where MKL runs its AUTO branch without a word; so the same pin computed other products on an AMD CPU and
    on an Intel one. COMPATIBLE is honoured on both."""
    vendor = cpu_identity()["vendor"]
    if vendor not in ("AuthenticAMD", "GenuineIntel"):
        pytest.skip(f"CPU vendor {vendor!r}: MKL's branches are documented for Intel and AMD CPUs")
    *_, avx2 = _ops("native", MKL_CBWR="AVX2")
    *_, compatible = _ops("native", MKL_CBWR="COMPATIBLE")
    assert compatible == "COMPATIBLE"
    assert avx2 == ("AVX2" if vendor == "GenuineIntel" else "AUTO")


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
    both print the same table: every model's every metric, and the same GRPO history, byte for byte. The first run is
    also the README's demo on seed 42, which must learn (`assert_the_demo_learns`). On a CPU whose widest kernels
    are AVX2 the two settings are one, and the second run would repeat the first (that a run repeated gives the same
    bits is test_ablation_demo's): there only the first runs, and the kernel probe below still compares the settings
    op by op."""
    # two settings that, unpinned, compute other last bits on an AVX-512 CPU (test above); the two runs side by side,
    # a thread each (threads are the probe's test below: 16 of them on 2 cores would take this one minutes)
    widest = {k: v for k, v in WIDEST.items() if not k.startswith("OMP_")}
    settings = [{"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}, widest]
    settings = settings if WIDER_THAN_AVX2 else settings[:1]
    run_side_by_side([[sys.executable, "train.py", "experiment=demo", "logger=none", f"hydra.run.dir={tmp_path / f'run{k}'}",
                       f"paths.cache_dir={tmp_path / f'cache{k}'}", f"paths.log_dir={tmp_path / f'logs{k}'}"]
                      for k in range(len(settings))], envs=[{**CLEAN, **env} for env in settings])

    def results(k: int) -> tuple[dict, bytes]:
        run = tmp_path / f"run{k}"
        machine = json.loads((run / "paired_captions.json").read_text())["machine"]
        assert machine["cpu_kernels"] == "portable" and machine["cpu_capability"] == "AVX2", machine
        assert machine["mkl_branch"] == "COMPATIBLE,STRICT" and machine["cpu"] and "avx2" in machine["flags"], machine
        return json.loads((run / "results.json").read_text()), (run / "train_history_grpo.json").read_bytes()

    plain = results(0)
    assert_the_demo_learns(tmp_path / "run0")  # the README's demo, seed 42, learns (seeds 1 and 2: test_end_to_end)
    assert len(plain[0]) == 3  # untrained, SFT and GRPO
    if not WIDER_THAN_AVX2:
        pytest.skip("this CPU's widest kernels are AVX2: the demo ran once, under the one setting it has (and learned)")
    wide = results(1)
    assert plain[0] == wide[0]  # every metric of every model
    assert plain[1] == wide[1]


@pytest.mark.slow
def test_the_kernel_probe_finds_no_difference_under_the_pins_and_names_the_op_where_settings_part(
        tmp_path: Path) -> None:
    """The probe as documented (Getting started): the demo's first SFT and GRPO steps, every op hashed, under the
    pins and under the pins with a server's environment (widest kernels asked): the same bits, op for op, on the 2
    threads the pins fix. With a server's 16 threads forced over the pin, it names a matrix product (MKL splits its
    sums by thread: why the pins fix the threads). Without the pins on an AVX-512 CPU, it names an op where the two
    part; --compare walks two trace folders."""
    p = subprocess.run([sys.executable, "-m", "vase.checks.kernel_probe", "--out", str(tmp_path / "probe"),
                        "--settings", "portable", "portable, widest asked", "portable, 16 threads forced", "native"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900, env=CLEAN)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    record = json.loads((tmp_path / "probe" / "kernel_probe.json").read_text())
    same, threads, native = record["comparisons"]
    assert same["same"] is True and same["ops"] > 10_000, same
    portable, wide = read_trace(tmp_path / "probe" / "portable"), read_trace(tmp_path / "probe" / "portable_widest_asked")
    assert portable[0]["mkl_branch"] == wide[0]["mkl_branch"] == "COMPATIBLE,STRICT"
    assert portable[0]["threads"] == wide[0]["threads"] == PORTABLE_THREADS
    assert read_trace(tmp_path / "probe" / "portable_16_threads_forced")[0]["threads"] == 16
    # the check can fail: the same pins on 16 threads compute another product
    assert threads["same"] is False and threads["kind"] == "output" and threads["a"]["op"].startswith("aten.addmm"), threads
    phases = {r["phase"] for r in portable[1]}
    assert phases == {"sft step 1", "grpo step 1"}  # both stages traced, the GRPO rollout among them
    assert first_difference(portable[1], wide[1]) == {"same": True, "ops": same["ops"]}
    if WIDER_THAN_AVX2:
        assert native["same"] is False and native["kind"] == "output" and native["a"]["op"].startswith("aten."), native
        assert f"first difference at op {native['index']:,}" in p.stdout
    c = subprocess.run([sys.executable, "-m", "vase.checks.kernel_probe", "--compare", str(tmp_path / "probe" / "portable"),
                        str(tmp_path / "probe" / "native")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert c.returncode == 0 and c.stdout.splitlines()[-1].startswith("A vs B: " if not native["same"] else "A = B"), c.stdout


_WAIT = "import os, sys\nfrom vase.kernels import pin_cpu_kernels\npin_cpu_kernels(sys.argv[1])\n" \
        "print(os.environ.get('OMP_WAIT_POLICY', 'unset'))"


@pytest.mark.parametrize("mode,threads,want", [("portable", "1", "PASSIVE"), ("portable", None, "unset"),
                                               ("native", "1", "unset")])
def test_portable_on_fewer_threads_lets_openmp_sleep(mode: str, threads: str | None, want: str) -> None:
    """``cpu_kernels=portable`` under ``OMP_NUM_THREADS=1`` (jobs side by side) sets ``OMP_WAIT_POLICY=PASSIVE``
    before torch loads, so its two threads sleep instead of spinning on the other job's core; alone (no thread count
    asked) and under ``native`` it leaves the policy to OpenMP. Run without the suites' own PASSIVE (Makefile)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    p = subprocess.run([sys.executable, "-c", _WAIT, mode], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 0 and p.stdout.split()[-1] == want, p.stdout + p.stderr[-2000:]
