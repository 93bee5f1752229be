"""Facts about the instance types this project runs on.

Everything accelerator- or EFA-specific in the program (network interfaces, device-plugin
resources, taints, tolerations, AMI types, ranks per node) is derived from this table, never
from config a user could get wrong. `tests/unit/test_instances.py` checks every entry against
the EC2 instance-type data that moto ships, as an independent reference.

Sources: the EC2 accelerated-computing instance type pages (network cards, maximum EFA
interfaces, accelerators, instance store); the EKS user guide (AL2023 accelerated AMI types).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from facts.names import (
    ACCELERATOR_LABEL,
    EFA_LABEL,
    NEURON_PRESENT_LABEL,
    NEURON_RESOURCE,
    NVIDIA_PRESENT_LABEL,
    NVIDIA_RESOURCE,
)

Accelerator = Literal["neuron", "nvidia"]


@dataclass(frozen=True)
class Taint:
    """A Kubernetes node taint (effect spelled the Kubernetes way)."""

    key: str
    value: str
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule"]

    @property
    def eks_effect(self) -> str:
        """The same effect as the EKS managed node group API spells it."""
        return {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}[
            self.effect
        ]

    def toleration(self) -> dict[str, str]:
        """The toleration that admits a pod onto nodes with exactly this taint."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


