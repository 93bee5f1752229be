"""How long a run takes to its first step, whether Kueue waits long enough for its pods, and how
long a server's replica may take to start.

Before the first step: the image on every node (the image check Job pulls it onto every node of
the run's group, in parallel, before anything else of the run), the data steps (their Jobs run
before the MPIJob), then the MPIJob: Kueue admits it, the workers start (image already there),
the launcher starts on a system node once every worker is ready (launcherCreationPolicy
WaitForWorkersReady) and pulls the image there, then compiles (Neuron) and trains.

Kueue's `waitForPodsReady` counts from admission until every pod of the MPIJob is ready: the
workers' start and the launcher's pull. A pull is bounded by the measured rate below (the
network of every node in the catalog is faster: decompression and disk bind); the size of an
image is not published for the bases the images use, so the plan states the largest image the
timeout covers, and the config refuses a timeout that does not cover the largest image a system
node can hold (its root volume).
"""

from __future__ import annotations

from dataclasses import dataclass

from facts import serving
from facts.instances import InstanceType

PULL_GB, PULL_SECONDS = 11.6, 121
"""A measured cold pull from same-region ECR: 11.6 GB in 2 min 01 s (kubelet's Pulled event) on a
g6e.2xlarge (awslabs/data-on-eks a546a190, data-stacks/ray-on-eks/examples/ray-batch-inference/
README.md, measured 2026-07-10 in us-west-2): about 96 MB/s, far under the node's network."""
START_MARGIN_SECONDS = 120
"""Scheduling, container starts and sshd's readiness probe after the pulls (assumed, not measured)."""
GB = 1e9
GIB = 1024**3


def pull_bytes_per_second(instance: InstanceType | None = None) -> float:
    """A node's image pull rate: the measured rate, or the node's network where that is slower."""
    measured = PULL_GB * GB / PULL_SECONDS
    network = instance.network_gbps * 1e9 / 8 if instance and instance.network_gbps else measured
    return min(measured, network)


@dataclass(frozen=True)
class CompileTime:
    """A recipe's graph compile before its first step, from a published figure where one exists."""

    miss_minutes: float | None
    """On a cache miss (None: no published figure)."""
    basis: str
    """Where the figure comes from, or why there is none."""
    hit: str = "skipped (the precompile's marker, the compile cache on /shared)"
    """What a cache hit costs."""


NO_COMPILE = CompileTime(0, "no ahead-of-time compile (CUDA or CPU)", hit="none")


def covered_image_gb(timeout_minutes: int, system: InstanceType, *, prepulled: bool) -> float:
    """The largest image whose pulls fit Kueue's pods-ready timeout: the launcher's on a system
    node, after the workers' own pull where the image check did not pull it onto them first."""
    pulls = 1 if prepulled else 2
    seconds = timeout_minutes * 60 - START_MARGIN_SECONDS
    return max(seconds, 0) * pull_bytes_per_second(system) / pulls / GB


def minimum_timeout_minutes(root_volume_gib: int, system: InstanceType) -> int:
    """The shortest pods-ready timeout that covers the launcher's pull of the largest image a
    system node can hold (its root volume), workers pre-pulled."""
    seconds = root_volume_gib * GIB / pull_bytes_per_second(system) + START_MARGIN_SECONDS
    return -(-int(seconds) // 60)


@dataclass(frozen=True)
class StartupPlan:
    """One run's way to its first step."""

    seconds_per_gb: float
    compile: CompileTime

    def as_dict(self) -> dict[str, object]:
        c = self.compile
        return {
            "pullSecondsPerGB": round(self.seconds_per_gb, 1),
            "pullBasis": f"measured {PULL_GB} GB in {PULL_SECONDS} s",
            "prepulled": True,
            "compileMinutesOnMiss": c.miss_minutes,
            "compileBasis": c.basis,
            "compileOnHit": c.hit,
            "dataStaging": "before the MPIJob, at the file system's throughput; dataset sizes are not published",
        }


def plan(compile_time: CompileTime, system: InstanceType, node: InstanceType | None) -> StartupPlan:
    """The startup plan of a run whose workers run on `node` and launcher on `system`. Kueue's
    pods-ready timeout is the cluster layer's: the config check holds it (minimum_timeout_minutes)."""
    rate = min(pull_bytes_per_second(system), pull_bytes_per_second(node))
    return StartupPlan(GB / rate, compile_time)


def server_start_seconds(instance: InstanceType, mb_per_second: float, parameters: float | None) -> int:
    """What a server replica's start may take (its startup probe's allowance): its bf16 weights read
    from /shared at the file system's throughput, the engine's start, and on Neuron the first
    compile of a shape (a margin); rounded up to 10 s."""
    weights = (parameters or 0) * serving.BYTES_PER_PARAMETER
    seconds = weights / 1e6 / max(mb_per_second, 1) + serving.ENGINE_START_SECONDS
    if instance.accelerator == "neuron":
        seconds += serving.NEURON_COMPILE_SECONDS
    return int(-(-seconds // 10) * 10)


@dataclass(frozen=True)
class ServerReplicas:
    """What the estimate reads of a server (its recipe's config builds it)."""

    replicas: int
    group_nodes: int | None
    """Nodes of one replica where it spans nodes (a LeaderWorkerSet group); None: within a node."""
    devices: int
    """Accelerators a replica takes on each of its nodes."""
    parameters: float
    """Parameters served (0: unknown)."""


def serving_basis(server: ServerReplicas, instance: InstanceType, mb_per_second: float) -> str:
    """How the cost line names a server's cost, per hour while it stands: what it holds and how long
    a replica may take to start (server_start_seconds)."""
    start = server_start_seconds(instance, mb_per_second, server.parameters)
    compile_ = ", the Neuron compile" if instance.accelerator == "neuron" else ""
    group = f" {server.group_nodes} nodes x" if server.group_nodes is not None else ""
    return (
        f"serving, per hour while it stands: {server.replicas} replica(s) x{group} {server.devices} of the"
        f" {instance.accelerator_count} accelerators of a node; a replica starts in up to {start // 60} min"
        f" ({server.parameters * serving.BYTES_PER_PARAMETER / 1e9:,.0f} GB of bf16 weights from /shared at"
        f" {mb_per_second:,.0f} MB/s, the engine{compile_}); tokens/s not modeled (no published figure)"
    )
