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
import posixpath
import shlex
from collections.abc import Callable

from config.training import ModelConfig
from facts.awaits import SKIP_AWAIT, TRUE
from facts.nodegroups import NodeGroup
from workloads.manifests.objects import (
    DATA_JOB_CPUS,
    Context,
    Source,
    Step,
    data_dir,
    former_run_dir,
    job,
    labels,
    run_dir,
    short_hash,
    trained_marker,
)

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


def served_link(ctx: Context, workload_name: str, source: Source) -> str:
    """The model a server that follows its training workload serves: a link to the newest run of
    it converted whole, replaced only once the next run's folder is done."""
    return f"{data_dir(ctx, workload_name)}/models/{source.workload}-served"


@dataclasses.dataclass(frozen=True)
class Await:
    """How the conversion meets `pulumi up`: `follow` (the run the training workload runs now, not
    pinned by the server: never awaited, it waits on the cluster for as long as the run takes)
    or pinned (`wait_minutes`: how long `pulumi up` waits for the run to finish)."""

    follow: bool
    wait_minutes: int = 0


WAIT_POD = {"requests": {"cpu": "1", "memory": "4Gi"}}
"""A followed run's conversion waits beside the run on its node group: it requests little so
the run's whole-node workers still fit, and bursts to the data Jobs' limits once it converts
(the run has finished then, its nodes are free)."""


SPECIAL_TOKENS = """import json, os, sys
out = sys.argv[1]
def read(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.isfile(path) else {}
if not any(os.path.isfile(os.path.join(out, f)) for f in ("tokenizer.json", "tokenizer.model", "vocab.json")):
    sys.exit("FAIL: the model folder has no tokenizer (tokenizer.json, tokenizer.model or vocab.json)")
config, tok = read("config.json"), read("tokenizer_config.json")
ids = {t["content"]: int(i) for i, t in tok.get("added_tokens_decoder", {}).items()}
ids.update({t["content"]: t["id"] for t in read("tokenizer.json").get("added_tokens", [])})
vocab = read("tokenizer.json").get("model", {}).get("vocab") or read("vocab.json")
ids.update(vocab if isinstance(vocab, dict) else {})
def token_id(key):
    token = tok.get(key)
    token = token.get("content") if isinstance(token, dict) else token
    return ids.get(token)
for key in ("bos_token_id", "eos_token_id"):
    if config.get(key) is None:
        config[key] = token_id(key[:-3])
if config["eos_token_id"] is None:
    from transformers import AutoTokenizer
    loaded = AutoTokenizer.from_pretrained(out, local_files_only=True)
    config["bos_token_id"], config["eos_token_id"] = loaded.bos_token_id, loaded.eos_token_id
if config["eos_token_id"] is None:
    sys.exit("FAIL: the tokenizer names no end-of-sequence token: the server would not know where to stop")
if config["bos_token_id"] is None:
    config["bos_token_id"] = config["eos_token_id"]
json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
print("special tokens: bos", config["bos_token_id"], "eos", config["eos_token_id"])
"""
"""Give config.json the training tokenizer's bos/eos ids where the converter left them out:
transformers then fills LlamaConfig's defaults (bos 1, eos 2: configuration_llama.py, v4.44.0)
and vLLM stops generating at id 2, whatever the tokenizer says. Read from the folder's own
tokenizer files (stdlib only); transformers only where the files do not name them. A folder
without a tokenizer fails: the server runs offline and cannot fetch one."""


def special_tokens(out: str) -> str:
    """The script that checks the folder's tokenizer and writes its special token ids."""
    return f"python3 - {out} <<'EOF'\n{SPECIAL_TOKENS}EOF\n"


