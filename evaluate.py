"""Evaluate: run one evaluation task (``task=``, default ``generate``) from the registry ``vase.config.EVAL_TASKS``.

    python evaluate.py --help                                  # every task, one line each
    python evaluate.py                                         # generate: tiny model, synthetic val split, scored
    python evaluate.py adapter=logs/train/runs/<time>/adapter  # a trained adapter
    python evaluate.py model=qwen2_5_vl_7b data=vasevqa3d data.root=/data/VaseVQA-3D metrics=paper
    python evaluate.py task=vqa adapter=<run>/adapter          # per-dimension VQA accuracy
    python evaluate.py task=score generated=G.json ground_truth=T.json output=OUT.json

`--help` lists the tasks (one module each in ``vase.pipeline.tasks`` and one ``conf/task/<name>.yaml``), with any
an installed package registers under the entry-point group ``vase.eval_tasks``. generate writes results.json (the
caption metrics: docs/glossary.md), a markdown table beside it, and the generations as resumable JSONL (a rerun
skips what is done).
"""

from vase.cli.evaluate import main

if __name__ == "__main__":
    main()
