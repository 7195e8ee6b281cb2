"""A checkpoint checked before it loads: a folder with every file a Qwen2.5-VL load needs, intact, or a hub id this
machine can reach; each problem one line naming the folder and the file (transformers' own failures run from 35 to
215 lines, and a hub id on an offline machine retries for minutes first)."""

from __future__ import annotations

import json
import os
import re
import socket
import struct
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from huggingface_hub import try_to_load_from_cache

from vase.errors import ConfigError, DataError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""What the hub takes as a repository id (``org/name``); anything else is read as a local path."""
CHAT_TEMPLATES = ("chat_template.jinja", "chat_template.json")
HUB_PROBE_S = 3.0


JSON_FILES = ("config.json", "preprocessor_config.json", "processor_config.json", "tokenizer.json",
              "tokenizer_config.json", "generation_config.json", "chat_template.json", "special_tokens_map.json")
"""The checkpoint's JSON files that transformers reads when it loads the model, its processor and its tokenizer."""


def check_checkpoint(name_or_path: str, key: str = "model.name_or_path") -> None:
    """Refuse, in one line, a checkpoint that would fail to load: a path that does not exist or is a file; a folder
    without ``config.json``, ``preprocessor_config.json`` (the processor), a tokenizer or a chat template (every
    prompt is built with it), or whose weights are missing or cut short (each safetensors shard's header and length
    checked, the damaged one named); a hub id that is neither in this machine's hub cache nor reachable. Reads only:
    the folder is the user's."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{key}={text!r} is a file; give the checkpoint's folder (config.json, the weights, the "
                              f"processor and tokenizer files)")
        _check_folder(path, key)
        return
    if not HUB_ID.match(text) or text.startswith((".", "/", "~")):
        raise ConfigError(f"{key}={text!r}: no such folder, and not a hub id (org/name); give a local checkpoint "
                          f"folder or a hub id such as Qwen/Qwen2.5-VL-3B-Instruct")
    _check_hub_id(text, key)


LINEAGE_FILE = "vase_lineage.json"
"""The file beside a vase adapter that lists the adapters merged under it (SFT's under GRPO's) and how it trained."""


def check_adapter(adapter: str, key: str = "init_adapter") -> list[str]:
    """An adapter to start from or to evaluate, checked before any model loads: a folder with ``adapter_config.json``
    (what a training run saves in ``<run>/adapter``), and every adapter its lineage lists as merged under it; a
    ConfigError naming the key and the folder otherwise. Returns those earlier adapters, in merge order."""
    path = Path(str(adapter)).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{key}={str(adapter)!r}: no such folder; give the adapter folder a training run saved "
                          f"(<run>/adapter, e.g. logs/train/runs/<time>/adapter)")
    if not (path / "adapter_config.json").is_file():
        raise ConfigError(f"{key}={str(adapter)!r}: no adapter_config.json in it; give the adapter folder a training "
                          f"run saved (<run>/adapter), not the run folder or a checkpoint")
    lineage = path / LINEAGE_FILE
    if not lineage.is_file():
        return []
    try:
        earlier = [str(a) for a in json.loads(lineage.read_text()).get("merged_adapters", [])]
    except (OSError, ValueError, AttributeError) as e:
        raise DataError(f"{lineage}: cannot be read ({type(e).__name__}: {e}); it lists the adapters merged under "
                        f"this one, which cannot be rebuilt without it") from None
    for a in earlier:
        if not (Path(a) / "adapter_config.json").is_file():
            raise DataError(f"{lineage} lists {a} as merged under this adapter, but it is gone; the adapter cannot be "
                            f"rebuilt without it")
    return earlier


def _check_folder(path: Path, key: str) -> None:
    where = f"{key}={str(path)!r}"
    if not (path / "config.json").is_file():
        raise DataError(f"{where}: {path / 'config.json'} is missing (the model's architecture); copy it from the "
                        f"checkpoint's release (the hub folder it came from) into a folder of yours")
    if not ((path / "preprocessor_config.json").is_file() or _processor_in(path / "processor_config.json")):
        raise DataError(f"{where}: {path / 'preprocessor_config.json'} is missing (the image processor: pixel bounds, "
                        f"patch size, normalisation; or processor_config.json with an image_processor, as "
                        f"transformers 5 saves it); copy it from the checkpoint's release into a folder of yours")
    if not ((path / "tokenizer.json").is_file() or (path / "vocab.json").is_file()):
        raise DataError(f"{where}: {path} has no tokenizer (tokenizer.json, or vocab.json and merges.txt)")
    for name in JSON_FILES:  # a file cut short or edited by hand: named here, not in transformers' traceback
        if (path / name).is_file():
            try:
                json.loads((path / name).read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise DataError(f"{where}: {path / name} is not valid JSON ({str(e).splitlines()[0][:120]}): cut short "
                                f"or edited by hand; copy it again from the checkpoint's release") from None
    if not _has_chat_template(path):
        raise DataError(f"{where}: {path} has no chat template (tokenizer_config.json's chat_template, "
                        f"chat_template.json or chat_template.jinja): vase builds every prompt with it; copy it from "
                        f"the checkpoint's release")
    _check_weights(path, where)


def _processor_in(path: Path) -> bool:
    try:
        return isinstance(json.loads(path.read_text()).get("image_processor"), dict)
    except (OSError, ValueError, AttributeError):
        return False


def _has_chat_template(path: Path) -> bool:
    if any((path / name).is_file() for name in CHAT_TEMPLATES):
        return True
    try:
        return bool(json.loads((path / "tokenizer_config.json").read_text()).get("chat_template"))
    except (OSError, ValueError, AttributeError):
        return False


def _check_weights(path: Path, where: str) -> None:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataError(f"{where}: {index} is not a safetensors index ({type(e).__name__}: {e})") from None
    elif (path / "model.safetensors").is_file():
        shards = ["model.safetensors"]
    elif any(path.glob("pytorch_model*.bin")):
        return  # the older format: transformers reads it; nothing cheap to check
    else:
        raise DataError(f"{where}: {path} has no weights (model.safetensors, model.safetensors.index.json and its "
                        f"shards, or pytorch_model.bin)")
    for shard in shards:
        problem = safetensors_problem(path / shard)
        if problem:
            raise DataError(f"{where}: shard {path / shard} {problem}; download it again")


def safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file cannot be loaded (missing, its header cut or not JSON, its tensors' bytes cut short),
    or None: the header is read, never the tensors.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> head = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    >>> _ = (d / "ok.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + bytes(8))
    >>> _ = (d / "cut.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + bytes(5))
    >>> safetensors_problem(d / "ok.safetensors"), safetensors_problem(d / "cut.safetensors")
    (None, 'is cut short: its tensors need 8 bytes after the header, the file has 5')
    """
    if not path.is_file():
        return "is missing"
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            return f"is cut short ({size} bytes: not even a header length)"
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8:
            return f"is cut short: its header says {n} bytes, the file has {size - 8} after the length"
        try:
            header: Any = json.loads(f.read(n))
        except ValueError:
            return "has a header that is not JSON (not a safetensors file, or damaged)"
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)
            and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2]
    need, have = max(ends, default=0), size - 8 - n
    if need > have:
        return f"is cut short: its tensors need {need} bytes after the header, the file has {have}"
    return None


def _check_hub_id(repo: str, key: str) -> None:
    """A hub id: fine when its config is in this machine's hub cache; else the hub must answer (one connection,
    a few seconds at most)."""
    if isinstance(try_to_load_from_cache(repo, "config.json"), str):
        return
    todo = f"pass a local checkpoint folder ({key}=/path/to/{repo.split('/')[-1]})"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise ConfigError(f"{key}={repo!r} is not in this machine's hub cache and HF_HUB_OFFLINE is set; {todo}")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    url = urlparse(endpoint)
    try:
        socket.create_connection((url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)),
                                 timeout=HUB_PROBE_S).close()
    except OSError as e:
        raise ConfigError(f"{key}={repo!r} is not in this machine's hub cache and the hub ({endpoint}) cannot be "
                          f"reached from here ({e}); {todo}") from None
