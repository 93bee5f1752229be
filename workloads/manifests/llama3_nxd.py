"""Recipe `llama3-nxd` (maintenance-only): Llama 3 8B pretraining on trn1/trn1n with neuronx-distributed's
TP + ZeRO-1 example (v2.28.0, in the image of images/neuronx-distributed/, laid out in /workspace as
awsome-distributed-ai's Trainium EKS case does): tokenizer and dataset Jobs, then one training
MPIJob whose launcher checks the nodes, precompiles, trains (resuming from the newest complete
checkpoint) and converts the newest checkpoint to Hugging Face parameter names."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from config.workloads import Llama3NxdWorkload
from config.workloads.llama3_nxd import LAYERS, NEURON_CORES_PER_PROCESS_GROUP, SEQ_LENGTH
from workloads.manifests.companions import extras
from workloads.manifests.convert import WEIGHTS, copy_export
from workloads.manifests.healthcheck import training
from workloads.manifests.hub import hugging_face_token_file
from workloads.manifests.llama2_neuron import NO_SYMLINKS
from workloads.manifests.objects import (
    HUGGING_FACE_TOKEN,
    Context,
    Source,
    Step,
    checkpoint_dir,
    data_dir,
    image_check,
    job,
    labels,
    run_dir,
    secret,
    shared_dirs,
    short_hash,
)

WORKSPACE = "/workspace"
SCRIPT = "tp_zero1_llama_hf_pretrain.py"
CONFIG_DIRS = {"3": "8B_config_llama3", "3.1": "8B_config_llama3.1"}
# tp_zero1_llama3_8B_hf_pretrain.sh of neuronx-distributed v2.28.0, its MPI branch (the EFA
# settings come with every Neuron job: workloads/manifests/mpijob.py). Training reads only local
# files: the Hub stays offline in the ranks (the tokenizer and corpus were staged by the Jobs).
NXD_ENV = {
    "NEURON_FUSE_SOFTMAX": "1",
    "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3",
    "MALLOC_ARENA_MAX": "64",
    "NEURON_RT_NUM_CORES": str(NEURON_CORES_PER_PROCESS_GROUP),
    "NUM_NEURONCORES": str(NEURON_CORES_PER_PROCESS_GROUP),
    "TPU_NUM_DEVICES": str(NEURON_CORES_PER_PROCESS_GROUP),
    "TPU_CHIPS_PER_HOST_BOUNDS": str(NEURON_CORES_PER_PROCESS_GROUP),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
}
# The files get_dataset.py's AutoTokenizer reads from the tokenizer directory (awsome-distributed-ai's
# tokenize_data.py downloads the same, allow_patterns=["tokenizer*"]).
TOKENIZER_FILES = "tokenizer*"


@dataclass(frozen=True)
class _Data:
    """The tokenizer, the corpus and the steps that make them, named by what they hold."""

    tokenizer_step: str
    dataset_step: str
    tokenizer_dir: str
    home: str
    """HOME of get_dataset.py, which writes ~/examples_datasets/wikicorpus_llama3_tokenized_8k."""

    @classmethod
    def of(cls, workload_name: str, run: Llama3NxdWorkload, ctx: Context) -> _Data:
        key = short_hash(run.data.tokenizer)
        data = data_dir(ctx, workload_name)
        return cls(
            tokenizer_step=f"{workload_name}-tokenizer-{key}",
            dataset_step=f"{workload_name}-dataset-{key}",
            tokenizer_dir=f"{data}/tokenizer-{key}",
            home=f"{data}/wikicorpus-{key}",
        )

    @property
    def tokenized(self) -> str:
        return f"{self.home}/examples_datasets/wikicorpus_llama3_tokenized_8k"


def _data_steps(
    workload_name: str, run: Llama3NxdWorkload, ctx: Context, paths: _Data, after: tuple[str, ...]
) -> list[Step]:
    """Secret -> tokenizer -> dataset: the two downloads are the only pods that reach the internet,
    only the tokenizer Job mounts the token; each skips work already marked done."""
    token = secret(
        f"{workload_name}-hf-token", ctx, labels(workload_name, "secret"), "secret", {"HF_TOKEN": HUGGING_FACE_TOKEN}
    )
    hf_env, hf_mount = hugging_face_token_file(token.name)
    downloads = labels(workload_name, "data", internet=True)
    tok = paths.tokenizer_dir
    tokenizer = (
        f"test -f {tok}/.done && {{ echo 'tokenizer already downloaded'; exit 0; }}\n"
        f"huggingface-cli download {run.data.tokenizer} --include {shlex.quote(TOKENIZER_FILES)} --local-dir {tok}\n"
        + NO_SYMLINKS.format(d=tok)
        + f"touch {tok}/.done"
    )
    # get_dataset.py (upstream, unchanged): wikicorpus raw_en through datasets' loading script, the
    # tokenizer from the working directory, the blocks under $HOME/examples_datasets.
    dataset = (
        f"test -f {paths.tokenized}/.done && {{ echo 'corpus already tokenized'; exit 0; }}\n"
        f"mkdir -p {paths.home}\n"
        f"cd {tok} && HOME={paths.home} python3 {WORKSPACE}/get_dataset.py --llama-version 3\n"
        f"touch {paths.tokenized}/.done"
    )
    cache = [{"name": "HF_HOME", "value": f"{paths.home}/.cache/huggingface"}]
    return [
        token,
        Step(
            paths.tokenizer_step,
            "tokenizer",
            job(paths.tokenizer_step, ctx, downloads, tokenizer, env=hf_env, timeout=1800, mounts=(hf_mount,)),
            after=(token.name, *after),
        ),
        Step(
            paths.dataset_step,
            "dataset",
            job(paths.dataset_step, ctx, downloads, dataset, env=cache, timeout=8 * 3600),
            after=(paths.tokenizer_step,),
        ),
    ]


def train_args(
    run: Llama3NxdWorkload, ctx: Context, workload_name: str, paths: _Data, *, compile_only: bool
) -> list[str]:
    """tp_zero1_llama_hf_pretrain.py's options: upstream's 8B run; the compile run traces a few
    steps and neither saves nor loads a checkpoint, the real run resumes from the newest one."""
    m, t = run.model, run.training
    rdir = run_dir(ctx, workload_name, run.run_id)
    out = f"{rdir}/precompile" if compile_only else rdir
    args = [
        f"--model_path={WORKSPACE}/{CONFIG_DIRS[m.version]}",
        f"--data_dir={paths.tokenized}",
        f"--output_dir={out}",
        f"--metrics_file={out}/results.json",
        f"--tensor_parallel_size={m.tensor_parallel}",
        f"--batch_size={m.micro_batch_size}",
        f"--grad_accum_usteps={run.grad_accum}",
        f"--max_steps={t.max_steps}",
        f"--steps_this_run={run.training.precompile_steps if compile_only else t.max_steps}",
        f"--warmup_steps={t.warmup_steps}",
        f"--lr={t.learning_rate:g}",
        f"--seq_len={SEQ_LENGTH}",
        "--sequence_parallel_enabled",
        "--selective_checkpoint_enabled",
        "--logging_interval=1",
        "--qkv_linear",
        f"--kv_replicator={m.kv_replicator}",
        "--use_flash_attention=1",
        "--use_gpu_compatible_precision=1",
        "--use_mix_precision",
        "--use_zero_1",
        f"--checkpoint_dir={checkpoint_dir(ctx, workload_name, run.run_id)}",
        f"--num_kept_checkpoint={t.checkpoints_to_keep}",
    ]
    if compile_only:
        return [*args, "--checkpoint_freq=0"]
    return [*args, f"--checkpoint_freq={t.checkpoint_every_steps}", "--loading_step=latest_if_exists"]


def _torchrun(args: list[str], *, prefix: str = "") -> str:
    """mpirun starts one torchrun per node in /workspace (the script imports its modules from there)."""
    command = (
        f"ulimit -n 65535 && {prefix}torchrun --nproc_per_node=$NPROC_PER_NODE --nnodes=$NNODES"
        f" --node_rank=$OMPI_COMM_WORLD_RANK --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT {SCRIPT} "
        + " ".join(shlex.quote(a) for a in args)
    )
    return f"$MPIRUN bash -c {shlex.quote(f'cd {WORKSPACE} && {command}')}"


def newest_checkpoint(ckpt: str) -> str:
    """Shell: `$tag` becomes the newest complete checkpoint (a step_<n> with its `done` file), or empty."""
    return (
        f'tag=$(for d in {ckpt}/step_*; do [ -f "$d/done" ] && basename "$d"; done 2>/dev/null'
        " | sort -t_ -k2 -n | tail -n 1)\n"
    )


def export(run: Llama3NxdWorkload, ctx: Context, workload_name: str, paths: _Data) -> str:
    """The newest checkpoint as one state dict with Hugging Face parameter names
    (convert_checkpoints.py --convert_to_full_state), with upstream's config.json and the tokenizer
    beside it, on the first node (its NeuronCores are free once training ended); once per checkpoint.
    The converter reads the xser shards of every TP rank and splits the fused qkv weights."""
    m = run.model
    ckpt = checkpoint_dir(ctx, workload_name, run.run_id)
    hf = f"{run_dir(ctx, workload_name, run.run_id)}/hf"
    config = f"{WORKSPACE}/{CONFIG_DIRS[m.version]}/config.json"
    convert = (
        '[ "$OMPI_COMM_WORLD_RANK" = 0 ] || exit 0\n'
        + newest_checkpoint(ckpt)
        + f'if [ -z "$tag" ]; then echo "FAIL: no complete checkpoint in {ckpt} to export"; exit 1; fi\n'
        f'if [ -f {hf}/$tag/.done ]; then echo "$tag already exported to {hf}/$tag"; exit 0; fi\n'
        f"cd {WORKSPACE} && python3 convert_checkpoints.py --input_dir={ckpt}/$tag/model --output_dir={hf}/$tag"
        f" --config={config} --tp_size={m.tensor_parallel} --n_layers={LAYERS} --convert_to_full_state"
        f" --kv_size_multiplier={m.kv_replicator} --qkv_linear=True --fuse_qkv=True --load_xser=True"
        " --hw_backend=trn1\n"
        f"cp {config} {paths.tokenizer_dir}/tokenizer* {hf}/$tag/ && touch {hf}/$tag/.done\n"
        f'echo "exported $tag to {hf}/$tag"'
    )
    return f'echo "== Hugging Face export"\n$MPIRUN bash -c {shlex.quote(convert)}\n'


def launch(workload_name: str, run: Llama3NxdWorkload, ctx: Context, paths: _Data) -> str:
    """Precompile (skipped when this shape was compiled before), train unless the newest checkpoint
    is the last step's, then export to Hugging Face names."""
    rdir = run_dir(ctx, workload_name, run.run_id)
    ckpt = checkpoint_dir(ctx, workload_name, run.run_id)
    compile_args = train_args(run, ctx, workload_name, paths, compile_only=True)
    marker = f"{rdir}/precompile/.done-{short_hash(compile_args)}"
    script = (
        'echo "== precompile"\n'
        f"if [ -f {marker} ]; then echo 'this shape is compiled (cache on /shared)'; else\n"
        f"{_torchrun(compile_args, prefix='neuron_parallel_compile ')}\n"
        f"mkdir -p {rdir}/precompile && touch {marker}\nfi\n"
        'echo "== training"\n'
        f"if [ -f {ckpt}/step_{run.training.max_steps}/done ]; then echo 'training finished before'; else\n"
        f"{_torchrun(train_args(run, ctx, workload_name, paths, compile_only=False))}\nfi\n"
    )
    return script + (export(run, ctx, workload_name, paths) if run.convert_to_hugging_face else "")


