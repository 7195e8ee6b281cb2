"""The checks that run other tools for real, apart from what users import: SLURM on the loopback
(`slurm`, `cluster_check`: ``make cluster-check``), the docs site in Chromium (`docs_check`: ``make docs-check``),
MLflow's and TensorBoard's servers (`dashboards_check`: ``make dashboards-check``), ms-swift and TRL in their own
virtualenvs (`stack_check`, `venvs`: ``make stack-check``); `parts` runs a check's parts, in lanes where they may
overlap. Nothing else in vase imports this package (a layer above all others in ``.importlinter``).
"""
