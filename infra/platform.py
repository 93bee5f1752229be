"""The one typed value the workload layer receives from the infrastructure layer.

Workload builders are pure: they take a `NodeGroup` (facts.nodegroups: a node group's
instance type from the catalog, its size and AZ) and return Kubernetes dicts. The Pulumi
layer also gets the provider, each team's namespace and view of the shared storage, the
registry URLs and the queues from `Platform`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from config.storage import StorageConfig
from config.teams import TeamConfig
from facts.names import DEFAULT_QUEUE, SHARED_MOUNT
from facts.nodegroups import NodeGroup

LAUNCHER_REQUESTS = {"cpu": "1", "memory": "4Gi"}
"""What an MPI launcher requests (it only runs mpirun); Kueue quotas count it on the system nodes."""
LAUNCHER_LIMITS = {"cpu": "2", "memory": "4Gi"}


@dataclass(frozen=True)
class InternalLoadBalancing:
    """Where the AWS Load Balancer Controller puts a serving run's internal Network Load Balancer:
    the VPC's private subnets, one per AZ, and their CIDRs. With ip targets the NLB connects to the
    pods from its own addresses in those subnets (client IP preservation is off for ip targets), so
    the CIDRs are what a server's NetworkPolicy admits for it."""

    subnets: tuple[str, ...]
    """The private subnets by their Name tag (a VPC the stack creates; the controller resolves names)."""
    cidrs: tuple[str, ...]


@dataclass
class Platform:
    """Everything workloads receive from the infrastructure, in one value."""

    provider: Any
    """The `pulumi_kubernetes.Provider` for the cluster."""
    namespaces: Mapping[str, str]
    """Team (or `default` without teams) -> the namespace of its runs (infra.tenancy)."""
    storage_claim: str
    """Name of the ReadWriteMany PersistentVolumeClaim of the shared file system, one in each
    team's namespace."""
    node_groups: Mapping[str, NodeGroup]
    registry_urls: Mapping[str, Any] = field(default_factory=dict)
    """Repository name -> repository URL (a Pulumi Output in a real program)."""
    shared_mount: str = SHARED_MOUNT
    shared_sub_paths: Mapping[str, str] = field(default_factory=dict)
    """Team -> the directory of the file system its pods see at `shared_mount` ("": all of it)."""
    depends_on: list[Any] = field(default_factory=list)
    """Resources every run is created after, whatever its team: the MPI operator, the charts
    (Kueue, device plugins, the FSx CSI driver), the Kueue flavors."""
    tenant_depends_on: Mapping[str, list[Any]] = field(default_factory=dict)
    """Team (or `default`) -> what its runs are created after besides: its namespace, the
    namespace's NetworkPolicies, its claim, its queues and priority class. Only these: a run that
    waited on every team's objects would make the plan and the state grow as runs x teams."""
    queues: Mapping[str, str] = field(default_factory=dict)
    """Team -> the name of its Kueue LocalQueue in the team's namespace."""
    priority_classes: Mapping[str, str] = field(default_factory=dict)
    """Team -> the name of its Kueue WorkloadPriorityClass."""
    teams: Mapping[str, TeamConfig] = field(default_factory=dict)
    """The teams behind the queues (their node group and quota), for checking runs against them."""
    storage: StorageConfig = field(default_factory=StorageConfig)
    """The shared file system's size, throughput and kind, for checking runs' checkpoints against it."""
    pods_ready_timeout_minutes: int = 30
    """Kueue's waitForPodsReady timeout (`queueing.podsReadyTimeoutMinutes` of the cluster layer): a
    serving replica's modeled start is held to it where the runs are declared."""
    recovery_timeout_minutes: int = 15
    """Kueue's waitForPodsReady recoveryTimeout (`queueing.recoveryTimeoutMinutes` of the cluster
    layer): a serving replica's restart is held to it where the runs are declared."""
    leader_worker_set: bool = False
    """Whether the cluster runs the LeaderWorkerSet controller (and Kueue's integration for it):
    a serving run across nodes needs it."""
    neuron_scheduler: bool = False
    """Whether the cluster runs the Neuron scheduler extension (`addons.neuronScheduler`): a Neuron
    server of several devices but not a whole node needs it, and its pods name its scheduler."""
    load_balancing: InternalLoadBalancing | None = None
    """Where internal load balancers go; None: no Load Balancer Controller (or a VPC the stack did not create)."""
    serving_metrics: bool = False
    """Whether the CloudWatch add-on runs the serving scraper: a server's metrics policy admits it then only."""

    def namespace_for(self, team: str | None) -> str:
        """The namespace a run of `team` lives in (the default one without a team)."""
        return self.namespaces[team or DEFAULT_QUEUE]

    def sub_path_for(self, team: str | None) -> str:
        """The directory of the shared file system a run of `team` sees as /shared."""
        return self.shared_sub_paths.get(team or DEFAULT_QUEUE, "")

    def depends_on_for(self, team: str | None) -> list[Any]:
        """What a run of `team` is created after: the platform's shared parts and its team's own."""
        return [*self.depends_on, *self.tenant_depends_on.get(team or DEFAULT_QUEUE, [])]

    def queue_for(self, team: str | None) -> str | None:
        """The LocalQueue a run of `team` goes through (the default queue without a team)."""
        return self.queues.get(team or DEFAULT_QUEUE)

    def priority_class_for(self, team: str | None) -> str | None:
        return self.priority_classes.get(team or DEFAULT_QUEUE)
