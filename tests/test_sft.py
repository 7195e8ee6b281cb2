"""SFT: loss on answer tokens only, LoRA weights move, base weights do not, the adapter saves in peft format."""

from __future__ import annotations

from pathlib import Path

import torch

from vase.data.datamodule import IGNORE_INDEX, ChatSample, SFTCollator
from vase.data.dataset import VaseDataset
from vase.models.loading import load_model, load_processor
from vase.training.sft import warmup_cosine


def test_labels_cover_exactly_the_answer(tiny_model_dir: Path, synthetic_root: Path) -> None:
    proc = load_processor(str(tiny_model_dir))
    ex = VaseDataset(synthetic_root, "train")[0]
    answers = ["Athenian black-figure amphora.", "A much longer answer, with several more words in it."]
    batch = [
        ChatSample("a", ex.images, "Describe the vase.", answers[0]),
        ChatSample("b", ex.images[:2], "What is the fabric of the vase?", answers[1]),
    ]
    out = SFTCollator(proc)(batch)
    tok = proc.tokenizer
    for b, ans in enumerate(answers):
        lab = out["labels"][b]
        kept = lab[lab != IGNORE_INDEX].tolist()
        assert tok.decode(kept) == ans + "<|im_end|>\n"
        # the supervised tokens sit at the end of the unpadded row, right after the prompt
        n = int(out["attention_mask"][b].sum())
        assert (lab[n - len(kept) : n] != IGNORE_INDEX).all() and (lab[: n - len(kept)] == IGNORE_INDEX).all()
        assert (out["input_ids"][b, n - len(kept) : n] == lab[n - len(kept) : n]).all()
    assert out["image_grid_thw"].shape[0] == 8  # 6 + 2 images


def test_training_batch_sees_the_same_positions_as_generation(tiny_model_dir: Path, synthetic_root: Path) -> None:
    """The collated SFT batch must give the prompt the same 3D (mrope) positions as the processor's own encoding,
    which is what generation uses; otherwise the model trains on one position scheme and is served another."""
    from vase.data.datamodule import prompt_text

    proc = load_processor(str(tiny_model_dir))
    model = load_model(str(tiny_model_dir)).eval()
    ex = VaseDataset(synthetic_root, "train")[0]
    batch = SFTCollator(proc)([ChatSample("a", ex.images, "Describe the vase.", "Athenian black-figure amphora.")])
    enc = proc(text=[prompt_text(proc, len(ex.images), "Describe the vase.")], images=[ex.images], return_tensors="pt")
    n = enc["input_ids"].shape[1]
    with torch.no_grad():
        train_logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits[0, :n]
        gen_logits = model(**enc).logits[0]
    assert torch.allclose(train_logits, gen_logits, atol=1e-5)


def test_warmup_cosine_by_hand() -> None:
    assert warmup_cosine(0, total=100, warmup=10) == 0.1
    assert warmup_cosine(9, total=100, warmup=10) == 1.0
    assert abs(warmup_cosine(55, total=100, warmup=10) - 0.5) < 1e-9
    assert warmup_cosine(100, total=100, warmup=10) == 0.0


def test_two_step_sft_moves_lora_only(train_cfg, tiny_model_dir: Path) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(["stage.module.optimizer.lr=1e-2", "stage.module.warmup_ratio=0.0"])
    assert Path(cfg.model.name_or_path) == tiny_model_dir  # model=tiny resolves to the spec-keyed cache folder
    base = load_model(str(tiny_model_dir))
    before = {k: v.clone() for k, v in base.state_dict().items()}
    out = run_training(cfg)
    module = out["module"]
    assert len(out["history"]) == 2
    moved_lora, moved_base = 0, 0
    # LoRA B matrices start at zero and must have moved; every base weight is bit-identical
    for name, p in module.model.named_parameters():
        if "lora_B" in name:
            moved_lora += int(p.detach().abs().sum() > 0)
        elif "lora_" not in name:
            key = name.replace("base_model.model.", "").replace(".base_layer", "")
            assert key in before, key
            moved_base += int(not torch.equal(p.detach(), before[key]))
    assert moved_lora > 0
    assert moved_base == 0
    # vision tower frozen: no adapter inside it
    assert not any("visual" in n and "lora_" in n for n, _ in module.model.named_parameters())
    adapter = Path(cfg.paths.output_dir) / "adapter"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    # the checkpoint holds trainable weights only, and resumes
    ckpt = torch.load(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["state_dict"] and all("lora_" in k for k in ckpt["state_dict"])
    # the saved adapter reloads onto the base model and reproduces the trained weights
    from peft import PeftModel

    reloaded = PeftModel.from_pretrained(load_model(str(tiny_model_dir)), adapter)
    a = dict(module.model.named_parameters())
    for n, p in reloaded.named_parameters():
        if "lora_B" in n:
            assert torch.allclose(p, a[n].detach())


def test_resume_from_checkpoint_continues(train_cfg) -> None:
    from vase.pipeline import run_training

    # 6 training vases in batches of 2: 3 optimizer steps per epoch
    first = train_cfg(["trainer.max_steps=-1", "stage.epochs=1"])
    out = run_training(first)
    assert len(out["history"]) == 3
    ckpt = Path(first.paths.output_dir) / "checkpoints" / "last.ckpt"
    second = train_cfg([f"ckpt_path={ckpt}", "trainer.max_steps=-1", "stage.epochs=2"])
    out2 = run_training(second)
    # the first epoch came from the checkpoint (its history too); only the second ran, continuing the step count
    assert [h["step"] for h in out2["history"]] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert out2["history"][:3] == out["history"]


def test_data_task_all_teaches_multiple_choice_with_the_evaluations_options() -> None:
    import numpy as np

    from vase.annotate.dimension_sampling import sample_record
    from vase.annotate.multiple_choice import LETTERS, mc_options
    from vase.data.datamodule import samples_for
    from vase.data.dataset import VaseExample

    rec = sample_record(np.random.default_rng(3), 0)
    samples = samples_for(VaseExample(rec, []), "all")
    assert len(samples) == 1 + 6 + 6
    mc = [s for s in samples if "#mc#" in s.id]
    for s in mc:
        options, answer = mc_options(rec, s.dimension)
        assert s.answer == LETTERS[answer] and all(f"{LETTERS[i]}. {o}" in s.prompt for i, o in enumerate(options))
        assert options[answer] == rec.dimension_text(s.dimension)
