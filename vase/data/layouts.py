"""Every dataset layout vase reads, to the same records.

* ``vase``        ``annotations/{train,val}.json`` (lists of records), ``models/<id>.glb``, ``images/<view>/<id>.png``
                  (what vase writes; the synthetic set).
* ``release``     the released VaseVQA-3D as its README documents it: ``models/*.glb``, ``images/<view>/``,
                  ``annotations/captions.json``, ``qa_pairs.json``, ``metadata.json``. Their schema is not published,
                  so each file may be a list of objects carrying an id (``id``, ``vase_id``, ``model_id``, ``uuid``,
                  ``image``, ``image_name``, ``images``, ``file_name``, ...) or a mapping id -> value; metadata values
                  are raw museum lines (``Fabric: ATHENIAN; Technique: BLACK-FIGURE; ...``) or objects with the six
                  dimensions. With no split in the release, a seeded split by vase id is made and saved.
* ``paper_eval``  the paper repository's evaluation inputs: one folder of view images per model
                  (``<uuid>_<n>_ac001001..._shaded/front.jpg`` ...) and ``groundTruth.json`` (``[{"images":
                  ["<uuid>_<n>_ac001001.jpg"], "caption": ...}]``), keyed as its scorer keys them.
* ``swift``       ms-swift JSONL: one conversation per line (``messages`` + ``images`` or ``videos``), a file or a
                  folder with ``train.jsonl`` / ``val.jsonl``. Lines of one vase (an ``id`` key, else the same media)
                  merge; each user/assistant pair is a sample: one of vase's six questions is a QA pair, the first
                  other one the caption with its own instruction kept, later ones free-form QA; a system message is
                  kept as the vase's system prompt; GRPO lines (user turn + ``solution``) are read. An optional
                  ``metadata`` column (raw museum line), or the six dimension columns, gives the dimensions.

Readers raise a DataError naming the file and what it expected; given a ``problems`` list they record
``(kind, id, message)`` and go on instead (the dataset checker).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from vase.annotate.records import VaseRecord, make_caption, make_qa, parse_raw_metadata
from vase.annotate.vocab import DIMENSIONS, QUESTIONS
from vase.choices import LAYOUTS
from vase.errors import DataError
from vase.io import atomic_write_json, read_json, safe_name
from vase.views import VIEWS, default_model, path_key

ID_KEYS = ("id", "vase_id", "model_id", "object_id", "uuid", "image_id", "image", "image_name", "images", "file_name",
           "filename", "name")
CAPTION_KEYS = ("caption", "text", "description", "museum_caption")
MEDIA_SUFFIXES = (".jpg", ".jpeg", ".png", ".glb", ".mp4", ".webm")
RELEASE_FILES = ("captions.json", "qa_pairs.json", "metadata.json")
_QUESTION_DIM = {q.strip().lower(): d for d, q in QUESTIONS.items()}
_TAG = re.compile(r"<(image|video)>")

Problems = list  # of (kind, id, message)


def load_annotations(path: str | Path, problems: list | None = None) -> list[VaseRecord]:
    """Records of one split file of the ``vase`` layout (a JSON list of vase objects); errors name the file and the vase id. With
    ``problems`` (a list) faults are recorded as ``(kind, id, message)`` and reading goes on."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of vases, got {type(data).__name__}")
    records = [VaseRecord.from_json(obj, str(path), problems) for obj in data]
    seen: set[str] = set()
    for r in records:
        if r.id in seen:
            if problems is None:
                raise DataError(f"{path}: vase id {r.id!r} appears twice")
            problems.append(("duplicate_id", r.id, f"{path}: vase id {r.id!r} appears twice"))
        seen.add(r.id)
    return records


