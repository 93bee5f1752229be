"""The one typed value the workload layer receives from the infrastructure layer.

Workload builders are pure: they take `NodeGroupFacts` (plain data derived from the
catalog) and return Kubernetes dicts. The Pulumi layer also gets the provider, the
namespace, the shared-storage claim and the registry URLs from `Platform`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra import catalog
from infra.config import NodeGroupConfig, StackConfig

SHARED_MOUNT = "/shared"
WORKLOADS_NAMESPACE = "training"
STORAGE_CLAIM = "shared-fsx"
"""Name of the ReadWriteMany claim of the shared FSx for Lustre file system in the workloads namespace."""
SYSTEM_NODE_GROUP = "system"
"""Label value (catalog.NODE_GROUP_LABEL) of the system node group, where MPI launchers run."""
LAUNCHER_REQUESTS = {"cpu": "1", "memory": "4Gi"}
"""What an MPI launcher requests (it only runs mpirun); Kueue quotas count it on the system nodes."""
LAUNCHER_LIMITS = {"cpu": "2", "memory": "4Gi"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that sends a job to a Kueue LocalQueue."""
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The label that gives a job a Kueue WorkloadPriorityClass."""


@dataclass(frozen=True)
class NodeGroupFacts:
    """What a job needs to know to fill one node of a node group, all derived from the catalog."""

    name: str
    instance_type: str
    accelerator: catalog.Accelerator
    device_resource: str
    device_count: int
    neuron_cores: int
    efa_count: int
    vcpus: int
    memory_gib: int
    allocatable_memory_gib: int
    allocatable_vcpus: int
    nodes: int
    max_nodes: int
    availability_zone: str
    taints: tuple[catalog.Taint, ...]
    labels: Mapping[str, str]

    efa_resource: str = catalog.EFA_RESOURCE

    @classmethod
    def from_config(cls, cfg: StackConfig, ng: NodeGroupConfig) -> NodeGroupFacts:
        it = ng.instance
        assert it.accelerator is not None and it.device_resource is not None
        from infra.nodegroups import node_labels

        return cls(
            name=ng.name,
            instance_type=it.name,
            accelerator=it.accelerator,
            device_resource=it.device_resource,
            device_count=it.accelerator_count,
            neuron_cores=it.neuron_cores,
            efa_count=it.efa_interfaces,
            vcpus=it.vcpus,
            memory_gib=it.memory_gib,
            allocatable_memory_gib=it.allocatable_memory_gib,
            allocatable_vcpus=it.allocatable_vcpus,
            nodes=ng.desired_size,
            max_nodes=ng.max,
            availability_zone=cfg.node_group_az(ng),
            taints=it.taints,
            labels=node_labels(ng),
        )

    def tolerations(self) -> list[dict[str, str]]:
        """Tolerations for exactly this node group's taints."""
        return [t.toleration() for t in self.taints]

    def node_selector(self) -> dict[str, str]:
        """Selects the nodes of this node group and no other."""
        return {catalog.NODE_GROUP_LABEL: self.name}

    def worker_requests(self) -> dict[str, str]:
        """What one MPI worker requests: the whole node (every accelerator and EFA device, the
        allocatable CPU and memory). MPIJobs and Kueue quotas both use it, so a quota of N nodes
        covers exactly N workers."""
        return {
            self.device_resource: str(self.device_count),
            self.efa_resource: str(self.efa_count),
            "cpu": str(self.allocatable_vcpus),
            "memory": f"{self.allocatable_memory_gib}Gi",
        }


@dataclass
class Platform:
    """Everything workloads receive from the infrastructure, in one value."""

    provider: Any
    """The `pulumi_kubernetes.Provider` for the cluster."""
    namespace: str
    storage_claim: str
    """Name of the ReadWriteMany PersistentVolumeClaim of the shared file system."""
    node_groups: Mapping[str, NodeGroupFacts]
    registry_urls: Mapping[str, Any] = field(default_factory=dict)
    """Repository name -> repository URL (a Pulumi Output in a real program)."""
    shared_mount: str = SHARED_MOUNT
    depends_on: list[Any] = field(default_factory=list)
    """Resources workloads must be created after (the MPI operator, the storage claim, the queues)."""
    queues: Mapping[str, str] = field(default_factory=dict)
    """Team -> the name of its Kueue LocalQueue in the workloads namespace (`""` is the default queue)."""
    priority_classes: Mapping[str, str] = field(default_factory=dict)
    """Team -> the name of its Kueue WorkloadPriorityClass."""
