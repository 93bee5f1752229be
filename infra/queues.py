"""Sharing the cluster with Kueue: flavors, team queues, priorities (pure builders) and the
component that applies them.

Every accelerated node group is a ResourceFlavor; the system node group is one more, for
the MPI launchers and the workers of CPU runs (recipe ddp-cpu). Each team of `teams` becomes
a ClusterQueue (all in one cohort, so unused quota can be borrowed and reclaimed) with a
LocalQueue of the same name in the team's own namespace (`team-<name>`, infra.tenancy), and a
WorkloadPriorityClass. A team's ClusterQueue admits workloads of that namespace only, so a team
cannot spend another team's quota by pointing a LocalQueue of its own at it. Without teams, one
`default` queue in `training` owns every node group (the system group's CPU worker slots
included), so every MPIJob of every stack goes through a queue.

Quotas are whole nodes times what one worker requests (`NodeGroup.worker_requests`,
the same function the MPIJob builder uses), so a quota of N nodes admits exactly N workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import _utilities as k8s_utilities

from config.teams import QueueingConfig, TeamConfig
from facts.names import (
    COHORT,
    DEFAULT_QUEUE,
    EFA_RESOURCE,
    KUEUE_MANAGED_LABEL,
    NODE_GROUP_LABEL,
    SYSTEM_NODE_GROUP,
    app_labels,
    component_type,
)
from facts.nodegroups import NodeGroup
from infra.platform import LAUNCHER_REQUESTS
from infra.tenancy import tenants_of

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Quota:
    """Nodes of one node group a queue is guaranteed, and how many more it may borrow (None: any)."""

    nodes: int
    borrowing_limit_nodes: int | None = 0


@dataclass(frozen=True)
class Team:
    """One ClusterQueue, its LocalQueue (in the team's namespace) and its priority."""

    name: str
    quotas: Mapping[str, Quota]
    """Node group name -> quota."""
    namespace: str
    """The team's namespace: where its LocalQueue is, and the only one its ClusterQueue admits from."""
    priority: int = 0

    @property
    def priority_class(self) -> str:
        return f"team-{self.name}"

    def max_launchers(self, groups: Mapping[str, NodeGroup]) -> int:
        """Runs the queue can have admitted at once (each takes at least one node), so the
        launchers' quota on the system nodes never holds a run back."""
        total = 0
        for ng, q in self.quotas.items():
            borrow = q.borrowing_limit_nodes
            total += q.nodes + (borrow if borrow is not None else groups[ng].nodes - q.nodes)
        return max(total, 1)


def present_quotas(wanted: Mapping[str, int], present: int) -> dict[str, int]:
    """Teams' node quotas on one node group, scaled down to the nodes it runs now.

    Config checks hold the quotas within the group's maxSize; while it runs fewer nodes
    (scaled down, or to 0 before a Capacity Block ends), a quota over the nodes present
    would admit runs whose pods cannot be placed: Kueue would evict them after
    `podsReadyTimeout` and count the requeue. Scaled quotas keep them waiting in the queue.
    Shares are kept in proportion (largest remainders first, ties by team order).
    """
    total = sum(wanted.values())
    if total <= present:
        return dict(wanted)
    exact = {team: nodes * present / total for team, nodes in wanted.items()}
    out = {team: int(share) for team, share in exact.items()}
    by_remainder = sorted(wanted, key=lambda t: (-(exact[t] - out[t]), list(wanted).index(t)))
    for team in by_remainder[: present - sum(out.values())]:
        out[team] += 1
    return out


def teams_of(
    teams: Mapping[str, TeamConfig], groups: Mapping[str, NodeGroup], default_queue: bool = False
) -> list[Team]:
    """The configured teams (quotas within the nodes present), and the `default` team over
    every node group of `groups` (the accelerated ones and the system group) when there are no
    teams or `default_queue` keeps it. Beside teams, the default queue is guaranteed only the
    nodes no team is, and may borrow the rest: its runs keep running, and a team gets its quota
    back by evicting them (reclaimWithinCohort), to resume from their checkpoint when readmitted."""
    tenants = tenants_of(teams, default_queue)
    nodes: dict[str, int] = {}
    for group in {t.node_group for t in teams.values()}:
        wanted = {name: t.nodes for name, t in teams.items() if t.node_group == group}
        nodes.update(present_quotas(wanted, groups[group].nodes))
    out = [
        Team(name, {t.node_group: Quota(nodes[name], t.borrowing_limit_nodes)}, tenants[name].namespace, t.priority)
        for name, t in teams.items()
    ]
    if DEFAULT_QUEUE in tenants:
        taken = {g: sum(nodes[n] for n, t in teams.items() if t.node_group == g) for g in groups}
        rest = {g.name: Quota(max(g.nodes - taken[g.name], 0), None) for g in groups.values()}
        out.insert(0, Team(DEFAULT_QUEUE, rest, tenants[DEFAULT_QUEUE].namespace, priority=0))
    return out


# --------------------------------------------------------------------------- builders (pure)


def _labels() -> dict[str, str]:
    return app_labels("queueing")


def resource_flavor(g: NodeGroup) -> Obj:
    """The flavor of one accelerated node group.

    `nodeLabels` makes Kueue pin admitted pods to the group (and match our own selectors);
    `nodeTaints` (not `tolerations`) lets only pods that already tolerate the group's taints
    take this flavor, so an MPI launcher (which tolerates nothing) lands in the system flavor
    and never on accelerated quota.
    """
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": g.name, "labels": _labels()},
        "spec": {
            "nodeLabels": g.node_selector(),
            "nodeTaints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in g.instance.taints],
        },
    }


