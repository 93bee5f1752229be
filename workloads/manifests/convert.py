"""The conversion step of a serving run: a finished training run's checkpoint turned into a
Hugging Face folder on /shared, by the training recipe's own converter (its builder's
`convert`), in the training run's image, on its node group.

The Job waits for the run's `.trained` marker (written by its launcher once the run finished),
converts, completes the folder the converter leaves without (a Llama `config.json` sized from
the written weights, the run's tokenizer), checks it and marks it done. It runs as the non-root
data user: the run's checkpoints are readable by all, the output is the serving workload's.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable

from config.training import ModelConfig
from workloads.manifests.objects import Context, Source, Step, data_dir, job, labels, short_hash, trained_marker

Converter = Callable[[Source, str, Context], str]
"""(the training run, the output folder, the serving run's context) -> the converter's script."""
WEIGHTS = "pytorch_model.bin"
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")
"""What vLLM 0.24.0 loads from a local folder with load_format auto ("hf": `*.safetensors`, then
`*.bin`; model_executor/model_loader/default_loader.py _prepare_weights)."""
CONVERT_TIMEOUT = 4 * 3600
"""Reading a 70B fp32 checkpoint and writing its bf16 weights takes well under this on a trn1 or
p5 host: the conversion's own bound (the wait for the run comes on top)."""
POLL_SECONDS = 60


def model_dir(ctx: Context, workload_name: str, source: Source) -> str:
    """Where the converted model of one run lives: the serving workload's data, named by the run."""
    return f"{data_dir(ctx, workload_name)}/models/{source.workload}-{source.run_id}"


def llama_config(m: ModelConfig, out: str, vocab_from: str | None) -> str:
    """Write `<out>/config.json` for transformers' LlamaForCausalLM from the run's shape; the
    vocabulary from the rows of the written embedding (`vocab_from`: the weights file), since
    Megatron pads it to a multiple of its tensor-parallel degree (None: a placeholder the
    converter does not read)."""
    fields = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": m.hidden_size,
        "intermediate_size": m.ffn_hidden_size,
        "num_hidden_layers": m.num_layers,
        "num_attention_heads": m.num_attention_heads,
        "num_key_value_heads": m.num_kv_heads,
        "max_position_embeddings": m.seq_length,
        "rms_norm_eps": m.layernorm_epsilon,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    vocab = (
        f"torch.load('{vocab_from}', map_location='cpu', mmap=True)['model.embed_tokens.weight'].shape[0]"
        if vocab_from
        else "32000"
    )
    return (
        "python3 - <<'EOF'\n"
        "import json, torch\n"
        f"config = {fields!r}\n"
        f"config['vocab_size'] = int({vocab})\n"
        f"json.dump(config, open('{out}/config.json', 'w'), indent=2)\n"
        "EOF\n"
    )


def conversion(workload_name: str, ctx: Context, convert: Converter, after: tuple[str, ...], wait_minutes: int) -> Step:
    """The conversion Job of `ctx.source`, run with `convert`'s script."""
    source = ctx.source
    assert source is not None, "a conversion needs the training run it converts"
    out = model_dir(ctx, workload_name, source)
    marker = trained_marker(ctx, source.workload, source.run_id)
    polls = wait_minutes * 60 // POLL_SECONDS
    script = (
        f"test -f {out}/.done && {{ echo 'already converted: {out}'; exit 0; }}\n"
        f"for i in $(seq 0 {polls}); do test -f {marker} && break\n"
        f'  [ "$i" = {polls} ] && {{ echo "FAIL: run {source.run_id} of {source.workload} has not finished'
        f' (no {marker}); serve it once it has"; exit 1; }}\n'
        f"  sleep {POLL_SECONDS}; done\n"
        f"rm -rf {out} && mkdir -p {out}\n"
        f"{convert(source, out, ctx)}"
        f'test -s {out}/config.json || {{ echo "FAIL: the converter wrote no config.json"; exit 1; }}\n'
        f'weights=; for f in {" ".join(f"{out}/{w}" for w in WEIGHT_FILES)}; do test -s "$f" && weights=1; done\n'
        f'test -n "$weights" || {{ echo "FAIL: the converter wrote no weights ({", ".join(WEIGHT_FILES)})";'
        " exit 1; }\n"
        f"touch {out}/.done && ls -l {out}\n"
    )
    on_source = dataclasses.replace(ctx, node_group=source.node_group, image=source.image)
    name = f"{workload_name}-convert-{short_hash(source.workload, source.run_id, convert(source, out, ctx))}"
    obj = job(name, on_source, labels(workload_name, "convert"), script, env=[], timeout=CONVERT_TIMEOUT + polls * 60)
    # Its last attempt must end before `pulumi up` stops waiting: one attempt, no retries.
    obj["spec"]["backoffLimit"] = 0
    obj["spec"]["activeDeadlineSeconds"] = CONVERT_TIMEOUT + polls * POLL_SECONDS - 60
    return Step(name, "convert", obj, after=after)


def copy_files(source_dir: str, out: str, files: tuple[str, ...]) -> str:
    """Copy the files of `files` that `source_dir` has (a tokenizer) into the model folder."""
    names = " ".join(shlex.quote(f) for f in files)
    return f"for f in {names}; do test -f {source_dir}/$f && cp {source_dir}/$f {out}/; done\n"


def copy_export(newest: str, out: str, rename: tuple[str, str] | None = None) -> str:
    """Copy a run's own Hugging Face export into the model folder: `newest` is a script that sets
    `$exported` to the newest complete export folder (or leaves it empty); `rename` (from, to) gives
    a weights file the name a server loads."""
    script = (
        f"{newest}"
        'test -n "$exported" || { echo "FAIL: the run left no complete Hugging Face export"; exit 1; }\n'
        f'cp -r "$exported"/. {out}/ && rm -f {out}/.done\n'
    )
    if rename is not None:
        script += f"mv {out}/{rename[0]} {out}/{rename[1]}\n"
    return script + 'echo "copied the export $exported"\n'
