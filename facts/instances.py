"""Facts about the instance types this project runs on.

Everything accelerator- or EFA-specific in the program (network interfaces, device-plugin
resources, taints, tolerations, AMI types, ranks per node) is derived from this table, never
from config a user could get wrong. `tests/unit/test_instances.py` checks every entry against
the EC2 instance-type data that moto ships, as an independent reference.

Sources: the EC2 accelerated-computing instance type pages (network cards, maximum EFA
interfaces, accelerators, instance store); the EKS user guide (AL2023 accelerated AMI types;
botocore's eks model holds their names); the Neuron architecture pages for what AWS's data leaves
out of trn2u.48xlarge (its Trainium2 devices, and the UltraServer it is part of).
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
Architecture = Literal["x86_64", "arm64"]

AMI_TYPES: dict[tuple[Architecture, Accelerator | None], str] = {
    ("x86_64", None): "AL2023_x86_64_STANDARD",
    ("arm64", None): "AL2023_ARM_64_STANDARD",
    ("x86_64", "neuron"): "AL2023_x86_64_NEURON",
    ("x86_64", "nvidia"): "AL2023_x86_64_NVIDIA",
    ("arm64", "nvidia"): "AL2023_ARM_64_NVIDIA",
}
"""The EKS managed node group AMI type per CPU architecture and accelerator (AL2023; AL2 is end of
life). There is no arm64 Neuron AMI type (botocore eks model, AMITypes)."""


CUDA_ARCH: dict[str, int] = {"A100": 80, "H100": 90, "H200": 90, "B200": 100, "B300": 103}
"""GPU -> its CUDA architecture (sm_XX), which an image's kernels must be built for
(awsome-distributed-ai nccl-tests README; tests/upstream/gpu-fabric-stack-2026-11.yaml)."""


@dataclass(frozen=True)
class UltraServer:
    """Instances joined by an accelerator interconnect into one scale-up domain, sold as a whole
    through UltraServer Capacity Blocks (EC2 API: DescribeCapacityBlockOfferings UltraserverType)."""

    ultraserver_type: str
    """The EC2 UltraServer type, e.g. u-trn2x64."""
    instances: int
    """Instances of one UltraServer."""
    interconnect: str


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
    efa: bool
    efa_on_primary_card: bool = True
    """Network card 0 takes an EFA device too. Not on p6-b300, whose card 0 is ENA only (EC2
    instance-type data: NetworkCards[0].InterfaceTypes is ["interface"])."""
    architecture: Architecture = "x86_64"
    ultraserver: UltraServer | None = None
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
    def efa_cards(self) -> tuple[int, ...]:
        """The network cards that carry an EFA device: every card that supports one (EC2 guide,
        "Maximize network bandwidth on Amazon EC2 instances with multiple network cards")."""
        if not self.efa:
            return ()
        return tuple(range(0 if self.efa_on_primary_card else 1, self.network_cards))

    @property
    def efa_interfaces(self) -> int:
        """EFA devices a node exposes: one on every EFA-capable network card, or none."""
        return len(self.efa_cards)

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
        """The EKS managed node group AMI type for the architecture and accelerator."""
        return AMI_TYPES[(self.architecture, self.accelerator)]

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
        """Training processes per node: one per NeuronCore (Trainium2 runs two physical cores as
        one logical core by default, LNC=2) or one per GPU; 0 without accelerators."""
        if self.accelerator == "neuron":
            return self.neuron_cores // 2 if self.accelerator_name == "Trainium2" else self.neuron_cores
        return self.accelerator_count

    @property
    def cuda_arch(self) -> int | None:
        """The GPUs' CUDA architecture (sm_XX as XX); None without NVIDIA GPUs."""
        return CUDA_ARCH[self.accelerator_name or ""] if self.accelerator == "nvidia" else None

    @property
    def neuron_family(self) -> str:
        """The instance family the Neuron SDK's support matrix names: a Trn2 UltraServer member
        (trn2u) runs what trn2 runs (Neuron docs, trn2-arch: the same 16 Trainium2 per instance)."""
        return "trn2" if self.family == "trn2u" else self.family

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


def _neuron(
    name: str,
    vcpus: int,
    mem: int,
    cards: int,
    chip: str,
    cores: int,
    gbps: int,
    ultraserver: UltraServer | None = None,
) -> InstanceType:
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
        ultraserver=ultraserver,
    )


def _gpu(
    name: str,
    mem: int,
    cards: int,
    gpu: str,
    gpu_mib: int,
    disks: int,
    disk_gb: int,
    gbps: int,
    vcpus: int = 192,
    efa_on_primary_card: bool = True,
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
        efa_on_primary_card=efa_on_primary_card,
    )


def _general(name: str, vcpus: int, mem: int, ipv4_per_interface: int) -> InstanceType:
    return InstanceType(
        name=name, vcpus=vcpus, memory_gib=mem, network_cards=1, efa=False, ipv4_per_interface=ipv4_per_interface
    )


TRN2_ULTRASERVER = UltraServer("u-trn2x64", 4, "NeuronLink-v3")
"""A Trn2 UltraServer: four trn2u.48xlarge, 64 Trainium2 (Neuron docs 2.32.0, trn2-arch)."""

ACCELERATED: dict[str, InstanceType] = {
    t.name: t
    for t in (
        _neuron("trn1.32xlarge", 128, 512, 8, "Trainium", 32, 800),
        _neuron("trn1n.32xlarge", 128, 512, 16, "Trainium", 32, 1600),
        _neuron("trn2.48xlarge", 192, 2048, 16, "Trainium2", 128, 3200),
        _neuron("trn2u.48xlarge", 192, 2048, 16, "Trainium2", 128, 3200, TRN2_ULTRASERVER),
        _gpu("p4d.24xlarge", 1152, 4, "A100", 40960, 8, 8000, 400, vcpus=96),
        _gpu("p4de.24xlarge", 1152, 4, "A100", 81920, 8, 8000, 400, vcpus=96),
        _gpu("p5.48xlarge", 2048, 32, "H100", 81920, 8, 30400, 3200),
        _gpu("p5e.48xlarge", 2048, 32, "H200", 144384, 8, 30400, 3200),
        _gpu("p5en.48xlarge", 2048, 16, "H200", 144384, 8, 30400, 3200),
        _gpu("p6-b200.48xlarge", 2048, 8, "B200", 183359, 8, 30400, 3200),
        _gpu("p6-b300.48xlarge", 4096, 17, "B300", 275040, 8, 30400, 6400, efa_on_primary_card=False),
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

NOT_SUPPORTED: dict[str, str] = {
    "p6e-gb200.36xlarge": "no EFA layout of its 17 network cards and no price in the data at hand, arm64 (the"
    " images here are x86_64), and its NVLink domain needs IMEX, which the stack does not set up (docs/training.md,"
    " GB200 UltraServers)",
}
"""Accelerated EC2 types the project refuses by name, and why (tests/unit/test_instances.py holds
each reason to the data it cites: when that data gains the type, the test says so)."""


def get(name: str) -> InstanceType:
    """The catalog entry for an instance type; KeyError names the valid ones."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"unknown instance type {name!r}; known: {', '.join(CATALOG)}") from None
