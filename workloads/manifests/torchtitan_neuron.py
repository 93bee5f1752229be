"""Recipe `torchtitan-neuron` (beta): TorchTitan pre-training on Trainium2 with TorchNeuron (Neuron
SDK 2.33, TorchTitan Neuron 0.2.2+neuron.1, in the image of images/torchtitan/): a Job stages
the model's Hugging Face tokenizer and config.json on /shared, then one training MPIJob whose
launcher checks the nodes and runs torchrun `-m torchtitan.train` on every node, resuming from the
newest DCP checkpoint, the last one written as Hugging Face safetensors."""

from __future__ import annotations

import shlex

from config.workloads import TorchTitanNeuronWorkload
from workloads.manifests.companions import extras
from workloads.manifests.convert import copy_export
from workloads.manifests.healthcheck import training
from workloads.manifests.objects import (
    Context,
    Source,
    Step,
    checkpoint_dir,
    data_dir,
    image_check,
    job,
    labels,
    run_dir,
    shared_dirs,
    short_hash,
)

DOWNLOAD = "scripts/download_hf_assets.py"
CHECKPOINT_FOLDER = "checkpoints"
"""--checkpoint.folder under the run directory (--dump_folder): the run's $CHECKPOINT_DIR."""
TENSORBOARD_FOLDER = "tb"
# Every rank reads staged files only: the tokenizer and config from hf_assets_path, the dataset
# from the checkout (c4_test) or /shared; the Hub stays offline.
TORCHTITAN_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def assets_dir(workload_name: str, run: TorchTitanNeuronWorkload, ctx: Context) -> str:
    """Where download_hf_assets.py puts the repo's files: <local_dir>/<name after the slash>."""
    repo = run.model.hugging_face_repo
    return f"{data_dir(ctx, workload_name)}/hf-assets-{short_hash(repo)}/{repo.split('/')[-1]}"


def _assets(workload_name: str, run: TorchTitanNeuronWorkload, ctx: Context, after: tuple[str, ...]) -> Step:
    """The tokenizer and config.json of the model's repo, with TorchTitan's own download script,
    from a Job that may reach the internet (the repo is ungated: no token)."""
    repo = run.model.hugging_face_repo
    target = assets_dir(workload_name, run, ctx)
    local_dir = target.rsplit("/", 1)[0]
    name = f"{workload_name}-assets-{short_hash(repo)}"
    script = (
        f"test -f {target}/.done && {{ echo 'assets already downloaded'; exit 0; }}\n"
        f"cd {run.repo_dir} && python3 {DOWNLOAD} --repo_id {repo} --assets tokenizer config --local_dir {local_dir}\n"
        f"test -f {target}/config.json\n"
        f"touch {target}/.done"
    )
    cache = [{"name": "HF_HUB_CACHE", "value": "/tmp/huggingface/hub"}]
    obj = job(name, ctx, labels(workload_name, "data", internet=True), script, env=cache, timeout=1800)
    return Step(name, "assets", obj, after=after)


def schedule_args(run: TorchTitanNeuronWorkload) -> list[str]:
    """Every lr_scheduler key, sized to the run: the fork's config function may set its own (for its
    own length). total_steps is where the decay ends; decay_ratio makes the decay start right after
    the warm-up (build() decays over round(total_steps x decay_ratio) steps)."""
    s = run.lr_schedule
    return [
        f"--lr_scheduler.warmup_steps={s.warmup_steps}",
        f"--lr_scheduler.total_steps={s.decay_end}",
        f"--lr_scheduler.decay_ratio={(s.decay_end - s.warmup_steps) / s.decay_end:g}",
        f"--lr_scheduler.decay_type={s.style}",
        f"--lr_scheduler.min_lr_factor={s.min_lr_ratio:g}",
    ]


