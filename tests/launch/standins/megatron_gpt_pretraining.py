"""Stand-in for megatron_gpt_pretraining.py of neuronx-nemo-megatron 0.8.0 and of NeMo r2.0.0rc1:
reads the Hydra overrides, checks them against the launch (nodes, ranks per node) and the data
steps' outputs, resumes the way that framework's exp_manager does, trains `trainer.max_steps`
steps and saves checkpoints under the names that framework gives them. The framework (from the
image) and its rules come from /harness/job.json (tests/upstream/training-resume-rules.yaml).
Every rank starts its accelerator runtime first (the node's driver against the image's runtime)
and builds its tokenizer as NeMo does: a megatron type or a Hub id through AutoTokenizer, which
reads the repository's tokenizer config and, when that names no tokenizer class, its config.json
(through the Hub client _hub: the network, or offline the staged cache); a directory from disk.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import _hub
from _common import Steps, accelerator_init, fail, job, rank, record


def overrides(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for arg in argv:
        if arg.startswith("--"):
            continue
        key, _, value = arg.partition("=")
        out[key.lstrip("+")] = value
    return out


def truthy(value: str | None, default: bool = False) -> bool:
    return default if value is None else value.strip().lower() in ("true", "1", "yes")


def step_of(path: Path) -> int:
    m = re.search(r"step=(\d+)", path.name)
    if not m:
        fail(f"cannot tell the step of {path}")
    return int(m.group(1)) if m else 0


def latest(rules: dict[str, Any], ckdir: Path) -> Path | None:
    """The checkpoint that framework's check_resume resumes from, or None."""
    if not ckdir.exists():
        return None
    if rules["resume"] == "last":  # NeMo r2.0.0rc1
        unfinished = {p.name[: -len("-unfinished")] for p in ckdir.glob("*-unfinished")}
        dirs = [d for d in ckdir.glob("*") if d.is_dir() and d.name.endswith("last") and d.name not in unfinished]
        lasts = dirs or [p for p in ckdir.rglob("*last.ckpt") if p.name not in unfinished]
        if len(lasts) > 1:
            fail(f"ValueError: Multiple checkpoints {lasts} that matches *last.ckpt.")
        return lasts[0] if lasts else None
    found = sorted(
        (p for p in ckdir.rglob("*.ckpt") if len(p.relative_to(ckdir).parts) <= 2), key=lambda p: p.stat().st_mtime
    )
    if not found:
        return None
    newest = found[-1]  # uninject_model_parallel_rank: the rank folder out of the path
    return newest.parent.parent / newest.name if re.match(r"(mp|tp)_rank", newest.parent.name) else newest


def resume_step(rules: dict[str, Any], o: dict[str, str], ckdir: Path, me: int) -> int:
    if not truthy(o.get("exp_manager.resume_if_exists")):
        return 0
    found = latest(rules, ckdir)
    if found is None:
        if not truthy(o.get("exp_manager.resume_ignore_no_checkpoint")):
            fail(rules["noCheckpointError"].format(dir=ckdir))
        if me == 0:
            print(rules["noCheckpointLog"].format(dir=ckdir), flush=True)
        return 0
    if me == 0:
        print(rules["resumeLog"].format(path=found), flush=True)
    return step_of(found)


def save(rules: dict[str, Any], o: dict[str, str], ckdir: Path, step: int) -> None:
    """Rank 0 writes what every rank writes: the checkpoint, its `-last` twin when save_last,
    and only the newest save_top_k (monitor=step, mode=max)."""
    prefix = "exp_manager.checkpoint_callback_params."
    pattern = o.get(prefix + "filename", rules["filename"]).strip("'\"")
    save_last = truthy(o.get(prefix + "save_last"), rules["saveLast"])
    top_k = int(o.get(prefix + "save_top_k", rules["saveTopK"]))
    consumed = float(step * int(o.get("model.global_batch_size", "1")))
    name = pattern.replace("{val_loss:.2f}", "val_loss=0.00").replace("{step}", f"step={step}")
    name = name.replace("{consumed_samples}", f"consumed_samples={consumed}")
    names = [name, *([f"{name}-last"] if save_last else [])]
    tp, pp = int(o.get("model.tensor_model_parallel_size", "1")), int(o.get("model.pipeline_model_parallel_size", "1"))
    ckdir.mkdir(parents=True, exist_ok=True)
    if rules["checkpointIsDirectory"]:  # distributed checkpoints: a directory each
        marker = ckdir / f"{name}-unfinished"
        marker.touch()
        for n in names:
            shutil.rmtree(ckdir / n, ignore_errors=True)
            (ckdir / n).mkdir()
            (ckdir / n / "metadata.json").write_text(f'{{"step": {step}}}')
        kept = sorted((p for p in ckdir.glob("*") if p.is_dir() and not p.name.endswith("last")), key=step_of)
        for old in kept[:-top_k]:
            shutil.rmtree(old)
        marker.unlink()
        return
    folders = rules["modelParallelDir"]
    ranks = (
        [""]
        if tp * pp == 1
        else [folders["pp1" if pp == 1 else "pp"].format(tp=t, pp=p) for t in range(tp) for p in range(pp)]
    )
    for r in ranks:
        sub = ckdir / r if r else ckdir
        sub.mkdir(parents=True, exist_ok=True)
        for n in names:
            (sub / f"{n}.ckpt").write_text(f"step {step}\n")
        kept = sorted((p for p in sub.glob("*.ckpt") if not p.name.endswith("last.ckpt")), key=step_of)
        for old in kept[:-top_k]:
            old.unlink()
    for n in names:  # NLPCheckpointIO logs this once every rank's files are written (d760e201)
        print(f"Synchronous saving of checkpoint {n}.ckpt fully completed", flush=True)


