"""The six-head attribute baseline (ArtSeek's multitask classifier, for 3D vases): frozen features of a vase's views
(CLIP image embeddings, or the weight-free view descriptor: ``attributes.features``, as the retrieval index chooses),
a small shared trunk, one classification head per dimension, trained with Lightning.

    python evaluate.py action=attributes                       # train on the train split, score the val split
    python evaluate.py action=attributes data=vasevqa3d data.root=/data/VaseVQA-3D metrics=paper

Classes are the values seen in training (dating: the (start, end) intervals seen); a value never seen in training
cannot be predicted and counts as wrong. Its predictions are answered as text and scored by the same open-ended VQA
rule as the VLMs (``vase.eval.vqa.score_vqa``), so it sits in the same per-dimension table.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy

from vase.annotate.vocab import DIMENSIONS, QUESTIONS, format_dating
from vase.errors import ConfigError
from vase.io import atomic_write_bytes, load_tensors
from vase.metrics.features import encoder_from_record, view_encoder
from vase.progress import progress_bar


def label_of(rec: Any, dim: str) -> str | None:
    """A record's value of ``dim`` as a class label (dating as ``start..end``), None when unknown."""
    v = getattr(rec, dim)
    if v is None:
        return None
    return f"{v[0]}..{v[1]}" if dim == "dating" else str(v)


def answer_text(dim: str, label: str) -> str:
    """The predicted class as the answer a VQA reference would read."""
    if dim == "dating":
        a, b = (int(x) for x in label.split(".."))
        text = format_dating(a, b)
    else:
        text = label
    return text[0].upper() + text[1:] + "."


@torch.inference_mode()
def view_features(dataset: Any, encoder: Any, progress: bool = True) -> torch.Tensor:
    """One row per vase: its views' normalised image features (CLIP or the view descriptor), concatenated in view
    order."""
    rows = []
    it: Any = range(len(dataset))
    if progress:
        it = progress_bar(it, desc="encoding views", unit="vase")
    for i in it:
        f = encoder.encode_images(dataset[i].images)
        rows.append((f / f.norm(dim=-1, keepdim=True)).flatten())
    return torch.stack(rows)


class AttributeHeads(pl.LightningModule):
    """A shared MLP trunk over frozen features and one linear head per dimension; loss = sum of cross-entropies."""

    def __init__(self, in_dim: int, classes: dict[str, list[str]], hidden: int = 256, dropout: float = 0.2,
                 lr: float = 3e-3, weight_decay: float = 1e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.classes = classes
        self.trunk = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, hidden), nn.GELU(), nn.Dropout(dropout))
        self.heads = nn.ModuleDict({d: nn.Linear(hidden, len(c)) for d, c in classes.items()})
        self.acc = nn.ModuleDict({d: MulticlassAccuracy(num_classes=max(2, len(c)), average="micro",
                                                        ignore_index=-100) for d, c in classes.items()})

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.trunk(x)
        return {d: head(h) for d, head in self.heads.items()}

    def _loss(self, batch: tuple) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        x, y = batch
        out = self(x)
        loss = sum(nn.functional.cross_entropy(out[d], y[:, k], ignore_index=-100)
                   for k, d in enumerate(self.classes) if (y[:, k] != -100).any())
        return loss, out

    def training_step(self, batch: tuple, _: int) -> torch.Tensor:
        loss, _ = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[0]))
        return loss

    def validation_step(self, batch: tuple, _: int) -> None:
        loss, out = self._loss(batch)
        self.log("val/loss", loss, batch_size=len(batch[0]))
        for k, d in enumerate(self.classes):
            self.acc[d].update(out[d].argmax(-1), batch[1][:, k])

    def on_validation_epoch_end(self) -> None:
        for d, m in self.acc.items():
            self.log(f"val/acc/{d}", m.compute())
            m.reset()

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)


def targets(records: list[Any], classes: dict[str, list[str]]) -> torch.Tensor:
    """Class indices per record and dimension; -100 where unknown or never seen in training."""
    index = {d: {c: i for i, c in enumerate(cs)} for d, cs in classes.items()}
    return torch.tensor([[index[d].get(label_of(r, d), -100) if label_of(r, d) is not None else -100
                          for d in classes] for r in records], dtype=torch.long)


def train_attribute_heads(train_x: torch.Tensor, train_records: list[Any], val_x: torch.Tensor,
                          val_records: list[Any], epochs: int = 60, batch_size: int = 32, seed: int = 0,
                          out_dir: str | None = None, **hparams: Any) -> AttributeHeads:
    """Fit the heads on the training vases (classes from their labels), validating on the val vases."""
    pl.seed_everything(seed, workers=True)
    classes = {d: sorted({label_of(r, d) for r in train_records if label_of(r, d) is not None}) for d in DIMENSIONS}
    classes = {d: c for d, c in classes.items() if c}
    model = AttributeHeads(train_x.shape[1], classes, **hparams)
    train = DataLoader(TensorDataset(train_x, targets(train_records, classes)), batch_size=batch_size, shuffle=True,
                       generator=torch.Generator().manual_seed(seed))
    val = DataLoader(TensorDataset(val_x, targets(val_records, classes)), batch_size=256)
    trainer = pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_model_summary=False, deterministic=True, default_root_dir=out_dir,
                         enable_progress_bar=False)
    trainer.fit(model, train, val)
    return model.eval()


