"""Stand-in for `python -m torchtitan.train` of TorchTitan Neuron (aws-neuron/torchtitan-neuron on
pytorch/torchtitan, tests/upstream/torchtitan-config-cli.yaml): --module and --config named, every
other flag a command-line field of its section (else tyro's "Unrecognized arguments"), the torchrun
rank check, the staged assets and the dataset, and its checkpoints
(tests/upstream/training-resume-rules.yaml, torchtitan): {dump_folder}/{checkpoint.folder}/step-<n>
every checkpoint.interval steps and at the last, complete with .metadata (the last one, with
last_save_in_hf, as model.safetensors.index.json), the newest keep_latest_k kept; with
checkpoint.enable the newest complete step is loaded first."""

from __future__ import annotations

import json
import os
import shutil
import sys

from _common import Steps, fail, job, rank, record

facts = job()
cli, rules = facts["torchtitan"], facts["rules"]


def parse(argv: list[str]) -> dict[str, str | None]:
    opts: dict[str, str | None] = {}
    words = iter(argv)
    for word in words:
        if not word.startswith("--"):
            fail(f"tyro: unexpected positional argument {word!r}")
        flag, _, value = word[2:].partition("=")
        opts[flag] = value if _ else None
    for flag in opts:
        section, _, name = flag.rpartition(".")
        if flag in ("module", "config"):
            continue
        for end in ("lower", "upper"):
            if name not in cli[end]["sections"].get(section, []):
                fail(f"tyro: Unrecognized arguments: --{flag}")
    for needed in ("module", "config"):
        if not opts.get(needed):
            fail(f"ValueError: --{needed} is required. Example: --module llama3 --config llama3_debugmodel")
    return opts


def complete(folder: str) -> list[int]:
    if not os.path.isdir(folder):
        return []
    found = []
    for name in os.listdir(folder):
        d = os.path.join(folder, name)
        if name.startswith("step-") and (
            os.path.exists(os.path.join(d, rules["complete"])) or os.path.exists(os.path.join(d, rules["completeHf"]))
        ):
            found.append(int(name.split("-")[1]))
    return sorted(found)


def save(folder: str, step: int, hf: bool) -> None:
    tmp = os.path.join(folder, f".tmp-{step}")
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, rules["completeHf"] if hf else rules["complete"]), "w") as f:
        json.dump({"step": step}, f)
    os.rename(tmp, os.path.join(folder, rules["checkpoint"].format(step=step)))


def main() -> None:
    o = parse(sys.argv[1:])
    steps_total, dump = int(o["training.steps"] or 0), str(o["dump_folder"])
    assets = str(o["hf_assets_path"])
    if not os.path.exists(os.path.join(assets, "tokenizer.json")):
        fail(f"FileNotFoundError: no tokenizer files in hf_assets_path {assets}")
    dataset = o.get("dataloader.dataset")
    path = o.get("dataloader.dataset_path") or (cli["datasets"]["c4_test"]["path"] if dataset == "c4_test" else None)
    if path is None or not os.path.exists(path):
        fail(
            f"datasets: no dataset at {path} (the ranks are offline: HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE')})"
        )
    me, world = rank()
    steps = Steps("train", me, world)
    steps.joined()
    folder = os.path.join(dump, str(o.get("checkpoint.folder") or "checkpoint"))
    start = 0
    if "checkpoint.enable" in o and complete(folder):
        start = complete(folder)[-1]
        print(rules["resumeLog"].format(path=os.path.join(folder, rules["checkpoint"].format(step=start))), flush=True)
    record("torchtitan", rank=me, world=world, resumedFrom=start, extracting=False)
    interval, keep = int(o.get("checkpoint.interval") or 500), int(o.get("checkpoint.keep_latest_k") or 10)
    hf = "checkpoint.last_save_in_hf" in o
    step = start
    while step < steps_total:
        step += 1
        steps.step(step)
        if me == 0:
            print(f"step: {step}  loss: {8.0 / step:.4f}", flush=True)
        if "checkpoint.enable" in o and (step % interval == 0 or step == steps_total):
            if me == 0:
                os.makedirs(folder, exist_ok=True)
                save(folder, step, hf and step == steps_total)
                old = complete(folder)
                for gone in old[: max(len(old) - keep, 0)] if keep > 0 else []:
                    shutil.rmtree(os.path.join(folder, rules["checkpoint"].format(step=gone)))
            steps.barrier(f"ckpt-{step}")
    if me == 0:
        record("torchtitan-done", steps=step, extracting=False)


if __name__ == "__main__":
    main()
