"""The Lightning data module: synthesis and rendering in ``prepare_data``, Qwen2.5-VL chat batches in the loaders."""

from __future__ import annotations

import contextlib
import logging
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from vase.config import check_retrieval, check_zoom, deprecation
from vase.config.renames import strict as strict_deprecations
from vase.data.dataset import VIEWS, VaseDataset, VaseExample, VideoFrames, models_to_render
from vase.data.layouts import detect_layout, load_split, no_such_dataset, read_records
from vase.data.loader import ResumableLoader, ResumableSampler
from vase.data.pixel_cache import DEFAULT_MB, cached_pixels
from vase.data.pixel_cache import configure as configure_view_store
from vase.data.synthetic import SHAPE_SPECS, generate
from vase.errors import ConfigError, DataError
from vase.io import atomic_write_json, file_lock, own_output_dir, read_json
from vase.metrics.features import view_encoder
from vase.prompt_tasks import DATA_MIXES, SAMPLES
from vase.prompt_tasks import zoom as zoom_task
from vase.prompt_tasks.base import ChatSample
from vase.render import RenderSettings, render_dataset, rendered_settings
from vase.retrieval.index import Retriever, VaseIndex, index_dir
from vase.views import DEFAULT_FOV_DEG, DEFAULT_RESOLUTION, at_settings, path_key, render_cache_root

log = logging.getLogger("vase")
FAILURES_FILE = "render_failures.json"

IGNORE_INDEX = -100


def samples_for(example: VaseExample, mix: str, zoom: bool = False,
                views: tuple[str, ...] | list[str] = VIEWS, zoom_width: float = 1.0,
                zoom_direct: int = 5) -> list[ChatSample]:
    """The chat samples of one vase for ``data.mix`` (``vase.prompt_tasks.DATA_MIXES``: its caption, its QA pairs, both,
    both plus multiple choice, or its generator parameters), each built by its task's module; ``zoom`` adds the
    zoom-in tool's samples after the QA pairs: the call on ``zoom_width`` of the frieze's width, and ``zoom_direct``
    of the other questions answered directly with the tool offered."""
    if mix not in DATA_MIXES:
        raise ValueError(f"data.mix={mix!r} must be one of {list(DATA_MIXES)}")
    ctx = example.context  # retrieved neighbours' metadata (retrieval.k), the same in training and evaluation
    out: list[ChatSample] = []
    for name in DATA_MIXES[mix]:
        out += SAMPLES[name](example, ctx)
        if name == "qa" and zoom:
            out += zoom_task.samples(example, ctx, views, frieze_band, views_are_images=isinstance(
                example.images, list) and not isinstance(example.images, VideoFrames), width=zoom_width,
                direct=zoom_direct)
    for s in out:  # every sample of a vase is asked under the dataset's own system prompt, where it has one
        s.system = example.record.system
    return out


def frieze_band(shape: str) -> tuple[float, float] | None:
    """Where the synthetic generator paints a shape's frieze (None for a shape it does not know)."""
    spec = SHAPE_SPECS.get(shape)
    return spec.band if spec is not None else None


def build_messages(visuals: Any, prompt: str, system: str = "") -> list[dict[str, Any]]:
    """A user turn with the visuals (``VideoFrames``: one video; a list of views: one image each, or a count of
    images) followed by the prompt, in the processor's chat format; after ``system`` (the dataset's own system
    prompt) where there is one, else the template's default."""
    if isinstance(visuals, VideoFrames):
        parts = [{"type": "video"}]
    else:
        n = visuals if isinstance(visuals, int) else len(visuals)
        parts = [{"type": "image"} for _ in range(n)]
    head = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
    return head + [{"role": "user", "content": parts + [{"type": "text", "text": prompt}]}]


def prompt_text(processor: Any, visuals: Any, prompt: str, system: str = "") -> str:
    return processor.apply_chat_template(build_messages(visuals, prompt, system), add_generation_prompt=True,
                                         tokenize=False)


VISUAL_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")


