"""vase's sweeper and launchers where Hydra looks for plugins (only under ``hydra_plugins``): a sweep that goes on
past a failed or killed job and names it in its report. The logic is `vase.launchers`; these names are what the
configs' ``_target_`` give (conf/hydra/sweeper/keep_going.yaml, conf/hydra/launcher/parallel.yaml, conf/cluster/local.yaml and slurm.yaml). And vase's
configs on every command's search path, after the primary folder (`VaseConfigs`), so that a command whose primary
folder is the user's project (``vase train --config-dir conf``) composes vase's groups too, and the user's file of the
same name wins; where vase's folder is the primary one (``python train.py``) that adds nothing new.

Import this module only after Hydra's scan of ``hydra_plugins`` (``Plugins.instance()``): its sweepers subclass
Hydra's, and imported before the scan they would subclass classes the scan replaces (super() then fails in Hydra's own
__init__). `vase.cli` and `vase.testing` do so, then call `register`."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

from vase import launchers, search
from vase.config.options import CONF_DIR

__all__ = ["CheckingOptunaSweeper", "KeepGoingBasicSweeper", "ParallelLocalLauncher", "SearchConfirmSweeper",
           "SubmititLocalLauncher", "SubmititSlurmLauncher", "VaseConfigs"]


class VaseConfigs(SearchPathPlugin):
    """The search-path plugin: Hydra finds it under ``hydra_plugins`` in an installed wheel; `register` makes sure
    of it where an editable install hides that package from Hydra's scan."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="vase", path=f"file://{CONF_DIR}")


class KeepGoingBasicSweeper(launchers.KeepGoingBasicSweeper):
    """`vase.launchers.KeepGoingBasicSweeper`, registered with Hydra."""


class CheckingOptunaSweeper(launchers.CheckingOptunaSweeper):
    """`vase.launchers.CheckingOptunaSweeper`, registered with Hydra."""


class SubmititLocalLauncher(launchers.SubmititLocalLauncher):
    """`vase.launchers.SubmititLocalLauncher`, registered with Hydra."""


class ParallelLocalLauncher(launchers.ParallelLocalLauncher):
    """`vase.launchers.ParallelLocalLauncher`, registered with Hydra."""


class SubmititSlurmLauncher(launchers.SubmititSlurmLauncher):
    """`vase.launchers.SubmititSlurmLauncher`, registered with Hydra."""


class SearchConfirmSweeper(search.SearchConfirmSweeper):
    """`vase.search.SearchConfirmSweeper`, registered with Hydra."""


def register() -> None:
    """Register `VaseConfigs` and vase's sweepers and launchers with Hydra, once (a second call changes nothing):
    Hydra finds plugins by scanning ``hydra_plugins`` on ``sys.path``, which an editable install's import hook hides
    from a console command (``vase train`` from any folder)."""
    plugins = Plugins.instance()
    for name in __all__:
        plugins.register(globals()[name])
