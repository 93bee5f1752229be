"""Recipe `llama2-neuron`: Llama2 pretraining on Trainium with neuronx-nemo-megatron 0.8.0, as the
Data on EKS Llama2 blueprint runs it: tokenizer, dataset and tokenize Jobs, then one training
MPIJob whose launcher checks the nodes, precompiles (neuron_parallel_compile) and trains, plus
TensorBoard and an optional shell pod."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from config.workloads import Llama2NeuronWorkload
from workloads.manifests.companions import extras
from workloads.manifests.convert import WEIGHTS, copy_files, llama_config
from workloads.manifests.healthcheck import training
from workloads.manifests.hub import hugging_face_token_file
from workloads.manifests.megatron import EXAMPLES, SCRIPT, neuronx_config, neuronx_overrides, torchrun
from workloads.manifests.objects import (
    DATA_JOB_CPUS,
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
from workloads.manifests.resume import mark_saved, neuronx_guard

# train_setup.sh of neuronx-nemo-megatron 0.8.0, for MPI runs on EKS with bf16 + stochastic
# rounding (its default, "bf16SR"); the compile cache on FSx as the Data on EKS blueprint has it.
NEURONX_ENV = {
    "XLA_USE_BF16": "1",
    "NEURON_CC_FLAGS": "--model-type transformer --distribution-strategy=llm-training"
    " --enable-mixed-precision-accumulation",
    "NEURON_FUSE_SOFTMAX": "1",
    "NEURON_RT_STOCHASTIC_ROUNDING_EN": "1",
    "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "5",
    "NEURON_RT_EXEC_TIMEOUT": "100",
    "NEURON_TRANSFER_WITH_STATIC_RING_OPS": "",
    "BUCKET_CAP_MB": "1024",
    "MALLOC_ARENA_MAX": "128",
    "TF_NUM_INTEROP_THREADS": "1024",
    "XLA_THREAD_POOL_SIZE": "4",
    "XLA_IO_THREAD_POOL_SIZE": "4",
    "HYDRA_FULL_ERROR": "1",
}
PREPROCESS = "nemo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"
NO_SYMLINKS = 'if [ -n "$(find {d} -type l)" ]; then echo "FAIL: symlinks in {d} point outside /shared"; exit 1; fi\n'


@dataclass(frozen=True)
class _Data:
    """Where the tokenizer, the dataset and the tokenized corpus live, and the steps that make
    them. Named by what they hold, not by run: a new runId reuses them."""

    tokenizer_step: str
    dataset_step: str
    tokenize_step: str
    tokenizer_dir: str
    dataset_dir: str
    tokenized_dir: str

    @classmethod
    def of(cls, workload_name: str, run: Llama2NeuronWorkload, ctx: Context) -> _Data:
        d = run.data
        data = data_dir(ctx, workload_name)
        tokenized = short_hash(d.tokenizer, d.dataset, d.include)
        return cls(
            tokenizer_step=f"{workload_name}-tokenizer-{short_hash(d.tokenizer)}",
            dataset_step=f"{workload_name}-dataset-{short_hash(d.dataset, d.include)}",
            tokenize_step=f"{workload_name}-tokenize-{tokenized}",
            tokenizer_dir=f"{data}/tokenizer-{short_hash(d.tokenizer)}",
            dataset_dir=f"{data}/dataset-{short_hash(d.dataset, d.include)}",
            tokenized_dir=f"{data}/tokenized-{tokenized}",
        )

    @property
    def data_prefix(self) -> str:
        return f"{self.tokenized_dir}/corpus_text_document"


def _scripts(run: Llama2NeuronWorkload, paths: _Data) -> tuple[str, str, str]:
    """The tokenizer, dataset and tokenize scripts. Downloads copy real files into /shared:
    huggingface-hub < 0.23 (neuronx-nemo-megatron's pin) otherwise symlinks files over 5 MB
    into the pod's own cache, which is gone with the pod."""
    d = run.data
    tok_dir, ds_dir, out_dir = paths.tokenizer_dir, paths.dataset_dir, paths.tokenized_dir
    tokenizer = (
        f"test -f {tok_dir}/.done && {{ echo 'tokenizer already downloaded'; exit 0; }}\n"
        f"huggingface-cli download {d.tokenizer} tokenizer.model tokenizer.json tokenizer_config.json"
        f" special_tokens_map.json --local-dir {tok_dir} --local-dir-use-symlinks False\n"
        + NO_SYMLINKS.format(d=tok_dir)
        + f"touch {tok_dir}/.done"
    )
    dataset = (
        f"test -f {ds_dir}/.done && {{ echo 'dataset already downloaded'; exit 0; }}\n"
        f"huggingface-cli download --repo-type dataset {d.dataset} --include {shlex.quote(d.include)}"
        f" --local-dir {ds_dir} --local-dir-use-symlinks False\n"
        + NO_SYMLINKS.format(d=ds_dir)
        + f"touch {ds_dir}/.done"
    )
    tokenize = (
        f"test -f {out_dir}/.done && {{ echo 'corpus already tokenized'; exit 0; }}\n"
        f"mkdir -p {out_dir}\n"
        f"find {ds_dir} -name {shlex.quote(d.include)} -print0 | sort -z | xargs -0 cat > {out_dir}/corpus.jsonl\n"
        f"python3 {run.repo_dir}/{PREPROCESS}"
        f" --input={out_dir}/corpus.jsonl --json-keys=text --tokenizer-library=huggingface"
        f" --tokenizer-type={tok_dir} --dataset-impl=mmap --output-prefix={out_dir}/corpus"
        f" --append-eod --need-pad-id --workers={DATA_JOB_CPUS}\n"
        f"rm {out_dir}/corpus.jsonl\n"
        f"touch {out_dir}/.done"
    )
    return tokenizer, dataset, tokenize


def _data_steps(
    workload_name: str, run: Llama2NeuronWorkload, ctx: Context, paths: _Data, after: tuple[str, ...]
) -> list[Step]:
    """Secret -> tokenizer -> dataset -> tokenize: each Job skips work already marked done. The
    token's Secret lives in the run's namespace and only the two download Jobs mount it; only
    they may reach the internet."""
    data_labels = labels(workload_name, "data")
    downloads = labels(workload_name, "data", internet=True)
    token_labels = labels(workload_name, "secret")
    token = secret(f"{workload_name}-hf-token", ctx, token_labels, "secret", {"HF_TOKEN": HUGGING_FACE_TOKEN})
    hf_env, hf_mount = hugging_face_token_file(token.name)
    tokenizer, dataset, tokenize = _scripts(run, paths)
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
            job(paths.dataset_step, ctx, downloads, dataset, env=hf_env, timeout=4 * 3600, mounts=(hf_mount,)),
            after=(paths.tokenizer_step,),
        ),
        Step(
            paths.tokenize_step,
            "tokenize",
            job(paths.tokenize_step, ctx, data_labels, tokenize, env=[], timeout=6 * 3600),
            after=(paths.dataset_step,),
        ),
    ]


