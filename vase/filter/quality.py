"""The photo quality classifier: a torchvision ResNet-50 trained with Lightning on ``0/`` bad, ``1/`` good folders.

    python -m vase.filter action=train_quality filter.quality.train_dir=/data/labelled   # writes quality_classifier.pt
    python -m vase.filter filter.input=/data/photos filter.quality.checkpoint=<run>/quality_classifier.pt

ImageNet weights come from a local file (``filter.quality.imagenet_weights=/models/resnet50-11ad3fa6.pth``, the
torchvision release file); without one the network starts from random weights. ``filter.quality.width_per_group``
and ``layers`` shrink it for tests; the default is the paper's ResNet-50.
"""

from __future__ import annotations

import io
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchmetrics import MetricCollection
from torchmetrics.classification import BinaryAccuracy, BinaryAUROC, BinaryPrecision, BinaryRecall

from vase.errors import ConfigError, DataError
from vase.images import IMAGE_EXTENSIONS, open_photo
from vase.io import atomic_write_bytes, load_tensors

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RESNET50_LAYERS = (3, 4, 6, 3)


@dataclass
class ResNetSpec:
    """What builds the network; saved in the exported file so that inference rebuilds it exactly."""

    layers: tuple[int, ...] = RESNET50_LAYERS
    width_per_group: int = 64
    image_size: int = 224

    def build(self, imagenet_weights: str | None = None) -> nn.Module:
        # lazy: torchvision
        from torchvision.models.resnet import Bottleneck, ResNet

        net = ResNet(Bottleneck, list(self.layers), width_per_group=self.width_per_group)
        if imagenet_weights:
            path = Path(imagenet_weights)
            if tuple(self.layers) != RESNET50_LAYERS or self.width_per_group != 64:
                raise ConfigError(f"filter.quality.imagenet_weights={path} fits a ResNet-50; this network has layers="
                                  f"{list(self.layers)}, width_per_group={self.width_per_group}")
            if not path.is_file():
                raise ConfigError(f"filter.quality.imagenet_weights={path}: no such file")
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
                net.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
            except Exception as e:
                raise ConfigError(f"filter.quality.imagenet_weights={path}: not ResNet-50 weights ({e})") from e
        net.fc = nn.Linear(net.fc.in_features, 1)  # one logit: P(good)
        return net


