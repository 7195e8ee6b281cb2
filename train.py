"""Train a vase model: compose the Hydra config, validate it, then prepare data, fit, evaluate and report.

    python train.py                              # tiny model, synthetic vases, LoRA SFT on CPU
    python train.py experiment=demo              # what `make demo` runs
    python train.py model=qwen2_5_vl_7b stage=grpo trainer=deepspeed_zero3 init_adapter=<sft run>/adapter
    python train.py -m sweep=reward_weights      # a sweep over reward weights
    python train.py --cfg job                    # print the composed config and stop

A bad value fails before any model loads, with one line naming its key (e.g. `reward.tau=1.7 must lie in [0, 1]`).
"""

from vase.cli.train import main

if __name__ == "__main__":
    main()
