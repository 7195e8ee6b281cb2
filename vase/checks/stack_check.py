"""vase in the real ms-swift and TRL, end to end on CPU (``make stack-check``): PASS/FAIL per part, exit 1 on FAIL.

    python -m vase.checks.stack_check                 # builds ms-swift's venv under ~/.cache/vase/tools/ when missing

Parts, on a small synthetic set and the tiny Qwen2.5-VL with the public special-token ids:

1. ``export``: ``python -m vase.data.export`` to ms-swift's SFT and GRPO forms (views rendered into the cache).
2. ``swift-sft``: ``swift sft`` 2 LoRA steps, run from another directory; every view reaches the model as image
   tokens (ms-swift logs ``[151655 * n]`` per view) and no image file is missing; the control, vase's default tiny
   model, shows the collapse the public ids prevent (one token per view).
3. ``swift-grpo``: the paper's ``swift rlhf --rlhf_type grpo --external_plugins <vase plugin> --reward_funcs
   external_vase_acc``, 2 steps.
4. ``plugin-parity``: the plugin's rewards, in ms-swift's venv, equal vase's own ``VaseReward`` in vase's venv on the
   same completions (1e-6): those ms-swift trained on in part 3, and each row's reference, another vase's caption
   and a wrong answer, for the total and every term.
5. ``trl-grpo``: TRL's ``GRPOTrainer`` 2 steps with vase's TRL reward functions, each term logged by name.
6. ``swift-read``: an ms-swift file with multi-turn, system and GRPO lines read back into vase, pair by pair, and
   ``python -m vase.data.check`` on it exits 0.

After the export, two lanes run side by side (each part is its own tool's process): 3 then 4; 2, 5 and 6.

ms-swift cannot share vase's virtualenv (it caps transformers, trl, peft, datasets below vase's): it gets its own,
from the package index, with vase installed ``--no-deps`` and ``vase/integrations/requirements-reward.txt``.
Writes ``stack_check.json`` and ``stack_check.md`` and every tool's log under ``logs/stack_check/<time>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.checks.parts import Parts
from vase.checks.venvs import OFFLINE, run_logged, tool_venv, tools_dir
from vase.data.layouts import read_records
from vase.data.synthetic import generate
from vase.integrations.columns import load_reward
from vase.io import atomic_write_json, atomic_write_text
from vase.models.tiny import TinySpec, build_tiny
from vase.prompt_tasks.base import fields_of, only
from vase.provenance import machine_stamp
from vase.runs import log_root, run_dir

ROOT = Path(__file__).resolve().parents[2]
SWIFT_PACKAGES = ["torch==2.14.1", "torchvision==0.29.1", "ms-swift==4.6.0", "qwen_vl_utils", "msgspec"]
PLUGIN = ROOT / "vase" / "integrations" / "swift_plugin.py"  # the plugin users load into ms-swift


_run = run_logged


def swift_venv(venv: Path, log: Path) -> Path:
    """ms-swift's own virtualenv (built from the package index when missing or not built for these packages), with
    this checkout's vase in it (installed again, without its dependencies, when the venv holds another checkout's)."""
    reward = ROOT / "vase/integrations/requirements-reward.txt"
    venv = tool_venv(venv, SWIFT_PACKAGES, log, "ms-swift", after=[["-r", str(reward)]], stamp_extra=reward.read_text())
    mark = venv / ".vase-checkout"
    if not mark.is_file() or mark.read_text() != str(ROOT):
        cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)]
        if run_logged(cmd, log.with_suffix(".vase.log"), venv.parent) != 0:
            raise RuntimeError(f"installing this checkout's vase into {venv} failed (log: {log.with_suffix('.vase.log')})")
        mark.write_text(str(ROOT))
    return venv


def check_export(work: Path, cache: Path) -> dict[str, Any]:
    src = work / "vases"
    generate(src, num=8, seed=0, progress=False)
    out = {}
    for form in ("swift", "swift-grpo"):
        dest = work / f"export-{form}"
        rc = _run([sys.executable, "-m", "vase.data.export", str(src), str(dest), "--to", form, "--cache-dir",
                   str(cache), "--resolution", "112"], work / "logs" / f"export-{form}.log", ROOT)
        lines = [json.loads(x) for x in (dest / "train.jsonl").read_text().splitlines()] if rc == 0 else []
        images = [p for line in lines for p in line.get("images", [])]
        out[form] = {"rc": rc, "lines": len(lines), "absolute": all(Path(p).is_absolute() for p in images),
                     "images_exist": all(Path(p).is_file() for p in images)}
    ok = all(v["rc"] == 0 and v["lines"] > 0 and v["absolute"] and v["images_exist"] for v in out.values())
    return {"passed": ok, **out}


def _image_tokens(log_text: str) -> list[int]:
    """The image-token runs ms-swift logged for its first sample: ``<|vision_start|>[<id> * n]`` per view gives n
    (the public tiny's 151655 expands to one token per patch group; a model off the public ids collapses to 1)."""
    first = log_text.find("[INFO:swift] [INPUT]")
    block = log_text[first: first + 4000] if first >= 0 else ""
    return [int(n) for n in re.findall(r"<\|vision_start\|>\[\d+ \* (\d+)\]", block)]


def swift_common(model: Path, out: Path) -> list[str]:
    return ["--model", str(model), "--model_type", "qwen2_5_vl", "--template", "qwen2_5_vl", "--tuner_type", "lora",
            "--max_steps", "2", "--output_dir", str(out), "--report_to", "none", "--torch_dtype", "float32",
            "--dataloader_num_workers", "0", "--save_steps", "2", "--logging_steps", "1", "--split_dataset_ratio",
            "0"]


def _swift_sft(venv: Path, model: Path, work: Path, name: str, steps: int = 2) -> tuple[int, str]:
    elsewhere = work / "elsewhere"  # not the export's folder: absolute image paths must work from anywhere
    elsewhere.mkdir(exist_ok=True)
    log = work / "logs" / f"{name}.log"
    args = swift_common(model, work / name)
    args[args.index("--max_steps") + 1] = str(steps)
    rc = _run([str(venv / "bin" / "swift"), "sft", *args, "--dataset", str(work / "export-swift" / "train.jsonl"),
               "--per_device_train_batch_size", "1"], log, elsewhere)
    return rc, log.read_text(errors="replace")


def check_swift_sft(venv: Path, model: Path, work: Path, default_tiny: Path) -> dict[str, Any]:
    """2 LoRA steps; every view must reach the model as more than one image token. The control, vase's default tiny
    model (special tokens off the public ids), must show the collapse this guards against: one token per view."""
    rc, text = _swift_sft(venv, model, work, "swift-sft")
    runs, missing = _image_tokens(text), text.count("FileNotFoundError")
    _, control = _swift_sft(venv, default_tiny, work, "swift-sft-control", steps=1)
    collapsed = _image_tokens(control)
    ok = rc == 0 and len(runs) == 6 and all(n > 1 for n in runs) and not missing
    return {"passed": ok and collapsed == [1] * 6, "rc": rc, "image_tokens_per_view": runs, "file_not_found": missing,
            "control_default_tiny_tokens_per_view": collapsed, "log": str(work / "logs" / "swift-sft.log")}


def check_swift_grpo(venv: Path, model: Path, work: Path) -> dict[str, Any]:
    log, scored = work / "logs" / "swift-grpo.log", work / "swift-grpo-rewards.jsonl"
    rc = _run([str(venv / "bin" / "swift"), "rlhf", "--rlhf_type", "grpo", *swift_common(model, work / "swift-grpo"),
               "--dataset", str(work / "export-swift-grpo" / "train.jsonl"), "--external_plugins", str(PLUGIN),
               "--reward_funcs", "external_vase_acc", "--num_generations", "2", "--per_device_train_batch_size", "2",
               "--max_completion_length", "16", "--temperature", "1.0"], log, work / "elsewhere",
              env={"VASE_REWARD": "vase6d", "VASE_REWARD_LOG": str(scored)})
    text = log.read_text(errors="replace")
    logged = re.findall(r"'rewards/external_vase_acc/mean': '([-0-9.e]+)'", text)
    calls = len(scored.read_text().splitlines()) if scored.is_file() else 0
    return {"passed": rc == 0 and len(logged) == 2 and calls >= 2, "rc": rc, "reward_per_step": logged,
            "scored_batches": calls, "log": str(log)}


PARITY_SCRIPT = r"""
import importlib.util, json, sys
from datasets import load_dataset
spec = importlib.util.spec_from_file_location("vase_swift_plugin", sys.argv[1])
plugin = importlib.util.module_from_spec(spec); spec.loader.exec_module(plugin)
from swift.rewards import orms
rows = load_dataset("json", data_files=sys.argv[2], split="train").to_list()
cols = {k: [r.get(k) for r in rows] for k in rows[0] if k not in ("messages", "images")}
names = [n for n in orms if n == "external_vase_acc" or n.startswith("vase_")]
out = []
for kind, completions in (("reference", [r["solution"] for r in rows]),
                          ("another vase", [rows[(k + 1) % len(rows)]["solution"] for k in range(len(rows))]),
                          ("wrong", ["A black-figure amphora." for _ in rows])):
    out.append({"kind": kind, "completions": completions, "columns": cols,
                "values": {n: orms[n]()(completions, **cols) for n in names}})
print(json.dumps({"batches": out, "weights": plugin.shared_reward().terms}))
"""


def vase_scores(completions: list[str], columns: dict[str, Any], records: dict[str, Any]) -> Any:
    """vase's own reward on completions of the rows ``columns`` name: targets from vase's records (the caption's
    six dimensions, a QA answer's own one), reference the row's answer; no column's value is used but id, task and
    solution (the row's reference answer)."""
    reward = load_reward("vase6d", [])
    targets = []
    for vid, task in zip(columns["id"], columns["task"]):
        fields = fields_of(records[vid])
        targets.append(fields if task == "caption" else only(fields, task))
    return reward.compute(completions, targets=targets, reference=list(columns["solution"]))


def _differences(got: dict[str, list[float]], want: Any, weights: dict[str, float]) -> dict[str, float]:
    diffs = {"external_vase_acc": max(abs(a - b) for a, b in zip(got["external_vase_acc"], want.total))}
    for name in weights:
        diffs[f"vase_{name}"] = max(abs(a - b) for a, b in zip(got[f"vase_{name}"], want.components[name]))
    return diffs


def check_plugin_parity(venv: Path, work: Path) -> dict[str, Any]:
    records = {r.id: r for rs in read_records(work / "vases").values() for r in rs}
    script = work / "parity.py"
    script.write_text(PARITY_SCRIPT)
    log = work / "logs" / "plugin-parity.log"
    res = subprocess.run([str(venv / "bin" / "python"), str(script), str(PLUGIN),
                          str(work / "export-swift-grpo" / "train.jsonl")], capture_output=True, text=True,
                         env={**os.environ, **OFFLINE, "VASE_REWARD": "vase6d"}, timeout=900)
    log.write_text(res.stdout[-20000:] + res.stderr[-20000:])
    if res.returncode != 0:
        return {"passed": False, "rc": res.returncode, "log": str(log)}
    got = json.loads(res.stdout.strip().splitlines()[-1])
    worst: dict[str, float] = {}
    for batch in got["batches"]:
        want = vase_scores(batch["completions"], batch["columns"], records)
        for k, d in _differences(batch["values"], want, got["weights"]).items():
            worst[k] = max(worst.get(k, 0.0), d)
    trained = work / "swift-grpo-rewards.jsonl"
    n_trained = 0
    for line in (trained.read_text().splitlines() if trained.is_file() else []):
        call = json.loads(line)
        want = vase_scores(call["completions"], call["columns"], records)
        worst["trained completions"] = max(worst.get("trained completions", 0.0),
                                           max(abs(a - b) for a, b in zip(call["values"], want.total)))
        n_trained += len(call["completions"])
    spread = [max(b["values"]["external_vase_acc"]) - min(b["values"]["external_vase_acc"]) for b in got["batches"]]
    ok = bool(worst) and max(worst.values()) <= 1e-6 and n_trained > 0 and max(spread) > 0.1
    return {"passed": ok, "max_abs_difference": worst, "rows": len(got["batches"][0]["completions"]),
            "trained_completions": n_trained, "reward_spread_per_batch": spread, "log": str(log)}


TRL_SCRIPT = r"""
import json, sys
from trl import GRPOConfig, GRPOTrainer
from vase.integrations.trl import grpo_dataset, reward_functions
funcs, weights = reward_functions("vase6d")
args = GRPOConfig(output_dir=sys.argv[2], reward_weights=weights, num_generations=2, per_device_train_batch_size=2,
                  max_completion_length=16, max_steps=2, logging_steps=1, report_to="none", use_cpu=True,
                  save_strategy="no", bf16=False, temperature=1.0)
trainer = GRPOTrainer(model=sys.argv[3], reward_funcs=funcs, args=args, train_dataset=grpo_dataset(sys.argv[1]))
trainer.train()
print(json.dumps({"names": [f.__name__ for f in funcs], "weights": weights,
                  "log": [h for h in trainer.state.log_history if "reward" in h]}))
"""


def check_trl(model: Path, work: Path) -> dict[str, Any]:
    script = work / "trl_grpo.py"
    script.write_text(TRL_SCRIPT)
    log = work / "logs" / "trl-grpo.log"
    res = subprocess.run([sys.executable, str(script), str(work / "export-swift-grpo" / "train.jsonl"),
                          str(work / "trl-grpo"), str(model)], capture_output=True, text=True, cwd=work / "elsewhere",
                         env={**os.environ, **OFFLINE}, timeout=900)
    log.write_text(res.stdout[-20000:] + res.stderr[-20000:])
    if res.returncode != 0:
        return {"passed": False, "rc": res.returncode, "log": str(log)}
    got = json.loads(res.stdout.strip().splitlines()[-1])
    by_name = all(f"rewards/{n}/mean" in step for n in got["names"] for step in got["log"])
    return {"passed": len(got["log"]) == 2 and by_name, "terms": dict(zip(got["names"], got["weights"])),
            "reward_per_step": [step["reward"] for step in got["log"]], "log": str(log)}


def swift_sample_file(folder: Path, image: str) -> Path:
    """An ms-swift file as users write one: a multi-turn chat under a system prompt, a plain caption line, and a
    GRPO line (user turn + solution)."""
    lines = [
        {"messages": [{"role": "system", "content": "You are a museum curator."},
                      {"role": "user", "content": "<image>Describe this vase."},
                      {"role": "assistant", "content": "An Attic red-figure kylix."},
                      {"role": "user", "content": "What is the shape of the vase?"},
                      {"role": "assistant", "content": "Kylix."},
                      {"role": "user", "content": "Who painted it?"},
                      {"role": "assistant", "content": "Douris."}], "images": [image], "id": "chat"},
        {"messages": [{"role": "user", "content": "<image>Describe this vase."},
                      {"role": "assistant", "content": "A Corinthian aryballos."}], "images": [image], "id": "plain"},
        {"messages": [{"role": "user", "content": "<image>Describe this vase."}],
         "solution": "An Apulian red-figure krater.", "images": [image], "id": "grpo"},
    ]
    path = folder / "users.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def check_swift_read(work: Path) -> dict[str, Any]:
    image = next((work / "export-swift" / "images" / "front").glob("*.png"))
    path = swift_sample_file(work, str(image))
    recs = {r.id: r for r in read_records(path)["all"]}
    chat = recs.get("chat")
    got = {
        "chat caption": chat is not None and chat.caption == "An Attic red-figure kylix.",
        "chat shape answer": chat is not None and {"dimension": "shape", "question": "What is the shape of the vase?",
                                                   "answer": "Kylix."} in chat.qa,
        "chat free-form pair": chat is not None and any(q["answer"] == "Douris." for q in chat.qa),
        "system prompt": chat is not None and chat.system == "You are a museum curator.",
        "plain caption": "plain" in recs and recs["plain"].caption == "A Corinthian aryballos.",
        "GRPO line": "grpo" in recs and recs["grpo"].caption == "An Apulian red-figure krater.",
    }
    rc = _run([sys.executable, "-m", "vase.data.check", str(path), "--report", str(work / "check-users.json")],
              work / "logs" / "check-users.log", ROOT)
    got["vase.data.check exits 0"] = rc == 0
    return {"passed": all(got.values()), **got}


def _measured(name: str, r: dict[str, Any]) -> str:
    """The numbers behind one part's verdict, for people."""
    if "error" in r:
        return r["error"]
    if name == "export":
        return "; ".join(f"{k}: {v['lines']} lines, absolute paths {v['absolute']}" for k, v in r.items()
                         if isinstance(v, dict))
    if name == "swift-sft":
        return (f"image tokens per view {r['image_tokens_per_view']} (control, default tiny: "
                f"{r['control_default_tiny_tokens_per_view']}); missing files {r['file_not_found']}")
    if name in ("swift-grpo", "trl-grpo"):
        return f"reward per step {r.get('reward_per_step')}"
    if name == "plugin-parity":
        worst = max(r.get("max_abs_difference", {}).values(), default=float("nan"))
        return (f"largest difference {worst:.1e} over {r.get('rows')} rows x 3 completions and "
                f"{r.get('trained_completions')} trained completions, total and every term")
    return ", ".join(k for k, v in r.items() if v is True and k != "passed")


def report(results: dict[str, dict[str, Any]], seconds: float) -> str:
    lines = ["# ms-swift and TRL stack check", "", f"{machine_stamp()['date']}, {os.cpu_count()} CPU cores, "
             f"{seconds / 60:.1f} minutes", "", *md.table(["part", "result", "measured", "seconds"], align="lllr")]
    lines += [f"| {name} | {'PASS' if r['passed'] else 'FAIL'} | {_measured(name, r)} | {r.get('seconds', '')} |"
              for name, r in results.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.checks.stack_check", description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / ".cache"))
    a = ap.parse_args(argv)
    started = time.time()
    cache = Path(a.cache_dir)
    work = Path(run_dir(str(log_root(ROOT) / "stack_check"), "never"))
    (work / "elsewhere").mkdir(parents=True, exist_ok=True)
    venv = swift_venv(tools_dir() / "swift-venv", work / "logs" / "venv.log")
    spec = TinySpec(public_token_ids=True)
    model = build_tiny(cache / "models" / f"tiny-qwen2_5_vl-{spec.fingerprint()}", spec)
    default = build_tiny(cache / "models" / f"tiny-qwen2_5_vl-{TinySpec().fingerprint()}")
    parts = Parts(["export", "swift-sft", "swift-grpo", "plugin-parity", "trl-grpo", "swift-read"])
    parts.run("export", lambda: check_export(work, cache))  # what the others read
    # then two lanes side by side (each part is its own tool's process): ms-swift's GRPO and the parity check on what
    # it trained on; ms-swift's SFT, TRL's GRPO and ms-swift's file read back
    parts.lanes([lambda: parts.run("swift-grpo", lambda: check_swift_grpo(venv, model, work)),
                 lambda: parts.run("plugin-parity", lambda: check_plugin_parity(venv, work))],
                [lambda: parts.run("swift-sft", lambda: check_swift_sft(venv, model, work, default)),
                 lambda: parts.run("trl-grpo", lambda: check_trl(model, work)),
                 lambda: parts.run("swift-read", lambda: check_swift_read(work))])
    results = parts.ordered()
    atomic_write_json(work / "stack_check.json", {"machine": machine_stamp(), "results": results})
    atomic_write_text(work / "stack_check.md", report(results, time.time() - started))
    ok = all(r["passed"] for r in results.values())
    print(f"{'PASS' if ok else 'FAIL'}: stack check, {len(results)} parts, {(time.time() - started) / 60:.1f} min "
          f"({work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