def check_inputs(facts: dict[str, Any], o: dict[str, str]) -> None:
    """The launch and the data: nodes and ranks per node as rendered, and (neuronx-nemo-megatron)
    the tokenizer directory and the tokenized corpus the data Jobs left on /shared."""
    if o.get("trainer.num_nodes") != os.environ["NNODES"]:
        fail(f"trainer.num_nodes={o.get('trainer.num_nodes')} but NNODES={os.environ['NNODES']}")
    if o.get("trainer.devices") != facts["renderedNprocPerNode"]:
        fail(f"trainer.devices={o.get('trainer.devices')} but the job renders {facts['renderedNprocPerNode']} per node")
    prefix = re.fullmatch(r"\[1\.0,(.+)\]", o.get("model.data.data_prefix", ""))
    for path in [f"{prefix.group(1)}.bin", f"{prefix.group(1)}.idx"] if prefix else []:
        if not Path(path).exists():  # megatron's indexed dataset reads <prefix>.bin and <prefix>.idx
            fail(f"FileNotFoundError: {path} (model.data.data_prefix)")
    tokenizer = o.get("model.tokenizer.type", "")
    if tokenizer.startswith("/") and not (Path(tokenizer) / "tokenizer_config.json").exists():
        fail(f"OSError: Can't load tokenizer for '{tokenizer}' (model.tokenizer.type)")
    for key in ("model.tokenizer.model", "model.tokenizer.vocab_file", "model.tokenizer.merge_file"):
        if o.get(key, "").startswith("/") and not Path(o[key]).is_file():
            fail(f"FileNotFoundError: {o[key]} ({key})")


def tokenizer(facts: dict[str, Any], o: dict[str, str]) -> str | None:
    """The Hub repository NeMo's tokenizer reads (None: a directory or none), read as
    AutoTokenizer.from_pretrained does (tests/upstream/transformers-4.44.0.yaml)."""
    library, name = o.get("model.tokenizer.library", ""), o.get("model.tokenizer.type", "").strip("'\"")
    repo = facts["megatronTokenizers"].get(name) if library == "megatron" else name
    if library not in ("megatron", "huggingface") or not repo or repo in ("null", "") or repo.startswith("/"):
        return None
    auto = facts["autoTokenizer"]
    try:
        config = [_hub.cached_file(repo, f, required=False) for f in auto["optional"]]
        if not any(p and "tokenizer_class" in p.read_text() for p in config):
            for f in auto["required_without_tokenizer_class"]:
                _hub.cached_file(repo, f)
    except OSError as e:
        fail(f"OSError: {e}")
    return repo


GPT2_VOCABULARY = 50257  # GPT-2 BPE's tokens; Megatron pads them (make_vocab_size_divisible_by x TP)


def save_nemo(facts: dict[str, Any], o: dict[str, str], ckdir: Path) -> None:
    """NeMo's save_nemo_on_train_end: `<checkpoint dir>/<exp_manager name>.nemo`, a tar holding
    model_config.yaml (the converter reads the model's shape there) and the weights."""
    name = o.get("exp_manager.name") or o.get("name") or facts["nemoExpManagerName"]
    divisor = int(o.get("model.make_vocab_size_divisible_by", "128")) * int(o["model.tensor_model_parallel_size"])
    padded = -(-GPT2_VOCABULARY // divisor) * divisor
    text = f"hidden_size: {o['model.hidden_size']}\nnum_layers: {o['model.num_layers']}\npadded_vocab_size: {padded}\n"
    ckdir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(ckdir / f"{name}.nemo", "w") as tar:
        for member, data in (("./model_config.yaml", text.encode()), ("./model_weights/common.pt", b"")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    print(f"Saved the model to {ckdir / f'{name}.nemo'}", flush=True)


def main() -> None:
    facts = job()
    rules = facts["rules"]
    o = overrides(sys.argv[1:])
    extracting = os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY") == "1"
    check_inputs(facts, o)
    me, world = rank()
    accelerator_init()
    hub_tokenizer = tokenizer(facts, o)
    steps = Steps("compile" if extracting else "train", me, world)
    steps.joined()
    ckdir = Path(o["exp_manager.explicit_log_dir"]) / "checkpoints"
    start = resume_step(rules, o, ckdir, me)
    max_steps = int(o["trainer.max_steps"])
    every = int(o.get("exp_manager.checkpoint_callback_params.every_n_train_steps", "0") or 0)
    saving = truthy(o.get("exp_manager.create_checkpoint_callback"), True) and every > 0
    record(
        "megatron",
        rank=me,
        world=world,
        resumedFrom=start,
        extracting=extracting,
        framework=facts["framework"],
        hubTokenizer=hub_tokenizer,
    )
    batch = int(o.get("model.global_batch_size", "1"))
    for s in range(start + 1, max_steps + 1):
        steps.step(s)
        if me == 0:
            print(
                f"Epoch 0: global_step={s} reduced_train_loss={10.0 / s:.3f} consumed_samples={s * batch}", flush=True
            )
            if saving and s % every == 0:
                save(rules, o, ckdir, s)
    steps.barrier("done")  # every rank through the last step (and its checkpoint)
    if me == 0:
        record("megatron-done", steps=max_steps, resumedFrom=start, extracting=extracting)
        print(f"`Trainer.fit` stopped: `max_steps={max_steps}` reached.", flush=True)
        end = truthy(o.get("exp_manager.checkpoint_callback_params.save_nemo_on_train_end"))
        if facts["framework"] == "nemo" and saving and end and not extracting:
            save_nemo(facts, o, ckdir)


if __name__ == "__main__":
    main()