def fit_heads(section: Any, train: Any, evald: Any, seed: int, key: str = "attributes",
              progress: bool = True) -> tuple[AttributeHeads, dict[str, Any], torch.Tensor]:
    """The six heads of ``section`` (``attributes``: features, encoder, hidden, dropout, lr, epochs, batch_size)
    trained on the ``train`` dataset's vases alone (``evald`` only validates); returns the heads, the record of their
    encoder (saved with them) and ``evald``'s features."""
    encoder, record = view_encoder(section, key)
    tx, ex = view_features(train, encoder, progress), view_features(evald, encoder, progress)
    model = train_attribute_heads(tx, train.records, ex, evald.records, epochs=int(section.get("epochs", 60)),
                                  batch_size=int(section.get("batch_size", 32)), seed=int(seed),
                                  hidden=int(section.get("hidden", 256)), dropout=float(section.get("dropout", 0.2)),
                                  lr=float(section.get("lr", 3e-3)))
    return model, record, ex


@torch.inference_mode()
def predict_rows(model: AttributeHeads, x: torch.Tensor, records: list[Any]) -> list[dict[str, Any]]:
    """Open-ended VQA rows (as the VLMs' generations are): the predicted class as the answer to each question."""
    out = model(x)
    rows = []
    for i, rec in enumerate(records):
        for d, cs in model.classes.items():
            if getattr(rec, d) is None:
                continue
            rows.append({"id": f"{rec.id}#open#{d}", "caption": answer_text(d, cs[int(out[d][i].argmax())]),
                         "reference": rec.dimension_text(d)[0].upper() + rec.dimension_text(d)[1:] + ".",
                         "dimension": d, "protocol": "open", "question": QUESTIONS[d]})
    return rows


def majority_label(train_records: list[Any], dim: str) -> str | None:
    """The training vases' most frequent value of ``dim`` as a class label (None when none has one)."""
    labels = [label_of(r, dim) for r in train_records if label_of(r, dim) is not None]
    return Counter(labels).most_common(1)[0][0] if labels else None


def majority_rows(train_records: list[Any], records: list[Any]) -> list[dict[str, Any]]:
    """The same rows from always answering the most frequent training value: the chance level to beat."""
    rows = []
    for d in DIMENSIONS:
        top = majority_label(train_records, d)
        if top is None:
            continue
        for rec in records:
            if getattr(rec, d) is not None:
                rows.append({"id": f"{rec.id}#open#{d}", "caption": answer_text(d, top),
                             "reference": rec.dimension_text(d)[0].upper() + rec.dimension_text(d)[1:] + ".",
                             "dimension": d, "protocol": "open"})
    return rows


@torch.inference_mode()
def heads_accuracy(model: Any, x: torch.Tensor, records: list[Any], train_records: list[Any]) -> dict[str, Any]:
    """Per dimension, how often the heads' top class is the vase's own value, and how often the training vases'
    most frequent value is (the level the classifier must beat to teach anything)."""
    out = model(x)
    acc = {}
    for d, classes in model.classes.items():
        known = [(i, label_of(r, d)) for i, r in enumerate(records) if label_of(r, d) is not None]
        if not known:
            continue
        top = majority_label(train_records, d)
        right = sum(classes[int(out[d][i].argmax())] == lab for i, lab in known)
        acc[d] = {"heads": right / len(known), "majority": sum(lab == top for _, lab in known) / len(known),
                  "n": len(known)}
    return acc


def save_heads(model: AttributeHeads, encoder_record: dict, path: Any) -> Any:
    """The trained heads with what rebuilds them (classes, sizes) and the encoder that made their features
    (`vase.metrics.features.view_encoder`'s record)."""
    buf = io.BytesIO()
    torch.save({"hparams": dict(model.hparams), "state_dict": model.state_dict(), "encoder": encoder_record}, buf)
    return atomic_write_bytes(path, buf.getvalue())


class AttributePredictor:
    """A saved six-head model as a predictor: a vase's views -> the six dimensions as answer texts (the learned
    reward term asks a completion to agree with it)."""

    def __init__(self, path: Any) -> None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"reward.terms.learned.checkpoint={path}: no such file (python evaluate.py action=attributes "
                              f"writes one beside its output; checkpoint=train trains one on the run's training vases)")
        blob = load_tensors(path, "reward.terms.learned.checkpoint")
        self.model = AttributeHeads(**blob["hparams"])
        self.model.load_state_dict(blob["state_dict"])
        self.model.eval()
        self.encoder = encoder_from_record(blob["encoder"])

    @torch.inference_mode()
    def predict(self, images: list[Any]) -> dict[str, str]:
        f = self.encoder.encode_images(images)
        x = (f / f.norm(dim=-1, keepdim=True)).flatten()[None]
        out = self.model(x)
        return {d: answer_text(d, cs[int(out[d][0].argmax())]).rstrip(".") for d, cs in self.model.classes.items()}