def train_args(workload_name: str, run: TorchTitanNeuronWorkload, ctx: Context) -> list[str]:
    """torchtitan.train's flags: the config function, then what the run owns (where outputs and
    checkpoints go, the schedule of saves, the batch, the staged assets and dataset)."""
    m, t, d = run.model, run.training, run.data
    args = [
        f"--module={m.module}",
        f"--config={m.config}",
        f"--dump_folder={run_dir(ctx, workload_name, run.run_id)}",
        f"--hf_assets_path={assets_dir(workload_name, run, ctx)}",
        f"--training.steps={t.max_steps}",
        *schedule_args(run),
        f"--training.seq_len={m.seq_length}",
        f"--training.local_batch_size={m.local_batch_size}",
        f"--training.global_batch_size={m.global_batch_size}",
        f"--parallelism.tensor_parallel_degree={m.tensor_parallel}",
        "--checkpoint.enable",
        f"--checkpoint.folder={CHECKPOINT_FOLDER}",
        f"--checkpoint.interval={t.checkpoint_every_steps}",
        f"--checkpoint.keep_latest_k={t.checkpoints_to_keep}",
        f"--dataloader.dataset={d.dataset}",
        "--metrics.enable_tensorboard",
        f"--metrics.save_tb_folder={TENSORBOARD_FOLDER}",
    ]
    if d.dataset_path:
        args.append(f"--dataloader.dataset_path={d.dataset_path}")
    if run.hugging_face_export:
        args += [
            "--checkpoint.last_save_model_only",
            "--checkpoint.last_save_in_hf",
            "--checkpoint.export_dtype=bfloat16",
        ]
    if run.compile:
        args += ["--compile.enable", "--compile.backend=neuron"]
    return args


def launch(workload_name: str, run: TorchTitanNeuronWorkload, ctx: Context) -> str:
    """Train unless the last step's checkpoint exists (a restart after the end), then put the
    repo's config.json and tokenizer beside the Hugging Face export of the last step."""
    last = f"{checkpoint_dir(ctx, workload_name, run.run_id)}/step-{run.training.max_steps}"
    done = f"{last}/model.safetensors.index.json" if run.hugging_face_export else f"{last}/.metadata"
    command = (
        "torchrun --nproc_per_node=$NPROC_PER_NODE --nnodes=$NNODES --node_rank=$OMPI_COMM_WORLD_RANK"
        " --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT -m torchtitan.train "
        + " ".join(shlex.quote(a) for a in train_args(workload_name, run, ctx))
    )
    script = (
        'echo "== training"\n'
        f"if [ -f {done} ]; then echo 'training finished before'; else\n"
        f"$MPIRUN bash -c {shlex.quote(f'cd {run.repo_dir} && {command}')}\nfi\n"
    )
    if not run.hugging_face_export:
        return script
    assets = assets_dir(workload_name, run, ctx)
    return script + (
        'echo "== Hugging Face export"\n'
        f'[ -f {done} ] || {{ echo "FAIL: no Hugging Face export at {last}"; exit 1; }}\n'
        f"cp {assets}/config.json {assets}/tokenizer* {last}/\n"
        f'echo "exported step {run.training.max_steps} to {last}"\n'
    )


def convert(source: Source, out: str, ctx: Context) -> str:
    """A serving run's model: the last step's Hugging Face export (complete once its safetensors
    index is written), with the repo's config.json and tokenizer the run copied beside it."""
    run = source.run
    assert isinstance(run, TorchTitanNeuronWorkload)
    last = f"{checkpoint_dir(ctx, source.workload, source.run_id)}/step-{run.training.max_steps}"
    newest = (
        f"exported=; test -f {last}/model.safetensors.index.json && test -f {last}/config.json && exported={last}\n"
    )
    return copy_export(newest, out)


MODEL = TorchTitanNeuronWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: TorchTitanNeuronWorkload, ctx: Context) -> list[Step]:
    """Image check -> shared directories -> assets Job -> the training MPIJob, plus TensorBoard."""
    image = image_check(workload_name, ctx, run)
    dirs = shared_dirs(workload_name, ctx, after=(image.name,))
    assets = _assets(workload_name, run, ctx, after=(dirs.name,))
    env = {**TORCHTITAN_ENV, "NEURON_COMPILE_CACHE_URL": f"{ctx.shared_mount}/{workload_name}/neuron-cache"}
    return [
        image,
        dirs,
        assets,
        *training(workload_name, run, ctx, launch(workload_name, run, ctx), env=env, after=(assets.name,)),
        *extras(workload_name, ctx, run.run_id, tensorboard_on=run.tensorboard, shell_on=False),
    ]