def paper_key(name: str) -> str:
    """The paper scorer's matching key for an image name: its first two ``_``-separated parts, or, for a name with
    fewer than three parts, the name without ``.jpg``. Purely positional, on the name as written (a folder in it
    stays part of the first piece), exactly as ``eval/compare.py`` keys it.

    >>> paper_key("3f2a9c_7_ac001001.jpg")
    '3f2a9c_7'
    >>> paper_key("vase12_front.jpg")
    'vase12_front'
    >>> paper_key("amphora.jpg")
    'amphora'
    >>> paper_key("views/a_b_c.png")
    'views/a_b'
    """
    if "_" in name:
        parts = name.split("_")
        if len(parts) >= 3:
            return f"{parts[0]}_{parts[1]}"
    return name.replace(".jpg", "")



def _fault(problems: Problems | None, kind: str, vid: str, message: str) -> None:
    if problems is None:
        raise DataError(message)
    problems.append((kind, vid, message))


def _each_file(problems: Problems | None, read: Any, path: Path, *args: Any) -> Any:
    """``read(path, *args)``; with ``problems`` given, a file that cannot be read at all is recorded (kind
    ``unreadable_file``) and None returned, so the other files of the dataset are still read and checked."""
    if problems is None:
        return read(path, *args)
    try:
        return read(path, *args, problems)
    except DataError as e:
        problems.append(("unreadable_file", path.name, str(e)))
        return None


def normalize_id(value: Any) -> str:
    """An id as written in a file: a name without folders or a media extension (``x/ab_1.jpg`` -> ``ab_1``).

    >>> normalize_id("images/front/3F2A_7_ac001001.jpg"), normalize_id("v0003")
    ('3F2A_7_ac001001', 'v0003')
    """
    if isinstance(value, list) and value:
        value = value[0]
    name = Path(str(value)).name
    for suffix in MEDIA_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def no_such_dataset(path: str | Path) -> DataError:
    """The one error every entry point gives for a dataset path that does not exist (train.py, evaluate.py,
    ``python -m vase.data.check``, ``python -m vase.data.export``), before anything else is tried."""
    return DataError(f"{path}: no such folder; data.root (or the path you gave) must be the dataset as you downloaded "
                     f"it: the VaseVQA-3D release, a folder with annotations/train.json, the paper's evaluation folder "
                     f"or ms-swift JSONL")


def detect_layout(path: str | Path) -> str:
    """Which of `LAYOUTS` a path holds, from the files it has; a DataError lists what was looked for (a path that
    does not exist: `no_such_dataset`)."""
    p = Path(path)
    if not p.exists():
        raise no_such_dataset(p)
    if p.is_file() and p.suffix == ".jsonl":
        return "swift"
    if (p / "annotations" / "train.json").is_file():
        return "vase"
    if any((p / "annotations" / f).is_file() for f in RELEASE_FILES):
        return "release"
    if (p / "groundTruth.json").is_file():
        return "paper_eval"
    if p.is_dir() and any(p.glob("*.jsonl")):
        return "swift"
    raise DataError(f"{p}: no dataset layout recognised; looked for annotations/train.json (vase), "
                    f"annotations/{{{','.join(RELEASE_FILES)}}} (the VaseVQA-3D release), groundTruth.json (the "
                    f"paper's evaluation folder) and *.jsonl (ms-swift)")


# ------------------------------------------------------------------------------------------------ keyed JSON files


def _entry_id(obj: dict) -> str | None:
    for k in ID_KEYS:
        if obj.get(k) not in (None, "", []):
            return normalize_id(obj[k])
    return None


def read_keyed(path: Path, what: str, problems: Problems | None = None) -> dict[str, list[Any]]:
    """id -> the values the file gives it (a list: QA files give several per id). Accepts a mapping id -> value or a
    list of objects with an id key (the object itself is the value)."""
    data = read_json(path)
    out: dict[str, list[Any]] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            out.setdefault(normalize_id(k), []).append(v)
        return out
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of objects with an id ({', '.join(ID_KEYS[:6])}, ...) or a mapping "
                        f"id -> {what}; got a JSON {type(data).__name__}")
    for n, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise DataError(f"{path}: item {n} is a {type(obj).__name__}; expected an object with an id and {what}")
        vid = _entry_id(obj)
        if vid is None:
            _fault(problems, "missing_id", f"#{n}", f"{path}: item {n} has no id key (looked for {list(ID_KEYS)})")
            continue
        out.setdefault(vid, []).append(obj)
    return out


