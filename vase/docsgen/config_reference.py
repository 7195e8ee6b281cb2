"""The configuration reference, generated from ``conf/`` and the structured configs in `vase.config`.

    python -m vase.docsgen.config_reference            # writes docs/reference/configuration.md
    python -m vase.docsgen.config_reference --check    # exit 1 when the committed page differs from what this makes

Every primary config (``train.yaml``, ``evaluate.yaml``, ...) and every option of every group: each key with its
type (the schema's annotation where `vase.config.SECTIONS` has one, else the default's), its default as the
YAML file writes it (interpolations unresolved), and its one-line doc (the comment on the key's line, else the comment
block right above it). ``make docs`` builds the page; a test fails when it drifts from the code.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import re
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from vase import markdown as md
from vase.config import SECTIONS
from vase.config.options import CONF_DIR
from vase.io import atomic_write_text
from vase.metrics.registry import CAPTION_METRICS

ROOT = Path(__file__).resolve().parents[2]
CONF = CONF_DIR
"""vase's configs: the checkout's conf/, or an installed wheel's vase/conf/ (the package's conf folder either way)."""
IN_CHECKOUT = (ROOT / "docs" / "reference").is_dir()
"""Whether vase runs from its checkout, whose docs this generator keeps; an installed wheel has none."""
PAGE = ROOT / "docs" / "reference" / "configuration.md" if IN_CHECKOUT else Path("configuration.md")
"""Where the reference goes: the docs' page in a checkout; from an installed wheel, configuration.md in the current
folder (never into the installed package)."""
PRIMARY = ("train", "evaluate", "curate", "generate3d")
_KEY = re.compile(r"^(\s*)([A-Za-z_@][\w@.\-/]*|\"[^\"]+\"|'[^']+'):(\s|$)(.*)$")


def _comment(rest: str) -> str:
    """The ``# comment`` that ends a YAML line's value, if any (a ``#`` inside quotes is not one)."""
    quote = None
    for i, ch in enumerate(rest):
        if ch in "\"'" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (i == 0 or rest[i - 1] in " \t"):
            return rest[i + 1:].strip()
    return ""


def _one_line(text: str) -> str:
    """A comment's whole text on one line: never cut (a cut description left its reader no way to the rest)."""
    return " ".join(text.split())


def key_docs(path: Path, inline_only: bool = False) -> dict[str, str]:
    """Dotted key -> its doc, from the comments of one YAML file (``inline_only``: only the comment on the key's own
    line and its wrapped continuation, never a block above)."""
    docs: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    above: list[str] = []
    block_indent: int | None = None  # inside a block scalar (key: |) or a list: skipped
    last: tuple[str, int] | None = None  # the previous key and the column of its inline comment
    seen_key = False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if block_indent is not None and (not stripped or indent > block_indent):
            continue
        block_indent = None
        if not stripped:
            above = []
            continue
        if stripped.startswith("#"):
            if last is not None and indent == last[1]:  # the previous key's inline comment, wrapped
                docs[last[0]] = _one_line(docs.get(last[0], "") + " " + stripped.lstrip("#").strip())
                continue
            last = None
            if not stripped.startswith("# @package"):
                above.append(stripped.lstrip("#").strip())
            continue
        m = _KEY.match(line)
        if m is None or stripped.startswith("- "):
            above = []
            continue
        key = m.group(2).strip("\"'")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([k for _, k in stack] + [key])
        rest = m.group(4)
        inline = _comment(rest)
        doc = inline or (" ".join(above) if seen_key and not inline_only else "")  # a file's opening comment is its own
        seen_key = True
        if doc:
            docs[dotted] = _one_line(doc)
        above = []
        last = (dotted, line.index("#", len(line) - len(rest) + rest.index(inline) - 2)) if inline else None
        value = rest.split(" #")[0].strip()
        if value in ("", "|", ">", "|-", ">-"):
            if value:
                block_indent = indent
            else:
                stack.append((indent, key))
    return docs


