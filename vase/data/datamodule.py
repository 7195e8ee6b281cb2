"""The Lightning data module: synthesis and rendering in ``prepare_data``, Qwen2.5-VL chat batches in the loaders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from vase.annotate.vocab import DIMENSIONS
from vase.data.dataset import VIEWS, VaseDataset, VaseExample, VideoFrames
from vase.prompts import CAPTION_PROMPT

IGNORE_INDEX = -100


@dataclass
class ChatSample:
    """One conversation turn: the images, the user's question and (for training) the answer."""

    id: str
    images: list[Any]
    prompt: str
    answer: str
    dimension: str = "caption"
    target: dict[str, Any] | None = None  # the six dimensions the answer should state (for rewards)


def samples_for(example: VaseExample, task: str) -> list[ChatSample]:
    """The chat samples of one vase: its caption (task ``caption``), its QA pairs (``qa``) or both (``both``)."""
    rec = example.record
    fields = {d: (list(rec.dating) if d == "dating" else getattr(rec, d)) for d in DIMENSIONS}
    out = []
    if task in ("caption", "both"):
        out.append(ChatSample(rec.id, example.images, CAPTION_PROMPT, rec.caption, target=fields))
    if task in ("qa", "both"):
        # a QA answer states one dimension: the others are not expected of it
        out += [ChatSample(f"{rec.id}#{q['dimension']}", example.images, q["question"], q["answer"], q["dimension"],
                           target={d: (v if d == q["dimension"] else None) for d, v in fields.items()})
                for q in rec.qa]
    if not out:
        raise ValueError(f"data.task={task!r} must be one of caption, qa, both")
    return out


def build_messages(visuals: Any, prompt: str) -> list[dict[str, Any]]:
    """A user turn with the visuals (``VideoFrames``: one video; a list of views: one image each, or a count of
    images) followed by the prompt, in the processor's chat format."""
    if isinstance(visuals, VideoFrames):
        parts = [{"type": "video"}]
    else:
        n = visuals if isinstance(visuals, int) else len(visuals)
        parts = [{"type": "image"} for _ in range(n)]
    return [{"role": "user", "content": parts + [{"type": "text", "text": prompt}]}]


def prompt_text(processor: Any, visuals: Any, prompt: str) -> str:
    return processor.apply_chat_template(build_messages(visuals, prompt), add_generation_prompt=True, tokenize=False)


VISUAL_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")


def encode_prompts(processor: Any, prompts: list[str], visuals: list[Any], padding_side: str) -> Any:
    """Tokenise chat prompts with their views (as images) or orbit frames (as one video each)."""
    videos = [isinstance(v, VideoFrames) for v in visuals]
    if any(videos) and not all(videos):
        raise ValueError("a batch mixes orbit videos and multi-view images; use one data.modality per run")
    texts = [prompt_text(processor, v, p) for v, p in zip(visuals, prompts)]
    if videos and all(videos):
        return processor(text=texts, videos=[list(v) for v in visuals], do_sample_frames=False, return_tensors="pt",
                         padding=True, padding_side=padding_side)
    return processor(text=texts, images=visuals, return_tensors="pt", padding=True, padding_side=padding_side)


class ChatDataset(Dataset):
    """Flattens a VaseDataset into chat samples (several per vase for QA)."""

    def __init__(self, base: VaseDataset, task: str) -> None:
        self.base = base
        self.task = task
        per = len(samples_for(VaseExample(base.records[0], []), task)) if len(base) else 0
        self.index = [(i, j) for i in range(len(base)) for j in range(per)]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> ChatSample:
        i, j = self.index[k]
        return samples_for(self.base[i], self.task)[j]


