"""vase's configs on Hydra's search path after the primary folder, so that a command whose primary folder is the
user's project (``vase train --config-dir conf``) composes vase's groups too, and the user's file of the same name
wins. Where vase's folder is the primary one (``python train.py``) this adds nothing new."""

from __future__ import annotations

import importlib

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

from vase.config.options import CONF_DIR


class VaseConfigs(SearchPathPlugin):
    """The search-path plugin: Hydra finds it under ``hydra_plugins`` in an installed wheel; `register` makes sure
    of it where an editable install hides that package from Hydra's scan."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="vase", path=f"file://{CONF_DIR}")


def register() -> None:
    """Register `VaseConfigs` and vase's sweepers and launchers (``hydra_plugins.vase_launchers``) with Hydra, once
    (a second call changes nothing): Hydra finds plugins by scanning ``hydra_plugins`` on ``sys.path``, which an
    editable install's import hook hides from a console command (``vase train`` from any folder)."""
    plugins = Plugins.instance()  # Hydra's scan first: it re-executes the modules it finds (its own sweepers too)
    # then vase's, by name, as Hydra's scan imports plugins: they subclass Hydra's sweepers, so imported before the
    # scan they would subclass classes the scan replaces (super() then fails in Hydra's own __init__)
    ours = importlib.import_module("hydra_plugins.vase_launchers")

    for name in ours.__all__:
        plugins.register(getattr(ours, name))
