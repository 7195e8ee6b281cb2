"""``python -m vase.render``: the command's old name, accepted until vase 0.3 with one deprecation line; the
command is ``vase render`` (`vase.data.render`: it asks the dataset which models to render, a floor above the
renderer, so it is run by name here, as ``vase <command>`` runs every command)."""

from __future__ import annotations

import runpy
import sys

from vase.config.renames import deprecation, say_deprecated
from vase.errors import ConfigError

if __name__ == "__main__":
    try:
        say_deprecated(deprecation("python -m vase.render", "vase render (python -m vase.data.render)"))
    except ConfigError as e:  # VASE_DEPRECATIONS=error
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    runpy.run_module("vase.data.render", run_name="__main__", alter_sys=True)