def convert(source: Source, out: str, ctx: Context) -> str:
    """A serving run's model: the run's newest complete export (`hf/step_<n>` with its `.done`), its
    checkpoint.pt (a torch.save'd state dict with Hugging Face names) as the pytorch_model.bin a
    server loads, beside upstream's config.json and the tokenizer."""
    hf = f"{run_dir(ctx, source.workload, source.run_id)}/hf"
    newest = (
        f"exported=; for d in $(ls -d {hf}/step_* 2>/dev/null | sort -V); do test -f $d/.done && exported=$d; done\n"
    )
    return copy_export(newest, out, rename=("checkpoint.pt", WEIGHTS))


MODEL = Llama3NxdWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: Llama3NxdWorkload, ctx: Context) -> list[Step]:
    """Image check -> shared directories -> Secret, tokenizer and dataset Jobs -> the training
    MPIJob, plus TensorBoard."""
    paths = _Data.of(workload_name, run, ctx)
    # The compile cache on /shared, as every Neuron recipe here has it (upstream's script names
    # it with --cache_dir in NEURON_CC_FLAGS; torch-neuronx reads NEURON_COMPILE_CACHE_URL too).
    env = {
        **NXD_ENV,
        "NEURON_CC_FLAGS": "--model-type transformer",
        "NEURON_COMPILE_CACHE_URL": f"{ctx.shared_mount}/{workload_name}/neuron-cache",
    }
    image = image_check(workload_name, ctx, run)
    dirs = shared_dirs(workload_name, ctx, after=(image.name,))
    return [
        image,
        dirs,
        *_data_steps(workload_name, run, ctx, paths, (dirs.name,)),
        *training(
            workload_name, run, ctx, launch(workload_name, run, ctx, paths), env=env, after=(paths.dataset_step,)
        ),
        *extras(workload_name, ctx, run.run_id, tensorboard_on=run.tensorboard, shell_on=False),
    ]
