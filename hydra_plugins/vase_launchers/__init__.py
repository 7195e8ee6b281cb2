"""vase's sweeper and launchers where Hydra looks for plugins (only under ``hydra_plugins``): a sweep that goes on
past a failed or killed job and names it in its report. The logic is `vase.launchers`; these names are what the
configs' ``_target_`` give (conf/hydra/sweeper/keep_going.yaml, conf/cluster/local.yaml and slurm.yaml). And vase's
configs on every command's search path, after the user's own folder where ``--config-dir`` names one."""

from vase import launchers, search
from vase.config.searchpath import VaseConfigs

__all__ = ["CheckingOptunaSweeper", "KeepGoingBasicSweeper", "SearchConfirmSweeper", "SubmititLocalLauncher",
           "SubmititSlurmLauncher", "VaseConfigs"]


class KeepGoingBasicSweeper(launchers.KeepGoingBasicSweeper):
    """`vase.launchers.KeepGoingBasicSweeper`, registered with Hydra."""


class CheckingOptunaSweeper(launchers.CheckingOptunaSweeper):
    """`vase.launchers.CheckingOptunaSweeper`, registered with Hydra."""


class SubmititLocalLauncher(launchers.SubmititLocalLauncher):
    """`vase.launchers.SubmititLocalLauncher`, registered with Hydra."""


class SubmititSlurmLauncher(launchers.SubmititSlurmLauncher):
    """`vase.launchers.SubmititSlurmLauncher`, registered with Hydra."""


class SearchConfirmSweeper(search.SearchConfirmSweeper):
    """`vase.search.SearchConfirmSweeper`, registered with Hydra."""