def train_transform(size: int) -> Any:
    """Augmentation as for any photo classifier: crops, flips, light colour jitter."""
    # lazy: torchvision
    from torchvision import transforms as T

    return T.Compose([T.RandomResizedCrop(size, scale=(0.6, 1.0)), T.RandomHorizontalFlip(),
                      T.ColorJitter(0.2, 0.2, 0.2), T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def eval_transform(size: int) -> Any:
    # lazy: torchvision
    from torchvision import transforms as T

    return T.Compose([T.Resize(size, antialias=True), T.CenterCrop(size), T.ToTensor(),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def labelled_files(root: str | Path) -> list[tuple[Path, int]]:
    """``(file, label)`` for every image under ``root/0`` (bad) and ``root/1`` (good), sorted."""
    root = Path(root)
    missing = [d for d in ("0", "1") if not (root / d).is_dir()]
    if missing:
        raise DataError(f"{root}: a quality training folder needs sub-folders 0/ (bad) and 1/ (good); missing {missing}")
    out = [(p, label) for label in (0, 1) for p in sorted((root / str(label)).rglob("*"))
           if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS]
    for label in (0, 1):
        if not any(lab == label for _, lab in out):
            raise DataError(f"{root / str(label)}: no images; both classes need examples")
    return out


class _Photos(Dataset):
    def __init__(self, items: list[tuple[Path, int]], transform: Any, min_side: int) -> None:
        self.items, self.transform, self.min_side = items, transform, min_side

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        path, label = self.items[i]
        d = open_photo(path, min_side=self.min_side)
        if d.image is None:  # a labelled file that cannot be read would silently skew the classes: stop, name it
            raise DataError(f"{path}: labelled {label} but {d.reason}; remove or replace it")
        return self.transform(d.image), torch.tensor(float(label))


class PhotoFolderDataModule(pl.LightningDataModule):
    """A labelled photo folder split into train and val by a seeded shuffle within each class."""

    def __init__(self, root: str, image_size: int = 224, val_fraction: float = 0.2, batch_size: int = 32,
                 num_workers: int = 0, seed: int = 0, min_side: int = 32) -> None:
        super().__init__()
        self.root, self.size, self.val_fraction = root, image_size, val_fraction
        self.batch_size, self.num_workers, self.seed, self.min_side = batch_size, num_workers, seed, min_side

    def setup(self, stage: str | None = None) -> None:
        items = labelled_files(self.root)
        rng = random.Random(self.seed)
        self.train_items, self.val_items = [], []
        for label in (0, 1):
            cls = [it for it in items if it[1] == label]
            rng.shuffle(cls)
            n_val = max(1, round(len(cls) * self.val_fraction))
            self.val_items += cls[:n_val]
            self.train_items += cls[n_val:]
        if not self.train_items:
            raise DataError(f"{self.root}: too few images to leave any for training")

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_Photos(self.train_items, train_transform(self.size), self.min_side), self.batch_size,
                          shuffle=True, num_workers=self.num_workers, generator=torch.Generator().manual_seed(self.seed))

    def val_dataloader(self) -> DataLoader:
        return DataLoader(_Photos(self.val_items, eval_transform(self.size), self.min_side), self.batch_size,
                          num_workers=self.num_workers)


class QualityClassifier(pl.LightningModule):
    """Binary good/bad photo classifier; logs ``val/acc``, ``val/precision``, ``val/recall``, ``val/auroc``."""

    def __init__(self, spec: dict, imagenet_weights: str | None = None, lr: float = 1e-3,
                 weight_decay: float = 1e-4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.spec = ResNetSpec(**{**spec, "layers": tuple(spec.get("layers", RESNET50_LAYERS))})
        self.net = self.spec.build(imagenet_weights)
        self.val_metrics = MetricCollection({"acc": BinaryAccuracy(), "precision": BinaryPrecision(),
                                             "recall": BinaryRecall(), "auroc": BinaryAUROC()}, prefix="val/")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch: tuple, _: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.binary_cross_entropy_with_logits(self(x), y)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(y))
        return loss

    def validation_step(self, batch: tuple, _: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val/loss", nn.functional.binary_cross_entropy_with_logits(logits, y), batch_size=len(y))
        self.val_metrics.update(torch.sigmoid(logits), y.long())

    def on_validation_epoch_end(self) -> None:
        self.log_dict(self.val_metrics.compute(), prog_bar=True)
        self.val_metrics.reset()

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)


@dataclass
class QualityExport:
    """What ``quality_classifier.pt`` holds: the spec, the weights and the best validation metrics."""

    spec: dict
    state_dict: dict
    metrics: dict = field(default_factory=dict)


def export_best(ckpt_path: str | Path, out: str | Path, metrics: dict) -> Path:
    """Write the best Lightning checkpoint's network as a small inference file (atomically)."""
    ck = load_tensors(ckpt_path, "the best quality checkpoint")
    spec = ck["hyper_parameters"]["spec"]
    state = {k[len("net."):]: v for k, v in ck["state_dict"].items() if k.startswith("net.")}
    buf = io.BytesIO()
    torch.save(asdict(QualityExport(dict(spec), state, metrics)), buf)
    return atomic_write_bytes(out, buf.getvalue())


class QualityScorer:
    """P(good) of a batch of photos from an exported classifier; its transform runs in DataLoader workers."""

    def __init__(self, path: str | Path, device: str = "cpu") -> None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"filter.quality.checkpoint={path}: no such file; train one with "
                              f"python -m vase.filter action=train_quality")
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            spec = blob["spec"]
            self.spec = ResNetSpec(**{**spec, "layers": tuple(spec["layers"])})
            self.net = self.spec.build()
            self.net.load_state_dict(blob["state_dict"])
        except Exception as e:
            raise ConfigError(f"filter.quality.checkpoint={path}: not a vase quality classifier ({e})") from e
        self.net.eval().to(device)
        self.device = device
        self.transform = eval_transform(self.spec.image_size)

    @torch.inference_mode()
    def __call__(self, px: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(px.to(self.device)).squeeze(-1)).float().cpu()


def train_quality(cfg: Any, out_dir: str | Path) -> Path:
    """Train on ``cfg.train_dir`` (``0/``, ``1/``), keep the best checkpoint by val/auroc, export it to
    ``out_dir/quality_classifier.pt`` and return that path."""
    if not cfg.get("train_dir"):
        raise ConfigError("filter.quality.train_dir is not set: a folder with 0/ (bad) and 1/ (good) photos")
    out_dir = Path(out_dir)
    pl.seed_everything(int(cfg.seed), workers=True)
    spec = {"layers": list(cfg.layers), "width_per_group": int(cfg.width_per_group), "image_size": int(cfg.image_size)}
    dm = PhotoFolderDataModule(str(cfg.train_dir), int(cfg.image_size), float(cfg.val_fraction), int(cfg.batch_size),
                               int(cfg.num_workers), int(cfg.seed))
    model = QualityClassifier(spec, cfg.get("imagenet_weights"), float(cfg.lr), float(cfg.weight_decay))
    best = ModelCheckpoint(dirpath=out_dir / "checkpoints", filename="best", monitor="val/auroc", mode="max",
                           save_top_k=1)
    trainer = pl.Trainer(max_epochs=int(cfg.max_epochs), accelerator=cfg.get("accelerator", "cpu"), devices=1,
                         callbacks=[best], logger=CSVLogger(str(out_dir), name="quality"), deterministic=True,
                         enable_model_summary=False, log_every_n_steps=1)
    trainer.fit(model, datamodule=dm)
    metrics = {"best_val_auroc": float(best.best_model_score) if best.best_model_score is not None else None,
               "last_epoch": {k: float(v) for k, v in trainer.callback_metrics.items()}}
    return export_best(best.best_model_path, out_dir / "quality_classifier.pt", metrics)
