"""GRPO: advantages and loss against independent straightforward computations; gradients reach LoRA only."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from vase.training.grpo import completion_mask, group_advantages, grpo_loss, repeat_batch

LOSS_TYPES = ["grpo", "dr_grpo", "dapo", "bnpo"]
SCALES = ["group", "batch", "none"]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: list[float]) -> float:  # unbiased, as torch.std
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def reference_advantages(rewards: list[float], g: int, scale: str) -> list[float]:
    out = []
    for start in range(0, len(rewards), g):
        grp = rewards[start: start + g]
        for r in grp:
            a = r - _mean(grp)
            if scale == "group":
                a /= _std(grp) + 1e-4
            elif scale == "batch":
                a /= _std(rewards) + 1e-4
            out.append(a)
    return out


def reference_loss(logps, old, ref, adv, mask, beta, el, eh, loss_type, max_len, num_items=None) -> float:
    """Token by token, with plain floats."""
    per_seq, total, n_tokens = [], 0.0, 0
    reference_loss.clipped = 0  # tokens where the clipped term is the smaller one (the clip fraction's numerator)
    for i in range(len(logps)):
        s, n = 0.0, 0
        for t in range(len(logps[i])):
            if not mask[i][t]:
                continue
            ratio = math.exp(logps[i][t] - (old[i][t] if old is not None else logps[i][t]))
            clipped = min(max(ratio, 1 - el), 1 + eh)
            term = -min(ratio * adv[i], clipped * adv[i])
            reference_loss.clipped += int(clipped * adv[i] < ratio * adv[i])
            if beta > 0:
                d = ref[i][t] - logps[i][t]
                term += beta * (math.exp(d) - d - 1)
            s += term
            n += 1
        per_seq.append(s / max(n, 1))
        total += s
        n_tokens += n
    if loss_type == "grpo":
        return _mean(per_seq)
    if loss_type == "bnpo":
        return total / max(n_tokens, 1)
    if loss_type == "dr_grpo":
        return total / (len(logps) * max_len)
    return total / max(num_items if num_items is not None else n_tokens, 1)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_loss_matches_straightforward_computation(loss_type: str, scale: str) -> None:
    g = torch.Generator().manual_seed(0)
    n, t, G = 6, 5, 3
    rewards = torch.rand(n, generator=g).tolist()
    adv = group_advantages(torch.tensor(rewards), G, scale)
    assert adv.tolist() == pytest.approx(reference_advantages(rewards, G, scale), rel=1e-5, abs=1e-6)
    logps = (torch.rand(n, t, generator=g) * -3).double()
    old = logps + 0.8 * (torch.rand(n, t, generator=g) - 0.5).double()  # ratios both sides of the clip range
    ref = logps + 0.2 * (torch.rand(n, t, generator=g) - 0.5).double()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0],
                         [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0]])
    for beta, old_in in ((0.0, None), (0.04, old)):
        got, m = grpo_loss(logps, old_in, ref, adv.double(), mask, beta=beta, epsilon_low=0.2, epsilon_high=0.28,
                           loss_type=loss_type, max_completion_length=8, num_items=30)
        want = reference_loss(logps.tolist(), None if old_in is None else old.tolist(), ref.tolist(), adv.tolist(),
                              mask.tolist(), beta, 0.2, 0.28, loss_type, 8, 30)
        assert float(got) == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert float(m["clip_fraction"]) == pytest.approx(reference_loss.clipped / int(mask.sum()))
        if old_in is not None:
            assert reference_loss.clipped > 0  # the case exercises the clip


def test_one_iteration_ratio_has_the_policy_gradient() -> None:
    # with old = current (mu = 1) the grpo loss gradient is -A / |o| per token, as in the GRPO paper
    logps = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    adv = torch.tensor([2.0])
    mask = torch.tensor([[1, 1, 0]])
    loss, _ = grpo_loss(logps, None, None, adv, mask, beta=0.0, epsilon_low=0.2, epsilon_high=0.2, loss_type="grpo",
                        max_completion_length=3)
    loss.backward()
    assert logps.grad.tolist() == [[pytest.approx(-1.0), pytest.approx(-1.0), 0.0]]


def test_completion_mask_stops_after_first_eos() -> None:
    c = torch.tensor([[5, 6, 9, 7, 9], [5, 5, 5, 5, 5], [9, 1, 1, 1, 1]])
    assert completion_mask(c, [9]).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]


def test_repeat_batch_keeps_each_samples_images() -> None:
    thw = torch.tensor([[1, 2, 2], [1, 2, 2], [1, 4, 2]])  # sample 0 has two images (4+4 patches), sample 1 one (8)
    pv = torch.arange(16).unsqueeze(1).float()
    batch = {"input_ids": torch.tensor([[1, 2], [3, 4]]), "attention_mask": torch.ones(2, 2, dtype=torch.long),
             "mm_token_type_ids": torch.tensor([[1, 0], [0, 1]]),
             "pixel_values": pv, "image_grid_thw": thw, "images": [["a", "b"], ["c"]]}
    rep = repeat_batch(batch, 2)
    assert rep["input_ids"].tolist() == [[1, 2], [1, 2], [3, 4], [3, 4]]
    assert rep["mm_token_type_ids"].tolist() == [[1, 0], [1, 0], [0, 1], [0, 1]]
    assert rep["image_grid_thw"].tolist() == [[1, 2, 2], [1, 2, 2]] * 2 + [[1, 4, 2]] * 2
    flat = rep["pixel_values"].squeeze(1).tolist()
    assert flat == list(range(8)) * 2 + list(range(8, 16)) * 2
    # where encoded features replace the pixels: the same grids (3D positions need them), no repeated pixels
    grids_only = repeat_batch(batch, 2, pixels=False)
    assert "pixel_values" not in grids_only and grids_only["image_grid_thw"].tolist() == rep["image_grid_thw"].tolist()


class LengthReward:
    """A deterministic stand-in reward: longer completions score higher (varied rewards within every group)."""

    def compute(self, completions, **_):
        from vase.rewards import RewardOutput

        totals = [len(c) / 10.0 for c in completions]
        return RewardOutput(totals, {"length": totals})


def test_gradients_reach_only_lora(tiny_model_dir: Path, synthetic_root: Path) -> None:
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import GRPOModule

    torch.manual_seed(0)
    proc = load_processor(str(tiny_model_dir))
    module = GRPOModule(load_model(str(tiny_model_dir)), LengthReward(), proc, lora={"r": 4, "alpha": 8, "dropout": 0.0},
                        num_generations=4, max_completion_length=8, beta=0.04, temperature=1.0)
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    batch = PromptCollator(proc)([ds[0], ds[1]])
    r = module.rollout(batch)
    assert r.completion_ids.shape[0] == 8 and len(r.texts) == 8
    assert r.ref_logps is not None and r.advantages.abs().sum() > 0
    logps = module._logps(module.model, r.inputs, r.completion_ids.shape[1])
    # the reference is the policy with its adapter off: at initialisation (LoRA B = 0) they are the same model
    assert torch.allclose(logps, r.ref_logps, atol=1e-5)
    # frozen vision: the rollout hands on each prompt's image features, encoded once; they must give the same
    # log-probabilities as encoding the repeated pixels
    assert "mm_encoder_outputs" in r.inputs and "pixel_values" not in r.inputs
    with_pixels = {k: v for k, v in r.inputs.items() if k != "mm_encoder_outputs"}
    with_pixels["pixel_values"] = repeat_batch(batch, 4)["pixel_values"]
    with torch.no_grad():
        assert torch.allclose(module._logps(module.model, with_pixels, r.completion_ids.shape[1]), logps, atol=1e-5)
    loss, _ = grpo_loss(logps, None, r.ref_logps, r.advantages, r.mask, beta=0.04, epsilon_low=0.2, epsilon_high=0.2,
                        loss_type="grpo", max_completion_length=8)
    loss.backward()
    with_grad = {n for n, p in module.model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert with_grad and all("lora_" in n for n in with_grad)
    assert not any(p.requires_grad for n, p in module.model.named_parameters() if "lora_" not in n)


def test_an_orbit_video_goes_through_the_frozen_vision_tower_once_per_prompt(tiny_model_dir: Path,
                                                                            synthetic_root: Path) -> None:
    """data.modality=orbit: the rollout encodes each prompt's video once (not 2G + 1 times: the prefill, the reference
    and the policy over G repeated copies) and hands the features on; the log-probabilities equal those from the
    repeated pixels."""
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset, VideoFrames
    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import GRPOModule
    from vase.training.rollout import core_model

    torch.manual_seed(0)
    proc = load_processor(str(tiny_model_dir))
    module = GRPOModule(load_model(str(tiny_model_dir)), LengthReward(), proc, lora={"r": 4, "alpha": 8, "dropout": 0.0},
                        num_generations=3, max_completion_length=6, beta=0.04, temperature=1.0)
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    samples = [ds[0], ds[1]]
    for s in samples:  # four of the views as the frames of one orbit video
        s.images = VideoFrames(s.images[:4])
    batch = PromptCollator(proc)(samples)
    assert "pixel_values_videos" in batch and "pixel_values" not in batch
    visual = core_model(module.model).visual
    calls = []
    hook = visual.register_forward_hook(lambda *_: calls.append(1))
    try:
        r = module.rollout(batch)
    finally:
        hook.remove()
    assert len(calls) == 1  # both prompts' videos in one pass, before the prefill
    assert "mm_encoder_outputs" in r.inputs and "pixel_values_videos" not in r.inputs
    assert len(r.inputs["mm_encoder_outputs"]["video"].pooler_output) == 6  # one per row: 2 prompts x G 3
    logps = module._logps(module.model, r.inputs, r.completion_ids.shape[1])
    assert torch.allclose(logps, r.ref_logps, atol=1e-5)
    with_pixels = {k: v for k, v in r.inputs.items() if k != "mm_encoder_outputs"}
    with_pixels["pixel_values_videos"] = repeat_batch(batch, 3)["pixel_values_videos"]
    with torch.no_grad():
        assert torch.allclose(module._logps(module.model, with_pixels, r.completion_ids.shape[1]), logps, atol=1e-5)


def test_a_training_vision_tower_encodes_each_prompt_once_with_the_gradient_of_g_copies(tiny_model_dir: Path,
                                                                                       synthetic_root: Path) -> None:
    """freeze_vision=false (LoRA in the vision tower, the demos' setting): the reference and the policy forwards
    encode each prompt's views once and repeat the features G times (PromptVisuals), not the G repeated pixels; the
    log-probabilities and every LoRA gradient, the vision tower's included, equal those from the repeated pixels."""
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import GRPOModule
    from vase.training.rollout import core_model

    torch.manual_seed(0)
    proc = load_processor(str(tiny_model_dir))
    module = GRPOModule(load_model(str(tiny_model_dir)), LengthReward(), proc,
                        lora={"r": 4, "alpha": 8, "dropout": 0.0, "freeze_vision": False},
                        num_generations=4, max_completion_length=6, beta=0.04, temperature=1.0)
    with torch.no_grad():  # adapters away from 0, so the policy differs from the reference and B's gradient is not 0
        for n, p in module.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    assert not module._vision_frozen()
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    batch = PromptCollator(proc)([ds[0], ds[1]])
    patches = []
    hook = core_model(module.model).visual.register_forward_hook(lambda _m, args, _o: patches.append(len(args[0])))
    try:
        r = module.rollout(batch)
        assert "pixel_values" not in r.inputs and r.inputs["prompt_visuals"].g == 4
        n = r.completion_ids.shape[1]
        logps = module._logps(module.model, r.inputs, n)
    finally:
        hook.remove()
    # the prefill, the reference and the policy each see the two prompts' pixels once, never 4 copies
    assert patches == [len(batch["pixel_values"])] * 3
    logps.sum().backward()
    ours = {k: v.grad.clone() for k, v in module.model.named_parameters() if v.grad is not None}
    assert any(".visual." in k for k in ours) and all(float(g.abs().sum()) > 0 for g in ours.values())
    module.model.zero_grad(set_to_none=True)
    with_pixels = {k: v for k, v in r.inputs.items() if k != "prompt_visuals"}
    with_pixels["pixel_values"] = repeat_batch(batch, 4)["pixel_values"]
    theirs = module._logps(module.model, with_pixels, n)
    assert torch.allclose(theirs, logps, atol=1e-5)
    theirs.sum().backward()
    for k, p in module.model.named_parameters():
        if k in ours:
            assert torch.allclose(p.grad, ours[k], rtol=1e-4, atol=1e-6), k
    with torch.no_grad(), module.model.disable_adapter():  # the reference: the adapter off in the vision tower too
        assert torch.allclose(module._logps(module.model, with_pixels, n), r.ref_logps, atol=1e-5)
    assert not torch.allclose(r.ref_logps, logps.detach(), atol=1e-4)


def test_grpo_stage_runs_through_train_and_logs(train_cfg) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(["stage=grpo", "stage.batch_size=2", "stage.grad_accum=2", "trainer.max_steps=1",
                     "stage.module.max_completion_length=8", "stage.module.num_iterations=2",
                     "stage.module.optimizer.lr=1e-3", "logger=csv"])
    out = run_training(cfg)
    hist = out["history"]
    # grad_accum 2 batches buffered, then mu = 2 passes: two optimizer steps (max_steps counts optimizer steps)
    assert [h["step"] for h in hist] == [1.0, 2.0] and all("reward" in h for h in hist)
    assert all(h["kl"] >= 0 for h in hist)  # the KL to the reference, kept in the history (sweeps and reports read it)
    import csv
    from pathlib import Path

    rows = list(csv.DictReader(open(next(Path(cfg.paths.output_dir).rglob("metrics.csv")))))
    keys = set(rows[0])
    for k in ("train/reward", "train/reward/fabric", "train/reward/fabric_pass_rate", "train/reward/penalty",
              "train/reward/bonus", "train/kl", "train/clip_fraction", "train/completion_length", "train/loss"):
        assert k in keys, k


def test_sft_then_grpo_followup_and_adapter_lineage(train_cfg, tiny_model_dir) -> None:
    import json
    from pathlib import Path

    from omegaconf import OmegaConf
    from peft import PeftModel

    from vase.data.datamodule import SFTCollator, samples_for
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_model_and_processor
    from vase.pipeline import run_training

    # SFT with a large learning rate and a trained output head, so that the SFT weights matter below
    cfg = train_cfg(["+stage@followup=grpo", "followup.epochs=1", "followup.batch_size=2",
                     "followup.module.max_completion_length=6", "followup.grad_accum=1",
                     "followup.module.optimizer.lr=1e-2", "stage.module.optimizer.lr=5e-2",
                     "stage.module.lora.modules_to_save=[lm_head]", "val.after=true", "val.max_new_tokens=6"])
    out = run_training(cfg)
    d = Path(cfg.paths.output_dir)
    assert list(out["results"]) == ["tiny-qwen2.5-vl (sft)", "tiny-qwen2.5-vl (grpo)"]
    assert set(out["histories"]) == {"sft", "grpo"}
    lineage = json.loads((d / "grpo" / "adapter" / "vase_lineage.json").read_text())
    assert lineage["merged_adapters"] == [str(d / "adapter")]
    # loading the GRPO adapter alone rebuilds base + SFT (merged) + GRPO: the trained model's logits exactly
    mcfg = OmegaConf.create({"name_or_path": str(tiny_model_dir), "dtype": "float32"})
    model, proc = load_model_and_processor(mcfg, adapter=str(d / "grpo" / "adapter"))
    ex = VaseDataset(Path(cfg.data.root), "val")[0]
    batch = SFTCollator(proc)(samples_for(ex, "caption"))
    batch.pop("labels")
    trained = out["module"].model.eval()
    with torch.no_grad():
        want = trained(**batch).logits
        got = model.eval()(**batch).logits
        without_sft = PeftModel.from_pretrained(load_model(str(tiny_model_dir)), str(d / "grpo" / "adapter"))
        wrong = without_sft.eval()(**batch).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert not torch.allclose(wrong, want, atol=1e-2)  # the lineage matters: SFT's weights are part of the model


def test_shared_prefill_sampling_matches_generate(tiny_model_dir: Path, synthetic_root: Path) -> None:
    """Greedy decoding through sample_groups (one prefill per prompt, cache repeated) gives exactly the tokens of
    ``generate`` on the prompts repeated G times."""
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import sample_groups

    proc = load_processor(str(tiny_model_dir))
    model = load_model(str(tiny_model_dir)).eval()
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    batch = PromptCollator(proc)([ds[0], ds[1], ds[2]])
    prompts = {k: batch[k] for k in ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw")}
    tok = proc.tokenizer
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    ours = sample_groups(model, prompts, 3, max_new_tokens=12, eos_ids=eos, pad_id=tok.pad_token_id, greedy=True)
    rep = repeat_batch(batch, 3)
    ref = model.generate(**rep, do_sample=False, max_new_tokens=12, pad_token_id=tok.pad_token_id)
    ref = ref[:, rep["input_ids"].shape[1]:]
    assert ours.shape[0] == 9
    assert torch.equal(ours[:, : ref.shape[1]], ref)
    # min_new_tokens forbids the end token early; suppressed ids never appear
    forced = sample_groups(model, prompts, 2, max_new_tokens=10, eos_ids=eos, pad_id=tok.pad_token_id,
                           min_new_tokens=10, suppress_ids=[5, 6, 7])
    assert forced.shape == (6, 10) and not torch.isin(forced, torch.tensor(eos + [5, 6, 7])).any()


def test_full_finetune_keeps_an_explicit_frozen_reference(tiny_model_dir: Path, synthetic_root: Path) -> None:
    """Without LoRA there is no adapter to switch off: the reference is a frozen copy, and every language-model
    weight (not the frozen vision tower) trains."""
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import GRPOModule

    torch.manual_seed(0)
    proc = load_processor(str(tiny_model_dir))
    module = GRPOModule(load_model(str(tiny_model_dir)), LengthReward(), proc, full_finetune=True,
                        lora={"freeze_vision": True}, num_generations=2, max_completion_length=6, beta=0.1)
    assert module.ref_model is not None and not any(p.requires_grad for p in module.ref_model.parameters())
    trainable = {n for n, p in module.model.named_parameters() if p.requires_grad}
    assert trainable and not any(".visual." in f".{n}" for n in trainable)
    assert "lm_head.weight" in trainable
    # the checkpoint keeps trainable weights only: the frozen reference is not saved
    assert not any(k.startswith("ref_model.") for k in module.state_dict())
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    r = module.rollout(PromptCollator(proc)([ds[0]]))
    logps = module._logps(module.model, r.inputs, r.completion_ids.shape[1])
    assert torch.allclose(logps, r.ref_logps, atol=1e-5)  # policy == reference before any step
    loss, _ = grpo_loss(logps, None, r.ref_logps, r.advantages, r.mask, beta=0.1, epsilon_low=0.2, epsilon_high=0.2,
                        loss_type="grpo", max_completion_length=6)
    loss.backward()
    assert module.model.lm_head.weight.grad is not None
    assert all(p.grad is None for p in module.ref_model.parameters())


def test_grpo_logs_a_wandb_table_of_completions(train_cfg) -> None:
    import json
    from pathlib import Path

    from vase.loggers import finish_wandb
    from vase.pipeline import run_training

    cfg = train_cfg(["stage=grpo", "stage.batch_size=2", "stage.grad_accum=1", "trainer.max_steps=1",
                     "stage.module.max_completion_length=6", "stage.module.log_completions_every=1", "logger=wandb"])
    try:
        run_training(cfg)
    finally:
        finish_wandb()
    tables = list(Path(cfg.paths.output_dir).rglob("train/completions_*.table.json"))
    assert tables
    t = json.loads(tables[0].read_text())
    assert t["columns"][:5] == ["step", "id", "view", "completion", "reward"] and "fabric" in t["columns"]
    assert len(t["data"]) == 2 * 4  # 2 prompts x G=4
    assert all(row[2] == "Image" for row in t["data"])  # a view per row (an offline run keeps images in its log)


def _advantages(kind: str, rewards: list) -> torch.Tensor:
    """One rank's advantages: ``batch`` scaling of summed rewards, or ``decoupled`` per-term rewards (weights 0.6, 0.4)."""
    from vase.training.grpo import decoupled_advantages

    if kind == "batch":
        return group_advantages(torch.tensor(rewards), 2, "batch")
    return decoupled_advantages(torch.tensor(rewards), torch.tensor([0.6, 0.4]), 2)


def _advantages_worker(rank: int, world: int, port: int, kind: str, data: list, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.save(_advantages(kind, data[rank]), f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def _on_two_ranks(tmp_path: Path, kind: str, data: list) -> torch.Tensor:
    """The advantages two gloo processes compute, rank ``r`` holding ``data[r]``, concatenated in rank order."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(_advantages_worker, args=(2, port, kind, data, str(tmp_path / "adv")), nprocs=2,
                       start_method="spawn")
    return torch.cat([torch.load(tmp_path / f"adv.{r}") for r in range(2)])


def test_batch_scaling_uses_every_ranks_rewards(tmp_path: Path) -> None:
    """scale_rewards=batch over 2 gloo processes equals one process holding both halves of the batch."""
    rewards = [[0.1, 0.5, 0.9, 0.2], [0.0, 3.0, 1.0, 1.5]]  # the second rank's spread is much larger
    got = _on_two_ranks(tmp_path, "batch", rewards)
    want = group_advantages(torch.tensor(rewards[0] + rewards[1]), 2, "batch")
    assert torch.allclose(got, want, atol=1e-6)
    local = group_advantages(torch.tensor(rewards[0]), 2, "batch")
    assert not torch.allclose(got[:4], local, atol=1e-3)  # a rank's own std alone gives other advantages


def _trl_loss(loss_type: str, logps: torch.Tensor, old: torch.Tensor | None, ref: torch.Tensor, adv: torch.Tensor,
              mask: torch.Tensor, beta: float, el: float, eh: float, max_len: int, num_items: float) -> torch.Tensor:
    """TRL 1.16 GRPOTrainer._compute_loss itself, on given per-token log-probabilities (its model call replaced)."""
    from collections import defaultdict
    from types import SimpleNamespace

    from trl import GRPOTrainer

    n, t = mask.shape
    accelerator = SimpleNamespace(num_processes=1, sync_gradients=True, gather=lambda x: x,
                                  gather_for_metrics=lambda x: x, reduce=lambda x, reduction="sum": x)
    fake = SimpleNamespace(
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token", beta=beta,
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None, steps_per_generation=1), loss_type=loss_type,
        epsilon_low=el, epsilon_high=eh, use_vllm=False, model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, accelerator=accelerator, max_completion_length=max_len,
        _entropy_bonus_enabled=False, aux_loss_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)),
        _get_per_token_logps_and_entropies=lambda *a, **k: (logps, torch.zeros_like(logps), None),
    )
    inputs = {"prompt_ids": torch.zeros(n, 1, dtype=torch.long), "prompt_mask": torch.ones(n, 1, dtype=torch.long),
              "completion_ids": torch.zeros(n, t, dtype=torch.long), "completion_mask": mask,
              "advantages": adv, "ref_per_token_logps": ref, "num_items_in_batch": torch.tensor(float(num_items))}
    if old is not None:
        inputs["old_per_token_logps"] = old
    return GRPOTrainer._compute_loss(fake, None, inputs)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_loss_equals_trls_on_the_same_inputs(loss_type: str) -> None:
    """Our loss and its gradient against TRL's own loss code, on the same log-probs, advantages and masks."""
    pytest.importorskip("trl")
    g = torch.Generator().manual_seed(1)
    n, t = 6, 7
    mask = (torch.arange(t).unsqueeze(0) < torch.tensor([7, 3, 5, 1, 6, 4]).unsqueeze(1)).long()
    adv = group_advantages(torch.rand(n, generator=g), 3, "group")
    base = torch.rand(n, t, generator=g) * -3
    old = base + 0.4 * (torch.rand(n, t, generator=g) - 0.5)  # ratios on both sides of the clip range
    ref = base + 0.3 * (torch.rand(n, t, generator=g) - 0.5)
    for beta, old_in in ((0.0, None), (0.04, None), (0.04, old)):
        ours_lp = base.clone().requires_grad_(True)
        trl_lp = base.clone().requires_grad_(True)
        ours, _ = grpo_loss(ours_lp, old_in, ref, adv, mask, beta=beta, epsilon_low=0.2, epsilon_high=0.28,
                            loss_type=loss_type, max_completion_length=t + 1, num_items=int(mask.sum()))
        theirs = _trl_loss(loss_type, trl_lp, old_in, ref, adv, mask, beta, 0.2, 0.28, t + 1, int(mask.sum()))
        assert float(ours) == pytest.approx(float(theirs), rel=1e-6, abs=1e-7), (loss_type, beta, old_in is None)
        ours.backward()
        theirs.backward()
        assert torch.allclose(ours_lp.grad, trl_lp.grad, atol=1e-7), (loss_type, beta)


def test_real_grpo_steps_move_lora_and_leave_every_base_weight_bit_identical(train_cfg, tiny_model_dir: Path) -> None:
    from vase.models.loading import load_model
    from vase.pipeline import run_training

    before = {k: v.detach().clone() for k, v in load_model(str(tiny_model_dir)).named_parameters()}
    cfg = train_cfg(["stage=grpo", "stage.batch_size=2", "stage.grad_accum=1", "trainer.max_steps=2",
                     "stage.module.max_completion_length=8", "stage.module.optimizer.lr=1e-2",
                     "stage.module.warmup_ratio=0.0"])
    out = run_training(cfg)
    assert len(out["history"]) == 2
    moved, base_seen = 0, 0
    for name, p in out["module"].model.named_parameters():
        if "lora_B" in name:
            moved += int(p.detach().abs().sum() > 0)  # B starts at zero: any non-zero entry is a real update
        elif "lora_" not in name:
            key = name.replace("base_model.model.", "").replace(".base_layer", "")
            assert torch.equal(p.detach(), before[key]), f"{key} changed"
            base_seen += 1
    assert moved > 0 and base_seen == len(before)  # every base weight was compared


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_logprobs_equal_trls_and_their_gradient_the_full_log_softmaxs(dtype: torch.dtype) -> None:
    """GRPO's log-probabilities without a full-vocabulary copy (vase.models.logprobs) equal TRL's own
    selective_log_softmax, and their gradient equals autograd's through log_softmax + gather, at a temperature."""
    pytest.importorskip("trl")
    from trl.trainer.utils import selective_log_softmax

    from vase.models.logprobs import selected_logprobs

    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(3, 8, 301, generator=g)).to(dtype)
    targets = torch.randint(0, 301, (3, 7), generator=g)
    upstream = torch.randn(3, 7, generator=g)
    ours_in = logits.clone().requires_grad_(True)
    # a slice along the positions, as GRPO passes the model's logits; blocks of 4 do not divide its 7 positions
    ours = selected_logprobs(ours_in[:, :-1], targets, 0.7, rows=4)
    theirs = selective_log_softmax(logits[:, :-1].float() / 0.7, targets)
    assert ours.dtype == torch.float32 and torch.allclose(ours, theirs, atol=1e-5)
    (ours * upstream).sum().backward()
    ref_in = logits.clone().requires_grad_(True)
    ref = torch.log_softmax(ref_in[:, :-1].float() / 0.7, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    (ref * upstream).sum().backward()
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    assert ours_in.grad.dtype == dtype and torch.allclose(ours_in.grad.float(), ref_in.grad.float(), atol=tol)


def test_an_unseeded_run_builds_its_training_loader(synthetic_root: Path, tiny_model_dir: Path) -> None:
    """Direct library use without seeding torch: the loader's order seed was torch's 64-bit initial seed times
    1,000,003 ("Overflow when unpacking long long")."""
    from vase.data.datamodule import VaseDataModule
    from vase.models.loading import load_processor

    torch.manual_seed(2**64 - 1)  # an initial seed as large as an unseeded process may draw
    try:
        dm = VaseDataModule(str(synthetic_root), processor=load_processor(str(tiny_model_dir)), batch_size=2,
                            synthetic={"num_vases": 8, "seed": 0, "val_fraction": 0.25},
                            render={"enabled": True, "resolution": 64, "fov_deg": 35.0})
        dm.prepare_data()
        dm.setup("fit")
        batch = next(iter(dm.train_dataloader()))
        assert batch["input_ids"].shape[0] == 2
    finally:
        torch.manual_seed(0)


def _trl_advantages(per_term: torch.Tensor, weights: torch.Tensor, g: int, aggregation: str,
                    scale: str) -> torch.Tensor:
    """TRL 1.16's own advantage code, the block of GRPOTrainer._generate_and_score_completions that turns the
    per-function rewards into advantages, run as TRL wrote it on the given rewards (its source read from the installed
    package; only ``self`` and the tensors around it are supplied)."""
    import inspect
    import textwrap
    from types import SimpleNamespace

    from trl import GRPOTrainer
    from trl.trainer.utils import nanstd

    src = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    start = src.index('        if self.multi_objective_aggregation == "sum_then_normalize":')
    end = src.index("advantages = torch.nan_to_num(advantages, nan=0.0)", start)
    block = textwrap.dedent(src[start:end]) + "advantages = torch.nan_to_num(advantages, nan=0.0)\n"
    scope = {"self": SimpleNamespace(multi_objective_aggregation=aggregation, reward_weights=weights,
                                     scale_rewards=scale, reward_funcs=[None] * per_term.shape[1]),
             "rewards_per_func": per_term, "num_generations": g, "device": per_term.device,
             "unscorable_mask": torch.isnan(per_term).all(dim=1), "torch": torch, "nanstd": nanstd}
    exec(compile(block, "trl/trainer/grpo_trainer.py (advantages)", "exec"), scope)  # noqa: S102 - TRL's own code
    return scope["advantages"]


@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_equal_trls_under_both_aggregations(aggregation: str, scale: str) -> None:
    """The same per-term rewards (six binary-ish dimension terms, a bonus, a penalty; three groups of four) through
    vase's advantages and TRL 1.16's own code (the installed package): equal to 1e-6 under both aggregations."""
    pytest.importorskip("trl")
    from vase.training.grpo import controlled_advantages

    gen = torch.Generator().manual_seed(3)
    per_term = torch.cat([torch.randint(0, 2, (12, 6), generator=gen).float() * torch.rand(12, 6, generator=gen),
                          torch.rand(12, 1, generator=gen), -torch.rand(12, 1, generator=gen)], dim=1)
    per_term[0:4, 2] = 1.0  # one group tied on a term: its standard deviation is 0 there
    weights = torch.tensor([0.2, 0.2, 0.15, 0.15, 0.2, 0.1, 0.1, 1.0])
    rewards = (per_term * weights).sum(dim=1)
    ours = controlled_advantages(rewards, 4, scale, aggregation=aggregation, per_term=per_term, weights=weights)
    theirs = _trl_advantages(per_term, weights, 4, aggregation, scale)
    assert torch.allclose(ours, theirs, atol=1e-6), (ours, theirs)


def test_decoupling_separates_what_the_sum_collapses() -> None:
    """GDPO's point, on numbers: two completions right on different dimensions tie on the weighted sum and get the
    same advantage under sum_then_normalize; normalised term by term, a rarer success counts more."""
    from vase.training.grpo import controlled_advantages, group_spread

    per_term = torch.tensor([[1., 0.], [0., 1.], [0., 1.], [0., 0.]])  # shape right once, dating right twice
    weights = torch.tensor([0.5, 0.5])
    rewards = (per_term * weights).sum(dim=1)
    summed = controlled_advantages(rewards, 4, "group", per_term=per_term, weights=weights)
    split = controlled_advantages(rewards, 4, "group", aggregation="normalize_then_sum", per_term=per_term,
                                  weights=weights)
    assert torch.isclose(summed[0], summed[1])  # the sum cannot tell them apart
    assert split[0] > split[1] > split[3]  # the rare shape success first, then a dating success, then neither
    spread = group_spread(rewards[:2].repeat(2), 4, per_term=per_term[[0, 1, 0, 1]], names=["shape", "dating"])
    assert spread["frac_sum_ties_terms_differ"] == 1.0 and spread["reward_spread/shape"] > 0


def test_normalize_then_sum_under_ddp_equals_one_process_holding_the_whole_batch(tmp_path: Path) -> None:
    """Over 2 gloo processes, each holding whole groups: the group statistics are each group's own, the final batch
    normalisation gathers every rank's sums, so the advantages equal one process's on the whole batch."""
    per_term = [[[1., 0.], [0., 1.], [1., 1.], [0., 0.]], [[0., 0.], [3., 1.], [1., 0.], [1., 2.]]]
    got = _on_two_ranks(tmp_path, "decoupled", per_term)
    assert torch.allclose(got, _advantages("decoupled", per_term[0] + per_term[1]), atol=1e-6)
    assert not torch.allclose(got[:4], _advantages("decoupled", per_term[0]), atol=1e-3)


def test_the_run_report_says_how_advantages_were_made_and_what_the_groups_held(tmp_path: Path) -> None:
    """The run report's training section names the aggregation and shows, over the run, the share of groups with no
    spread, the share whose sum tied while the terms differed, and each term's spread within a group."""
    from vase.reports.report import write_report

    history = [{"step": float(s), "loss": 0.1, "reward": 0.3, "frac_reward_zero_std": 0.5,
                "frac_sum_ties_terms_differ": 0.25 if s % 2 else 0.75, "reward_spread/shape": 0.2,
                "reward_spread/dating": 0.0} for s in range(4)]
    rows = {"tiny (grpo)": {"lexical_similarity": 0.1, "overall_score": 0.2}}
    path = write_report(tmp_path, rows, {"grpo": history}, None, aggregations={"grpo": "normalize_then_sum"})
    md = path.read_text()
    assert "stage.module.multi_objective_aggregation=normalize_then_sum" in md
    assert "no spread in 50 % of them; the sum tied while the terms differed in 50 %" in md
    assert "shape 0.200, dating 0.000" in md


@pytest.mark.parametrize("head", ["lora", "modules_to_save", "frozen"])
def test_the_head_inside_the_chunks_gives_todays_logprobs_gradients_and_trls(head: str, tiny_model_dir: Path) -> None:
    """GRPO's log-probabilities with the output head inside the chunks (issue 58: the policy's forward kept every
    completion position's logits, 1.2 GiB at 8 x 257 tokens of Qwen's vocabulary) equal the full-logits path's and
    TRL's selective_log_softmax on the same inputs, and every trainable weight's gradient equals the full path's:
    LoRA on the head, the head as a module to save, and a frozen head; chunks of 3 positions, which do not divide 8."""
    from types import SimpleNamespace

    from peft import LoraConfig, get_peft_model
    from trl.trainer.utils import selective_log_softmax

    from vase.models.loading import load_model
    from vase.models.logprobs import selected_logprobs
    from vase.training.grpo import GRPOModule

    torch.manual_seed(0)
    targets_lora = ["q_proj", "v_proj"] + (["lm_head"] if head == "lora" else [])
    model = get_peft_model(load_model(str(tiny_model_dir)), LoraConfig(
        r=4, lora_alpha=8, target_modules=targets_lora, init_lora_weights=False,
        modules_to_save=["lm_head"] if head == "modules_to_save" else None))
    ids = torch.randint(10, 200, (3, 20))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "mm_token_type_ids": torch.zeros_like(ids)}
    n, temperature = 8, 0.7
    upstream = torch.randn(3, n)
    trainable = {k: p for k, p in model.named_parameters() if p.requires_grad}
    assert any("lm_head" in k for k in trainable) == (head != "frozen")

    full = model(**inputs, logits_to_keep=n + 1).logits[:, :-1]
    before = selected_logprobs(full, ids[:, -n:], temperature)
    (before * upstream).sum().backward()
    grads = {k: p.grad.clone() for k, p in trainable.items()}
    model.zero_grad(set_to_none=True)

    import vase.models.logprobs as logprobs

    old_budget = logprobs.HEAD_CHUNK_ELEMENTS
    logprobs.HEAD_CHUNK_ELEMENTS = 3 * 3 * model.get_output_embeddings().weight.shape[0]  # 3 positions a chunk
    try:
        after = GRPOModule._logps(SimpleNamespace(temperature=temperature), model, inputs, n)
    finally:
        logprobs.HEAD_CHUNK_ELEMENTS = old_budget
    (after * upstream).sum().backward()
    assert torch.allclose(after, before, atol=1e-5)
    theirs = selective_log_softmax(full.detach().float() / temperature, ids[:, -n:])
    assert torch.allclose(after.detach(), theirs, atol=1e-5)
    for k, p in trainable.items():
        assert p.grad is not None and torch.allclose(p.grad, grads[k], rtol=1e-4, atol=1e-6), k
    with torch.no_grad(), model.disable_adapter():  # the reference: the adapter off, no gradient, no checkpointing
        ref = GRPOModule._logps(SimpleNamespace(temperature=temperature), model, inputs, n)
        base = selected_logprobs(model(**inputs, logits_to_keep=n + 1).logits[:, :-1], ids[:, -n:], temperature)
    assert torch.allclose(ref, base, atol=1e-5) and not torch.allclose(ref, after.detach(), atol=1e-4)
