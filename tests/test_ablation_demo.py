"""The ablation demo is reproducible: the same sweep twice gives byte-identical histories, held-out answers and
verdict (the README's ablation table is written from these files). Its own file, so that the slow suite's two
workers can run it beside the GRPO sanity check of tests/test_reward_terms.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python


@pytest.mark.slow
def test_the_ablation_demo_twice_gives_byte_identical_results(tmp_path: Path) -> None:
    """The README's ablation table is written from these files: the same sweep twice (shortened: 32 vases, 6 GRPO
    steps, one seed, one draw, two weights) must give the same histories, the same held-out answers (multiple choice
    and captions) and the same verdict. Each sweep starts from its own empty cache, so the data, the renders, the tiny
    models and the shared SFT are made twice and compared too (the SFT's history and adapter, byte for byte): the
    check that a whole run from nothing gives the same bits on every CPU (the kernel test's second demo runs only
    where the CPU has kernels wider than AVX2)."""
    def sweep(k: int) -> Path:
        logs = tmp_path / f"logs{k}"
        p = run_python(["train.py", "-m", "experiment=ablation_demo", "logger=none", "data.synthetic.num_vases=32",
                        "sft.epochs=1", "trainer.max_steps=6", "seed=1", "reward.weights.shape=0.0,0.6",
                        "data.synthetic.seed=0", f"paths.log_dir={logs}", f"paths.cache_dir={tmp_path / f'cache{k}'}"],
                       cwd=ROOT, timeout=1800)
        assert p.returncode == 0, p.stderr[-3000:]
        return next((logs / "ablation_demo" / "multiruns").iterdir())

    a, b = sweep(0), sweep(1)
    sfts = [sorted((tmp_path / f"cache{k}" / "sft").glob("*/adapter")) for k in range(2)]
    assert len(sfts[0]) == len(sfts[1]) == 1, sfts  # one shared SFT in each cache
    for name in ("train_history.json", "adapter/adapter_model.safetensors"):
        assert (sfts[0][0].parent / name).read_bytes() == (sfts[1][0].parent / name).read_bytes(), name
    for job in ("0", "1"):
        for name in ("train_history.json", "vqa_grpo.json", "answers_vqa_grpo_ll.jsonl", "heldout_reward.json",
                     "heldout_reward_answers.jsonl", "heldout_reward_start.json"):
            assert (a / job / name).read_bytes() == (b / job / name).read_bytes(), (job, name)
    va, vb = json.loads((a / "ablation.json").read_text()), json.loads((b / "ablation.json").read_text())
    assert va["table"] == vb["table"] and va.get("i") == vb.get("i")