@dataclass(frozen=True)
class InstanceType:
    """What the program needs to know about one EC2 instance type."""

    name: str
    vcpus: int
    memory_gib: int
    network_cards: int
    """Number of network cards; for the EFA types it equals the maximum EFA interfaces."""
    efa: bool
    accelerator: Accelerator | None = None
    accelerator_name: str | None = None
    accelerator_count: int = 0
    neuron_cores: int = 0
    """Physical NeuronCores per instance (Neuron types only)."""
    nvme_disks: int = 0
    nvme_total_gb: int = 0
    network_gbps: int = 0
    ipv4_per_interface: int = 0
    """IPv4 addresses one network interface can hold (the VPC CNI gives pods these addresses)."""
    gpu_memory_mib: int = 0
    """Memory of one GPU, MiB (EC2's GpuInfo MemoryInfo.SizeInMiB; 0 without GPUs)."""

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def efa_interfaces(self) -> int:
        """EFA devices a node exposes: one on every network card, or none."""
        return self.network_cards if self.efa else 0

    @property
    def device_resource(self) -> str | None:
        """The extended resource the device plugin advertises for the accelerators."""
        if self.accelerator == "neuron":
            return NEURON_RESOURCE
        if self.accelerator == "nvidia":
            return NVIDIA_RESOURCE
        return None

    @property
    def ami_type(self) -> str:
        """The EKS managed node group AMI type (AL2023; AL2 is end of life)."""
        if self.accelerator == "neuron":
            return "AL2023_x86_64_NEURON"
        if self.accelerator == "nvidia":
            return "AL2023_x86_64_NVIDIA"
        return "AL2023_x86_64_STANDARD"

    @property
    def taints(self) -> tuple[Taint, ...]:
        """Taints that keep everything but accelerator workloads off the node."""
        resource = self.device_resource
        if resource is None:
            return ()
        return (Taint(key=resource, value="true", effect="NoSchedule"),)

    @property
    def labels(self) -> dict[str, str]:
        """Node labels derived from the hardware (selectors and add-on placement use them)."""
        labels: dict[str, str] = {}
        if self.accelerator is not None:
            labels[ACCELERATOR_LABEL] = self.accelerator
        if self.accelerator == "nvidia":
            # Without node-feature-discovery, the NVIDIA device plugin chart selects on this.
            labels[NVIDIA_PRESENT_LABEL] = "true"
        if self.accelerator == "neuron":
            labels[NEURON_PRESENT_LABEL] = "true"
        if self.efa:
            labels[EFA_LABEL] = "true"
        return labels

    @property
    def allocatable_memory_gib(self) -> int:
        """Memory a single pod may request on an otherwise empty node.

        Leaves room for the kubelet, system reserve and daemonsets (about 8% and at least
        16 GiB on these large hosts) so a worker that asks for it still schedules.
        """
        reserve = max(16, self.memory_gib * 8 // 100)
        return self.memory_gib - reserve

    @property
    def ranks_per_node(self) -> int:
        """Training processes per node: one per NeuronCore (trn2 runs two physical cores as one
        logical core by default, LNC=2) or one per GPU; 0 without accelerators."""
        if self.accelerator == "neuron":
            return self.neuron_cores // 2 if self.family == "trn2" else self.neuron_cores
        return self.accelerator_count

    @property
    def cpu_worker_vcpus(self) -> int:
        """vCPUs of one CPU-training worker on a general-purpose (system) node: a quarter of the
        node, so the controllers, add-ons and MPI launchers the system nodes run keep the rest."""
        return max(1, self.vcpus // 4)

    @property
    def cpu_worker_memory_gib(self) -> int:
        """Memory of one CPU-training worker on a system node: a quarter of the node's."""
        return max(1, self.memory_gib // 4)

    @property
    def vpc_cni_addresses(self) -> int:
        """VPC addresses the VPC CNI holds for one node with few pods: with its default
        WARM_ENI_TARGET=1, every address of the primary interface and of one warm interface
        (EKS user guide, eks-outposts-local-cluster-overview; amazon-vpc-cni-k8s README)."""
        return 2 * self.ipv4_per_interface

    @property
    def allocatable_vcpus(self) -> int:
        """vCPUs a single pod may request on an otherwise empty node: about 6% (at least 4) is left
        for kube-reserved and the daemonsets (device plugins, CNI, CSI, monitoring agents)."""
        return self.vcpus - max(4, self.vcpus * 6 // 100)


def _neuron(name: str, vcpus: int, mem: int, cards: int, chip: str, cores: int, gbps: int) -> InstanceType:
    return InstanceType(
        name=name,
        vcpus=vcpus,
        memory_gib=mem,
        network_cards=cards,
        efa=True,
        accelerator="neuron",
        accelerator_name=chip,
        accelerator_count=16,
        neuron_cores=cores,
        nvme_disks=4,
        nvme_total_gb=7600,
        network_gbps=gbps,
        ipv4_per_interface=50,
    )


def _gpu(
    name: str, mem: int, cards: int, gpu: str, gpu_mib: int, disks: int, disk_gb: int, gbps: int, vcpus: int = 192
) -> InstanceType:
    return InstanceType(
        name=name,
        vcpus=vcpus,
        memory_gib=mem,
        network_cards=cards,
        efa=True,
        accelerator="nvidia",
        accelerator_name=gpu,
        accelerator_count=8,
        gpu_memory_mib=gpu_mib,
        nvme_disks=disks,
        nvme_total_gb=disk_gb,
        network_gbps=gbps,
        ipv4_per_interface=50,
    )


def _general(name: str, vcpus: int, mem: int, ipv4_per_interface: int) -> InstanceType:
    return InstanceType(
        name=name, vcpus=vcpus, memory_gib=mem, network_cards=1, efa=False, ipv4_per_interface=ipv4_per_interface
    )


ACCELERATED: dict[str, InstanceType] = {
    t.name: t
    for t in (
        _neuron("trn1.32xlarge", 128, 512, 8, "Trainium", 32, 800),
        _neuron("trn1n.32xlarge", 128, 512, 16, "Trainium", 32, 1600),
        _neuron("trn2.48xlarge", 192, 2048, 16, "Trainium2", 128, 3200),
        _gpu("p4de.24xlarge", 1152, 4, "A100", 81920, 8, 8000, 400, vcpus=96),
        _gpu("p5.48xlarge", 2048, 32, "H100", 81920, 8, 30400, 3200),
        _gpu("p5e.48xlarge", 2048, 32, "H200", 144384, 8, 30400, 3200),
        _gpu("p5en.48xlarge", 2048, 16, "H200", 144384, 8, 30400, 3200),
    )
}

GENERAL_PURPOSE: dict[str, InstanceType] = {
    t.name: t
    for t in (
        _general("m6i.xlarge", 4, 16, 15),
        _general("m6i.2xlarge", 8, 32, 15),
        _general("m6i.4xlarge", 16, 64, 30),
        _general("m7i.xlarge", 4, 16, 15),
        _general("m7i.2xlarge", 8, 32, 15),
        _general("m7i.4xlarge", 16, 64, 30),
    )
}

CATALOG: dict[str, InstanceType] = {**ACCELERATED, **GENERAL_PURPOSE}


def get(name: str) -> InstanceType:
    """The catalog entry for an instance type; KeyError names the valid ones."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"unknown instance type {name!r}; known: {', '.join(CATALOG)}") from None


@dataclass(frozen=True)
class HealthCheckFloor:
    """The all-reduce a pre-training health check runs on an instance type, and the bus
    bandwidth below which it fails."""

    message_size: str
    min_bus_bandwidth_gb_per_second: float
    basis: str = ""
    """The published two-node figure the floor is a share of, or why there is none."""


FLOOR_SHARE = 0.85
"""A floor is at least this share of a published two-node figure: a fabric at half its bandwidth
(a lost EFA card, a degraded link) fails the gate, run-to-run noise does not."""
NCCOM_TWO_TRN1_1GIB = 47.09
"""GB/s bus bandwidth of a 64-rank fp32 all-reduce of 1 GiB on two 32-NeuronCore instances: the
Neuron docs' nccom-test "Multiple Instances Example" (aws-neuron-sdk v2.29.1, nccom-test.rst)."""
_TRN1 = f"85% of {NCCOM_TWO_TRN1_1GIB} GB/s, nccom-test's published 2 x 32-NeuronCore figure at 1 GiB"
_NOT_PUBLISHED = (
    f"no published two-node figure for {{}}: trn1's ({NCCOM_TWO_TRN1_1GIB} GB/s at 1 GiB) as a lower bound, which a"
    " healthy {} fabric (more EFA bandwidth) passes with room; set healthCheck.minBusBandwidthGBPerSecond from a"
    " healthy run to catch a half-broken one"
)
_NEURON_FLOOR = round(FLOOR_SHARE * NCCOM_TWO_TRN1_1GIB, 1)
# GPU: 90% of the 2-node nccl-tests all_reduce_perf figures published by
# aws-samples/awsome-distributed-training (micro-benchmarks/nccl-tests README: p4de 78 GB/s
# at 2 GiB, p5 487 GB/s at 16 GiB), leaving room for run-to-run noise.
HEALTH_CHECK_FLOORS: dict[str, HealthCheckFloor] = {
    "p4de.24xlarge": HealthCheckFloor("2G", 70.0, "90% of 78 GB/s, awsome-distributed-training's 2 x p4de at 2 GiB"),
    "p5.48xlarge": HealthCheckFloor("16G", 438.0, "90% of 487 GB/s, awsome-distributed-training's 2 x p5 at 16 GiB"),
    "p5e.48xlarge": HealthCheckFloor("16G", 438.0, "p5's figure (same EFA bandwidth)"),
    "p5en.48xlarge": HealthCheckFloor("16G", 438.0, "p5's figure (same EFA bandwidth)"),
    "trn1.32xlarge": HealthCheckFloor("1G", _NEURON_FLOOR, _TRN1),
    "trn1n.32xlarge": HealthCheckFloor("1G", _NEURON_FLOOR, _NOT_PUBLISHED.format("trn1n", "trn1n")),
    "trn2.48xlarge": HealthCheckFloor("1G", _NEURON_FLOOR, _NOT_PUBLISHED.format("trn2", "trn2")),
}