def _flatten(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, DictConfig):
        out: list[tuple[str, Any]] = []
        for k in node.keys():
            if prefix == "" and k == "defaults":
                continue
            v = node._get_node(k)
            key = f"{prefix}{k}"
            if isinstance(v, DictConfig) and len(v) and not v._is_interpolation() and "_target_" not in v:
                out += _flatten(v, key + ".")
            elif isinstance(v, DictConfig) and "_target_" in v and not v._is_interpolation():
                out += _flatten(v, key + ".")
            else:
                out.append((key, v))
        return out
    return [(prefix.rstrip("."), node)]


def _shown(v: Any) -> str:
    if isinstance(v, (DictConfig, ListConfig)):
        value = str(v._value()) if v._is_interpolation() else OmegaConf.to_container(v, resolve=False)
    else:
        value = v._value() if hasattr(v, "_value") else v
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)  # whole: the reference is where it is read


def _type_of(section: str | None, key: str, v: Any, elsewhere: str | None = None) -> str:
    schema = SECTIONS.get(section) if section else None
    field = key.split(".")[0] if schema is not None else None
    if schema is not None and field in {f.name for f in dataclasses.fields(schema)} and "." not in key:
        hints = typing.get_type_hints(schema)
        hint = hints.get(field)
        if hint is not None:
            text = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
            return re.sub(r"\bvase\.config\.\w+\.", "vase.config.", text)  # a schema by the path it is imported from
    value = v._value() if hasattr(v, "_value") else v
    if isinstance(value, str) and "${" in value:
        return "interpolation"
    if isinstance(v, ListConfig):
        return "list"
    if isinstance(v, DictConfig):
        return "mapping"
    if value is None:  # null here: the type the key has where a file gives it a value, else what it takes
        full = f"{section}.{key}" if section else key
        known = elsewhere or NULL_TYPES.get(full) or NULL_TYPES.get(key) or (
            "str (path)" if key.rsplit(".", 1)[-1] in PATH_KEYS else None)
        return f"{known} | null" if known else "any | null"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), type(value).__name__)


def _cell(text: str, html: bool = False) -> str:
    """A table cell's text: pipes escaped; with ``html``, a comment's path with a ``<placeholder>`` in it
    (``logs/<run_kind>/...``) shown as code, other angle brackets escaped."""
    text = text.replace("|", "\\|").replace("\n", " ")
    if not html:
        return text
    path = r"(?<![\w`])([\w./~-]*<\w+>[\w./<>~-]*|\{\w+\})"
    text = "".join(p if p.startswith("`") else re.sub(path, r"`\1`", p) for p in re.split(r"(`[^`]*`)", text))
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;")
                   for p in re.split(r"(`[^`]*`)", text))


def shared_docs() -> dict[str, str]:
    """Full dotted key -> the doc of the file that defines the key, for a file that sets it without a comment: a group's
    key (``trainer.max_steps``) is defined by the group's options (the option train.py chooses first, then the others);
    a top-level key by the primary config (train.yaml first). Experiments, sweeps and other global overrides set keys
    but never define one: their comments describe their own values and stay in their own rows."""
    out: dict[str, str] = {}
    defaults = {**_defaults(CONF / "evaluate.yaml"), **_defaults(CONF / "train.yaml")}
    for g in sorted(p for p in CONF.iterdir() if p.is_dir()):
        options = sorted(g.glob("*.yaml"), key=lambda p: (p.stem != defaults.get(g.name), p.stem))
        for path in options:
            if _is_global(path):
                continue
            for key, doc in key_docs(path).items():
                out.setdefault(f"{g.name}.{key}", doc)
    for name in PRIMARY:
        for key, doc in key_docs(CONF / f"{name}.yaml").items():
            out.setdefault(key, doc)
    return out