def launch(workload_name: str, run: Llama2NeuronWorkload, ctx: Context, paths: _Data) -> str:
    """Precompile (skipped when this shape was compiled before) then train, in the launcher.

    The precompile is upstream's compile-only run (COMPILE=1: neuron_parallel_compile over a
    few steps, no TensorBoard, no checkpoints) in its own log directory, so the run's
    directory only ever holds the real run's logs and checkpoints.
    """
    ng = ctx.node_group
    code = f"{run.repo_dir}/nemo/{EXAMPLES}"
    script = f"{SCRIPT} --config-path=conf --config-name={neuronx_config(run.model)}"
    rdir = run_dir(ctx, workload_name, run.run_id)
    ckpt = checkpoint_dir(ctx, workload_name, run.run_id)

    def args(steps: int, log_dir: str, checkpoints: bool) -> list[str]:
        return neuronx_overrides(
            run.model,
            run.training,
            nodes=run.nodes,
            ranks_per_node=ng.instance.ranks_per_node,
            steps=steps,
            log_dir=log_dir,
            tokenizer_dir=paths.tokenizer_dir,
            data_prefix=paths.data_prefix,
            checkpoints=checkpoints,
        )

    compile_args = args(run.precompile_steps, f"{rdir}/precompile", False)
    train_args = args(run.training.max_steps, rdir, True)
    setup = "ulimit -n 65535 && "
    marker = f"{rdir}/precompile/.done-{short_hash(compile_args)}"
    return (
        f'echo "== precompile"\n'
        f"if [ -f {marker} ]; then echo 'this shape is compiled (cache on /shared)'; else\n"
        f"{torchrun(code, script, compile_args, prefix='neuron_parallel_compile ', setup=setup)}\n"
        f"mkdir -p {rdir}/precompile && touch {marker}\nfi\n"
        f'echo "== training"\n'
        f"{neuronx_guard(ckpt, rdir)}"
        f"{torchrun(code, script, train_args, setup=setup)} 2>&1 | {mark_saved(ckpt)}\n"
    )


CONVERTER = "nemo/examples/nlp/language_modeling/checkpoint_conversion/convert_nemo_checkpoint_to_hf_llama.py"
"""neuronx-nemo-megatron's xser checkpoint -> Hugging Face Llama weights (`pytorch_model.bin`)."""
TOKENIZER_FILES = ("tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
"""What the tokenizer step downloads (and the converted model needs beside its weights)."""


def convert(source: Source, out: str, ctx: Context) -> str:
    """The run's newest checkpoint (xser, one folder per tensor-parallel rank) to Hugging Face
    weights with upstream's converter, which reads the model's shape from a config.json it is
    given; then that config.json with the vocabulary the weights have, and the run's tokenizer."""
    run = source.run
    assert isinstance(run, Llama2NeuronWorkload)
    paths = _Data.of(source.workload, run, ctx)
    checkpoints = checkpoint_dir(ctx, source.workload, source.run_id)
    return (
        llama_config(run.model, out, None) + f"python3 {run.repo_dir}/{CONVERTER} --path_to_checkpoints {checkpoints}"
        f" --config_file {out}/config.json --output_path {out} --is_xser --trn\n"
        + llama_config(run.model, out, f"{out}/{WEIGHTS}")
        + copy_files(paths.tokenizer_dir, out, TOKENIZER_FILES)
    )


MODEL = Llama2NeuronWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: Llama2NeuronWorkload, ctx: Context) -> list[Step]:
    """Image check -> shared directories -> data steps -> the training MPIJob, plus TensorBoard
    and the shell pod."""
    paths = _Data.of(workload_name, run, ctx)
    env = {**NEURONX_ENV, "NEURON_COMPILE_CACHE_URL": f"{ctx.shared_mount}/{workload_name}/neuron-cache"}
    image = image_check(workload_name, ctx, run)
    dirs = shared_dirs(workload_name, ctx, after=(image.name,))
    return [
        image,
        dirs,
        *_data_steps(workload_name, run, ctx, paths, (dirs.name,)),
        *training(
            workload_name, run, ctx, launch(workload_name, run, ctx, paths), env=env, after=(paths.tokenize_step,)
        ),
        *extras(workload_name, ctx, run.run_id, tensorboard_on=run.tensorboard, shell_on=run.shell),
    ]
