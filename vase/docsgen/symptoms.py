"""The troubleshooting page's first part: the errors users meet first, each as the symptom they see (the line
vase prints, exactly: ``tests/test_troubleshooting.py`` provokes each and compares), its cause and its fix; the
test also checks that the printed line carries the fix (``needle``) and, where the fix is an override, that applying
it makes the command go through. Folders read ``/data/...`` for the test's own, ``~/vase`` for the checkout."""

from __future__ import annotations

from dataclasses import dataclass

SHOWN_ROOT = "/data"
"""What the page shows for the folder the test provoked each error in."""


@dataclass(frozen=True)
class Symptom:
    id: str
    topic: str  # the page's section
    title: str  # what went wrong, in the user's words
    seen: str  # the line vase prints
    cause: str
    fix: str
    needle: str  # the part of the printed line that carries the fix


SYMPTOMS: tuple[Symptom, ...] = (
    # the page's sections, in order: keys and values, datasets, checkpoints and adapters, loggers and tracking
    # servers, SLURM, disk and permissions, GPU memory
    Symptom(
        'key-typo', 'Keys and values', "A key of a target's arguments is misspelled",
        "config error: stage.module.optimizer.lrr: AdamW takes no argument 'lrr', so nothing would read it; did "
        "you mean 'lr'?",
        'The key is passed to a class (here the optimizer) that takes no such argument; nothing would read it, so '
        'the value would be ignored.',
        'Use the name it suggests: `stage.module.optimizer.lr=1e-4`.',
        "did you mean 'lr'?"),
    Symptom(
        'key-new', 'Keys and values', 'An override adds an entry the config does not have',
        "config error: callbacks.mine._target_: callbacks has no key 'mine', so nothing would read it; valid keys: "
        "checkpoint, inputs, progress, save_adapter, throughput (a new entry is added with +callbacks.mine._target_=...)",
        'Hydra sets only keys that exist; a new entry (a callback, a reward term) needs the `+` prefix.',
        'Add it with a `+`: `+callbacks.mine._target_=...`.',
        '+callbacks.mine._target_='),
    Symptom(
        'key-unknown-group', 'Keys and values', 'A config group option does not exist',
        "config error: model='qwen2.5_vl_3b' is not a known option; choose one of ['qwen2_5_vl_3b', "
        "'qwen2_5_vl_7b', 'tiny'] (files in ~/vase/conf/model)",
        '`model=`, `stage=`, `logger=`, `trainer=`, `data=` and the other groups take the name of a file in '
        '`conf/<group>/`.',
        'Choose one of the options listed (`model=qwen2_5_vl_3b`).',
        "choose one of ['qwen2_5_vl_3b'"),
    Symptom(
        'value-range', 'Keys and values', 'A value is outside its range',
        'config error: reward.tau=1.7 must lie in [0, 1]',
        'Each numeric key is checked against its range before anything loads (tau is a similarity threshold in [0, '
        '1]).',
        'Give a value in the range, on the stage that uses it (the reward is GRPO\'s; the default stage, SFT, refuses '
        'reward keys): `python train.py stage=grpo reward.tau=0.7`.',
        'must lie in [0, 1]'),
    Symptom(
        'value-stage', 'Keys and values', 'The stage has a name vase does not train',
        "config error: stage.name='rl' is not a known stage; choose one of ['sft', 'grpo']",
        '`stage.name` is `sft` or `grpo`; a stage is chosen as a config group, not by renaming it.',
        'Choose the group: `stage=grpo` (or `stage=sft`).',
        "choose one of ['sft', 'grpo']"),
    Symptom(
        'value-weight', 'Keys and values', 'A reward weight is negative',
        'config error: reward.weights.shape=-1.0 must be non-negative',
        'Reward weights scale each term of the GRPO reward; a negative one would reward the opposite of the term.',
        'Give 0 to switch a term off: `reward.weights.shape=0`.',
        'must be non-negative'),
    Symptom(
        'value-temperature', 'Keys and values', 'Sampling at temperature 0',
        'config error: generation.temperature=0 must be positive',
        "`evaluate.py`'s `generation.temperature` divides the logits; 0 is greedy decoding, which is "
        "`do_sample=false`.",
        'Decode greedily with `generation.do_sample=false` (or give a positive temperature).',
        'must be positive'),
    Symptom(
        'value-reward-target', 'Keys and values', 'Your own reward term cannot be imported',
        "config error: reward.terms.mine._target_='my_rewards.Shape' cannot be imported: ModuleNotFoundError: No "
        "module named 'my_rewards'; the module must be importable from where you run: run from the folder that "
        "holds my_rewards/ or my_rewards.py, add that folder to PYTHONPATH, or pip install -e your package",
        "A `_target_` is imported by its dotted name from where you run; your module is not on Python's path.",
        'Run from the folder that holds the module, add it to `PYTHONPATH`, or `pip install -e` your package.',
        'add that folder to PYTHONPATH'),
    Symptom(
        'value-limit', 'Keys and values', 'No vase left to evaluate',
        'config error: data.limit_val=1 leaves 1 vase to evaluate (val.before/after are on; FID needs at '
        'least 2); give at least 2, or null for no limit',
        '`data.limit_val` keeps fewer than 2 validation vases, and evaluation after training is on: FID compares two '
        'sets of caption embeddings, and a set of one has no spread.',
        'Give `data.limit_val` at least 2 (or null for all), or switch evaluation off: `val.after=false`.',
        'give at least 2, or null for no limit'),
    Symptom(
        'data-missing', 'Datasets', 'The dataset folder does not exist',
        "error: /data/VaseVQA-3D: no such folder; data.root (or the path you gave) must be the dataset as you "
        "downloaded it: the VaseVQA-3D release, a folder with annotations/train.json, the paper's evaluation "
        "folder or ms-swift JSONL",
        '`data.root` (or the path given to a tool) names no folder: a typo, or the dataset is on another mount.',
        'Give the folder as you downloaded it: `data=vasevqa3d data.root=/data/VaseVQA-3D`. Every entry point says '
        'this in the same words, at once.',
        'data.root (or the path you gave) must be the dataset as you downloaded it'),
    Symptom(
        'data-no-layout', 'Datasets', 'The folder is there but holds no dataset vase reads',
        "error: /data/VaseVQA-3D: no dataset layout recognised; looked for annotations/train.json (vase), "
        "annotations/{captions.json,qa_pairs.json,metadata.json} (the VaseVQA-3D release), groundTruth.json (the "
        "paper's evaluation folder) and *.jsonl (ms-swift)",
        'vase recognises four layouts by their files; this folder has none of them (often: one level too high or '
        'too low).',
        'Point `data.root` at the folder that holds `annotations/` (or `groundTruth.json`, or the `.jsonl`).',
        'looked for annotations/train.json (vase)'),
    Symptom(
        'data-synthetic-root', 'Datasets', "Your dataset path with the demo's synthetic settings",
        "config error: data.root='/data/VaseVQA-3D' with data.synthetic set would generate synthetic vases into "
        "that folder; vase generates them only under paths.cache_dir='~/vase/.cache'. To read your dataset drop "
        "the synthetic settings (data=vasevqa3d has none; experiment=demo sets them) or use data=synthetic",
        '`experiment=demo` and the default data config generate synthetic vases; vase never writes them into a '
        'folder you give.',
        'Read your dataset with `data=vasevqa3d data.root=...` (it has no synthetic settings).',
        'data=vasevqa3d has none'),
    Symptom(
        'data-bad-json', 'Datasets', 'An annotation file is not valid JSON',
        'error: /data/VaseVQA-3D/annotations/train.json: malformed JSON at line 1, column 15: Expecting property '
        'name enclosed in double quotes',
        'The file was cut short (a copy that stopped) or edited by hand.',
        'Open the file at the line and column named, or copy it again from the release; `python -m vase.data.check '
        '<dataset>` lists every problem at once.',
        'malformed JSON at line 1, column 15'),
    Symptom(
        'data-check-cli', 'Datasets', '`python -m vase.data.check` on a folder that does not exist',
        "error: /data/VaseVQA-3D: no such folder; data.root (or the path you gave) must be the dataset as you "
        "downloaded it: the VaseVQA-3D release, a folder with annotations/train.json, the paper's evaluation "
        "folder or ms-swift JSONL",
        'The same mistake as in `train.py`, from the dataset check.',
        "Give the dataset's folder as you downloaded it.",
        'must be the dataset as you downloaded it'),
    Symptom(
        'render-not-dataset', 'Datasets', '`python -m vase.data.render` on a folder of photos',
        'error: --root /data/photos: not a dataset folder: no annotations/train.json or annotations/val.json in it '
        '(vase render renders the vases they list, from their GLB models)',
        "The renderer renders the GLB models that a dataset's annotations list; a folder without annotations has "
        "nothing to render.",
        'Give `--root` the dataset folder (with `annotations/train.json`).',
        'no annotations/train.json or annotations/val.json'),
    Symptom(
        'ckpt-missing', 'Checkpoints and adapters', 'The checkpoint folder does not exist',
        "config error: model.name_or_path='/data/Qwen2.5-VL-3B': no such folder, and not a hub id (org/name); give "
        "a local checkpoint folder or a hub id such as Qwen/Qwen2.5-VL-3B-Instruct",
        '`model.name_or_path` is neither a folder nor a hub id (`org/name`).',
        'Give the folder you downloaded (`model.name_or_path=/data/Qwen2.5-VL-3B-Instruct`) or a hub id.',
        'give a local checkpoint folder or a hub id'),
    Symptom(
        'ckpt-no-config', 'Checkpoints and adapters', 'The checkpoint folder lacks `config.json`',
        "error: model.name_or_path='/data/Qwen2.5-VL-3B-Instruct': /data/Qwen2.5-VL-3B-Instruct/config.json is "
        "missing (the model's architecture); copy it from the checkpoint's release (the hub folder it came from) "
        "into a folder of yours",
        'Only the weights were copied; transformers needs the architecture file to build the model.',
        "Copy `config.json` from the checkpoint's release into the folder.",
        "copy it from the checkpoint's release"),
    Symptom(
        'ckpt-no-processor', 'Checkpoints and adapters', 'The checkpoint folder lacks the image processor',
        "error: model.name_or_path='/data/Qwen2.5-VL-3B-Instruct': "
        "/data/Qwen2.5-VL-3B-Instruct/preprocessor_config.json is missing (the image processor: pixel bounds, "
        "patch size, normalisation; or processor_config.json with an image_processor, as transformers 5 saves it); "
        "copy it from the checkpoint's release into a folder of yours",
        '`preprocessor_config.json` (or `processor_config.json`) sets the pixel bounds and patch size of every '
        'image.',
        "Copy it from the checkpoint's release.",
        "copy it from the checkpoint's release"),
    Symptom(
        'ckpt-no-template', 'Checkpoints and adapters', 'The checkpoint has no chat template',
        "error: model.name_or_path='/data/Qwen2.5-VL-3B-Instruct': /data/Qwen2.5-VL-3B-Instruct has no chat "
        "template (tokenizer_config.json's chat_template, chat_template.json or chat_template.jinja): vase builds "
        "every prompt with it; copy it from the checkpoint's release",
        "vase builds every prompt with the tokenizer's chat template; a base-model folder or a partial copy lacks "
        "it.",
        'Copy `chat_template.json` (or the `chat_template` of `tokenizer_config.json`) from the release.',
        "copy it from the checkpoint's release"),
    Symptom(
        'ckpt-cut-shard', 'Checkpoints and adapters', 'A weight shard is cut short',
        "error: model.name_or_path='/data/Qwen2.5-VL-3B-Instruct': shard "
        "/data/Qwen2.5-VL-3B-Instruct/model.safetensors is cut short: its tensors need 8 bytes after the header, "
        "the file has 4; download it again",
        "A download or copy stopped early; each safetensors shard's header says how long it must be.",
        'Download that shard again.',
        'download it again'),
    Symptom(
        'ckpt-tiny-into-yours', 'Checkpoints and adapters', "A real checkpoint with the tiny model's config",
        "config error: model.name_or_path='/data/Qwen2.5-VL-3B-Instruct' with model.build_tiny=true would build a "
        "random tiny model there; vase builds tiny models only under paths.cache_dir='~/vase/.cache'. To load this "
        "checkpoint set model.build_tiny=false (or choose model=qwen2_5_vl_3b / qwen2_5_vl_7b)",
        'The default `model=tiny` builds a random tiny model; vase builds it only in its cache, never in a folder '
        'you give.',
        'Load your checkpoint with `model=qwen2_5_vl_3b` (or `qwen2_5_vl_7b`) `model.name_or_path=...`, or '
        '`model.build_tiny=false`.',
        'set model.build_tiny=false'),
    Symptom(
        'ckpt-hub-offline', 'Checkpoints and adapters', 'A hub id on a machine without the hub',
        "config error: model.name_or_path='Qwen/Qwen2.5-VL-3B-Instruct' is not in this machine's hub cache and "
        "HF_HUB_OFFLINE is set; pass a local checkpoint folder "
        "(model.name_or_path=/path/to/Qwen2.5-VL-3B-Instruct)",
        "The id is not in this machine's hub cache and `HF_HUB_OFFLINE` is set (or the hub cannot be reached).",
        'Give the local folder of the checkpoint instead of its id.',
        'pass a local checkpoint folder'),
    Symptom(
        'adapter-not-adapter', 'Checkpoints and adapters', '`init_adapter` names a run folder, not its adapter',
        "config error: init_adapter='/data/run': no adapter_config.json in it; give the adapter folder a training "
        "run saved (<run>/adapter), not the run folder or a checkpoint",
        'A run saves its LoRA adapter in `<run>/adapter`; the run folder itself has no `adapter_config.json`.',
        'Give the adapter folder: `init_adapter=logs/train/runs/<time>/adapter`.',
        'give the adapter folder a training run saved'),
    Symptom(
        'mlflow-down', 'Loggers and tracking servers', 'No MLflow server at the tracking URI',
        "config error: logger.mlflow.tracking_uri='http://127.0.0.1:5000': no MLflow server answers there ([Errno "
        "111] Connection refused); start it (mlflow server --host 127.0.0.1 --port 5000 --backend-store-uri "
        "sqlite:///mlflow.db --artifacts-destination ./mlartifacts), fix MLFLOW_TRACKING_URI, or unset it to log "
        "to the local store under paths.log_dir",
        'The server is not started, listens elsewhere, or `MLFLOW_TRACKING_URI` is left from another project. vase '
        'probes it for at most 5 s before any model loads.',
        'Start it where the URI points: the line gives the command with the URI\'s own host and port (here '
        '`mlflow server --host 127.0.0.1 --port 5000 --backend-store-uri sqlite:///mlflow.db --artifacts-destination '
        './mlartifacts`); or fix the URI, or unset it to use the local store.',
        'start it (mlflow server --host 127.0.0.1 --port '),
    Symptom(
        'logger-unknown', 'Loggers and tracking servers', 'A logger name is misspelled',
        "config error: logger='mlfow' is not a known option; choose one of ['csv', 'mlflow', 'none', "
        "'tensorboard', 'wandb'] (files in ~/vase/conf/logger)",
        '`logger=` takes a file of `conf/logger/`; several are given as a list.',
        '`logger=mlflow`, or `"logger=[mlflow,tensorboard]"`.',
        "choose one of ['csv', 'mlflow'"),
    Symptom(
        'logger-dir-file', 'Loggers and tracking servers', "A logger's folder is a file",
        "config error: logger.tensorboard.save_dir='/data/tb' is a file; the logger writes a folder there: give a "
        "folder (or leave it: the run's own folder)",
        '`logger.<name>.save_dir` names a file that exists; the logger writes a folder there.',
        "Give a folder, or leave the key out (the run's own folder).",
        'give a folder'),
    Symptom(
        'slurm-timeout', 'SLURM', 'The SLURM time limit is too short for the warning signal',
        "config error: cluster.timeout_min=1 (60 s) leaves 0 s before SLURM may send the warning signal "
        "(hydra.launcher.signal_delay_s=120, plus up to 30 s between SLURM's limit tests); a job needs about 20 s "
        "to start and catch it. Raise cluster.timeout_min or lower hydra.launcher.signal_delay_s",
        'vase asks SLURM for a signal `signal_delay_s` before the limit to save and requeue; a limit shorter than '
        'that leaves the job no time to start and catch it.',
        'Raise `cluster.timeout_min` (or lower `hydra.launcher.signal_delay_s`).',
        'Raise cluster.timeout_min'),
    Symptom(
        'slurm-tasks', 'SLURM', 'Zero tasks per node',
        'config error: cluster.tasks_per_node=0 must be a whole number of at least 1 (or null: one per GPU)',
        '`cluster.tasks_per_node` is the number of processes (Lightning ranks) per node.',
        'Give at least 1, or null for one per GPU.',
        'or null: one per GPU'),
    Symptom(
        'slurm-no-sbatch', 'SLURM', '`cluster=slurm` on a machine without SLURM',
        "error: cluster=slurm submits the jobs through SLURM's sbatch, which this machine does not have (not on "
        "PATH): run the command on the cluster's login node, or use cluster=local to run the same jobs here "
        "through submitit",
        "The sweep submits through `sbatch`, which is only on the cluster's login nodes.",
        'Run the command on the login node, or `cluster=local` to run the same jobs here.',
        'use cluster=local'),
    Symptom(
        'slurm-refused', 'SLURM', 'sbatch cannot reach the SLURM controller',
        "error: sbatch refused the sweep's jobs (sbatch: fatal: Could not establish a configuration source); "
        "nothing was submitted. Check that this machine reaches the SLURM controller (sinfo answers; SLURM_CONF or "
        "/etc/slurm/slurm.conf names it) and that cluster.partition and cluster.account exist (sinfo, sacctmgr); "
        "or use cluster=local to run the same jobs here",
        '`sbatch` is installed but finds no controller: no `slurm.conf` (or `SLURM_CONF`), no DNS record for it, '
        'or a partition or account that does not exist.',
        'Check that `sinfo` answers from this machine and that `cluster.partition` and `cluster.account` exist; '
        'nothing was submitted.',
        'sinfo answers'),
    Symptom(
        'disk-not-writable', 'Disk and permissions', 'The log folder cannot be written',
        'config error: paths.log_dir=/data/notes.txt/logs: vase cannot write there (Not a directory); choose a '
        'folder you can write (paths.log_dir=...)',
        '`paths.log_dir` is under a file, on a read-only mount, or in a folder you may not write.',
        'Choose a folder you can write: `paths.log_dir=/scratch/$USER/vase-logs`.',
        'choose a folder you can write'),
    Symptom(
        'disk-full', 'Disk and permissions', 'The disk is full',
        'error: no space left on the device writing /data/logs: 4 KiB free, a run needs at least 1 MiB; free space '
        'there, or write elsewhere (paths.log_dir=..., paths.cache_dir=...)',
        "The run's folder has less than 1 MiB free; a run writes its config, checkpoints and records there.",
        'Free space there, or write elsewhere (`paths.log_dir=...`, `paths.cache_dir=...`). A full disk during '
        '`make setup` is said before pip starts.',
        'free space there, or write elsewhere'),
    Symptom(
        'out-flag-yours', 'Disk and permissions', "A tool's `--out` names a folder of yours",
        'error: --out /data/mine: exists and is not a tiny model that vase built; refusing to build over it: give '
        '--out a folder that does not exist yet',
        "vase's builders (`vase.models.tiny`, `vase.models.hub`) write only into folders they made; an existing "
        "folder of yours is left untouched.",
        'Give `--out` a folder that does not exist yet.',
        'give --out a folder that does not exist yet'),
    Symptom(
        'gpu-none', 'GPU memory', 'A GPU trainer on a machine without a GPU',
        'config error: trainer.accelerator=gpu asks for 1 CUDA GPU(s), and this machine has no CUDA GPU '
        '(torch.cuda.is_available() is False); use trainer=cpu (or trainer=ddp trainer.accelerator=cpu for several '
        'processes), or run on a GPU machine',
        '`trainer=gpu` (and the DeepSpeed trainers) train on CUDA GPUs; this machine has none, or torch was installed '
        'without CUDA. Said before the model loads, and by `VASE_CHECK_CONFIG=1`.',
        'On a CPU machine: `trainer=cpu`. On a GPU machine: check `nvidia-smi`, and that `python -c "import torch; '
        'print(torch.cuda.is_available())"` prints True.',
        'use trainer=cpu'),
    Symptom(
        'gpu-oom', 'GPU memory', 'CUDA out of memory',
        'error: the GPU ran out of memory (CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total '
        'capacity of 79.19 GiB of which 1.02 GiB is free); lower it, one step at a time: '
        'stage.module.gradient_checkpointing=true, model.dtype=bfloat16, a smaller stage.batch_size with a larger '
        'stage.grad_accum (the same effective batch), for GRPO a smaller stage.module.max_completion_length or '
        'stage.module.num_generations, then trainer=deepspeed_zero2 or deepspeed_zero3 over several GPUs; '
        'resume=auto continues from the last checkpoint',
        "The model, its activations and (for GRPO) G completions' logits do not fit the card at these settings.",
        'In this order: `stage.module.gradient_checkpointing=true`, `model.dtype=bfloat16`, a smaller '
        '`stage.batch_size` with a larger `stage.grad_accum`, for GRPO a smaller '
        '`stage.module.max_completion_length` or `num_generations`, then '
        '`trainer=deepspeed_zero2`/`deepspeed_zero3`; `resume=auto` continues from the last checkpoint.',
        'stage.module.gradient_checkpointing=true'),
)