def _single_interpolation(value: str) -> bool:
    """Whether a value is one ``${...}`` and nothing else (``${a}/x/${b}`` is not: it has no one key to follow).

    >>> _single_interpolation("${render}"), _single_interpolation("${a.b:${c}}"), _single_interpolation("${a}/x/${b}")
    (True, True, False)
    """
    if not (value.startswith("${") and value.endswith("}")):
        return False
    depth = 0
    for i, ch in enumerate(value[1:], 1):  # from the opening brace: the first ${ must close at the very end
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0 and i < len(value) - 1:
            return False
    return True


def _fallback(full: str, v: Any, shared: dict[str, str]) -> str:
    """A doc for a key no file comments: the same key of the stage it configures, what an interpolation follows,
    what a sweep's parameter or an instantiated node's ``_target_`` is."""
    head, _, rest = full.partition(".")
    if head in ("followup", "sft") and shared.get(f"stage.{rest}"):
        return shared[f"stage.{rest}"]
    if full.startswith("hydra.sweeper.params."):
        return f"the values the sweep runs for `{full.removeprefix('hydra.sweeper.params.')}`"
    if full.endswith("._target_") or full == "_target_":
        return "the class Hydra instantiates for this node (your own class works the same way)"
    if full.endswith("._partial_"):
        return "Hydra builds a partial: the module calls it with the parameters it optimises"
    if full == "hydra.mode":
        return "MULTIRUN: this file runs as a sweep (as with -m)"
    if full == "action":
        return "the action this file configures (chosen with action=<name>)"
    value = v._value() if hasattr(v, "_value") else v
    if isinstance(value, str) and _single_interpolation(value):
        return f"follows `{value[2:-1]}` unless set"
    return ""


def documented(path: Path, section: str | None, shared: dict[str, str]) -> list[tuple[str, Any, str]]:
    """Each key a file sets, its value and its doc: the file's own comment, else what the key is by structure (an
    interpolation, a ``_target_``, a sweep's parameter, a second stage's key, a field documented on its mapping's
    first entry), else, for a file that only overrides (an experiment, a sweep, debug, cluster), the doc of the file
    that defines the key (`shared_docs`). A group option and a primary config define their keys: their docs are
    their own."""
    node = OmegaConf.load(path)
    overrides = _is_global(path) and path.parent != CONF  # an experiment, a sweep, debug, cluster: it sets, never defines
    docs = key_docs(path, inline_only=overrides)
    out = []
    seen: dict[str, str] = {}
    for key, v in _flatten(node):
        full = f"{section}.{key}" if section and not _is_global(path) else key
        if overrides:  # the key's own description (where it is defined); a comment above may speak of several keys
            doc = (shared.get(full) or _fallback(full, v, shared) or docs.get(key) or _override_docs().get(full)
                   or key_docs(path).get(key) or "")  # a block above: only for a key nothing else describes
        else:
            doc = docs.get(key) or _fallback(full, v, shared) or _sibling(full, seen) or shared.get(full) or ""
        seen[full] = doc
        out.append((full, v, doc))
    return out


@functools.cache
def _override_docs() -> dict[str, str]:
    """Keys no group or primary config defines (an experiment's ``hypothesis`` block, ``model.tiny``): the first
    comment on the key's own line in any experiment or sweep file."""
    out: dict[str, str] = {}
    for path in sorted(CONF.glob("*/*.yaml")):
        if _is_global(path):
            for key, doc in key_docs(path, inline_only=True).items():
                out.setdefault(key, doc)
    return out


def all_documented() -> list[tuple[Path, str, str]]:
    """Every key of every config file the reference shows: (file, full key, its description)."""
    shared = shared_docs()
    files = [(CONF / f"{n}.yaml", None) for n in PRIMARY] + group_files()
    return [(path, full, doc) for path, section in files for full, _, doc in documented(path, section, shared)]


def missing_docs() -> list[str]:
    """``file: key`` for each key the reference would show without a description of its own (the check fails)."""
    return [f"{path.relative_to(CONF)}: {full}" for path, full, doc in all_documented() if not doc]