def system_flavor() -> Obj:
    """The flavor of the system node group, where the MPI launchers and CPU workers run."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": SYSTEM_NODE_GROUP, "labels": _labels()},
        "spec": {"nodeLabels": {NODE_GROUP_LABEL: SYSTEM_NODE_GROUP}},
    }


def _quantity(value: str, times: int, plus: str = "0") -> str:
    """`times` x a request like "16", "121" or "471Gi", plus another of the same unit."""
    for unit in ("Gi", "Mi"):
        if value.endswith(unit):
            extra = int(plus[: -len(unit)]) if plus.endswith(unit) else int(plus)
            return f"{int(value[: -len(unit)]) * times + extra}{unit}"
    return str(int(value) * times + int(plus))


def covered_resources(groups: Sequence[NodeGroup]) -> list[str]:
    """Every resource an MPIJob on these node groups requests: accelerators, EFA, CPU, memory."""
    devices = sorted({g.device_resource for g in groups if g.accelerated})
    return [*devices, EFA_RESOURCE, "cpu", "memory"]


def cluster_queue(team: Team, groups: Mapping[str, NodeGroup]) -> Obj:
    """A team's ClusterQueue: per node group, nodes x one worker's requests; on the system
    flavor, room for the team's launchers (plus its CPU workers, where its quota is on the
    system group). One resource group, so every flavor lists every covered resource (0 where
    a flavor has none of it)."""
    served = [groups[name] for name in team.quotas]
    covered = covered_resources(served)
    launchers = team.max_launchers(groups)
    flavors = []
    for g in served:
        if g.name == SYSTEM_NODE_GROUP:
            continue
        flavors.append({"name": g.name, "resources": _flavor_resources(covered, g, team.quotas[g.name])})
    # Launchers first: a team without a system quota gets exactly the launchers' room.
    system = {res: _quantity(LAUNCHER_REQUESTS.get(res, "0"), launchers) for res in covered}
    entries = [{"name": res, "nominalQuota": system[res]} for res in covered]
    if SYSTEM_NODE_GROUP in team.quotas:
        workers = _flavor_resources(covered, groups[SYSTEM_NODE_GROUP], team.quotas[SYSTEM_NODE_GROUP])
        entries = [{**w, "nominalQuota": _quantity(w["nominalQuota"], 1, system[w["name"]])} for w in workers]
    flavors.append({"name": SYSTEM_NODE_GROUP, "resources": entries})
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": team.name, "labels": _labels()},
        "spec": {
            "cohortName": COHORT,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
            "queueingStrategy": "BestEffortFIFO",
            # A lender gets its quota back by evicting borrowers (they resume from their last
            # checkpoint when readmitted); within a team, higher priority goes first.
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        },
    }


def _flavor_resources(covered: Sequence[str], g: NodeGroup, q: Quota) -> list[Obj]:
    """One flavor's quota: q.nodes x one worker's requests of each covered resource (0 where
    the group has none of it), and as much again for q.borrowing_limit_nodes."""
    per_node = g.worker_requests()
    resources = []
    for res in covered:
        amount = per_node.get(res, "0")
        entry: Obj = {"name": res, "nominalQuota": _quantity(amount, q.nodes)}
        if q.borrowing_limit_nodes is not None:
            entry["borrowingLimit"] = _quantity(amount, q.borrowing_limit_nodes)
        resources.append(entry)
    return resources


def local_queue(team: Team) -> Obj:
    """The team's queue in its namespace; MPIJobs name it in `kueue.x-k8s.io/queue-name`."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": team.name, "namespace": team.namespace, "labels": _labels()},
        "spec": {"clusterQueue": team.name},
    }


def priority_class(team: Team) -> Obj:
    """The team's WorkloadPriorityClass (queue order and preemption within its ClusterQueue)."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": team.priority_class, "labels": _labels()},
        "value": team.priority,
        "description": f"Training runs of team {team.name}",
    }


def flavor_objects(groups: Mapping[str, NodeGroup]) -> list[Obj]:
    """A flavor per accelerated node group, then the system node group's."""
    return [*(resource_flavor(g) for g in groups.values() if g.name != SYSTEM_NODE_GROUP), system_flavor()]


def queue_objects(teams: Sequence[Team], groups: Mapping[str, NodeGroup]) -> list[Obj]:
    """Every Kueue object of the stack: flavors first, then each team's queues and priority."""
    objs = flavor_objects(groups)
    for team in teams:
        objs += [priority_class(team), cluster_queue(team, groups), local_queue(team)]
    return objs


