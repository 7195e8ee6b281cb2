#!/usr/bin/env bash
# Prepare, on the development machine, what benchmarks/gpu_scale.sh needs on a GPU machine that reaches no network:
#   .whl/      wheels (Python 3.12, manylinux x86-64) of this venv's versions of what the GPU image lacks
#   .devdata/  8 synthetic vases at 448 px with 16-frame orbits (train.py runs), and the benchmarks' rendered views
# Both are ignored by git (.gitignore / .git/info/exclude) and travel with `carry: [".whl", ".devdata"]`.
#   bash benchmarks/gpu_prep.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
grep -qx '/.devdata/' .git/info/exclude 2>/dev/null || echo '/.devdata/' >> .git/info/exclude
mkdir -p .whl
if [ "${SKIP_WHEELS:-0}" != 1 ]; then
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
# the GPU image has torch, lightning, torchmetrics, tokenizers, safetensors, sentence-transformers, accelerate, numpy;
# a package this venv lacks is fetched at its newest version; pydantic (DeepSpeed), submitit and
# hydra-submitit-launcher (train.py) were missing from the image on 2026-11-29
for pkg in transformers peft trl datasets hydra-core omegaconf dill xxhash multiprocess trimesh open-clip-torch ftfy \
           hjson py-cpuinfo ninja msgpack pydantic pydantic-core annotated-types typing-inspection submitit \
           hydra-submitit-launcher; do
  v=$(version "$pkg" 2>/dev/null) && spec="$pkg==$v" || spec=$pkg
  ls .whl | grep -qi "^${pkg//-/_}-" && continue
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$spec" || echo "no wheel for $spec"
done
ls .whl | grep -q '^antlr4' || "$PY" -m pip wheel -q --no-deps -w .whl \
  "antlr4-python3-runtime==$(version antlr4-python3-runtime)"  # hydra's pin has only a source distribution
if ! ls .whl | grep -q '^deepspeed-'; then  # PyPI has only its source: build a pure-Python wheel (ops JIT-built there)
  DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps -w .whl "deepspeed==$(version deepspeed 2>/dev/null || echo 0.19.8)"
fi
du -sh .whl
fi
"$PY" - <<'PY'
from pathlib import Path
from vase.data.datamodule import VaseDataModule
# what train.py reads with paths.cache_dir=.devdata/cache data.synthetic.num_vases=8 render.resolution=448
VaseDataModule(".devdata/cache/data/synthetic-n8-s0", synthetic={"num_vases": 8, "seed": 0, "val_fraction": 0.25},
               render={"enabled": True, "resolution": 448, "fov_deg": 35.0, "orbit_frames": 16}).prepare_data()
from benchmarks.grpo_step import bench_root
bench_root(Path(".devdata/bench"), 448)  # decode_speed.py and grpo_step.py read it
print("rendered", sum(1 for _ in Path(".devdata").rglob("*.png")), "images")
PY
du -sh .devdata
