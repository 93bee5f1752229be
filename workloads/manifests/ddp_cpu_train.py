"""The training script of recipe ddp-cpu: PyTorch DDP over gloo on CPUs, started by torchrun on
every node. A small regression model on synthetic data: enough to prove the rendezvous, the
collectives, checkpoints on the shared file system and the resume from the latest one.

It runs inside the recipe's image (Python 3.8, PyTorch 1.12.1; facts/images.py), so it uses
nothing newer; the launcher writes it to $RUN_DIR, where every worker reads it. Every
checkpoint is written by rank 0 to a temporary file and renamed, so a crash never leaves a torn
one; a restart loads the newest. With --interrupt-once-at, the first attempt stops after the
first checkpoint at or past that step (a marker in $RUN_DIR remembers it), so the launcher's
restart and the resume are exercised; the run then fails unless it did resume. Every rank
meets at a barrier before destroying the process group: a rank that tears down its gloo pairs
while rank 0 still writes the result can abort at exit ("terminate called without an active
exception", SIGABRT; seen once in CI, rank 2 of 3), which would fail a finished run; the
process then leaves with os._exit, past the interpreter's teardown, where the same abort was seen
once more after the barrier.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

FEATURES = 32
BATCH = 64


def checkpoints(directory: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, "step-*.pt")))


def save(directory: str, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, keep: int) -> None:
    path = os.path.join(directory, f"step-{step:08d}.pt")
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path + ".tmp")
    os.replace(path + ".tmp", path)
    for old in checkpoints(directory)[:-keep]:
        os.remove(old)


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same data for a (step, rank) on every attempt, so a resumed run continues exactly."""
    generator = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(BATCH, FEATURES, generator=generator)
    return x, x.sum(dim=1, keepdim=True) * 0.1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--checkpoint-every", type=int, required=True)
    parser.add_argument("--keep", type=int, default=2)
    parser.add_argument("--interrupt-once-at", type=int, default=0)
    args = parser.parse_args()
    run_dir, checkpoint_dir = os.environ["RUN_DIR"], os.environ["CHECKPOINT_DIR"]
    marker = os.path.join(run_dir, "interrupted-once")

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    start = 0
    found = checkpoints(checkpoint_dir)
    if found:
        state = torch.load(found[-1], map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
    ddp = DistributedDataParallel(model)
    if rank == 0:
        print(f"rank 0 of {world}: " + (f"resumed from step {start}" if start else "starting at step 0"), flush=True)

    loss = torch.tensor(0.0)
    for step in range(start + 1, args.steps + 1):
        x, y = batch(step, rank)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        if step % args.checkpoint_every and step != args.steps:
            continue
        if rank == 0:
            save(checkpoint_dir, step, model, optimizer, args.keep)
            print(f"step {step}: loss {loss.item():.6f}, checkpoint saved", flush=True)
        dist.barrier()
        if args.interrupt_once_at and step >= args.interrupt_once_at and not os.path.exists(marker):
            dist.barrier()  # every rank has seen no marker before rank 0 writes it
            if rank == 0:
                with open(marker, "w") as f:
                    f.write(str(step))
                print(f"stopping once after the checkpoint of step {step}; the restart resumes from it", flush=True)
            return 3

    if args.interrupt_once_at and start == 0:
        print("FAIL: asked to stop once and resume, but this attempt started at step 0", flush=True)
        return 1
    if rank == 0:
        result = {"steps": args.steps, "resumedFrom": start, "worldSize": world, "loss": round(loss.item(), 6)}
        with open(os.path.join(run_dir, "result.json"), "w") as f:
            json.dump(result, f)
        print(f"done: {json.dumps(result)}", flush=True)
    dist.barrier()  # all ranks leave together (one that tore down gloo early could abort at exit)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without the interpreter's teardown: the barrier above made every rank finish, yet a
    # gloo thread still joinable when C++ statics are destroyed aborts the process ("terminate
    # called without an active exception", SIGABRT; fresh-clone CI on 970b3d5, rank 1 of 2, after
    # "done"), which would fail a finished run. Everything the run keeps is written and flushed.
    os._exit(code)
