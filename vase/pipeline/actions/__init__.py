"""``evaluate.py``'s actions, one module each: a module here named ``<action>.py`` holds ``ACTION`` (a
`vase.config.EvalAction`: its help line and what the early checks need to know) and ``run(cfg)`` (the action: it
takes the composed config and returns a dict whose ``scores``, ``rows`` and ``table`` go to the loggers); with its
``conf/action/<action>.yaml`` that is all an action is. `vase.config.EVAL_ACTIONS` finds the modules here by their
names; `common` holds what several share (the split with its limit, the model, a table written and shown). Nothing
here is imported before an action runs, except to read ``ACTION``: heavy libraries load inside ``run``."""
