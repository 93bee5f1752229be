"""What every stand-in shares: the job facts the harness gives it (/harness/job.json), a record
of its argv and environment (/harness/records/), the torchrun rank check, and a step barrier.

Training stand-ins do not import torch: torchrun (real) has done the rendezvous when it starts
them (every node joined its c10d store, or it does not start any rank), and the environment it
gives each rank (RANK, WORLD_SIZE, GROUP_RANK, LOCAL_RANK) is what is checked here. The ranks
then step together through a barrier of files in /harness (the stand-in for the collectives
of a step): when a node dies, the ranks elsewhere stop at the next step, as real ranks block
in their next all-reduce.
"""

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


def rank() -> tuple[int, int]:
    """(rank, world size) that torchrun gave this process, checked against the job's
    environment as mpirun forwarded it: the world is NNODES x NPROC_PER_NODE and this rank
    is node_rank x nproc + local_rank."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        fail("not started by torchrun (no TORCHELASTIC_RUN_ID)")
    world, me = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    nnodes, nproc = int(os.environ["NNODES"]), int(os.environ["NPROC_PER_NODE"])
    node, local = int(os.environ["GROUP_RANK"]), int(os.environ["LOCAL_RANK"])
    if world != nnodes * nproc:
        fail(f"rendezvous: world size {world}, expected NNODES x NPROC_PER_NODE = {nnodes * nproc}")
    if me != node * nproc + local:
        fail(f"rendezvous: rank {me} on node {node} local {local}, expected {node * nproc + local}")
    return me, world


class Steps:
    """The ranks of one training run stepping together: `step(n)` returns once every rank has
    reached step n (a file per rank and step under /harness/sync/<launcher attempt>/<run>/)."""

    def __init__(self, run: str, me: int, world: int) -> None:
        attempt = (HARNESS / "attempt").read_text().strip()
        self.dir = HARNESS / "sync" / attempt / run
        self.dir.mkdir(parents=True, exist_ok=True)
        self.me, self.world = me, world
        self.seconds = float(job()["stepSeconds"])

    def step(self, n: int) -> None:
        time.sleep(self.seconds)
        self.barrier(str(n))

    def joined(self) -> None:
        """Every rank is there (rank 0 says so, as a framework logs its world)."""
        (self.dir / f"host.{self.me}").write_text(socket.gethostname())
        self.barrier("joined")
        if self.me == 0:
            hosts = {p.read_text() for p in self.dir.glob("host.*")}
            print(f"rendezvous: {self.world} ranks joined from {len(hosts)} nodes", flush=True)

    def barrier(self, name: str) -> None:
        (self.dir / f"{name}.{self.me}").touch()
        while sum(1 for r in range(self.world) if (self.dir / f"{name}.{r}").exists()) < self.world:
            time.sleep(0.01)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("-")[0].split(".") if p.isdigit())


def _at_least(text: str, floor: str) -> bool:
    f = _version(floor)
    return _version(text)[: len(f)] >= f


def accelerator_init() -> None:
    """What the accelerator runtime does first on its node: the Neuron runtime's nrt_init reads the
    loaded driver's version and refuses a driver its runtime library cannot use (the known issues
    of the runtime release notes, job facts "neuron"); CUDA refuses a driver older than its
    CUDA major needs (job facts "cuda"). The node's driver: /sys/module/<module>/version."""
    facts = job()
    neuron, cuda = facts.get("neuron"), facts.get("cuda")
    if neuron:
        try:
            driver = Path("/sys/module/neuron/version").read_text().strip()
        except OSError:
            fail(
                "NRT:nrt_init      Unable to determine Neuron Driver version. Please check aws-neuron-dkms package is installed."
            )
        runtime = neuron["runtime"]
        for rule in neuron["rules"]:
            if rule.get("families") and neuron["family"] not in rule["families"]:
                continue
            broken = (
                "driver_at_least" in rule
                and _at_least(driver, rule["driver_at_least"])
                and not _at_least(runtime, rule["needs_runtime_at_least"])
            ) or (
                "runtime_at_least" in rule
                and _at_least(runtime, rule["runtime_at_least"])
                and not _at_least(driver, rule["needs_driver_at_least"])
            )
            if broken:
                error = neuron["error"].format(id=runtime)
                fail(f"NRT:nrt_init      {error} (Neuron driver {driver}, runtime library {runtime}: {rule['text']})")
    if cuda:
        try:
            driver = Path("/sys/module/nvidia/version").read_text().strip()
        except OSError:
            fail("CUDA driver initialization failed: no NVIDIA driver")
        if not _at_least(driver, cuda["minimum"]):
            fail(
                f"CUDA error: CUDA driver version is insufficient for CUDA runtime version (driver {driver}, CUDA {cuda['major']})"
            )