def _sibling(full: str, seen: dict[str, str]) -> str:
    """A field documented on another entry of the same mapping earlier in the same file (``reward.terms.shape.
    similarity`` by ``reward.terms.fabric.similarity``)."""
    parts = full.split(".")
    if len(parts) < 3:
        return ""
    head, last = ".".join(parts[:-2]), parts[-1]
    return next((d for k, d in seen.items() if d and k.startswith(head + ".") and k.endswith("." + last)
                 and k.count(".") == full.count(".")), "")


def option_table(path: Path, section: str | None, shared: dict[str, str],
                 types: dict[str, str] | None = None) -> list[str]:
    rows = md.table(["key", "type", "default", "doc"])
    types = known_types() if types is None else types
    for full, v, doc in documented(path, section, shared):
        key = full[len(section) + 1:] if section and not _is_global(path) and full.startswith(section + ".") else full
        typ = _type_of(section if not _is_global(path) else None, key, v, types.get(full))
        rows.append(f"| `{_cell(full)}` | {_cell(typ)} | `{_cell(_shown(v))}` | {_cell(doc, html=True)} |")
    return rows if len(rows) > 2 else ["(no keys: choosing it adds nothing)"]


PATH_KEYS = ("ckpt_path", "init_adapter", "adapter", "index_dir", "input", "file", "checkpoint", "train_dir",
             "imagenet_weights", "metadata", "pretrained", "cwd", "generated", "ground_truth", "gt_dir", "captions",
             "weights")
"""Keys (by their last name) that are null by default and take a path (or a hub id, for weights) when set."""
NULL_TYPES = {"sft": "stage config (mapping)", "followup": "stage config (mapping)", "retrieval.url": "str (URL)",
              "cluster.partition": "str", "cluster.account": "str", "cluster.tasks_per_node": "int",
              "filter.clip.threshold": "float", "sft.limit_train": "int", "stage.module.negative_control": "str",
              "methods": "mapping", "trainer.max_time": "str (DD:HH:MM:SS)"}
"""Keys null in every file whose type no value shows: what they take when set."""


def known_types() -> dict[str, str]:
    """Full dotted key -> the type its non-null values have in any file (a key that is null where it is defined still
    has a type where it is set: ``init_adapter`` is a path string in the experiments that give one)."""
    out: dict[str, str] = {}
    files = [*group_files(), *((CONF / f"{n}.yaml", None) for n in PRIMARY)]
    for path, section in files:
        prefix = f"{section}." if section else ""
        for key, v in _flatten(OmegaConf.load(path)):
            if (v._value() if hasattr(v, "_value") else v) is None:
                continue
            t = _type_of(None, key, v)
            if t != "interpolation":
                out.setdefault(prefix + key, t)
    return out


def _is_global(path: Path) -> bool:
    return "@package _global_" in path.read_text().split("\n", 1)[0] or path.parent == CONF


def _section(path: Path) -> str | None:
    """Where an option file's keys land: None for a global one, its ``# @package`` header's package, else its group's
    path with dots (``hydra/sweeper/search_confirm.yaml``: ``hydra.sweeper``)."""
    if _is_global(path):
        return None
    first = path.read_text().split("\n", 1)[0]
    if first.startswith("# @package "):
        return first.removeprefix("# @package ").strip()
    return ".".join(path.parent.relative_to(CONF).parts)


def _subgroups(g: Path) -> list[Path]:
    """A group's nested groups that hold options (``hydra/sweeper``, ``sweep/space``)."""
    return sorted(d for d in g.iterdir() if d.is_dir() and any(d.glob("*.yaml")))


def group_files() -> list[tuple[Path, str | None]]:
    """Every option file of every group and nested group, with where its keys land (`_section`)."""
    return [(p, _section(p)) for g in sorted(CONF.iterdir()) if g.is_dir()
            for d in (g, *_subgroups(g)) for p in sorted(d.glob("*.yaml"))]


