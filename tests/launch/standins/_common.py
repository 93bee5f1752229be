"""What every stand-in shares: the job facts the harness gives it (/harness/job.json), a record
of its argv and environment (/harness/records/), and the torchrun/gloo rendezvous check."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

HARNESS = Path("/harness")


def job() -> dict[str, Any]:
    return json.loads((HARNESS / "job.json").read_text())


def record(kind: str, **data: Any) -> None:
    """Leave what this process saw for the test to read: argv, environment, host, and `data`."""
    out = HARNESS / "records"
    out.mkdir(parents=True, exist_ok=True)
    doc = {"kind": kind, "host": socket.gethostname(), "argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    doc.update(data)
    name = f"{kind}-{socket.gethostname()}-{os.getpid()}-{time.monotonic_ns()}.json"
    (out / name).write_text(json.dumps(doc))


def fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr, flush=True)
    sys.exit(code)


def rendezvous() -> tuple[Any, int, int]:
    """Join the torchrun job over gloo and check it: the world is NNODES x NPROC_PER_NODE (the
    environment mpirun forwarded), this rank is node_rank x nproc + local_rank, and every rank
    from 0 to world-1 is there exactly once."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    nnodes, nproc = int(os.environ["NNODES"]), int(os.environ["NPROC_PER_NODE"])
    node, local = int(os.environ["GROUP_RANK"]), int(os.environ["LOCAL_RANK"])
    if world != nnodes * nproc:
        fail(f"rendezvous: world size {world}, expected NNODES x NPROC_PER_NODE = {nnodes * nproc}")
    if rank != node * nproc + local:
        fail(f"rendezvous: rank {rank} on node {node} local {local}, expected {node * nproc + local}")
    ranks = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(ranks, torch.tensor([float(rank)]))
    joined = sorted(int(r.item()) for r in ranks)
    if joined != list(range(world)):
        fail(f"rendezvous: ranks {joined} joined, expected 0..{world - 1}")
    name = socket.gethostname().encode()[:64].ljust(64)
    hosts = [torch.zeros(64, dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(hosts, torch.tensor(list(name), dtype=torch.uint8))
    nodes = {bytes(h.tolist()) for h in hosts}
    if len(nodes) != nnodes:
        fail(f"rendezvous: ranks on {len(nodes)} hosts, expected {nnodes}")
    if rank == 0:
        print(f"rendezvous: {world} ranks joined from {len(nodes)} nodes", flush=True)
    return dist, rank, world


def step(dist: Any) -> None:
    """One training step: the step's time, then an all-reduce across every rank."""
    import torch

    time.sleep(job()["stepSeconds"])
    t = torch.ones(1)
    dist.all_reduce(t)
    if int(t.item()) != dist.get_world_size():
        fail(f"all-reduce gave {t.item()}, expected {dist.get_world_size()}")
