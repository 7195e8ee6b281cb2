"""The views kept between batches (`vase.data.pixel_cache`): the same tensors as the processor makes, bit for bit,
on the tiny model's processor and the hub-shaped checkpoint's, from files and from images made in memory; bounded;
the user's processor as it was after every call; a changed file read again."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vase.data import pixel_cache
from vase.data.datamodule import encode_prompts
from vase.data.dataset import read_rgb
from vase.data.pixel_cache import STORE, CachedImageProcessor
from vase.errors import DataError
from vase.models.loading import load_processor


def _views(seed: int, n: int, size: tuple[int, int] = (224, 224)) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (*size[::-1], 3), dtype=np.uint8)) for _ in range(n)]


@pytest.fixture(autouse=True)
def _empty_store():
    pixel_cache.configure(64)
    STORE.clear()
    yield
    pixel_cache.configure(pixel_cache.DEFAULT_MB)
    STORE.clear()


def _equal(a, b) -> None:
    assert set(a.keys()) == set(b.keys())
    for k in a.keys():
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("which", ["tiny", "hub"])
def test_cached_views_are_the_processors_own_tensors_on_hits_misses_and_repeats(which: str, tiny_model_dir: Path,
                                                                                  hub_checkpoint_dir: Path) -> None:
    proc = load_processor(str(tiny_model_dir if which == "tiny" else hub_checkpoint_dir))
    inner = proc.image_processor
    a, b, c = _views(1, 6), _views(2, 6), _views(3, 2, (160, 96))  # c: another size, another grid
    batches = [[a, b], [b, a], [a, c, a], [c, b]]  # misses, then hits in another order, a repeat within one batch
    for views in batches:
        prompts = [f"describe vase {i}" for i in range(len(views))]
        plain = encode_prompts(proc, prompts, views, "left")
        kept = encode_prompts(proc, prompts, views, "left", cache_views=True)
        _equal(plain, kept)
        assert proc.image_processor is inner  # the user's processor, put back
    store = STORE
    assert store.misses == 14 and store.hits == 32 and len(store) == 14  # 12 + 2 new; 12 + 12 + 8 seen


def test_the_store_stays_within_its_bound_and_keeps_giving_the_same_tensors(tiny_model_dir: Path) -> None:
    proc = load_processor(str(tiny_model_dir))
    one = encode_prompts(proc, ["x"], [_views(9, 1)], "left")["pixel_values"]
    pixel_cache.configure(3 * one.numel() * one.element_size() / 2**20)  # room for three views
    for seed in (4, 5, 4, 6, 4):
        views = [_views(seed, 2)]
        _equal(encode_prompts(proc, ["x"], views, "left"), encode_prompts(proc, ["x"], views, "left", cache_views=True))
    assert len(STORE) == 3 and STORE.bytes <= STORE.max_bytes
    # a batch whose new views push out one it found in the store: the one it found is still its own
    kept, new = _views(4, 1), _views(7, 3)
    encode_prompts(proc, ["x"], [kept], "left", cache_views=True)
    _equal(encode_prompts(proc, ["x"], [kept + new], "left"),
           encode_prompts(proc, ["x"], [kept + new], "left", cache_views=True))


def test_the_processor_is_put_back_after_an_error_and_saves_as_it_loaded(tiny_model_dir: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    proc = load_processor(str(tiny_model_dir))
    inner = proc.image_processor

    def fails(self, images, **kwargs):
        raise OSError("the image processor failed")

    with monkeypatch.context() as m:
        m.setattr(type(inner), "__call__", fails)
        with pytest.raises(OSError, match="the image processor failed"):
            encode_prompts(proc, ["a"], [_views(7, 6)], "left", cache_views=True)
    assert proc.image_processor is inner and not isinstance(proc.image_processor, CachedImageProcessor)
    encode_prompts(proc, ["a"], [_views(1, 6)], "left", cache_views=True)
    proc.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "processor_config.json").read_text() == \
        (tiny_model_dir / "processor_config.json").read_text() or \
        not (tiny_model_dir / "processor_config.json").exists()
    again = load_processor(str(tmp_path / "saved"))
    _equal(encode_prompts(again, ["a"], [_views(1, 6)], "left"), encode_prompts(proc, ["a"], [_views(1, 6)], "left"))


def test_views_read_from_files_are_decoded_once_and_a_changed_file_is_read_again(tiny_model_dir: Path,
                                                                                tmp_path: Path) -> None:
    proc = load_processor(str(tiny_model_dir))
    paths = []
    for i, im in enumerate(_views(11, 6)):
        paths.append(tmp_path / f"view{i}.png")
        im.save(paths[-1])
    first = [read_rgb(p, "a view") for p in paths]
    again = [read_rgb(p, "a view") for p in paths]  # from the store: the same pixels, a copy each time
    assert all(a.tobytes() == b.tobytes() and a is not b for a, b in zip(first, again))
    prompts = ["describe it"]
    plain = encode_prompts(proc, prompts, [first], "left")
    _equal(plain, encode_prompts(proc, prompts, [first], "left", cache_views=True))  # keyed by the files
    _equal(plain, encode_prompts(proc, prompts, [again], "left", cache_views=True))
    assert STORE.hits == 6
    _views(12, 1)[0].save(paths[0])  # the user's file changed (and its modification time with it)
    os.utime(paths[0], ns=(0, 10**9 + os.stat(paths[0]).st_mtime_ns))
    changed = [read_rgb(p, "a view") for p in paths]
    assert changed[0].tobytes() != first[0].tobytes()
    _equal(encode_prompts(proc, prompts, [changed], "left"),
           encode_prompts(proc, prompts, [changed], "left", cache_views=True))
    with pytest.raises(DataError, match="view0.png"):  # a missing file is still the DataError naming it
        paths[0].unlink()
        read_rgb(paths[0], "a view")


def test_a_store_bounded_at_0_keeps_nothing(tiny_model_dir: Path) -> None:
    pixel_cache.configure(0)
    proc = load_processor(str(tiny_model_dir))
    views = [_views(13, 6)]
    _equal(encode_prompts(proc, ["x"], views, "left"), encode_prompts(proc, ["x"], views, "left", cache_views=True))
    assert len(STORE) == 0 and STORE.hits == 0
