"""Recipe `nemo-gpu`: NVIDIA NeMo 2.0.0rc1 (NGC nemo:24.07) Llama pretraining on GPU nodes, in
the image of images/nemo/ (NeMo with EFA, aws-ofi-nccl and nccl-tests), whose launcher checks
the nodes and the EFA fabric with that same image, then trains."""

from __future__ import annotations

from config.workloads import NemoGpuWorkload
from workloads.manifests.companions import extras
from workloads.manifests.convert import WEIGHTS, llama_config
from workloads.manifests.healthcheck import training
from workloads.manifests.hub import cache_dir as hub_cache_dir
from workloads.manifests.hub import offline_env
from workloads.manifests.hub import stage as stage_hub
from workloads.manifests.megatron import EXAMPLES, SCRIPT, nemo_overrides, torchrun
from workloads.manifests.objects import (
    Context,
    Source,
    Step,
    checkpoint_dir,
    image_check,
    run_dir,
    shared_dirs,
)

CONVERTER = "scripts/checkpoint_converters/convert_llama_nemo_to_hf.py"
"""NeMo's .nemo (mcore) -> Hugging Face Llama weights."""
NEMO_FILE = "megatron_llama.nemo"
"""What NeMo saves at the end of training (save_nemo_on_train_end): `<checkpoints>/<prefix>.nemo`,
the prefix being exp_manager's name, `megatron_llama` in megatron_llama_config.yaml."""


def convert(source: Source, out: str, ctx: Context) -> str:
    """The run's .nemo to Hugging Face weights with NeMo's converter on the CPU (`--cpu-only`:
    the Job takes no GPU), then a config.json from the run's shape and the weights' vocabulary,
    and the run's tokenizer, read offline from the tenant's Hub cache where its training read it."""
    run = source.run
    assert isinstance(run, NemoGpuWorkload)
    nemo = f"{checkpoint_dir(ctx, source.workload, source.run_id)}/{NEMO_FILE}"
    script = (
        f"python3 {run.repo_dir}/{CONVERTER} --input_name_or_path {nemo} --output_path {out}/{WEIGHTS} --cpu-only\n"
        + llama_config(run.model, out, f"{out}/{WEIGHTS}")
    )
    return script + save_tokenizer(run, out, ctx)


def save_tokenizer(run: NemoGpuWorkload, out: str, ctx: Context) -> str:
    """The run's tokenizer saved into the model folder: NeMo's converter writes only the weights
    with `--output_path` alone (r2.0.0rc1 convert_llama_nemo_to_hf.py saves a tokenizer only with
    `--hf_output_path` and a Llama `--input_tokenizer`), so a served folder would have none. A
    Hub tokenizer from the tenant's cache, offline; a local folder as it is; a sentencepiece
    model as Llama's tokenizer over it (transformers LlamaTokenizer, `<s>` and `</s>`)."""
    tok, repo = run.tokenizer, run.tokenizer.hub_repo
    if repo is not None:
        env = " ".join(f"{k}={v}" for k, v in sorted(offline_env(ctx).items()))
        load = f"AutoTokenizer.from_pretrained('{repo.repo}')"
    elif tok.library == "sentencepiece":
        env, load = "", f"LlamaTokenizer(vocab_file='{tok.model}', legacy=False)"
    else:  # huggingface, a directory on /shared
        env, load = "", f"AutoTokenizer.from_pretrained('{tok.type}', local_files_only=True)"
    # The class the load names, alone: the Hub tokenizer's line as it always was (the Job's name
    # hashes its script, so a reworded line would rename a deployed Job).
    imports = f"from transformers import {load.split('(', 1)[0].split('.', 1)[0]}"
    return f"{env + ' ' if env else ''}python3 -c \"{imports}; {load}.save_pretrained('{out}')\"\n"


MODEL = NemoGpuWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: NemoGpuWorkload, ctx: Context) -> list[Step]:
    """Image check -> shared directories and the tokenizer's Hub files (NeMo's tokenizers read the
    Hub even with local vocabulary files) -> the training MPIJob (health gate, then NeMo,
    offline), plus TensorBoard."""
    args = [
        *nemo_overrides(
            run.model,
            run.training,
            nodes=run.nodes,
            ranks_per_node=ctx.node_group.instance.ranks_per_node,
            log_dir=run_dir(ctx, workload_name, run.run_id),
            tokenizer=run.tokenizer,
            data_prefix=run.data_prefix,
        ),
        *(f"{k}={v}" for k, v in sorted(run.overrides.items())),
    ]
    script = f"{SCRIPT} --config-path=conf --config-name={run.config_name}"
    phases = f'echo "== training"\n{torchrun(f"{run.repo_dir}/{EXAMPLES}", script, args)}\n'
    image = image_check(workload_name, ctx, run)
    staged: list[Step] = []
    if run.hub_repos:  # the tokenizer's Hub files, read offline by every rank
        dirs = shared_dirs(workload_name, ctx, after=(image.name,), also=(hub_cache_dir(ctx),))
        staged = [dirs, stage_hub(workload_name, ctx, run.hub_repos, after=(dirs.name,))]
    env = offline_env(ctx) if staged else {}
    last = staged[-1] if staged else image
    return [
        image,
        *staged,
        *training(workload_name, run, ctx, phases, env=env, after=(last.name,)),
        *extras(workload_name, ctx, run.run_id, tensorboard_on=run.tensorboard, shell_on=False),
    ]
