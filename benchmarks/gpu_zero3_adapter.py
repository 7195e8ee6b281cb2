"""Check, on a GPU machine, that an adapter saved under DeepSpeed ZeRO-3 holds whole tensors: every LoRA weight has
the shape of the same weight saved from a plain run, and the trained B matrices are not all zero.

    python benchmarks/gpu_zero3_adapter.py <zero3 run>/adapter <plain run>/adapter
"""

import sys

from safetensors.torch import load_file

z3, plain = (load_file(f"{d}/adapter_model.safetensors") for d in sys.argv[1:3])
assert z3.keys() == plain.keys(), "different adapter keys"
bad = [k for k in z3 if z3[k].shape != plain[k].shape]
assert not bad, f"shapes differ (empty ZeRO-3 shards?): {bad[:3]}"
moved = sum(int(v.abs().sum() > 0) for k, v in z3.items() if "lora_B" in k)
assert moved > 0, "no LoRA B weight moved"
print(f"ZeRO-3 adapter OK: {len(z3)} tensors, shapes match the plain run, {moved} B matrices trained")