def kueue_manager_config(q: QueueingConfig, leader_worker_set: bool = False) -> str:
    """Kueue's controller configuration (chart value `managerConfig.controllerManagerConfigYaml`).

    MPIJobs, the Jobs a run's steps put on accelerated nodes (data, directory and image steps:
    workloads.manifests.objects.queued_labels) and the serving Deployments are managed, each
    only when it names a queue (`manageJobsWithoutQueueName: false`); TensorBoard and the shell
    tolerate no accelerator taint, so they stay on the system nodes, unmanaged.
    `pod` is listed although `deployment` turns it on itself (ImplicitlyEnabledFrameworkNames):
    Kueue 0.19.2's chart makes a webhook fail closed only for a listed framework, so a serving pod
    created while Kueue is down would otherwise start unadmitted, outside its team's quota. Listed,
    its creation is refused until Kueue is back (the ReplicaSet retries). The pod-based
    integrations reach only the tenants' namespaces (managedJobsNamespaceSelector on their
    label), so a Kueue outage never stops a system pod (tests/plan/test_kueue_pods.py).
    `waitForPodsReady` makes admission all-or-nothing: a run whose pods are not all ready in
    time is evicted and requeued with backoff, so it never holds half a placement group.
    With `leader_worker_set` (its controller installed), LeaderWorkerSets too: each group of a
    serving replica larger than one node is one workload, admitted whole.
    """
    lws = "  - leaderworkerset.x-k8s.io/leaderworkerset\n" if leader_worker_set else ""
    return (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
        "kind: Configuration\n"
        "health:\n  healthProbeBindAddress: :8081\n"
        "metrics:\n  bindAddress: :8443\n"
        "webhook:\n  port: 9443\n"
        "leaderElection:\n  leaderElect: true\n  resourceName: c1f6bfd2.kueue.x-k8s.io\n"
        "manageJobsWithoutQueueName: false\n"
        f"managedJobsNamespaceSelector:\n  matchLabels:\n    {KUEUE_MANAGED_LABEL}: 'true'\n"
        "waitForPodsReady:\n"
        f"  timeout: {q.pods_ready_timeout_minutes}m\n"
        f"  recoveryTimeout: {q.recovery_timeout_minutes}m\n"
        "  blockAdmission: false\n"
        "  requeuingStrategy:\n"
        "    timestamp: Eviction\n"
        f"    backoffLimitCount: {q.requeue_limit}\n"
        "    backoffBaseSeconds: 60\n"
        "    backoffMaxSeconds: 3600\n"
        "integrations:\n  frameworks:\n  - batch/job\n  - kubeflow.org/mpijob\n  - deployment\n  - pod\n"
        f"{lws}"
    )


# --------------------------------------------------------------------------- component


class _KueueObject(pulumi.CustomResource):
    """A Kueue object as the Kubernetes provider takes it: the whole object as inputs.

    `apiextensions.CustomResource` only carries `spec`; a WorkloadPriorityClass has top-level
    `value` and `description`, so every Kueue object goes through this one class.
    """

    def __init__(self, name: str, obj: Obj, opts: pulumi.ResourceOptions):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_utilities.get_version()))
        super().__init__(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", name, dict(obj), opts)


class TeamQueues(pulumi.ComponentResource):
    """Kueue flavors, team queues and priorities, created once the Kueue release is ready. Each
    object waits for what it really needs: Kueue (its CRDs and webhook) and, for a LocalQueue, its
    team's namespace and ClusterQueue; never every team's namespace."""

    objects: list[pulumi.Resource]
    flavors: list[pulumi.Resource]
    """The ResourceFlavors: every run's queue admits onto them."""
    team_objects: dict[str, list[pulumi.Resource]]
    """Team -> its WorkloadPriorityClass, ClusterQueue and LocalQueue."""
    queues: dict[str, str]
    priority_classes: dict[str, str]

    def __init__(
        self,
        name: str,
        teams: Sequence[Team],
        groups: Mapping[str, NodeGroup],
        provider: Any,
        kueue: pulumi.Resource,
        namespaces: Mapping[str, pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "TeamQueues"), name, None, opts)
        self._name, self._provider = name, provider
        self.flavors = [self._apply(obj, [kueue]) for obj in flavor_objects(groups)]
        self.team_objects = {}
        for team in teams:
            priority = self._apply(priority_class(team), [kueue])
            cq = self._apply(cluster_queue(team, groups), [kueue])
            local = self._apply(local_queue(team), [kueue, cq, namespaces[team.name]])
            self.team_objects[team.name] = [priority, cq, local]
        self.objects = [*self.flavors, *(o for objs_ in self.team_objects.values() for o in objs_)]
        self.queues = {t.name: t.name for t in teams}
        self.priority_classes = {t.name: t.priority_class for t in teams}
        self.register_outputs({"queues": self.queues})

    def _apply(self, obj: Obj, depends_on: list[pulumi.Resource]) -> pulumi.Resource:
        kind = obj["kind"].lower()
        opts = pulumi.ResourceOptions(parent=self, provider=self._provider, depends_on=depends_on)
        return _KueueObject(f"{self._name}-{kind}-{obj['metadata']['name']}", obj, opts)
