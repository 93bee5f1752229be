"""Stand-in for Megatron Bridge 0.6.0's scripts/training/run_recipe.py under torchrun: its
options and ConfigContainer overrides (KEY=VALUE words), the library recipe's Hugging Face
repository and the tokenizer read from the staged cache offline (every rank builds the recipe),
the data the run names, the resume Bridge does (a checkpoint in checkpoint.load wins over
checkpoint.pretrained_checkpoint, which must hold the import), and its checkpoints: one every
save_interval steps and one at the last step, iter_NNNNNNN directories, the tracker, the newest
most_recent_k kept. Facts from /harness/job.json (tests/upstream/megatron-bridge-0.6.0.yaml)."""

from __future__ import annotations

import sys
from pathlib import Path

import _hub
from _bridge import hub_file, latest, save
from _common import Steps, accelerator_init, fail, job, rank, record

facts = job()["bridge"]
words = sys.argv[1:]
options = {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--")}
unknown = set(options) - set(facts["runRecipeOptions"])
if unknown:
    fail(f"run_recipe.py: error: unrecognized arguments: {sorted(unknown)}")
o = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
recipe = options.get("--recipe", "")
if recipe not in facts["recipes"]:
    fail(f"ValueError: Unknown recipe '{recipe}'")
me, world = rank()
accelerator_init()  # CUDA: the node's NVIDIA driver against the image's CUDA 13
# Every rank builds the recipe: AutoBridge.from_hf_pretrained(<repository>) reads its config.
# At the revision the recipe pins (AutoBridge.from_hf_pretrained(id, revision=...)), main unless it does.
library = facts["recipes"][recipe]
model_files = {"config.json": str(hub_file(library["repo"], "config.json", library["revision"]))}
if o.get("tokenizer.tokenizer_type") == "HuggingFaceTokenizer":
    tokenizer = o["tokenizer.tokenizer_model"]
    if library["tokenizerRevision"] != "main" and not Path(tokenizer).exists():
        # build_tokenizer: a pinned tokenizer revision of a Hub id is a tokenizer snapshot first
        # (tokenizer.py _resolve_hf_tokenizer_revision), offline every selected file of the listing.
        patterns = facts["tokenizerSnapshot"]
        try:
            tokenizer = str(
                _hub.snapshot_offline(
                    tokenizer, library["tokenizerRevision"], patterns["allow_patterns"], patterns["ignore_patterns"]
                )
            )
        except OSError as e:
            fail(str(e))
        for name in facts["tokenizerFiles"]:
            if not (Path(tokenizer) / name).is_file():
                fail(f"OSError: {tokenizer} does not appear to have a file named {name}.")
            model_files[name] = str(Path(tokenizer) / name)
    else:
        for name in facts["tokenizerFiles"]:
            model_files[name] = str(hub_file(tokenizer, name, library["tokenizerRevision"]))
dataset = options.get("--dataset")
if dataset == "local-jsonl":
    for name in ("training.jsonl", "validation.jsonl"):
        if not (Path(o["dataset.dataset_root"]) / name).is_file():
            fail(f"FileNotFoundError: {Path(o['dataset.dataset_root']) / name} (dataset.dataset_root)")
elif dataset == "megatron-indexed":
    for prefix in o["dataset.data_path"].strip("[]").split(","):
        for suffix in (".bin", ".idx"):
            if not Path(prefix + suffix).is_file():
                fail(f"FileNotFoundError: {prefix}{suffix} (dataset.data_path)")
steps = Steps("train", me, world)
steps.joined()
save_dir, load_dir = Path(o["checkpoint.save"]), Path(o["checkpoint.load"])
start = latest(facts, load_dir)
pretrained = o.get("checkpoint.pretrained_checkpoint")
if start is not None:
    if me == 0:
        print(f" loading distributed checkpoint from {load_dir} at iteration {start}", flush=True)
        print(facts["resumeLog"].format(dir=load_dir, tp="0/1", pp="0/1", step=start), flush=True)
elif pretrained:
    if latest(facts, Path(pretrained)) is None:
        fail("FileNotFoundError: No checkpoint found in load directory or pretrained directory")
    if me == 0:
        print(
            f"Checkpoint file not found in load directory {load_dir}. Attempting to finetune with checkpoint in"
            f" {pretrained}",
            flush=True,
        )
    start = 0
else:
    start = 0
record("bridge", rank=me, world=world, resumedFrom=start, extracting=False, overrides=o, modelFiles=model_files)
iters, every, keep = int(o["train.train_iters"]), int(o["checkpoint.save_interval"]), int(o["checkpoint.most_recent_k"])
for s in range(start + 1, iters + 1):
    steps.step(s)
    if me == 0:
        print(f" [{s}/{iters}] iteration {s:8d}/{iters:8d} | lm loss: {10.0 / s:.4f}", flush=True)
        if s % every == 0 or s == iters:
            save(facts, save_dir, s, keep)
            print(f"  successfully saved checkpoint from iteration {s:7d} to {save_dir} [ t 1/1, p 1/1 ]", flush=True)
steps.barrier("done")
if me == 0:
    record("bridge-done", steps=iters, resumedFrom=start, extracting=False)
