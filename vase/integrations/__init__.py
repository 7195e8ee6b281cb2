"""vase in the stacks its users already run: its reward as an ms-swift plugin (``swift_plugin``) and as TRL reward
functions (``trl``), both reading the columns of vase's ms-swift exports (``python -m vase.data.export --to
swift-grpo``). The harness that runs the real packages end to end (``make stack-check``) is
`vase.checks.stack_check`, apart from what users import.

Nothing here needs Lightning, the renderer or vase's pinned transformers: it imports in ms-swift's own virtualenv.
"""