def _caption_of(value: Any, path: Path, vid: str, problems: Problems | None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for k in CAPTION_KEYS:
            if isinstance(value.get(k), str):
                return value[k]
    _fault(problems, "bad_caption", vid, f"{path}: vase {vid!r} has no caption text (looked for {list(CAPTION_KEYS)})")
    return ""


def _qa_of(values: list[Any], path: Path, vid: str, problems: Problems | None) -> list[dict[str, str]]:
    pairs: list[Any] = []
    for v in values:
        if isinstance(v, list):
            pairs += v
        elif isinstance(v, dict) and any(isinstance(v.get(k), list) for k in ("qa", "qa_pairs", "questions")):
            pairs += next(v[k] for k in ("qa", "qa_pairs", "questions") if isinstance(v.get(k), list))
        else:
            pairs.append(v)
    out = []
    for q in pairs:
        if not (isinstance(q, dict) and isinstance(q.get("question"), str) and isinstance(q.get("answer"), str)):
            _fault(problems, "bad_qa", vid, f"{path}: a QA pair of vase {vid!r} lacks a question or answer text: {q!r}")
            continue
        dim = q.get("dimension") or _QUESTION_DIM.get(q["question"].strip().lower(), "other")
        out.append({"dimension": str(dim).lower(), "question": q["question"], "answer": q["answer"]})
    return out


def _record_from_metadata(value: Any, path: Path, vid: str, problems: Problems | None) -> VaseRecord:
    if isinstance(value, dict) and isinstance(value.get("metadata") or value.get("raw"), str):
        value = value.get("metadata") or value.get("raw")
    if isinstance(value, str):
        return parse_raw_metadata(value, vid, problems)
    if isinstance(value, dict):
        return VaseRecord.from_json({**value, "id": vid}, str(path), problems)
    _fault(problems, "missing_dimension", vid, f"{path}: metadata of vase {vid!r} is a {type(value).__name__}; "
                                               f"expected a raw museum line or an object with the six dimensions")
    return VaseRecord(vid, None, None, None, None, None, None)


def _model_for(root: Path, vid: str) -> str:
    exact = default_model(vid)
    if (root / exact).is_file():
        return exact
    stem = safe_name(vid)
    found = sorted((root / "models").glob(f"{glob_escape(stem)}*.glb")) if (root / "models").is_dir() else []
    return f"models/{found[0].name}" if found else ""


def glob_escape(s: str) -> str:
    return re.sub(r"([\[\]*?])", r"[\1]", s)


def read_release(root: Path, problems: Problems | None = None) -> list[VaseRecord]:
    """The VaseVQA-3D release: records from metadata.json, captions.json and qa_pairs.json (any present)."""
    ann = root / "annotations"
    what = {"captions.json": "a caption", "qa_pairs.json": "QA pairs", "metadata.json": "the raw museum metadata"}
    keyed = {f: _each_file(problems, read_keyed, ann / f, what[f]) for f in RELEASE_FILES if (ann / f).is_file()}
    keyed = {f: k for f, k in keyed.items() if k is not None}
    ids = sorted(set().union(*(set(k) for k in keyed.values())))
    records = []
    for vid in ids:
        meta = keyed.get("metadata.json", {}).get(vid)
        if meta:
            if len(meta) > 1:
                _fault(problems, "duplicate_id", vid, f"{ann / 'metadata.json'}: vase id {vid!r} appears {len(meta)} times")
            rec = _record_from_metadata(meta[-1], ann / "metadata.json", vid, problems)
        else:
            _fault(problems, "missing_dimension", vid, f"{ann / 'metadata.json'}: no metadata for vase {vid!r}")
            rec = VaseRecord(vid, None, None, None, None, None, None)
        caps = keyed.get("captions.json", {}).get(vid)
        if caps:
            if len(caps) > 1:
                _fault(problems, "duplicate_id", vid, f"{ann / 'captions.json'}: vase id {vid!r} appears {len(caps)} times")
            rec.caption = _caption_of(caps[-1], ann / "captions.json", vid, problems)
        elif rec.has_dimensions:
            rec.caption = make_caption(rec)
        qas = keyed.get("qa_pairs.json", {}).get(vid)
        rec.qa = _qa_of(qas, ann / "qa_pairs.json", vid, problems) if qas else (make_qa(rec) if rec.has_dimensions else [])
        rec.model = _model_for(root, vid)
        records.append(rec)
    return records


# ------------------------------------------------------------------------------------------------ paper_eval


def read_paper_eval(root: Path, problems: Problems | None = None) -> list[VaseRecord]:
    """The paper's evaluation folder: view-image folders per model plus groundTruth.json, keyed by its scorer's rule."""

    gt_path = root / "groundTruth.json"
    data = read_json(gt_path)
    if not isinstance(data, list):
        raise DataError(f"{gt_path}: expected the paper's list of {{\"images\": [name], \"caption\": text}}, got a "
                        f"JSON {type(data).__name__}")
    captions: dict[str, str] = {}
    for n, item in enumerate(data):
        if not (isinstance(item, dict) and item.get("images") and isinstance(item.get("caption"), str)):
            _fault(problems, "bad_caption", f"#{n}", f"{gt_path}: item {n} lacks 'images' or a 'caption' text")
            continue
        key = paper_key(Path(str(item["images"][0])).name)
        if key in captions:
            _fault(problems, "duplicate_id", key, f"{gt_path}: id {key!r} appears twice (the paper's scorer keeps "
                                                  f"the last caption)")
        captions[key] = item["caption"]
    folders: dict[str, Path] = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        key = paper_key(d.name)
        if key in folders:
            _fault(problems, "duplicate_id", key, f"{d}: a second view folder for id {key!r} ({folders[key].name})")
            continue
        folders[key] = d
    records = []
    for vid in sorted(set(captions) | set(folders)):
        rec = VaseRecord(vid, None, None, None, None, None, None, caption=captions.get(vid, ""))
        if vid not in captions:
            _fault(problems, "bad_caption", vid, f"{gt_path}: no ground-truth caption for the view folder of {vid!r}")
        if vid in folders:
            rec.images = [str(_view_file(folders[vid], v) or folders[vid] / f"{v}.jpg") for v in VIEWS]
        else:
            _fault(problems, "missing_view", vid, f"{root}: no view folder for {vid!r} (named in {gt_path.name})")
        records.append(rec)
    return records


def _view_file(folder: Path, view: str) -> Path | None:
    for ext in (".jpg", ".jpeg", ".png"):
        if (folder / f"{view}{ext}").is_file():
            return folder / f"{view}{ext}"
    return None


# ------------------------------------------------------------------------------------------------ ms-swift JSONL


def _media(line: dict, key: str, base: Path) -> list[str]:
    out = []
    for m in line.get(key) or []:
        p = m.get("path") if isinstance(m, dict) else m
        p = Path(str(p)).expanduser()
        out.append(str(p if p.is_absolute() else base / p))
    return out


def _turns(msgs: list[Any], line: dict, where: str) -> tuple[str, list[tuple[str, str]]]:
    """A conversation's system prompt and its (question, answer) pairs, in order. A last user turn without an answer
    takes the line's ``solution`` (ms-swift's GRPO lines). Anything else that does not alternate user/assistant is
    a DataError naming ``where`` (file:line): a chat is never paired up by guess."""
    system, pairs, question = "", [], None
    for k, m in enumerate(msgs):
        role, content = (m.get("role"), m.get("content")) if isinstance(m, dict) else (None, None)
        if not isinstance(content, str):
            raise DataError(f"{where}: message {k} has no text content (ms-swift messages are role + content text)")
        if role == "system":
            if pairs or question is not None:
                raise DataError(f"{where}: message {k} is a system message after the conversation began")
            system = content
        elif role == "user":
            if question is not None:
                raise DataError(f"{where}: messages {k - 1} and {k} are two user turns in a row; each question "
                                f"needs its answer")
            question = content
        elif role == "assistant":
            if question is None:
                raise DataError(f"{where}: message {k} is an assistant turn without a question before it")
            pairs.append((question, content))
            question = None
        else:
            raise DataError(f"{where}: message {k} has role {role!r}; expected system, user or assistant")
    if question is not None:
        solution = line.get("solution")
        if not isinstance(solution, str):
            raise DataError(f"{where}: the last user turn has no answer (no assistant message, no 'solution' column)")
        pairs.append((question, solution))
    if not pairs:
        raise DataError(f"{where}: no user/assistant pair")
    return system, pairs


def _swift_record(line: dict, vid: str, where: str, problems: Problems | None) -> VaseRecord:
    """A vase's record from its first line: dimensions from a ``metadata`` column (raw museum line), or from the six
    dimension columns (vase's ``swift-grpo`` export), else none (the vase trains captions)."""
    meta = line.get("metadata")
    if isinstance(meta, str):
        return parse_raw_metadata(meta, vid, problems)
    if all(d in line for d in DIMENSIONS):
        if line.get("task", "caption") == "caption" or all(line[d] is not None for d in DIMENSIONS):
            return VaseRecord.from_json({**line, "id": vid}, where, problems)
    return VaseRecord(vid, None, None, None, None, None, None)


def read_swift(path: Path, problems: Problems | None = None) -> list[VaseRecord]:
    """One ms-swift JSONL file to records (lines of one vase merged). Each user/assistant pair of a conversation
    is a sample of its own: one of vase's six questions is that dimension's QA pair, the vase's first other
    question its caption (with its instruction kept), later ones free-form QA pairs. A system message is the
    vase's system prompt. GRPO lines (a user turn and a ``solution``) read as that pair."""
    by_id: dict[str, VaseRecord] = {}
    base = path.parent
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            where = f"{path}:{n}"
            try:
                line = json.loads(raw)
            except json.JSONDecodeError as e:
                _fault(problems, "bad_line", f"{path.name}:{n}", f"{where}: not JSON ({e.msg})")
                continue
            msgs = line.get("messages") if isinstance(line, dict) else None
            if not isinstance(msgs, list):
                _fault(problems, "bad_line", f"{path.name}:{n}", f"{where}: no 'messages' list (ms-swift format)")
                continue
            try:
                system, pairs = _turns(msgs, line, where)
            except DataError as e:
                _fault(problems, "bad_line", f"{path.name}:{n}", str(e))
                continue
            images, videos = _media(line, "images", base), _media(line, "videos", base)
            vid = str(line.get("id") or normalize_id((images or videos or [f"line{n}"])[0]))
            rec = by_id.get(vid)
            if rec is None:
                rec = by_id[vid] = _swift_record(line, vid, where, problems)
                rec.caption, rec.images, rec.videos, rec.system = "", images, videos, system
                rec.source = where if line.get("id") else f"{where} (no 'id' column: the vase is named after its media)"
            elif (images, videos) != (rec.images, rec.videos):
                gone = [m for m in images + videos if not Path(m).exists()]
                if gone:  # a file this line lists is not there: that, not the difference, is what to fix
                    more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
                    _fault(problems, "missing_view", vid, f"{where}: {gone[0]}: listed for vase {vid!r} but "
                                                          f"missing{more}")
                else:
                    _fault(problems, "bad_line", vid, f"{where}: vase {vid!r} appears with other media than on an "
                                                      f"earlier line")
            elif not rec.has_dimensions and (full := _swift_record(line, vid, where, problems)).has_dimensions:
                for d in DIMENSIONS:  # a GRPO export's QA line came first: its caption line states all six
                    setattr(rec, d, getattr(full, d))
            if system != rec.system:
                _fault(problems, "bad_line", vid, f"{where}: vase {vid!r} has another system prompt than on an "
                                                  f"earlier line")
            for user, answer in pairs:
                question = _TAG.sub("", user).strip()
                dim = _QUESTION_DIM.get(question.lower())
                if dim is not None:
                    rec.qa.append({"dimension": dim, "question": question, "answer": answer})
                elif not rec.caption:
                    rec.caption, rec.prompt = answer, question
                else:
                    rec.qa.append({"dimension": "other", "question": question, "answer": answer})
    return list(by_id.values())


# ------------------------------------------------------------------------------------------------ splits


def split_ids(ids: list[str], seed: int, val_fraction: float) -> dict[str, list[str]]:
    """A seeded split by vase id: sorted ids shuffled with ``seed``, the first ``val_fraction`` to val.

    >>> s = split_ids([f"v{i}" for i in range(10)], seed=0, val_fraction=0.2)
    >>> len(s["val"]), len(s["train"]), set(s["val"]) & set(s["train"])
    (2, 8, set())
    """
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    n_val = max(1, round(len(order) * val_fraction)) if len(order) > 1 else 0
    return {"train": sorted(order[n_val:]), "val": sorted(order[:n_val])}


def read_records(root: str | Path, layout: str = "auto", problems: Problems | None = None) -> dict[str, list[VaseRecord]]:
    """All records of a dataset by split: ``{"train": ..., "val": ...}`` where the layout has splits, else
    ``{"all": ...}``."""
    root = Path(root)
    layout = detect_layout(root) if layout == "auto" else layout
    if layout == "vase":
        splits = {s: _each_file(problems, load_annotations, root / "annotations" / f"{s}.json")
                  for s in ("train", "val") if (root / "annotations" / f"{s}.json").is_file()}
        return {s: rs for s, rs in splits.items() if rs is not None}
    if layout == "release":
        return {"all": read_release(root, problems)}
    if layout == "paper_eval":
        return {"all": read_paper_eval(root, problems)}
    if layout == "swift":
        if root.is_file():
            return {"all": read_swift(root, problems)}
        named = {s: root / f"{s}.jsonl" for s in ("train", "val") if (root / f"{s}.jsonl").is_file()}
        if named:
            found = {s: _each_file(problems, read_swift, p) for s, p in named.items()}
            return {s: rs for s, rs in found.items() if rs is not None}
        return {"all": [r for p in sorted(root.glob("*.jsonl")) for r in _each_file(problems, read_swift, p) or []]}
    raise DataError(f"data.layout={layout!r} must be auto or one of {list(LAYOUTS)}")


def load_split(root: str | Path, split: str, layout: str = "auto", seed: int = 0, val_fraction: float = 0.1,
               split_file: str | Path | None = None, cache_dir: str | Path | None = None) -> list[VaseRecord]:
    """The records of one split. A layout without splits is split by vase id: by ``split_file`` (JSON with
    ``train`` and ``val`` id lists) when given, else seeded, and the split is saved under ``cache_dir/splits/``
    (never into the dataset) so later runs and other tools see the same one."""
    by_split = read_records(root, layout)
    if split in by_split:
        return by_split[split]
    if "all" not in by_split:
        raise DataError(f"{root}: no {split!r} split (it has {sorted(by_split)})")
    records = by_split["all"]
    ids = [r.id for r in records]
    if split_file:
        chosen = read_json(split_file)
        if not (isinstance(chosen, dict) and isinstance(chosen.get(split), list)):
            raise DataError(f"{split_file}: expected {{\"train\": [ids], \"val\": [ids]}} (data.split.file)")
        unknown = sorted(set(chosen[split]) - set(ids))
        if unknown:
            raise DataError(f"{split_file}: {len(unknown)} id(s) of split {split!r} are not in {root}: {unknown[:5]}")
        keep = set(chosen[split])
    else:
        split_ids_ = split_ids(ids, seed, val_fraction)
        if cache_dir:
            saved = Path(cache_dir) / "splits" / f"{path_key(root)}-s{seed}-v{val_fraction}.json"
            if not saved.is_file() or read_json(saved).get("ids") != sorted(ids):
                atomic_write_json(saved, {"root": str(Path(root).resolve()), "seed": seed,
                                          "val_fraction": val_fraction, "ids": sorted(ids), **split_ids_})
            split_ids_ = {k: read_json(saved)[k] for k in ("train", "val")}
        if split not in split_ids_:
            raise DataError(f"split {split!r} must be train or val")
        keep = set(split_ids_[split])
    return [r for r in records if r.id in keep]
