"""A node group as every layer sees it, and what a run takes of one.

`NodeGroup` is the one shape of a node group from the config rules to the runs layer: the
stack-file models build it (`config.nodegroups.NodeGroupConfig.node_group`,
`config.cluster.SystemNodeGroupConfig.node_group`), a layered stack reads it from its lower
stack's JSON (`infra.layers`), and the components, queues, charts and workload builders take
it. `Placement` is a run's share of one: its totals (ranks, devices, EFA devices) are
multiplied out here and nowhere else. `NodeGroupLaunch` adds what only the aws layer needs to
launch an accelerated group (capacity source, update and repair settings); it is built from
the stack file (`NodeGroupConfig.launch`) and never crosses a layer.

No config and no Pulumi here: facts are what every layer may import.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from facts import instances
from facts.names import EFA_RESOURCE, NODE_GROUP_LABEL


@dataclass(frozen=True)
class Placement:
    """A run's totals on `nodes` nodes of one instance type, multiplied out once."""

    instance: instances.InstanceType
    nodes: int
    ranks_per_node: int
    """Training processes per node (one per NeuronCore or GPU; 0 without accelerators)."""
    ranks: int
    """The world size: every rank of every node."""
    devices_per_node: int
    """Accelerators the run uses on each node: all of them, or a serving replica's share."""
    devices: int
    """Accelerators (Neuron devices or GPUs) across the nodes."""
    efa_devices: int
    """EFA devices across the nodes."""


def placement(instance: instances.InstanceType, nodes: int, devices_per_node: int | None = None) -> Placement:
    """The totals of `nodes` nodes of `instance`: the one place that multiplies per-node counts.
    `devices_per_node`: what the run takes of each node's accelerators (default all of them; a
    vLLM replica may take fewer)."""
    per_node = instance.ranks_per_node
    used = instance.accelerator_count if devices_per_node is None else devices_per_node
    return Placement(
        instance=instance,
        nodes=nodes,
        ranks_per_node=per_node,
        ranks=nodes * per_node,
        devices_per_node=used,
        devices=nodes * used,
        efa_devices=nodes * instance.efa_interfaces,
    )


@dataclass(frozen=True)
class NodeGroup:
    """One node group: what a rule, a component, a queue or a job needs to know of it."""

    name: str
    instance: instances.InstanceType
    nodes: int
    """desiredSize: the nodes running now (Kueue's quota)."""
    max_nodes: int
    """maxSize: the most nodes the group can be scaled to."""
    availability_zone: str
    """The group's AZ; the system node group spans several (comma-separated)."""
    labels: Mapping[str, str]
    release_version: str = ""
    """The EKS AMI release of its nodes (config.amis.pinned_release; "" for the system group
    and where the rules check a stack before releases are pinned), whose driver the runs'
    images must fit (facts.amis, facts.drivers)."""
    max_key: str = field(default="", compare=False)
    """Where `max_nodes` is set, for messages: `nodeGroups[0].maxSize` in a stack file, or the
    lower stack's output it was read from. Provenance only: two groups read from different
    places are still the same group."""

    @property
    def accelerated(self) -> bool:
        """Accelerators and EFA (an accelerated node group), or CPUs only (the system node group)."""
        return self.instance.accelerator is not None

    @property
    def accelerator(self) -> instances.Accelerator:
        """The accelerator kind of an accelerated group (never asked of the system group)."""
        assert self.instance.accelerator is not None, f"{self.instance.name} has no accelerator"
        return self.instance.accelerator

    @property
    def device_resource(self) -> str:
        """The extended resource of the node's accelerators."""
        assert self.instance.device_resource is not None, f"{self.instance.name} has no accelerator"
        return self.instance.device_resource

    def placement(self, nodes: int) -> Placement:
        """A run's totals on `nodes` nodes of this group."""
        return placement(self.instance, nodes)

    def tolerations(self) -> list[dict[str, str]]:
        """Tolerations for exactly this node group's taints."""
        return [t.toleration() for t in self.instance.taints]

    def node_selector(self) -> dict[str, str]:
        """Selects the nodes of this node group and no other."""
        return {NODE_GROUP_LABEL: self.name}

    @property
    def slots_per_worker(self) -> int:
        """MPI slots of one worker: a rank per accelerator rank; one on a CPU node, where
        torchrun starts the processes."""
        return self.instance.ranks_per_node or 1

    @property
    def shm_gib(self) -> int:
        """The worker's memory-backed /dev/shm (counted in its memory): a quarter of it."""
        it = self.instance
        return (it.allocatable_memory_gib if self.accelerated else it.cpu_worker_memory_gib) // 4 or 1

    def worker_requests(self) -> dict[str, str]:
        """What one MPI worker requests: on an accelerated group the whole node (every
        accelerator and EFA device, the allocatable CPU and memory); on the system group a
        quarter of a node (the controllers and launchers keep the rest). MPIJobs and Kueue
        quotas both use it, so a quota of N nodes covers exactly N workers."""
        it = self.instance
        if not self.accelerated:
            return {"cpu": str(it.cpu_worker_vcpus), "memory": f"{it.cpu_worker_memory_gib}Gi"}
        return {
            self.device_resource: str(it.accelerator_count),
            EFA_RESOURCE: str(it.efa_interfaces),
            "cpu": str(it.allocatable_vcpus),
            "memory": f"{it.allocatable_memory_gib}Gi",
        }


NodeGroups = Mapping[str, NodeGroup]
"""Node group name -> the group."""

CapacityKind = Literal["on-demand", "reservation", "capacity-block", "spot"]


@dataclass(frozen=True)
class LaunchCapacity:
    """Where a group's instances come from, as its launch template and node group say it."""

    kind: CapacityKind
    reservation_id: str | None = None
    reservation_group_arn: str | None = None
    placement_group_name: str | None = None
    """An existing placement group to launch into (a reservation's own, or one named for on-demand)."""
    new_placement_group: bool = False
    """Launch into a new `cluster` placement group (on-demand and spot only)."""
    scale_down_at: dt.datetime | None = None
    """When the project's own action scales a Capacity Block group to 0 (None: EKS's own action does)."""
    scale_up_at: dt.datetime | None = None
    """When a Capacity Block group scales up to its desired size: the block's start, while it lies ahead."""

    @property
    def targets_reservation(self) -> bool:
        """A capacity reservation or Capacity Block: the launch template names its target."""
        return self.kind in ("reservation", "capacity-block")


@dataclass(frozen=True)
class RepairRule:
    """What EKS node auto repair does when the node monitoring agent reports one condition."""

    condition: str
    reason: str
    action: str
    wait_minutes: int


@dataclass(frozen=True)
class NodeRepair:
    """EKS node auto repair of a group: off, or on with its limits and per-condition rules."""

    enabled: bool
    max_unhealthy_percentage: int | None = None
    max_parallel: int = 1
    rules: tuple[RepairRule, ...] = ()


@dataclass(frozen=True)
class NodeGroupLaunch:
    """An accelerated node group with what the aws layer needs to launch it."""

    group: NodeGroup
    min_nodes: int
    max_unavailable: int
    """Nodes an update may replace at once."""
    update_strategy: str
    """EKS NodegroupUpdateConfig.updateStrategy: DEFAULT (surge) or MINIMAL (reserved groups)."""
    root_volume_size_gib: int
    capacity: LaunchCapacity
    repair: NodeRepair