def encode_prompts(processor: Any, prompts: list[str], visuals: list[Any], padding_side: str,
                   systems: list[str] | None = None, cache_views: bool = False) -> Any:
    """Tokenise chat prompts (each after its system prompt, where ``systems`` gives one) with their views (as
    images) or orbit frames (as one video each). ``cache_views``: each image's processed patches kept between calls
    in this process's store (`vase.data.pixel_cache`: the same tensors, for training, which shows every view many
    times); false: the processor on every image."""
    videos = [isinstance(v, VideoFrames) for v in visuals]
    if any(videos) and not all(videos):
        raise ValueError("a batch mixes orbit videos and multi-view images; use one data.modality per run")
    texts = [prompt_text(processor, v, p, sy) for v, p, sy in zip(visuals, prompts, systems or [""] * len(prompts))]
    if videos and all(videos):
        return processor(text=texts, videos=[list(v) for v in visuals], do_sample_frames=False, return_tensors="pt",
                         padding=True, padding_side=padding_side)
    with cached_pixels(processor, cache_views) as proc:
        return proc(text=texts, images=visuals, return_tensors="pt", padding=True, padding_side=padding_side)


class ChatDataset(Dataset):
    """Flattens a VaseDataset into chat samples (several per vase for QA)."""

    def __init__(self, base: VaseDataset, mix: str, zoom: bool = False, zoom_width: float = 1.0,
                 zoom_direct: int = 5) -> None:
        self.base = base
        self.mix = mix
        self.zoom = zoom
        self.zoom_width = zoom_width
        self.zoom_direct = zoom_direct
        self.index = [(i, j) for i, rec in enumerate(base.records)
                      for j in range(len(samples_for(VaseExample(rec, []), mix, zoom, base.views,
                                                     zoom_direct=zoom_direct)))]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> ChatSample:
        i, j = self.index[k]
        return samples_for(self.base[i], self.mix, self.zoom, self.base.views, self.zoom_width, self.zoom_direct)[j]


class SFTCollator:
    """Tokenises prompt and answer; the loss falls on the answer tokens (and the closing <|im_end|>) only.

    The answer is tokenised on its own and appended to the processed prompt, so the prompt's image placeholders
    are expanded once, by the processor, and the label mask is exact.
    """

    def __init__(self, processor: Any, max_length: int = 4096, cache_views: bool = False) -> None:
        self.processor = processor
        self.max_length = max_length
        self.cache_views = cache_views  # encode_prompts
        tok = processor.tokenizer
        self.end_ids = tok("<|im_end|>\n", add_special_tokens=False)["input_ids"]
        self.pad_id = tok.pad_token_id

    def __call__(self, batch: list[ChatSample]) -> dict[str, torch.Tensor]:
        enc = encode_prompts(self.processor, [s.prompt for s in batch], [s.images for s in batch], "right",
                             [s.system for s in batch], self.cache_views)
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

    def __init__(self, processor: Any, cache_views: bool = False) -> None:
        self.processor = processor
        self.cache_views = cache_views  # encode_prompts

    def __call__(self, batch: list[ChatSample]) -> dict[str, Any]:
        enc = encode_prompts(self.processor, [s.prompt for s in batch], [s.images for s in batch], "left",
                             [s.system for s in batch], self.cache_views)
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                "mm_token_type_ids": enc["mm_token_type_ids"], **{k: enc[k] for k in VISUAL_KEYS if k in enc},
                "targets": [s.target for s in batch], "reference": [s.answer for s in batch],
                "ids": [s.id for s in batch], "images": [s.images for s in batch]}


def _record_failures(path: Path, failed: list[dict[str, str]]) -> None:
    """The vases whose model failed to render, written only when they changed: a job that finds the views rendered
    (every job of a sweep but the first) writes nothing into the shared set; no file is made for none."""
    if path.is_file():
        try:
            if read_json(path) == failed:
                return
        except (OSError, DataError):
            pass  # unreadable: written again whole
    elif not failed:
        return
    atomic_write_json(path, failed)


