"""Stand-in for tp_zero1_llama_hf_pretrain.py of neuronx-distributed v2.28.0 (images/neuronx-distributed):
its options (tests/upstream/neuronx-distributed-v2.28.0.yaml; an unknown one fails as argparse
fails), the torchrun rank check, its data and config-directory reads, and its checkpoints
(tests/upstream/training-resume-rules.yaml, nxd): `step_<n>` directories under --checkpoint_dir
every --checkpoint_freq steps (0: none), `done` written last, the newest --num_kept_checkpoint
kept; --loading_step latest_if_exists loads the newest directory with `done`. Graph extraction
(NEURON_EXTRACT_GRAPHS_ONLY, neuron_parallel_compile) runs --steps_this_run steps and logs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

from _common import Steps, fail, job, rank, record

INTS = {"max_steps", "steps_this_run", "checkpoint_freq", "num_kept_checkpoint", "tensor_parallel_size", "batch_size"}


def parser(facts: dict[str, object]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    nxd = facts["nxd"]
    assert isinstance(nxd, dict)
    for option in nxd["options"]:
        if option in nxd["flags_without_value"]:
            p.add_argument(option, action="store_true")
        else:
            p.add_argument(option, type=int if option.lstrip("-") in INTS else str)
    return p


def complete(ckpt: str, rules: dict[str, str]) -> list[int]:
    if not os.path.isdir(ckpt):
        return []
    steps = []
    for name in os.listdir(ckpt):
        if name.startswith("step_") and os.path.exists(os.path.join(ckpt, name, rules["complete"])):
            steps.append(int(name.split("_")[1]))
    return sorted(steps)


def main() -> None:
    facts = job()
    rules = facts["rules"]
    flags = parser(facts).parse_args()
    extracting = os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY") is not None
    steps_this_run = (
        flags.max_steps if flags.steps_this_run is None or flags.steps_this_run < 0 else flags.steps_this_run
    )
    if not os.path.exists(os.path.join(flags.model_path, "config.json")):
        fail(f"OSError: {flags.model_path} does not appear to have a file named config.json")
    me, world = rank()
    steps = Steps("compile" if extracting else "train", me, world)
    steps.joined()
    start = 0
    if flags.loading_step == "latest_if_exists":
        found = complete(flags.checkpoint_dir, rules)
        if found:
            start = found[-1]
            print(rules["resumeLog"].format(path=rules["checkpoint"].format(step=start)), flush=True)
    elif flags.loading_step not in (None, "-1"):
        fail(f"--loading_step {flags.loading_step}: this stand-in plays the latest_if_exists and -1 cases only")
    if not os.path.exists(os.path.expanduser(flags.data_dir)):
        fail(f"AssertionError: ERROR: Data directory {flags.data_dir} doesn't exist!")
    record("nxd", rank=me, world=world, resumedFrom=start, extracting=extracting)
    step, kept = start, complete(flags.checkpoint_dir, rules)
    while step < steps_this_run:
        step += 1
        steps.step(step)
        if me == 0 and not extracting:
            print(f"step {step} loss {8.0 / step:.4f}", flush=True)
        if flags.checkpoint_freq and step % flags.checkpoint_freq == 0:
            if me == 0:  # a tag directory, its `done` last (written whole, as the real one marks it)
                tmp = os.path.join(flags.checkpoint_dir, f".tmp-{step}")
                os.makedirs(os.path.join(tmp, "model"), exist_ok=True)
                for tp in range(flags.tensor_parallel_size):
                    with open(os.path.join(tmp, "model", f"dp_rank_00_tp_rank_{tp:02d}_pp_rank_00.pt"), "w") as f:
                        json.dump({"step": step}, f)
                with open(os.path.join(tmp, rules["complete"]), "w") as f:
                    f.write("1")
                os.rename(tmp, os.path.join(flags.checkpoint_dir, rules["checkpoint"].format(step=step)))
                kept.append(step)
                if flags.num_kept_checkpoint > 0 and len(kept) > flags.num_kept_checkpoint:
                    shutil.rmtree(os.path.join(flags.checkpoint_dir, rules["checkpoint"].format(step=kept.pop(0))))
            steps.barrier(f"ckpt-{step}")
    if me == 0:
        record("nxd-done", steps=step, extracting=extracting)


if __name__ == "__main__":
    main()