def _description(path: Path) -> list[str]:
    """The option's whole description: the comment block its file opens with, each line as written (without ``#``)."""
    out = []
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("# @package"):
            continue
        if not s.startswith("#"):
            break
        out.append(s[1:].rstrip()[1:] if s[1:].startswith(" ") else s[1:].rstrip())
    return out


def _described(path: Path) -> list[str]:
    """Markdown for an option's description: its prose as a paragraph, its command lines (indented in the comment) as a
    shell block."""
    prose, commands = [], []
    for line in _description(path):
        (commands if line.startswith("  ") else prose).append(line.strip() if line.startswith("  ") else line)
    out = [_cell(" ".join(prose), html=True)] if prose else []
    if commands:
        out += ["", "```sh", *commands, "```"]  # sh, not bash: the docs-commands test runs only bash blocks
    return out


def _defaults(path: Path) -> dict[str, str]:
    node = OmegaConf.load(path)
    out: dict[str, str] = {}
    for entry in node.get("defaults", []) if isinstance(node, DictConfig) else []:
        if isinstance(entry, DictConfig):
            for k, v in entry.items():
                out[str(k).split("@")[0].removeprefix("override ").strip("/")] = str(v)
    return out


def generate() -> str:
    shared, types = shared_docs(), known_types()
    lines = ["# Configuration reference", "",
             "Generated from `conf/` and the structured configs in `vase.config` by "
             "`python -m vase.docsgen.config_reference`; do not edit by hand (`make test` fails when this page differs "
             "from what the code generates). Every key can be set on the command line (`python train.py "
             "stage.module.beta=0.04`); a group's option is chosen by its name (`python train.py stage=grpo`). Types "
             "come from the schema where `vase.config` validates the section, else from the default; defaults are as "
             "the YAML writes them (`${...}` is resolved at run time).", ""]
    lines += ["## Entry points", "", *md.table(["config", "used by", "default options"])]
    users = {"train": "`python train.py`", "evaluate": "`python evaluate.py`", "curate": "`python -m vase.filter`",
             "generate3d": "`python -m vase.reconstruct`"}
    for name in PRIMARY:
        d = _defaults(CONF / f"{name}.yaml")
        shown = ", ".join(f"`{k}={v}`" for k, v in d.items() if k != "_self_" and v not in ("None", "null"))
        lines.append(f"| [`{name}.yaml`](#{name}yaml) | {users[name]} | {_cell(shown)} |")
    lines.append("")
    for name in PRIMARY:
        path = CONF / f"{name}.yaml"
        lines += [f"### {name}.yaml", "", *_described(path), "", *option_table(path, None, shared, types), ""]
    lines += ["## Groups", ""]
    groups = sorted(p for p in CONF.iterdir() if p.is_dir())
    lines += md.table(["group", "options", "default in train.py"])
    train_defaults = _defaults(CONF / "train.yaml")
    for g in groups:
        opts = sorted(p.stem for p in g.glob("*.yaml")) + [f"{d.name}/{p.stem}" for d in _subgroups(g)
                                                            for p in sorted(d.glob("*.yaml"))]
        lines.append(f"| [`{g.name}`](#group-{g.name}) | {', '.join(f'`{o}`' for o in opts)} | "
                     f"{'`' + train_defaults[g.name] + '`' if g.name in train_defaults else '–'} |")
    lines.append("")
    for g in groups:
        lines += [f"### Group `{g.name}` {{#group-{g.name}}}", ""]
        for path in [p for d in (g, *_subgroups(g)) for p in sorted(d.glob("*.yaml"))]:
            section = _section(path)
            name = "/".join(path.parent.relative_to(CONF).parts)
            lines += [f"#### `{name}={path.stem}`", "", *_described(path), ""]
            d = _defaults(path)
            if d:
                lines += ["Builds on: " + ", ".join(f"`{k}: {v}`" for k, v in d.items() if k != "_self_"), ""]
            lines += [*option_table(path, section, shared, types), ""]
    return "\n".join(lines).rstrip() + "\n"


