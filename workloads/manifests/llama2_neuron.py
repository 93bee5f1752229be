"""Recipe `llama2-neuron`: Llama2 pretraining on Trainium with neuronx-nemo-megatron, as in
the Data on EKS Llama2 example: tokenizer, dataset and tokenize Jobs, then precompile, the
health check and training as MPIJobs, plus TensorBoard and an optional shell pod."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from config.workloads import Llama2NeuronWorkload
from workloads.manifests.healthcheck import gated_training
from workloads.manifests.megatron import nemo_overrides, torchrun
from workloads.manifests.mpijob import MPIJobSpec, mpijob
from workloads.manifests.objects import Context, Obj, Step, data_dir, extras, job, labels, meta, short_hash

# Neuron compiler flags of Amazon Search's M5 training on Trainium (AWS blog), less the
# model-specific ones.
NEURON_CC_FLAGS = "--model-type transformer --distribution-strategy=llm-training --cache_dir="
MEGATRON_SCRIPT = "megatron_gpt_pretraining.py --config-path=conf --config-name=megatron_llama_config"


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


def _data_steps(workload_name: str, run: Llama2NeuronWorkload, ctx: Context, paths: _Data) -> list[Step]:
    """Secret -> tokenizer -> dataset -> tokenize: each Job skips work already marked done."""
    d = run.data
    data_labels = labels(workload_name, "data")
    secret = f"{workload_name}-hf-token"
    hf_env: list[Obj] = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "HF_TOKEN"}}}]
    tok_dir, ds_dir, out_dir = paths.tokenizer_dir, paths.dataset_dir, paths.tokenized_dir
    secret_obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": meta(secret, ctx, labels(workload_name, "secret")),
    }
    tokenizer = (
        f"test -f {tok_dir}/.done && {{ echo 'tokenizer already downloaded'; exit 0; }}\n"
        f"huggingface-cli download {d.tokenizer} tokenizer.model tokenizer.json tokenizer_config.json"
        f" special_tokens_map.json --local-dir {tok_dir}\n"
        f"touch {tok_dir}/.done"
    )
    dataset = (
        f"test -f {ds_dir}/.done && {{ echo 'dataset already downloaded'; exit 0; }}\n"
        f"huggingface-cli download --repo-type dataset {d.dataset} --include {shlex.quote(d.include)}"
        f" --local-dir {ds_dir}\n"
        f"touch {ds_dir}/.done"
    )
    tokenize = (
        f"test -f {out_dir}/.done && {{ echo 'corpus already tokenized'; exit 0; }}\n"
        f"mkdir -p {out_dir}\n"
        f"find {ds_dir} -name {shlex.quote(d.include)} -print0 | sort -z | xargs -0 cat > {out_dir}/corpus.jsonl\n"
        "python3 /workspace/neuronx-nemo-megatron/nemo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"
        f" --input={out_dir}/corpus.jsonl --json-keys=text --tokenizer-library=huggingface"
        f" --tokenizer-type={tok_dir} --dataset-impl=mmap --output-prefix={out_dir}/corpus"
        f" --append-eod --need-pad-id --workers={ctx.node_group.instance.vcpus}\n"
        f"rm {out_dir}/corpus.jsonl\n"
        f"touch {out_dir}/.done"
    )
    return [
        Step(secret, "secret", secret_obj, secret_data={"HF_TOKEN": ""}),
        Step(
            paths.tokenizer_step,
            "tokenizer",
            job(paths.tokenizer_step, ctx, data_labels, tokenizer, env=hf_env, timeout=1800),
            after=(secret,),
        ),
        Step(
            paths.dataset_step,
            "dataset",
            job(paths.dataset_step, ctx, data_labels, dataset, env=hf_env, timeout=4 * 3600),
            after=(paths.tokenizer_step,),
        ),
        Step(
            paths.tokenize_step,
            "tokenize",
            job(paths.tokenize_step, ctx, data_labels, tokenize, env=[], timeout=6 * 3600),
            after=(paths.dataset_step,),
        ),
    ]


def steps(workload_name: str, run: Llama2NeuronWorkload, ctx: Context) -> list[Step]:
    """Data steps -> precompile -> health check -> train, plus TensorBoard and the shell pod."""
    paths = _Data.of(workload_name, run, ctx)
    cache = f"{ctx.shared_mount}/{workload_name}/neuron-cache"
    neuron_env = {
        "NEURON_COMPILE_CACHE_URL": cache,
        "NEURON_CC_FLAGS": f"{NEURON_CC_FLAGS}{cache}",
        "NEURON_FUSE_SOFTMAX": "1",
        "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3",
        "XLA_USE_BF16": "1",
    }
    data_args = [
        f"model.tokenizer.type={paths.tokenizer_dir}",
        f"model.data.data_prefix=[1.0,{paths.tokenized_dir}/corpus_text_document]",
    ]

    def launch(steps: int, prefix: str = "") -> str:
        args = [*nemo_overrides(workload_name, run, run.model, run.training, ctx, steps), *data_args]
        return torchrun(run.code_dir, MEGATRON_SCRIPT, args, prefix=prefix)

    precompile = MPIJobSpec(
        f"{workload_name}-{run.run_id}-precompile",
        "precompile",
        launch(run.precompile_steps, prefix="neuron_parallel_compile "),
        env=neuron_env,
        timeout_seconds=4 * 3600,
        backoff_limit=run.max_retries,
    )
    train = MPIJobSpec(
        f"{workload_name}-{run.run_id}-train",
        "train",
        launch(run.training.max_steps),
        env=neuron_env,
        awaited=False,
        backoff_limit=run.max_retries,
    )
    return [
        *_data_steps(workload_name, run, ctx, paths),
        Step(precompile.name, "precompile", mpijob(workload_name, run, ctx, precompile), after=(paths.tokenize_step,)),
        *gated_training(workload_name, run, ctx, train, after=(precompile.name,)),
        *extras(workload_name, ctx, tensorboard_on=run.tensorboard, shell_on=run.shell),
    ]
