#!/usr/bin/env bash
# Issue 18's measurements in one call on one H100/H200 (about 7-9 minutes; PARTS picks a subset):
#   ckpt    a random-weight Qwen2.5-VL-3B in the public architecture (benchmarks/random_checkpoint.py)
#   decode  ms/token at G 4: vase eager / static / compiled against transformers generate (benchmarks/decode_speed.py)
#   grpo    the paper's GRPO settings through train.py (G 4, 256 tokens, batch 1 x 4, orbit of 16 frames at 448 px):
#           s/step and peak memory, checkpointing off/on, rollout eager/compiled (perf/throughput.json of each run),
#           and the compiled, checkpointed run at 1,024 tokens (compiled_ckpt_x4: GRPO's memory on the real vocabulary)
#   trl     one GRPO step against TRL on the same 3B (benchmarks/grpo_step.py, six 448-px views, 32 tokens)
#   sft     experiment=vasevlm_3b_sft: s/step, tokens/s, MFU, peak memory
#   rl      experiment=vasevlm_3b_rl (full fine-tune, ZeRO-2) on one GPU
#   7b      (not in the default PARTS) a random 7B, LoRA GRPO at the paper's settings
# Prepare here first: bash benchmarks/gpu_prep.sh; then run with carry [".whl", ".devdata"]:
#   bash benchmarks/gpu_scale.sh                      # everything; results in $OUT/RESULTS_gpu.md
#   PARTS="ckpt decode grpo" bash benchmarks/gpu_scale.sh
#   BUDGET=540 GRPO_RUNS=compiled_ckpt bash benchmarks/gpu_scale.sh   # stop starting parts after 540 s; one GRPO run
# BUDGET (seconds, default 3600): each part's timeout is cut to what is left of it, and a part with under 40 s left is
# skipped and named, so a lease's one call ends with the parts measured so far written, not killed mid-way.
# DEVICE=cpu runs the same wiring on the tiny model in minutes (the dry run tests/ and `make gpu-dry-run` use).
set -uo pipefail
OUT=${OUT:-/tmp/gpu_scale}; mkdir -p "$OUT"
DEVICE=${DEVICE:-cuda}
PARTS=${PARTS:-ckpt decode grpo trl sft rl}
GRPO_RUNS=${GRPO_RUNS:-eager_nockpt eager_ckpt compiled_ckpt compiled_ckpt_x4}
BUDGET=${BUDGET:-3600}
left() { echo $((BUDGET - SECONDS)); }
has() {  # a part asked for in PARTS, with at least 40 s of BUDGET left (else said, and skipped)
  [[ " $PARTS " == *" $1 "* ]] || return 1
  [ "$(left)" -ge 40 ] && return 0
  echo "=== $1 skipped: $(left) s of BUDGET=$BUDGET left" | tee -a "$OUT/skipped.txt"; return 1
}
cap() { local l; l=$(left); [ "$l" -lt "$TIMEOUT" ] && echo $((l > 10 ? l - 10 : 1)) || echo "$TIMEOUT"; }
PY=${PY:-python3}
export WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false HYDRA_FULL_ERROR=1 PYTHONUNBUFFERED=1
if [ "$DEVICE" = cuda ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/env.txt" 2>&1 || { tail -20 "$OUT/env.txt"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$OUT/env.txt" 2>&1
  MODEL3=/tmp/qwen2_5_vl_3b_random; MODEL7=/tmp/qwen2_5_vl_7b_random
  TRAINER=(trainer=gpu); TOKENS=256; DECODE_TOKENS=64; STEPS=3; TIMEOUT=${TIMEOUT:-200}; TRL_STEPS=2
  MODEL_ARGS=(model=qwen2_5_vl_3b model.name_or_path=$MODEL3)
else
  export PYTHONPATH=$PWD
  MODEL3=""; TRAINER=(trainer=cpu); TOKENS=8; DECODE_TOKENS=8; STEPS=3; TIMEOUT=300; TRL_STEPS=2
  MODEL_ARGS=(model=tiny)
fi
"$PY" -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" >> "$OUT/env.txt" 2>&1
tail -2 "$OUT/env.txt"
# what train.py and the benchmarks import, checked before any part starts (a missing wheel is named at once)
"$PY" -c "import deepspeed, submitit, hydra, omegaconf, trl, datasets, vase.sacct, vase.training.grpo" 2>&1 | tail -1
DATA=(paths.cache_dir="$PWD/.devdata/cache" data.synthetic.num_vases=8 render.resolution=448 render.orbit_frames=16
      logger=none evaluate.after=false report=false)
NOEMB=reward.terms.decoration.similarity=sequence  # the embedding similarity's MiniLM weights are not carried
t_all=$SECONDS
part() { echo "=== $1 ($((SECONDS - t_all)) s so far)"; }

if has ckpt && [ "$DEVICE" = cuda ]; then
  part ckpt
  [ -d $MODEL3 ] || "$PY" benchmarks/random_checkpoint.py --arch 3b --out $MODEL3 --device cuda > "$OUT/ckpt.log" 2>&1 \
    || tail -5 "$OUT/ckpt.log"
fi
if has decode; then
  part decode
  timeout "$(cap)" "$PY" benchmarks/decode_speed.py --device "$DEVICE" ${MODEL3:+--model $MODEL3} --g 4 \
    --tokens $DECODE_TOKENS --repeats 3 --cache .devdata/bench --results "$OUT/RESULTS_gpu.md" --json "$OUT/decode.json" \
    > "$OUT/decode.log" 2>&1 || tail -5 "$OUT/decode.log"
fi
if has trl; then
  part trl
  if ! "$PY" -c "import trl, datasets" > "$OUT/trl.log" 2>&1; then
    echo "=== trl skipped: TRL or datasets (pyarrow) does not import here; carry their wheels (see $OUT/trl.log)"
  else  # both on the same checkpoint, six views, $TOKENS forced tokens (the paper's 256 on a GPU)
    timeout "$(cap)" "$PY" benchmarks/grpo_step.py --device "$DEVICE" ${MODEL3:+--model $MODEL3} --resolution 448 \
      --tokens $TOKENS --steps $TRL_STEPS --warmup 1 --gc on --rollout compiled --cache .devdata/bench \
      --results "$OUT/RESULTS_gpu.md" > "$OUT/trl.log" 2>&1 || tail -5 "$OUT/trl.log"
  fi
fi
train() {  # name, overrides...: one train.py run, its perf/throughput.json copied into $OUT/runs.json
  local name=$1; shift
  local t0=$SECONDS
  timeout "$(cap)" "$PY" train.py "$@" "${DATA[@]}" hydra.run.dir="/tmp/runs/$name" > "$OUT/train_$name.log" 2>&1
  local rc=$?
  "$PY" benchmarks/gpu_scale_table.py add "$OUT/runs.json" "$name" "/tmp/runs/$name" $rc $((SECONDS - t0)) "$*"
  [ $rc -eq 0 ] || grep -E "Error|error" "$OUT/train_$name.log" | tail -3
}
# 6 training vases at batch 1 x grad-accum 4: epochs enough for $STEPS optimizer steps (max_steps stops it)
GRPO=(stage=grpo data.modality=orbit stage.epochs=20 trainer.max_steps=$STEPS "${TRAINER[@]}" $NOEMB)
if has grpo; then
  part grpo
  for run in $GRPO_RUNS; do  # <rollout>_<ckpt|nockpt>[_x4]: _x4 at four times the part's tokens (1,024 on a GPU)
    [ "$(left)" -ge 40 ] || { echo "=== grpo_$run skipped: $(left) s left" | tee -a "$OUT/skipped.txt"; continue; }
    ckpt=true; [[ $run == *_nockpt* ]] && ckpt=false
    toks=$TOKENS; [[ $run == *_x4 ]] && toks=$((TOKENS * 4))
    train "grpo_$run" "${MODEL_ARGS[@]}" "${GRPO[@]}" stage.module.gradient_checkpointing=$ckpt \
      stage.module.rollout="${run%%_*}" stage.module.max_completion_length=$toks stage.module.min_completion_length=$toks
  done
fi
if has sft; then
  part sft
  if [ "$DEVICE" = cuda ]; then
    train sft_3b experiment=vasevlm_3b_sft data=synthetic model.name_or_path=$MODEL3 stage.grad_accum=1 trainer.max_steps=6
  else
    train sft_tiny "${MODEL_ARGS[@]}" data.modality=orbit trainer.max_steps=4 "${TRAINER[@]}"
  fi
fi
if has rl && [ "$DEVICE" = cuda ]; then
  part rl
  train rl_3b_zero2 experiment=vasevlm_3b_rl data=synthetic model.name_or_path=$MODEL3 trainer.devices=1 \
    stage.epochs=20 trainer.max_steps=2 $NOEMB
fi
if has 7b && [ "$DEVICE" = cuda ]; then
  part 7b
  [ -d $MODEL7 ] || "$PY" benchmarks/random_checkpoint.py --arch 7b --out $MODEL7 --device cuda > "$OUT/ckpt7.log" 2>&1
  train grpo_7b_lora_ckpt model=qwen2_5_vl_7b model.name_or_path=$MODEL7 "${GRPO[@]}" trainer.max_steps=2 \
    stage.module.gradient_checkpointing=true stage.module.rollout=compiled
fi
part done
"$PY" benchmarks/gpu_scale_table.py table "$OUT/runs.json" >> "$OUT/RESULTS_gpu.md" 2>&1
[ -f "$OUT/skipped.txt" ] && { echo; echo "Not measured in this call:"; sed 's/^=== /- /' "$OUT/skipped.txt"; } \
  >> "$OUT/RESULTS_gpu.md"
cat "$OUT/RESULTS_gpu.md"
