"""``evaluate.py``'s tasks, one module each: a module here named ``<task>.py`` holds ``TASK`` (a
`vase.config.EvalTask`: its help line and what the early checks need to know) and ``run(cfg)`` (the task: it takes the
composed config and returns a dict whose ``scores``, ``rows`` and ``table`` go to the loggers); with its
``conf/task/<task>.yaml`` that is all a task is. `vase.config.EVAL_TASKS` finds the modules here by their names;
`common` holds what several share (the split with its limit, the model, a table written and shown). Nothing here is
imported before a task runs, except to read ``TASK``: heavy libraries load inside ``run``."""
