"""Stand-in for dp_bert_large_hf_pretrain_hdf5.py of aws-neuron-samples v2.27.0 (the image's):
its options (tests/upstream/dp-bert-hf-pretrain-v2.27.0.yaml; an unknown one fails as argparse
fails), the torchrun rank check, its data and resume assertions, and its checkpoints
(tests/upstream/training-resume-rules.yaml): `ckpt_<step>.pt` in --output_dir by rank 0 after
every --shards_per_ckpt dataset shards and at --steps_this_run, none while graphs are only
extracted, the newest --num_ckpts_to_keep kept; --resume_ckpt resumes from the highest step
there. A shard is `stepsPerShard` steps here. Every rank (the graph extraction too) first starts
the Neuron runtime (nrt_init against the node's driver) and builds the model as get_model does:
BertForPreTraining.from_pretrained('bert-large-uncased', use_safetensors=False) reads its config
and weights through the Hub client (_hub: the network, or offline the staged cache).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time
import zipfile
from typing import Any

import _hub
from _common import Steps, accelerator_init, fail, job, rank, record

# Types and defaults of the options this stand-in acts on (the script's argparse).
TYPED: dict[str, tuple[Any, Any]] = {
    "output_dir": (str, "./output"),
    "data_dir": (str, "~/examples_datasets/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128/"),
    "max_steps": (int, 28125),
    "steps_this_run": (int, -1),
    "shards_per_ckpt": (int, 1),
    "num_ckpts_to_keep": (int, 1),
    "resume_step": (int, -1),
    "lr": (float, 4e-4),
}


def parser(facts: dict[str, Any]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    for option in facts["bertOptions"]:
        name = option.lstrip("-")
        if option in facts["bertFlags"]:
            p.add_argument(option, action="store_true")
        else:
            kind, default = TYPED.get(name, (str, None))
            p.add_argument(option, type=kind, default=default)
    return p


def checkpoints(output_dir: str) -> list[int]:
    return sorted(int(f.split(".pt")[0].split("_")[1]) for f in os.listdir(output_dir) if f.endswith(".pt"))


def resume(flags: argparse.Namespace, rules: dict[str, Any], me: int) -> tuple[int, int]:
    """(global step, shard index) to start from: the script's --resume_ckpt branch."""
    if not flags.resume_ckpt:
        return 0, 0
    if flags.resume_step == -1:
        if not os.path.isdir(flags.output_dir):
            fail(rules["noOutputDirError"].format(dir=flags.output_dir))
        found = checkpoints(flags.output_dir)
        if not found:
            fail(rules["noCheckpointError"].format(dir=flags.output_dir))
        step = found[-1]
    else:
        step = flags.resume_step
    path = os.path.join(flags.output_dir, rules["checkpoint"].format(step=step))
    print(rules["resumeLog"].format(rank=me, path=path, step=step), flush=True)
    with zipfile.ZipFile(path) as z:  # torch.save writes a zip archive (its central directory last)
        return step, int(json.loads(z.read("data.json"))["files"][0])


def get_model(facts: dict[str, Any]) -> dict[str, str]:
    """from_pretrained of the model the script names: each file it reads, and where it came from."""
    hub, found = facts["bertHub"], {}
    for name in hub["files"]:
        try:
            path = _hub.cached_file(hub["repo"], name)
        except OSError as e:
            fail(f"OSError: {e}")
        found[name] = str(path)
    return found


def main() -> None:
    facts = job()
    rules = facts["rules"]
    flags = parser(facts).parse_args()
    steps_this_run = flags.max_steps if flags.steps_this_run < 0 else flags.steps_this_run
    extracting = os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY") is not None
    me, world = rank()
    accelerator_init()
    model_files = get_model(facts)
    steps = Steps("compile" if extracting else "train", me, world)
    steps.joined()
    if me == 0:
        os.makedirs(flags.output_dir, exist_ok=True)
    global_step, shard = resume(flags, rules, me)
    record("bert", rank=me, world=world, resumedFrom=global_step, extracting=extracting, modelFiles=model_files)
    data_dir = os.path.expanduser(flags.data_dir)
    if not os.path.exists(data_dir):
        fail(rules["noDataError"].format(dir=flags.data_dir))
    shards = glob.glob(f"{data_dir}/*_training_*.hdf5")
    if len(shards) < world:
        fail(f"AssertionError: ERROR: Please ensure there are at least {world} (world_size) tokenized dataset shards")
    per_shard, kept = int(facts["stepsPerShard"]), []
    while global_step < steps_this_run:
        shard += 1
        for _ in range(per_shard):
            global_step += 1
            steps.step(global_step)
            if me == 0:
                loss, time_now = 8.0 / global_step, time.asctime()
                print(
                    rules["logLine"].format(
                        time=time_now, epoch=0, step=global_step, loss=loss, lr=flags.lr, throughput=100.0
                    ),
                    flush=True,
                )
            if global_step >= steps_this_run:
                break
        if me == 0 and not extracting and (shard % flags.shards_per_ckpt == 0 or global_step >= steps_this_run):
            path = os.path.join(flags.output_dir, rules["checkpoint"].format(step=global_step))
            print("Checkpointing...", flush=True)
            with zipfile.ZipFile(path, "w") as z:  # as torch.save's zip format: complete only when closed
                z.writestr("data.json", json.dumps({"files": [shard], "epoch": 0}))
            print("Checkpointing done...", flush=True)
            kept.append(path)
            if flags.num_ckpts_to_keep >= 0 and len(kept) > flags.num_ckpts_to_keep:
                os.remove(kept.pop(0))
        steps.barrier(f"shard-{shard}")  # every rank past the shard (and its checkpoint)
    if me == 0:
        record("bert-done", steps=global_step, extracting=extracting)


if __name__ == "__main__":
    main()