def conversion(workload_name: str, ctx: Context, convert: Converter, after: tuple[str, ...], wait: Await) -> Step:
    """The conversion Job of `ctx.source`, run with `convert`'s script."""
    source = ctx.source
    assert source is not None, "a conversion needs the training run it converts"
    out = model_dir(ctx, workload_name, source)
    marker = trained_marker(ctx, source.workload, source.run_id)
    polls = 0 if wait.follow else wait.wait_minutes * 60 // POLL_SECONDS
    link = served_link(ctx, workload_name, source)
    # Replaced in one rename: a server that starts meanwhile reads the old folder or the new one. The
    # link is relative (the folder beside it), so it resolves wherever the file system is mounted.
    assert posixpath.dirname(out) == posixpath.dirname(link), "the served link and its folder share models/"
    serve = f"ln -sfn {posixpath.basename(out)} {link}.next && mv -T {link}.next {link}\n" if wait.follow else ""
    waits = (
        f"until test -f {marker} ; do sleep {POLL_SECONDS}; done\n"
        if wait.follow
        else f"for i in $(seq 0 {polls}); do test -f {marker} && break\n"
        f'  [ "$i" = {polls} ] && {{ echo "FAIL: run {source.run_id} of {source.workload} has not finished'
        f' (no {marker}); serve it once it has"; exit 1; }}\n'
        f"  sleep {POLL_SECONDS}; done\n"
    )
    script = (
        f"test -f {out}/.done && {{ echo 'already converted: {out}'; {serve.strip() or 'true'}; exit 0; }}\n"
        f"{waits}"
        f"rm -rf {out} && mkdir -p {out}\n"
        f"{convert(source, out, ctx)}"
        f'test -s {out}/config.json || {{ echo "FAIL: the converter wrote no config.json"; exit 1; }}\n'
        f"{special_tokens(out)}"
        f'weights=; for f in {" ".join(f"{out}/{w}" for w in WEIGHT_FILES)}; do test -s "$f" && weights=1; done\n'
        f'test -n "$weights" || {{ echo "FAIL: the converter wrote no weights ({", ".join(WEIGHT_FILES)})";'
        " exit 1; }\n"
        f"touch {out}/.done && ls -l {out}\n{serve}"
    )
    group, awaited = placement(ctx, source, wait)
    on_source = dataclasses.replace(ctx, node_group=group, image=source.image)
    # Named by what it converts, read in the layout from before runs/ (objects.former_run_dir):
    # the move changed where the source lies, not what is converted, so a stack from before
    # keeps this Job's name and URN (its script is new: the Job is replaced, finds `.done`, exits).
    moved = (run_dir(ctx, source.workload, source.run_id), former_run_dir(ctx, source.workload, source.run_id))
    named_by = convert(source, out, ctx).replace(*moved)
    name = f"{workload_name}-convert-{short_hash(source.workload, source.run_id, named_by)}"
    resources = None
    if wait.follow:
        limits = {"cpu": str(DATA_JOB_CPUS), "memory": f"{group.instance.allocatable_memory_gib // 2}Gi"}
        resources = {**WAIT_POD, "limits": limits}
    obj = job(
        name,
        on_source,
        labels(workload_name, "convert"),
        script,
        env=[],
        timeout=CONVERT_TIMEOUT + polls * 60,
        resources=resources,
    )
    # Its last attempt must end before `pulumi up` stops waiting: one attempt, no retries.
    obj["spec"]["backoffLimit"] = 0
    if awaited:
        obj["spec"]["activeDeadlineSeconds"] = CONVERT_TIMEOUT + polls * POLL_SECONDS - 60
    else:
        obj["metadata"].setdefault("annotations", {})[SKIP_AWAIT] = TRUE
    return Step(name, "convert", obj, after=after, awaited=awaited)


def placement(ctx: Context, source: Source, wait: Await) -> tuple[NodeGroup, bool]:
    """Where the conversion runs and whether `pulumi up` waits for it. A followed run's is never
    awaited and waits beside the run. A pinned run's is awaited on the training group, or, with
    that group at desiredSize 0, on the server's group (a Job cannot start on a group with no
    node: `pulumi up` would wait out its timeout); with both at 0, it is not awaited."""
    if wait.follow:
        return source.node_group, False
    for group in (source.node_group, ctx.node_group):
        if group.nodes > 0:
            return group, True
    return source.node_group, False


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
