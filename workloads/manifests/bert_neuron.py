"""Recipe `bert-neuron`: BERT-large phase-1 pretraining on Trainium, data parallel, as the Neuron
BERT tutorial runs it (aws-neuron-samples v2.27.0 dp_bert_hf_pretrain, in the image of
images/bert-neuronx/): a Job stages the tokenized shards on /shared, then one training
MPIJob whose launcher checks the nodes, precompiles and trains, resuming from its newest
checkpoint on every start."""

from __future__ import annotations

import shlex

from config.workloads import BertNeuronWorkload
from workloads.manifests.companions import extras
from workloads.manifests.healthcheck import training
from workloads.manifests.hub import cache_dir as hub_cache_dir
from workloads.manifests.hub import offline_env
from workloads.manifests.hub import stage as stage_hub
from workloads.manifests.objects import (
    Context,
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
from workloads.manifests.resume import bert_guard

SCRIPT = "dp_bert_large_hf_pretrain_hdf5.py"
EXAMPLE = "torch-neuronx/training/dp_bert_hf_pretrain"
# The tutorial's multi-node settings (bert.rst, "Phase 1 BERT-Large pretraining on two
# instances") and run_dp_bert_large_hf_pretrain_bf16_s128.sh's runtime settings. HF_HOME is the
# pod's own; the model's files come from the staged Hub cache (hub.offline_env).
BERT_ENV = {
    "BUCKET_CAP_MB": "512",
    "XLA_TRANSFER_SEED_ASYNC": "1",
    "NEURON_RT_EXEC_TIMEOUT": "600",
    "NEURON_RT_STOCHASTIC_ROUNDING_SEED": "0",
    "HF_HOME": "/tmp/hf_cache",
}


def _dataset(workload_name: str, run: BertNeuronWorkload, ctx: Context) -> tuple[Step, str]:
    """A Job that unpacks the tokenized HDF5 shards onto /shared once (a .done marker guards it),
    from the tutorial's public S3 bucket (HTTPS to S3's public addresses, through the VPC's
    gateway endpoint where there is one)."""
    archive = run.data.archive
    target = f"{data_dir(ctx, workload_name)}/bert-{short_hash(archive)}"
    name = f"{workload_name}-dataset-{short_hash(archive)}"
    folder = archive.rsplit("/", 1)[-1].removesuffix(".tar")
    script = (
        f"test -f {target}/.done && {{ echo 'dataset already staged'; exit 0; }}\n"
        f"mkdir -p {target}\n"
        f"aws s3 cp --no-progress --no-sign-request {shlex.quote(archive)} - | tar -x -C {target}\n"
        f"touch {target}/.done"
    )
    obj = job(name, ctx, labels(workload_name, "data", internet=True), script, env=[], timeout=2 * 3600)
    return Step(name, "dataset", obj), f"{target}/{folder}"


def _torchrun(run: BertNeuronWorkload, args: list[str], *, prefix: str = "", setup: str = "", tail: str = "") -> str:
    """mpirun starts one torchrun per node in the script's directory; `tail` is shell text
    appended unquoted (it expands on the worker)."""
    command = (
        f"{setup}{prefix}torchrun --nproc_per_node=$NPROC_PER_NODE --nnodes=$NNODES"
        f" --node_rank=$OMPI_COMM_WORLD_RANK --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT {SCRIPT} "
        + " ".join(shlex.quote(a) for a in args)
        + tail
    )
    return f"$MPIRUN bash -c {shlex.quote(f'cd {run.repo_dir}/{EXAMPLE} && {command}')}"


def launch(workload_name: str, run: BertNeuronWorkload, ctx: Context, data: str) -> str:
    """Precompile (skipped when done for this shape), then train with `--resume_ckpt` whenever
    a checkpoint exists: the script resumes from the newest ckpt_<step>.pt in its output
    directory and refuses `--resume_ckpt` when there is none."""
    t = run.training
    ranks = ctx.node_group.placement(run.nodes).ranks
    # The tutorial divides gradient accumulation by the node count, keeping the global batch.
    accum = t.grad_accum(ranks) or 1
    common = [
        f"--data_dir={data}",
        f"--batch_size={t.batch_size}",
        f"--grad_accum_usteps={accum}",
        f"--lr={t.learning_rate:g}",
        f"--max_steps={t.max_steps}",
        f"--warmup_steps={t.warmup_steps}",
    ]
    rdir = run_dir(ctx, workload_name, run.run_id)
    ckpt = checkpoint_dir(ctx, workload_name, run.run_id)
    compile_args = [*common, f"--output_dir={rdir}/precompile", f"--steps_this_run={t.precompile_steps}"]
    train_args = [
        *common,
        f"--output_dir={ckpt}",
        f"--shards_per_ckpt={t.shards_per_checkpoint}",
        f"--num_ckpts_to_keep={t.checkpoints_to_keep}",
        f"--metrics_file={rdir}/results.json",
    ]
    marker = f"{rdir}/precompile/.done-{short_hash(compile_args)}"
    resume_flag = f'mkdir -p {ckpt}; r=; if compgen -G "{ckpt}/ckpt_*.pt" >/dev/null; then r=--resume_ckpt; fi; '
    train = _torchrun(run, train_args, setup=resume_flag, tail=" $r")
    return (
        'echo "== precompile"\n'
        f"if [ -f {marker} ]; then echo 'this shape is compiled (cache on /shared)'; else\n"
        f"{_torchrun(run, compile_args, prefix='neuron_parallel_compile ')}\n"
        f"mkdir -p {rdir}/precompile && touch {marker}\nfi\n"
        'echo "== training"\n'
        f"{bert_guard(ckpt, rdir, t.checkpoints_to_keep)}{train}\n"
    )


MODEL = BertNeuronWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: BertNeuronWorkload, ctx: Context) -> list[Step]:
    """Image check -> shared directories -> the model's Hub files and the dataset Job -> the
    training MPIJob (offline: every rank reads bert-large-uncased from the staged cache), plus
    TensorBoard."""
    image = image_check(workload_name, ctx, run)
    dirs = shared_dirs(workload_name, ctx, after=(image.name,), also=(hub_cache_dir(ctx),))
    model = stage_hub(workload_name, ctx, run.hub_repos, after=(dirs.name,))
    dataset, data = _dataset(workload_name, run, ctx)
    env = {
        **BERT_ENV,
        **offline_env(ctx),
        "NEURON_COMPILE_CACHE_URL": f"{ctx.shared_mount}/{workload_name}/neuron-cache",
    }
    dataset = Step(dataset.name, dataset.role, dataset.obj, after=(dirs.name,))
    phases = launch(workload_name, run, ctx, data)
    return [
        image,
        dirs,
        model,
        dataset,
        *training(workload_name, run, ctx, phases, env=env, after=(model.name, dataset.name)),
        *extras(workload_name, ctx, run.run_id, tensorboard_on=run.tensorboard, shell_on=False),
    ]
