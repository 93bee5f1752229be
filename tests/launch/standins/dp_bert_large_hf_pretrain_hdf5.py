"""Stand-in for aws-neuron-samples torch-neuronx/training/dp_bert_hf_pretrain/
dp_bert_large_hf_pretrain_hdf5.py (at 2015d650): its arguments (unknown ones fail as argparse
fails), the torchrun rendezvous over gloo, and its checkpoints: `ckpt_<step>.pt` in
--output_dir after every --shards_per_ckpt dataset shards and at the end, keeping
--num_ckpts_to_keep; resumed only with --resume_ckpt, from the highest step there (no
checkpoint: an AssertionError). A shard is `stepsPerShard` steps of the harness's job.
"""

from __future__ import annotations

import argparse
import os
import time

from _common import fail, job, record, rendezvous, step


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    for name, kind, default in (
        ("data_dir", str, "~/examples_datasets/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128/"),
        ("output_dir", str, "./output"),
        ("metrics_file", str, "results.json"),
        ("optimizer", str, "AdamW_FP32OptimParams"),
        ("batch_size", int, 8),
        ("max_steps", int, 28125),
        ("steps_this_run", int, -1),
        ("shards_per_ckpt", int, 1),
        ("seed", int, 12349),
        ("lr", float, 4e-4),
        ("seq_len", int, None),
        ("max_pred_len", int, 20),
        ("num_ckpts_to_keep", int, 1),
        ("resume_ckpt_path", str, None),
        ("resume_step", int, -1),
        ("warmup_steps", int, 2000),
        ("grad_accum_usteps", int, 64),
        ("phase1_end_step", int, 28125),
        ("expected_average_throughput", float, 0.0),
        ("snapshot_step_list", str, None),
        ("snapshot_rank_list", str, "0"),
        ("snapshot_dump_dir", str, "./snapshots"),
    ):
        p.add_argument(f"--{name}", type=kind, default=default)
    for flag in (
        "debug",
        "resume_ckpt",
        "minimal_ckpt",
        "enable_pt_autocast",
        "enable_fp32",
        "phase2",
        "print_grad_norm",
        "disable_dropout",
        "torch_xla_compile",
    ):
        p.add_argument(f"--{flag}", action="store_true")
    return p


def checkpoints(output_dir: str) -> list[int]:
    if not os.path.isdir(output_dir):
        return []
    return sorted(int(f.split(".pt")[0].split("_")[1]) for f in os.listdir(output_dir) if f.endswith(".pt"))


def main() -> None:
    flags = parser().parse_args()
    dist, rank, world = rendezvous()
    global_step = 0
    if flags.resume_ckpt:
        found = checkpoints(flags.output_dir)
        if not found:
            fail(f"AssertionError: Make sure there are ckpt_*.pt files in {flags.output_dir}")
        global_step = flags.resume_step if flags.resume_step != -1 else found[-1]
        print(
            f"Worker {rank} resuming from checkpoint {flags.output_dir}/ckpt_{global_step}.pt at step {global_step}",
            flush=True,
        )
    record("bert", rank=rank, world=world, resumedFrom=global_step)
    per_shard = int(job()["stepsPerShard"])
    kept: list[str] = []
    os.makedirs(flags.output_dir, exist_ok=True)
    shard = global_step // per_shard
    while global_step < flags.steps_this_run:
        step(dist)
        global_step += 1
        if rank == 0:
            print(
                f"LOG {time.asctime()} - (0, {global_step}) step_loss : {8.0 / global_step:.4f} learning_rate : {flags.lr:.2e} throughput : 100.00",
                flush=True,
            )
        if global_step % per_shard == 0 or global_step >= flags.steps_this_run:
            shard += 1
            if rank == 0 and (shard % flags.shards_per_ckpt == 0 or global_step >= flags.steps_this_run):
                import torch

                path = os.path.join(flags.output_dir, f"ckpt_{global_step}.pt")
                print("Checkpointing...", flush=True)
                torch.save({"model": {}, "files": [shard], "epoch": 0}, path)
                print("Checkpointing done...", flush=True)
                kept.append(path)
                if flags.num_ckpts_to_keep >= 0 and len(kept) > flags.num_ckpts_to_keep:
                    old = kept.pop(0)
                    if os.path.isfile(old):
                        os.remove(old)
            dist.barrier()
    if rank == 0:
        record("bert-done", steps=global_step)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