class SFTCollator:
    """Tokenises prompt and answer; the loss falls on the answer tokens (and the closing <|im_end|>) only.

    The answer is tokenised on its own and appended to the processed prompt, so the prompt's image placeholders
    are expanded once, by the processor, and the label mask is exact.
    """

    def __init__(self, processor: Any, max_length: int = 4096) -> None:
        self.processor = processor
        self.max_length = max_length
        tok = processor.tokenizer
        self.end_ids = tok("<|im_end|>\n", add_special_tokens=False)["input_ids"]
        self.pad_id = tok.pad_token_id

    def __call__(self, batch: list[ChatSample]) -> dict[str, torch.Tensor]:
        enc = encode_prompts(self.processor, [s.prompt for s in batch], [s.images for s in batch], "right")
        rows, labels, types = [], [], []
        for b, s in enumerate(batch):
            n = int(enc["attention_mask"][b].sum())
            prompt_ids = enc["input_ids"][b, :n].tolist()
            ans_ids = self.processor.tokenizer(s.answer, add_special_tokens=False)["input_ids"] + self.end_ids
            ids = prompt_ids + ans_ids
            lab = [IGNORE_INDEX] * len(prompt_ids) + ans_ids
            # mm_token_type_ids mark the image tokens; without them the model cannot build its 3D (mrope)
            # positions and would train on plain 1D positions, unlike generation
            mm = enc["mm_token_type_ids"][b, :n].tolist() + [0] * len(ans_ids)
            if len(ids) > self.max_length:
                if len(prompt_ids) >= self.max_length:
                    raise ValueError(f"sample {s.id}: prompt alone is {len(prompt_ids)} tokens, over "
                                     f"data.max_length={self.max_length}; lower model.processor.max_pixels")
                ids, lab, mm = ids[: self.max_length], lab[: self.max_length], mm[: self.max_length]
            rows.append(ids)
            labels.append(lab)
            types.append(mm)
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        label_t = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        mm_t = torch.zeros((len(rows), width), dtype=enc["mm_token_type_ids"].dtype)
        for b, (ids, lab, mm) in enumerate(zip(rows, labels, types)):
            input_ids[b, : len(ids)] = torch.tensor(ids)
            label_t[b, : len(lab)] = torch.tensor(lab)
            attn[b, : len(ids)] = 1
            mm_t[b, : len(mm)] = torch.tensor(mm)
        return {"input_ids": input_ids, "attention_mask": attn, "labels": label_t, "mm_token_type_ids": mm_t,
                **{k: enc[k] for k in VISUAL_KEYS if k in enc}}


class PromptCollator:
    """Prompts only, left-padded for generation, with what a reward needs: targets, reference answers, images."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor

    def __call__(self, batch: list[ChatSample]) -> dict[str, Any]:
        enc = encode_prompts(self.processor, [s.prompt for s in batch], [s.images for s in batch], "left")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                "mm_token_type_ids": enc["mm_token_type_ids"], **{k: enc[k] for k in VISUAL_KEYS if k in enc},
                "targets": [s.target for s in batch], "reference": [s.answer for s in batch],
                "ids": [s.id for s in batch], "images": [s.images for s in batch]}


class VaseDataModule(pl.LightningDataModule):
    """Data for one run: generate the synthetic set if configured, render views, then serve chat batches."""

    def __init__(self, root: str, views: list[str] | tuple[str, ...] = VIEWS, batch_size: int = 1,
                 eval_batch_size: int = 8, num_workers: int = 0, task: str = "caption", max_length: int = 4096,
                 synthetic: dict | None = None, render: dict | None = None, limit_train: int | None = None,
                 limit_val: int | None = None, processor: Any = None, stage: str = "sft",
                 modality: str = "views") -> None:
        super().__init__()
        self.root = Path(root)
        self.views = tuple(views)
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.task = task
        self.max_length = max_length
        self.synthetic = dict(synthetic) if synthetic else None
        self.render = dict(render) if render else {"enabled": False}
        self.limit_train = limit_train
        self.limit_val = limit_val
        self.processor = processor
        self.stage = stage  # sft batches carry answers as labels; grpo batches carry prompts and targets
        self.modality = modality  # views: six images per vase; orbit: the 360-degree frames as one video
        self.train_set: VaseDataset | None = None
        self.val_set: VaseDataset | None = None

    def prepare_data(self) -> None:
        """Synthesise (when configured) and render; both are cached and safe to call again."""
        from vase.data.dataset import load_annotations

        if self.synthetic:
            from vase.data.synthetic import generate

            generate(self.root, num=int(self.synthetic["num_vases"]), seed=int(self.synthetic["seed"]),
                     val_fraction=float(self.synthetic["val_fraction"]))
        if self.render.get("enabled", False):
            from vase.render import RenderSettings, render_dataset

            settings = RenderSettings(resolution=int(self.render["resolution"]), fov_deg=float(self.render["fov_deg"]))
            pairs = []
            for split in ("train", "val"):
                ann = self.root / "annotations" / f"{split}.json"
                pairs += [(r.id, r.model or f"models/{r.id}.glb") for r in load_annotations(ann)]
            render_dataset(self.root, pairs, settings, views=self.views,
                           orbit_frames=int(self.render.get("orbit_frames", 0)))

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            self.train_set = VaseDataset(self.root, "train", self.views, self.limit_train, modality=self.modality)
            self.val_set = VaseDataset(self.root, "val", self.views, self.limit_val, modality=self.modality)

    def train_dataloader(self) -> DataLoader:
        if self.processor is None:
            raise RuntimeError("VaseDataModule needs a processor before it can build batches")
        collate = (PromptCollator(self.processor) if self.stage == "grpo"
                   else SFTCollator(self.processor, self.max_length))
        return DataLoader(ChatDataset(self.train_set, self.task), batch_size=self.batch_size, shuffle=True,
                          num_workers=self.num_workers, collate_fn=collate, persistent_workers=self.num_workers > 0)
