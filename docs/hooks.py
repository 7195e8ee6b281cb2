"""MkDocs hook: the site names the vase version it documents (``vase 0.1.0`` in every page's header and title), read
from ``vase/__init__.py``, the one place the version is set."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def version() -> str:
    text = (Path(__file__).resolve().parents[1] / "vase" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"', text, flags=re.M)
    if not found:
        raise SystemExit("vase/__init__.py: no __version__ line; the docs name the version they document")
    return found.group(1)


def on_config(config: Any) -> Any:
    config["site_name"] = f"vase {version()}"
    return config
