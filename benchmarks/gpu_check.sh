#!/usr/bin/env bash
# GPU checks for a lent H100/H200 (no network there): bf16 SFT, DeepSpeed ZeRO-2 and ZeRO-3 SFT, GRPO in bf16 and
# under ZeRO-2, and the GRPO step benchmark against TRL on CUDA. Needs, carried from the development machine:
#   .whl/     wheels for Python 3.12 (transformers, peft, trl, deepspeed built with `pip wheel --no-deps`, hydra, ...)
#   .devdata/ the tiny model and 8 rendered synthetic vases (no rendering on the GPU machine)
# Logs go to $OUT (at most 8 files come back).
set -uo pipefail
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/env.txt" 2>&1 || { tail -20 "$OUT/env.txt"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false HYDRA_FULL_ERROR=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, transformers, peft, deepspeed, pytorch_lightning as pl; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'deepspeed', deepspeed.__version__, 'lightning', pl.__version__)"
} >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt" | tail -4
COMMON=(paths.cache_dir="$PWD/.devdata/cache" paths.data_dir="$PWD/.devdata/data" logger=none debug=fast
        render.resolution=64 evaluate.after=false report=false reward.terms.decoration.similarity=sequence)
run() {
  local name=$1; shift
  local t0=$SECONDS
  timeout 300 python3 train.py "$@" "${COMMON[@]}" hydra.run.dir="/tmp/runs/$name" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s; steps: $(python3 -c "import json;print(json.load(open('/tmp/runs/$name/train_history.json')))" 2>/dev/null | head -c 300)"
  [ $rc -eq 0 ] || grep -E "Error|error" "$OUT/$name.log" | tail -3
}
run sft_bf16 trainer=gpu
run sft_zero2 trainer=deepspeed_zero2 trainer.devices=1
run sft_zero3 trainer=deepspeed_zero3 trainer.devices=1
run grpo_bf16_zero2 stage=grpo trainer=deepspeed_zero2 trainer.devices=1 stage.batch_size=2 stage.grad_accum=1 \
  stage.module.max_completion_length=16 stage.module.optimizer.lr=1e-4
python3 benchmarks/gpu_zero3_adapter.py /tmp/runs/sft_zero3/adapter /tmp/runs/sft_bf16/adapter 2>&1 | tail -2
[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
t0=$SECONDS
timeout 240 python3 benchmarks/grpo_step.py --device cuda --steps 10 --warmup 3 --cache .devdata/bench \
  --trl-gc "${TRL_GC:-on}" \
  --results "$OUT/RESULTS_gpu.md" > "$OUT/bench.log" 2>&1
echo "=== bench: rc=$? in $((SECONDS - t0)) s"
grep -A8 "^| |" "$OUT/bench.log" | head -8