class VaseDataModule(pl.LightningDataModule):
    """Data for one run: generate the synthetic set if configured, render views, then serve chat batches."""

    def __init__(self, root: str, views: list[str] | tuple[str, ...] = VIEWS, batch_size: int = 1,
                 eval_batch_size: int = 8, num_workers: int = 0, mix: str = "caption", max_length: int = 4096,
                 synthetic: dict | None = None, render: dict | None = None, limit_train: int | None = None,
                 limit_val: int | None = None, processor: Any = None, stage: str = "sft",
                 modality: str = "views", seed: int | None = None, layout: str = "auto",
                 split: dict | None = None, max_video_frames: int = 16, retrieval: dict | None = None,
                 zoom: bool = False, zoom_width: float = 1.0, zoom_direct: int = 5, task: str | None = None,
                 pixel_cache_mb: float | None = DEFAULT_MB) -> None:
        super().__init__()
        if task is not None:  # the keyword before 0.2, for one release
            if strict_deprecations():
                raise ConfigError(deprecation("VaseDataModule(task=...)", "VaseDataModule(mix=...)") + " (refused: "
                                  "VASE_DEPRECATIONS=error)")
            warnings.warn(deprecation("VaseDataModule(task=...)", "VaseDataModule(mix=...)"), FutureWarning, stacklevel=2)
            mix = task
        self.zoom = zoom  # teach the zoom-in tool on the decoration question (vase.eval.zoom)
        check_zoom(zoom_width, zoom_direct)  # the config check's own rule (library use skips the config)
        self.zoom_width = float(zoom_width)
        self.zoom_direct = int(zoom_direct)
        self.retrieval = dict(retrieval or {})  # k > 0: the nearest training vases' metadata in every prompt
        self.layout = layout  # auto | vase | release | paper_eval | swift (vase.data.layouts)
        self.split = dict(split or {})  # for layouts without a train/val split: seed, val_fraction, file, cache_dir
        self.max_video_frames = max_video_frames
        self.pixel_cache_mb = pixel_cache_mb  # views kept between batches, decoded and processed (vase.data.pixel_cache)
        configure_view_store(pixel_cache_mb)
        self.seed = seed  # the training order's seed (default: torch's initial seed, i.e. the run's seed)
        self._resume: dict[str, int] | None = None
        self.root = Path(root)
        self.views = tuple(views)
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.mix = mix
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

    @property
    def owns_root(self) -> bool:
        """vase generated this root (synthetic data under the cache): views are rendered into it."""
        return bool(self.synthetic)

    def render_root(self) -> Path:
        """Where views vase renders go: the root when vase owns it (or ``render.write_to_root``), else a cache
        folder keyed by the dataset and, at other than the default render settings, by the settings too
        (`vase.views.at_settings`), so a user's dataset is only ever read and runs at two resolutions never overwrite
        each other's views (a root vase owns is named by its settings in conf/data/synthetic.yaml)."""

        if self.owns_root or self.render.get("write_to_root", False):
            return self.root
        cache = self.render.get("cache_dir")
        if not cache:
            raise DataError(f"{self.root}: views must be rendered for this dataset, but render.cache_dir is not set "
                            f"(vase renders a user's dataset into its cache, never into data.root)")
        return at_settings(render_cache_root(cache, self.root), int(self.render.get("resolution", DEFAULT_RESOLUTION)),
                           float(self.render.get("fov_deg", DEFAULT_FOV_DEG)))

    @property
    def image_roots(self) -> list[Path]:
        """Where views are read from, in order: the dataset's own views first, then what vase rendered."""
        roots = [self.root]
        if self.render.get("enabled", False) and not self.owns_root and self.render.get("cache_dir"):
            rendered = self.render_root()
            if rendered != self.root:
                roots.append(rendered)
        return roots

    def prepare_data(self) -> None:
        """Synthesise (when configured) and render the views a dataset lacks; both are cached and safe to repeat.

        A dataset's own views are used as they are: only vases missing a view are rendered, into
        `render_root`. With ``render.on_error=skip`` a GLB that fails is recorded with its reason
        (``images/render_failures.json`` beside the renders) and its vase is left out of training and evaluation.
        """
        lock = self._lock_path()
        if lock is None:
            self._prepare()
            return
        with file_lock(lock):  # the jobs of a parallel sweep take turns: one generates and renders, the rest reuse
            self._prepare()

    def _lock_path(self) -> Path | None:
        """Where jobs preparing a set vase owns (generated, then rendered into) wait for each other; None for a
        user's dataset, whose renders go to the cache by atomic writes that concurrent jobs cannot tear."""
        if not self.owns_root:
            return None
        if self.render.get("cache_dir"):
            return Path(self.render["cache_dir"]) / "locks" / f"{path_key(self.root)}.lock"
        return self.root.parent / f".{self.root.name}.lock"

    def _prepare(self) -> None:
        if self.synthetic:
            generate(self.root, num=int(self.synthetic["num_vases"]), seed=int(self.synthetic["seed"]),
                     val_fraction=float(self.synthetic["val_fraction"]), detail=bool(self.synthetic.get("detail")),
                     workers=self.render.get("workers", "auto"))
        if not self.render.get("enabled", False):
            return
        orbit = int(self.render.get("orbit_frames", 0) or 0)
        records = None
        if self.layout_name != "vase":
            records = [r for recs in read_records(self.root, self.layout_name).values() for r in recs]
        # a root vase owns is rendered whole (its cache re-renders changed GLBs); a user's only where views lack
        pairs = models_to_render(self.root, self.views, orbit, only_missing=not self.owns_root, records=records)
        out_root = self.render_root()
        failures_path = out_root / "images" / FAILURES_FILE
        if not pairs:
            _record_failures(failures_path, [])
            return
        settings = RenderSettings(resolution=int(self.render["resolution"]), fov_deg=float(self.render["fov_deg"]))
        if self.owns_root and rendered_settings(out_root) - {settings.key()}:
            # re-rendering in place would swap the views under another run's feet (two resolutions at once)
            raise DataError(f"data.root={str(self.root)!r} holds views rendered at other render settings than this "
                            f"run's (render.resolution={settings.resolution}, render.fov_deg={settings.fov_deg:g}); a "
                            f"set vase generates keeps one: leave data.root to its default, which names the settings "
                            f"(synthetic-n<N>-s<seed>-r<pixels>-fov<degrees>), or give another data.root")
        result = render_dataset(self.root, pairs, settings, views=self.views, orbit_frames=orbit,
                                out_root=out_root, keep_existing=out_root == self.root and not self.owns_root,
                                on_error=str(self.render.get("on_error", "raise")),
                                orbit_video=bool(self.render.get("orbit_video", False)),
                                sheets=bool(self.render.get("sheets", False)),
                                workers=self.render.get("workers", "auto"))
        _record_failures(failures_path, result["failed"])
        if result["failed"]:
            shown = "; ".join(f"{f['id']}: {f['reason']}" for f in result["failed"][:3])
            log.warning("left out %d of %d vases whose model could not be rendered (render.on_error=skip; all listed "
                        "in %s): %s", len(result["failed"]), len(pairs), failures_path, shown)

    def left_out(self) -> dict[str, str]:
        """Vases left out because their GLB failed to render (``render.on_error=skip``): id -> reason."""
        if not self.render.get("enabled", False):
            return {}
        try:
            path = self.render_root() / "images" / FAILURES_FILE
        except DataError:
            return {}
        if not path.is_file():
            return {}
        return {f["id"]: f["reason"] for f in read_json(path)}

    def dataset(self, split: str, limit: int | None = None, exclude: set[str] | None = None) -> VaseDataset:
        """One split's records and views (views searched in `image_roots`; the vases that failed to render,
        or ``exclude`` when the caller has read them already, left out)."""
        records = None
        if self.layout_name != "vase":
            records = load_split(self.root, split, self.layout_name, int(self.split.get("seed", 0)),
                                 float(self.split.get("val_fraction", 0.1)), self.split.get("file"),
                                 self.split.get("cache_dir"))
        return VaseDataset(self.root, split, self.views, limit, modality=self.modality, image_roots=self.image_roots,
                           exclude=set(self.left_out()) if exclude is None else exclude, records=records,
                           max_video_frames=self.max_video_frames)

    @property
    def layout_name(self) -> str:
        """The layout of `root` (``data.layout``, or detected from its files); the synthetic set is ``vase``."""
        if self.synthetic:
            return "vase"
        if not Path(self.root).exists():  # whatever data.layout says: the one message for a missing dataset
            raise no_such_dataset(self.root)
        if self.layout == "auto":
            self.layout = detect_layout(self.root)
        return self.layout

    def check_trainable(self, train_set: VaseDataset | None = None) -> int:
        """The number of training samples (``data.mix``'s samples of the train split); a DataError naming the data
        when there are none, so that nothing trains on nothing and ends "finished" without an adapter. Cheap: no
        view is read, no model is needed (train.py calls it before loading one)."""
        train = train_set if train_set is not None else self.dataset("train", self.limit_train, set(self.left_out()))
        self._require_dimensions(train)
        n = len(ChatDataset(train, self.mix, self.zoom, self.zoom_width, self.zoom_direct))
        if n == 0:
            what = f"{len(train.records)} vases" if train.records else "no vases"
            limit = f", data.limit_train={self.limit_train}" if self.limit_train is not None else ""
            raise DataError(f"{self.root} ({self.layout_name} layout): its train split has {what} and no "
                            f"{self.mix} sample to train on{limit}; nothing would train (python -m vase.data.check "
                            f"{self.root} lists what it read)")
        return n

    def answer_words(self) -> list[int]:
        """The word count of each training sample's reference answer (``data.mix``'s samples of the train split), read
        without a view: what a completion of this task is expected to be as long as."""
        train = self.dataset("train", self.limit_train, set(self.left_out()))
        return [len(s.answer.split()) for rec in train.records
                for s in samples_for(VaseExample(rec, []), self.mix, self.zoom, train.views, self.zoom_width,
                                     self.zoom_direct)]

    def check_evaluable(self, split: str, limit: int | None = None, minimum: int = 1) -> int:
        """The number of vases of ``split`` to evaluate on; a DataError naming the data when there are fewer than
        ``minimum`` (captions' FID needs 2), before any model or encoder loads (evaluate.py calls it first)."""
        n = len(self.dataset(split, limit, set(self.left_out())).records)
        if n < minimum:
            cap = f", limited to {limit}" if limit is not None else ""
            why = "nothing would be scored" if n == 0 else f"a caption score needs at least {minimum} (FID compares two sets)"
            raise DataError(f"{self.root} ({self.layout_name} layout): its {split} split has {n or 'no'} "
                            f"vase{'' if n <= 1 else 's'} to evaluate{cap}; {why} (python -m vase.data.check "
                            f"{self.root} lists what it read)")
        return n

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            skipped = self.left_out()
            if skipped:
                log.warning("training and evaluating without %d vases that failed to render: %s", len(skipped),
                            ", ".join(sorted(skipped)[:10]) + (" ..." if len(skipped) > 10 else ""))
            self.train_set = self.dataset("train", self.limit_train, set(skipped))
            if stage == "fit":
                self.check_trainable(self.train_set)
            self.val_set = self.dataset("val", self.limit_val, set(skipped))
            if int(self.retrieval.get("k", 0) or 0) > 0:
                self.attach_retrieval()
            self._require_dimensions(self.train_set)

    def _require_dimensions(self, train: VaseDataset) -> None:
        """GRPO's reward scores the six dimensions: a training record without them has no target."""
        lacking = [r.id for r in train.records if not r.has_dimensions] if self.stage == "grpo" else []
        if lacking:
            raise DataError(f"{self.root}: GRPO's reward needs the six dimensions, but {len(lacking)} training "
                            f"vase(s) lack some ({', '.join(lacking[:5])}); give them metadata (a raw museum "
                            f"line) or train these with stage=sft")

    def index_encoder(self) -> Any:
        """What the retrieval index embeds views with (``encode_images`` and ``name``): ``retrieval.features``."""
        return view_encoder(self.retrieval, "retrieval")[0]

    def attach_retrieval(self) -> dict[str, int]:
        """Index the training vases (incrementally) and give every vase of both splits the prompt context of its
        ``retrieval.k`` nearest training vases: never itself, never a validation vase (only training vases are
        indexed). Contexts are computed here, once, so DataLoader workers need neither the index nor the encoder."""
        r = self.retrieval
        check_retrieval(r)
        fmt = str(r.get("format") or "asked")
        encoder = self.index_encoder()
        where = index_dir(r.get("index_dir"), self.root, self.owns_root, self.split.get("cache_dir")
                          or self.render.get("cache_dir"))

        # a local index is one process's at a time (Qdrant locks its folder): jobs of a sweep take turns. The folder
        # is checked to be vase's own first, and the lock lives inside it: nothing is left beside a user's folder
        if not r.get("url"):
            own_output_dir(where, "retrieval.index_dir")
        with file_lock(where / ".vase-index.lock") if not r.get("url") else contextlib.nullcontext():
            index = VaseIndex(where, encoder, r.get("url"))
            try:
                counts = index.update(self.train_set)
                retriever = Retriever(index, int(r["k"]))
                for ds in (self.train_set, self.val_set):
                    # each vase's views read and its neighbours searched once, for both kinds of context
                    found = {rec.id: retriever.neighbours(rec, ds[i].images) for i, rec in enumerate(ds.records)}
                    ds.contexts = {vid: retriever.context(f) for vid, f in found.items()}
                    if fmt == "asked":  # a question sees only its dimension's values of the neighbours
                        ds.asked_contexts = {vid: retriever.asked_context(f) for vid, f in found.items()}
            finally:
                index.close()
        log.info("retrieval index %s: %s", where, counts)
        return counts

    def train_dataloader(self) -> DataLoader:
        if self.processor is None:
            raise RuntimeError("VaseDataModule needs a processor before it can build batches")

        keep = bool(self.pixel_cache_mb)
        collate = (PromptCollator(self.processor, keep) if self.stage == "grpo"
                   else SFTCollator(self.processor, self.max_length, keep))
        data = ChatDataset(self.train_set, self.mix, self.zoom, self.zoom_width, self.zoom_direct)
        seed = self.seed if self.seed is not None else torch.initial_seed()
        # each rank its own shard of every epoch's order (the trainer leaves sharding to vase: Lightning's wrapper
        # cannot shard a resumed, shortened epoch)
        world = max(1, int(getattr(self.trainer, "world_size", 1) or 1))  # no trainer: one process
        rank = int(getattr(self.trainer, "global_rank", 0) or 0)
        sampler = ResumableSampler(len(data), seed=seed, shuffle=True, rank=rank, world=world)
        if rank == 0:  # what the mix made of the split: a task of the user's own shows here by its count
            log.info("training data: %d items from %d vases, data.mix=%s (%s)", len(data), len(self.train_set.records),
                     self.mix, " + ".join([*DATA_MIXES[self.mix], *(["zoom"] if self.zoom else [])]))
        if world > 1:
            log.info("training data: rank %d of %d takes %d of %d items an epoch (seed %d)", rank, world, len(sampler),
                     len(data), seed)
        if self._resume is not None:  # the interrupted epoch continues after the batches each rank had consumed
            sampler.resume(self._resume["epoch"], self._resume["batches_done"] * self.batch_size)
            self._resume = None
        # a private generator: creating the loader's iterator then draws its worker seed from it, not from the
        # global RNG, so a resumed run's dropout and sampling streams match an uninterrupted run's
        gen = torch.Generator().manual_seed(int(seed))
        return ResumableLoader(data, batch_size=self.batch_size, sampler=sampler, num_workers=self.num_workers,
                               collate_fn=collate, persistent_workers=self.num_workers > 0, generator=gen)

    def state_dict(self) -> dict[str, Any]:
        """Saved in every checkpoint: where in which epoch training stood, so a resumed run skips what it saw."""
        t = self.trainer
        if t is None:
            return {}
        # the batch count belongs to the last epoch that started (after an epoch ends, current_epoch has moved on)
        epoch = max(0, int(t.fit_loop.epoch_progress.current.started) - 1)
        done = int(t.fit_loop.epoch_loop.batch_progress.current.processed)
        return {"epoch": epoch, "batches_done": done, "batch_size": int(self.batch_size)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict and "epoch" in state_dict:
            if int(state_dict.get("batch_size", self.batch_size)) != int(self.batch_size):
                raise DataError(f"the checkpoint was written with batch size {state_dict['batch_size']}, this run "
                                f"has {self.batch_size}: resume with the same stage.batch_size")
            self._resume = {"epoch": int(state_dict["epoch"]), "batches_done": int(state_dict["batches_done"])}
