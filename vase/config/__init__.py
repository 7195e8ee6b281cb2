"""vase's configuration: schemas and validation of a composed config before any model loads, the ``${vase.*}``
resolvers, and the lifecycle every entry point shares. Importing the package registers the resolvers and schemas.

One job per module (layers from top to bottom; `.importlinter` keeps them so):

- `vase.config.entry`: the entry points' lifecycle (`validated`, `run_entry`, `or_exit`, ``VASE_CHECK_CONFIG``)
- `vase.config.preflight`: the command line checked before Hydra composes (`preflight_overrides`)
- `vase.config.resolvers`: the ``${vase.*}`` resolvers, registered in one table
- `vase.config.validate`: a whole composed config checked (`validate`, `validate_reward`)
- `vase.config.decoding`: how evaluation decodes (`Decoding`)
- `vase.config.targets`: every ``_target_`` imports and takes the keys beside it (`validate_targets`)
- `vase.config.schemas`: one dataclass per section and its range checks (`SECTIONS`)
- `vase.config.naming`: run names, sweep groups, tags and hashes of overrides
- `vase.config.cluster`: the SLURM checks (`check_slurm_signal`, `check_slurm_nodes`)
- `vase.config.tracking`: W&B's offline mode and MLflow's store
- `vase.config.entry_actions`: each entry point's actions (the registry of evaluation actions `EVAL_ACTIONS`, `FILTER_ACTIONS`)
- `vase.config.renames`: the names 0.2 changed, accepted for one release (`renamed_overrides`, `renamed_keys`)
- `vase.config.options`: where ``conf/`` is, and one group option read as its file (`load_option`)
"""

from __future__ import annotations

from vase.config.cluster import (
    SLURM_LIMIT_CHECK_S,
    SLURM_STARTUP_S,
    check_cluster,
    check_slurm_nodes,
    check_slurm_signal,
    slurm_gpus,
    slurm_partition_nodes,
    slurm_tasks,
)
from vase.config.decoding import Decoding
from vase.config.entry import (
    CHECK_ONLY_ENV,
    check_only,
    one_line,
    or_exit,
    process_settings,
    run_entry,
    scratch_sweep_dir,
    validated,
)
from vase.config.entry_actions import (
    EVAL_ACTIONS,
    FILTER_ACTIONS,
    EvalAction,
    actions_help,
    load_eval_action_plugins,
    load_plugins,
    load_project_plugins,
    register_eval_action,
)
from vase.config.naming import (
    folder_name,
    group_name,
    launch_dir,
    name_from_overrides,
    overrides_hash,
    run_name,
    run_tags,
    sweep_group,
    sweep_keys_of,
    sweep_values_of,
    swept_keys,
    tiny_key,
    view_order,
)
from vase.config.options import CONF_DIR, load_option
from vase.config.preflight import preflight_overrides
from vase.config.renames import RENAMED, deprecation, old_name, renamed_keys, renamed_overrides
from vase.config.resolvers import register_resolvers
from vase.config.schemas import (
    SECTIONS,
    DataSchema,
    FilterSchema,
    GRPOSchema,
    LoraSchema,
    MetricsSchema,
    ModelSchema,
    RenderSchema,
    RewardSchema,
    RewardWeights,
    StageSchema,
    SyntheticSchema,
    check_retrieval,
    check_zoom,
    register_configs,
)
from vase.config.tracking import SERVER_SCHEMES, mlflow_artifacts, mlflow_uri, wandb_offline
from vase.config.validate import reward_keys, validate, validate_reward

__all__ = [
    "CHECK_ONLY_ENV",
    "CONF_DIR",
    "EVAL_ACTIONS",
    "EvalAction",
    "FILTER_ACTIONS",
    "SECTIONS",
    "SLURM_LIMIT_CHECK_S",
    "SLURM_STARTUP_S",
    "DataSchema",
    "Decoding",
    "FilterSchema",
    "GRPOSchema",
    "LoraSchema",
    "MetricsSchema",
    "ModelSchema",
    "RenderSchema",
    "RewardSchema",
    "RewardWeights",
    "StageSchema",
    "SyntheticSchema",
    "check_cluster",
    "check_retrieval",
    "check_slurm_nodes",
    "check_slurm_signal",
    "check_zoom",
    "SERVER_SCHEMES",
    "folder_name",
    "launch_dir",
    "mlflow_artifacts",
    "load_eval_action_plugins",
    "load_plugins",
    "load_project_plugins",
    "load_option",
    "mlflow_uri",
    "name_from_overrides",
    "one_line",
    "or_exit",
    "process_settings",
    "overrides_hash",
    "preflight_overrides",
    "RENAMED",
    "renamed_keys",
    "deprecation",
    "renamed_overrides",
    "scratch_sweep_dir",
    "register_configs",
    "register_eval_action",
    "register_resolvers",
    "reward_keys",
    "run_entry",
    "run_name",
    "run_tags",
    "slurm_gpus",
    "slurm_partition_nodes",
    "slurm_tasks",
    "sweep_group",
    "group_name",
    "sweep_keys_of",
    "view_order",
    "sweep_values_of",
    "swept_keys",
    "actions_help",
    "tiny_key",
    "validate",
    "validate_reward",
    "validated",
    "check_only",
    "wandb_offline",
]

register_resolvers()
register_configs()


def __getattr__(name: str) -> object:  # the names 0.2 changed (EVAL_TASKS, ...), for one release
    return old_name(__name__, globals(), name)
