"""The collective fabric: the pinned GPU fabric stack the current images build on, and the
all-reduce each instance type must reach before anything trains on it.

GPU fabric stack (tests/upstream/gpu-fabric-stack-2026-11.yaml records every source):
- EFA installer 1.51.0 (2026-10-22): libfabric 2.7.0amzn2.0, EFA driver 3.3.1, rdma-core 65.0
  and the Amazon OFI NCCL plugin 1.22.0 (EC2 user guide, "Elastic Fabric Adapter release notes").
  The installer bundles the plugin: aws-ofi-nccl's own Debian packaging installs it under
  /opt/amazon/ofi-nccl/lib (contrib/debian-template/rules at v1.21.1; awsome-distributed-ai's
  nccl-tests image checks that path from installer 1.48.0), unless the installer runs in its NGC
  mode, which installs to /opt/amazon/aws-ofi-nccl; the images turn that mode off.
- NCCL v2.30.7-1, the newest 2.30 tag of NVIDIA/nccl; it loads `libnccl-net.so` unless
  NCCL_NET_PLUGIN names another (src/plugin/net.cc) and logs "Using network %s" (src/init.cc).
- nccl-tests v2.18.5, the newest 2.18 tag of NVIDIA/nccl-tests: its footer is
  `# Avg bus bandwidth    : <GB/s>` (src/util.cu, writeResultFooter) and `-J <file>.json` writes
  the same results as JSON.

Floors: each accelerated type's all-reduce message size and the bus bandwidth below which the gate
fails. Where a two-node (or, said so, larger) figure is published, the floor is 85% of it, leaving
room for run-to-run noise; otherwise the floor only catches a fabric running without EFA (TCP gives
single-digit GB/s) and the fabric acceptance run's measured figure should replace it
(healthCheck.minBusBandwidthGBPerSecond).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EFA_INSTALLER = "1.51.0"
LIBFABRIC = "2.7.0amzn2.0"
AWS_OFI_NCCL = "1.22.0"
NCCL = "v2.30.7-1"
NCCL_TESTS = "v2.18.5"
OFI_NCCL_LIB = "/opt/amazon/ofi-nccl/lib"
"""Where the EFA installer puts the bundled aws-ofi-nccl plugin (not in its NGC mode)."""
NCCL_LIB = "/opt/nccl/build/lib"
"""Where the fabric images build NCCL (`make src.build`), ahead of any NCCL of the base image."""

CURRENT_STACK: dict[str, str] = {
    "EFA_INSTALLER_VERSION": EFA_INSTALLER,
    "NCCL_VERSION": NCCL,
    "NCCL_TESTS_VERSION": NCCL_TESTS,
}
"""The build arguments every image on the current fabric stack pins (tests/unit/test_fabric.py)."""

SEED_STACKS: dict[str, str] = {
    "nemo": "the nemo-gpu seed recipe keeps the stack of the NeMo 24.07 tutorial it reproduces"
    " (EFA installer 1.37.0, aws-ofi-nccl v1.13.2-aws, nccl-tests v2.13.10)",
}
"""Images that keep an older, pinned fabric stack, and why."""

FLOOR_SHARE = 0.85

# How the all-reduce tools count what they run (tests/upstream/all-reduce-iterations.yaml): the
# fabric acceptance run's modeled length (estimates/acceptance.py) counts the collectives
# of the commands the builders render with these.
NCCL_TESTS_WARMUP = 1
"""nccl-tests' default warm-up all-reduces per size (`-w`; src/common.cu `warmup_iters`)."""
NCCOM_TEST_ITERS, NCCOM_TEST_WARMUP = 20, 5
"""nccom-test's default measured and warm-up operations per size (`-n`, `-w`; nccom-test.rst)."""
NCCOM_TEST_GIB = 1 << 30
"""nccom-test's GB/s are GiB/s (nccom-test.rst, algbw); nccl-tests' are 10^9 bytes (src/all_reduce.cu)."""
GATE_ITERS = 50
"""The gate's all_reduce_perf `-n` (workloads/manifests/healthcheck.py)."""
SWEEP_ITERS = 20
"""The acceptance sweep's all_reduce_perf `-n` (workloads/manifests/fabric.py)."""
SWEEP_FROM = "8M"
"""Where the acceptance sweep starts, doubling up to the gated size."""
SELFTEST_SIZE = "64M"
"""The single-node nccom-test of the Neuron per-node check."""

"""The floor's share of a published figure."""

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
"""nccl-tests' size suffixes (src/common.cu parsesize: K, M, G are powers of 1024)."""