GROUPS_PAGE = ROOT / "docs" / "configuration.md"
GROUPS_START = "<!-- groups: generated by python -m vase.docsgen.config_reference from conf/; make docs checks it -->"
GROUPS_END = "<!-- end of groups -->"
GROUP_EXAMPLES = {
    "model": "`model=qwen2_5_vl_3b model.processor.max_pixels=401408`",
    "stage": "`stage.module.lora.r=16 stage.epochs=3`",
    "data": "`data.synthetic.num_vases=200 data.mix=qa`; `data.modality=orbit render.orbit_frames=16` (the 360° orbit "
            "as one video, as the paper trained)",
    "reward": "`reward.tau=0.6 reward.weights.dating=0.3`",
    "trainer": "`trainer=ddp trainer.accelerator=cpu trainer.devices=2`",
    "logger": "`logger.wandb.project=my-vases`; several at once: `logger=[wandb,mlflow]`",
    "render": "`render.resolution=448 render.orbit_frames=36`",
    "metrics": "`metrics.clip.model=ViT-B-32 metrics.clip.pretrained=openai metrics.clip.build_tiny=false`",
    "callbacks": "`callbacks.save_adapter.every_n_epochs=1`; `callbacks=[default,<yours>]`",
    "debug": "`debug=fast` (2 steps on 8 vases); `debug=overfit`, `debug=limit`, `debug=profiler` (recipes)",
    "experiment": "`experiment=demo`",
    "sweep": "`-m sweep=tau`",
    "cluster": "`-m cluster=slurm cluster.partition=gpu`",
    "paths": "`paths.log_dir=/scratch/logs paths.cache_dir=/scratch/cache`",
}
"""Each group's example for the groups table (the options come from conf/): a group of train.yaml without one here
fails the generator, so a new group gets an example."""


def groups_table() -> str:
    """The groups table of docs/configuration.md: every group ``conf/train.yaml`` composes, each with every option
    ``conf/<group>/`` holds (the default first, marked) and its example from `GROUP_EXAMPLES`.

    Raises:
        SystemExit: a group without an example (names it).
    """
    primary = OmegaConf.load(CONF / "train.yaml")
    rows = []
    for entry in primary.get("defaults") or []:
        if not isinstance(entry, DictConfig):
            continue
        key, default = next(iter(entry.items()))
        group = str(key).removeprefix("override ").removeprefix("optional ").split("@")[0]
        if group.startswith(("hydra", "/")) or not (CONF / group).is_dir():
            continue
        if group not in GROUP_EXAMPLES:
            raise SystemExit(f"conf/{group}: a group of conf/train.yaml without an example; add one to GROUP_EXAMPLES "
                             f"in {Path(__file__).relative_to(ROOT)}")
        names = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
        shown = [f"`{n}` (default)" if n == default else f"`{n}`" for n in names]
        rows.append(f"| `{group}` | {', '.join(shown)} | {GROUP_EXAMPLES[group]} |")
    return "\n".join([*md.table(["group", "options (every file of `conf/<group>/`)", "example"]), *rows])


def caption_metrics_table() -> str:
    """The caption metrics table of docs/glossary.md: every entry of `vase.metrics.registry.CAPTION_METRICS` (a metric
    added there is in the glossary once the generator runs; `make docs` fails until it has)."""
    rows = [f"| `{m.key}` | {m.title} | {'higher' if m.higher_is_better else 'lower'}"
            f"{' (in %)' if m.percent else ''} | {'yes' if m.paired else 'no'} | {m.meaning} |"
            for m in CAPTION_METRICS.values()]
    return "\n".join([*md.table(["name", "column", "better", "paired per vase", "meaning"]), *rows,
                      "| `n_pairs` | N | | | how many caption and reference pairs were scored |"])