def size_bytes(size: str) -> int:
    """Bytes of a size as nccl-tests reads it (`2G` = 2 GiB)."""
    unit = size[-1] if size[-1] in SIZE_UNITS else ""
    return int(size.removesuffix(unit)) * SIZE_UNITS[unit]


@dataclass(frozen=True)
class PublishedAllReduce:
    """A published all-reduce bus bandwidth (nccl-tests or nccom-test) and where it is from."""

    bus_bandwidth_gb_per_second: float
    message_size: str
    nodes: int | None
    """Nodes of the published run; None: the source does not say."""
    source: str
    """Repository and path (or page) of the figure."""


@dataclass(frozen=True)
class AllReduceFloor:
    """The all-reduce a health gate runs on an instance type, and the bus bandwidth below which
    it fails: 85% of `published`, or a fabric-presence floor where nothing is published."""

    message_size: str
    published: PublishedAllReduce | None = None
    presence_floor_gb_per_second: float | None = None
    why: str = ""

    @property
    def min_bus_bandwidth_gb_per_second(self) -> float:
        if self.published is not None:
            return math.floor(self.published.bus_bandwidth_gb_per_second * FLOOR_SHARE * 10) / 10
        assert self.presence_floor_gb_per_second is not None
        return self.presence_floor_gb_per_second

    @property
    def basis(self) -> str:
        """One line saying where the floor comes from (the plan, the docs and the run report it)."""
        p = self.published
        if p is None:
            return f"no published figure: a fabric-presence floor ({self.why})"
        nodes = f"{p.nodes} nodes" if p.nodes else "nodes not stated"
        return f"{FLOOR_SHARE:.0%} of {p.bus_bandwidth_gb_per_second:g} GB/s at {p.message_size} ({nodes}; {p.source})"


_NCCL_TESTS_README = "awslabs/awsome-distributed-ai micro-benchmarks/nccl-tests/README.md"
_PCS_COMPUTE_TEST = "awslabs/awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md"
_NCCOM_TEST = "aws-neuron/aws-neuron-sdk:tools/neuron-sys-tools/nccom-test.rst (Multiple Instances Example)"
_P5 = PublishedAllReduce(487.09, "16G", 2, _NCCL_TESTS_README)

_P4DE = PublishedAllReduce(78.33, "2G", 2, _NCCL_TESTS_README)

FLOORS: dict[str, AllReduceFloor] = {
    # p4d has p4de's fabric (4 x 100 Gbps EFA, A100 over NVSwitch); nothing is published for p4d
    # itself. At 2 GiB nccl-tests needs 3 x 2 GiB + 1 GiB of each 40 GiB A100 (facts/limits.py).
    "p4d.24xlarge": AllReduceFloor("2G", _P4DE),
    "p4de.24xlarge": AllReduceFloor("2G", _P4DE),
    "p5.48xlarge": AllReduceFloor("16G", _P5),
    # p5e has p5's fabric (32 x 100 Gbps EFA); nothing is published for p5e itself.
    "p5e.48xlarge": AllReduceFloor("16G", _P5),
    "p5en.48xlarge": AllReduceFloor(
        "16G",
        PublishedAllReduce(
            369.86,
            "16G",
            None,
            "awslabs/awsome-distributed-ai micro-benchmarks/nccl-tests/slurm/topology-aware-nccl-tests/README.md",
        ),
    ),
    # Published on four nodes; a two-node ring all-reduce reaches at least its bus bandwidth.
    "p6-b200.48xlarge": AllReduceFloor(
        "16G",
        PublishedAllReduce(
            377.0, "16G", 4, "awslabs/awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md"
        ),
    ),
    "p6-b300.48xlarge": AllReduceFloor(
        "16G",
        PublishedAllReduce(
            654.0, "16G", 2, "awslabs/awsome-distributed-ai architectures/aws-pcs/tests/compute-test.md"
        ),
    ),
    "trn1.32xlarge": AllReduceFloor(
        "1G",
        PublishedAllReduce(47.09, "1G", 2, _NCCOM_TEST),
    ),
    "trn1n.32xlarge": AllReduceFloor(
        "2G", presence_floor_gb_per_second=50.0, why="twice trn1's EFA, nothing published"
    ),
    "trn2.48xlarge": AllReduceFloor(
        "2G", presence_floor_gb_per_second=50.0, why="no trn2 nccom-test figure is published"
    ),
    "trn2u.48xlarge": AllReduceFloor(
        "2G", presence_floor_gb_per_second=50.0, why="no trn2 nccom-test figure is published"
    ),
}