GENERATED_SECTIONS: tuple[tuple[Path, str, str, Callable[[], str]], ...] = (
    (GROUPS_PAGE, GROUPS_START, GROUPS_END, groups_table),
    (ROOT / "docs" / "glossary.md",
     "<!-- caption metrics: generated by python -m vase.docsgen.config_reference from vase.metrics.registry -->",
     "<!-- end of caption metrics -->", caption_metrics_table),
)
"""The docs' tables this generator writes between markers: (page, start marker, end marker, what goes between)."""


def with_section(page: str, path: Path, start: str, end: str, body: str) -> str:
    """``page`` (the text of ``path``) with the text between ``start`` and ``end`` replaced by ``body``.

    Raises:
        SystemExit: the page lost its markers (names the page and them).
    """
    if start not in page or end not in page:
        raise SystemExit(f"{path}: a generated table's markers are gone; put back {start!r} and {end!r} around it")
    head, rest = page.split(start, 1)
    return head + start + "\n\n" + body + "\n\n" + end + rest.split(end, 1)[1]


def with_groups_table(page: str) -> str:
    """``page`` (docs/configuration.md) with the text between its groups markers replaced by `groups_table`."""
    return with_section(page, GROUPS_PAGE, GROUPS_START, GROUPS_END, groups_table())


def differing_keys(old: str, new: str) -> list[str]:
    r"""The keys whose rows differ between two versions of the page (or, for other lines, their first words).

    >>> differing_keys("| `a` | int | `1` | x |\n| `b` | int | `2` | y |", "| `a` | int | `1` | x |\n| `b` | int | `3` | y |")
    ['b']
    """
    out: list[str] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")) or not line[1:].strip():
            continue
        m = re.match(r"^\| `([^`]+)` \|", line[1:])
        name = m.group(1) if m else " ".join(line[1:].split()[:4])
        if name not in out:
            out.append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.docsgen.config_reference", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(PAGE))
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from what the code generates")
    a = ap.parse_args(argv)
    text, out = generate(), Path(a.out)
    missing = missing_docs()
    if missing:  # a key shown without a description of its own: write its comment where the key is defined
        print(f"{len(missing)} keys have no description of their own; comment them where they are defined (conf/): "
              f"{'; '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}", file=sys.stderr)
        return 1
    if a.check and not IN_CHECKOUT:
        print("error: --check compares a checkout's docs with its configs; this vase is installed, without its docs "
              "(vase config-reference writes the reference to ./configuration.md)", file=sys.stderr)
        return 2
    sections = [(path, path.read_text(), start, end, body) for path, start, end, body in GENERATED_SECTIONS
                if IN_CHECKOUT]  # the docs' tables: a checkout's only
    sections = [(path, page, with_section(page, path, start, end, body())) for path, page, start, end, body in sections]
    if a.check:
        stale = [str(path) for path, page, new in sections if new != page]
        if stale:
            print(f"{', '.join(stale)}: a generated table differs from what it is made from (conf/, the registries): "
                  f"run python -m vase.docsgen.config_reference", file=sys.stderr)
            return 1
        current = out.read_text() if out.is_file() else ""
        if current != text:
            changed = differing_keys(current, text)
            print(f"{out} differs from the configs in {', '.join(changed[:12])}"
                  f"{f' and {len(changed) - 12} more' if len(changed) > 12 else ''}: run python -m "
                  f"vase.docsgen.config_reference", file=sys.stderr)
            return 1
        print(f"{out}: up to date")
        return 0
    if out.is_dir():
        print(f"error: --out {out}: a folder; give the file to write (e.g. {out / PAGE.name})", file=sys.stderr)
        return 2
    if out.exists() and not out.read_text(errors="replace").startswith(text.split("\n", 1)[0]):
        print(f"error: --out {out}: the file exists and is not a configuration reference vase generated; vase never "
              f"replaces such a file: choose another path", file=sys.stderr)
        return 2
    atomic_write_text(out, text)
    print(f"wrote {out} ({text.count(chr(10))} lines)")
    for path, page, new in sections:
        if new != page:
            atomic_write_text(path, new)
            print(f"wrote the generated tables of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
