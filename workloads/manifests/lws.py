"""A serving replica larger than one node as a LeaderWorkerSet (kubernetes-sigs/lws v0.9.0): one
group of `size` pods per replica, the leader serving HTTP and the workers joining it, each pod
on a whole node; the leader-only Service, the NetworkPolicy between a group's pods, and one
PodDisruptionBudget over the set.

Pure builders: the pod templates come from the recipe's builder (workloads/manifests/vllm_serve.py);
the LWS fields, labels and injected variables are facts/leaderworkerset.py's.
"""

from __future__ import annotations

import copy

from facts import leaderworkerset as lws
from facts.awaits import SKIP_AWAIT, TRUE
from facts.names import app_labels
from infra.tenancy import NETWORK_POLICY_API_VERSION
from workloads.manifests.objects import Context, Obj, meta, queued_labels

LEADER = "0"
"""The worker index LWS gives a group's leader (its other pods: 1..size-1)."""


def worker_template(leader: Obj, command: list[str], pod_labels: dict[str, str]) -> Obj:
    """A worker's pod template: the leader's, with `pod_labels`, running `command`, with no port and
    no probes (a worker serves no HTTP; a group lives or dies with its leader's probes,
    RecreateGroupOnPodRestart) and nothing to scrape (the leader's /metrics covers the group)."""
    template = copy.deepcopy(leader)
    template["metadata"] = {"labels": dict(pod_labels)}
    for c in template["spec"]["containers"]:
        c["command"] = list(command)
        for key in ("ports", "startupProbe", "readinessProbe", "livenessProbe"):
            c.pop(key, None)
    return template


def group_set(
    name: str, ctx: Context, object_labels: dict[str, str], leader: Obj, worker: Obj, size: int, replicas: int
) -> Obj:
    """The LeaderWorkerSet: `replicas` groups of `size` pods, Kueue's queue on the object (its
    webhook copies it onto both templates and admits each group whole). A restart of any container
    recreates the group (a vLLM rank cannot rejoin its peers alone); the workers start with the
    leader, not after it is ready, since the leader is ready only once they have joined."""
    # A group is on accelerated nodes only (a serving group is GPUs'): the run's queue and priority.
    labels = queued_labels(ctx, object_labels)
    return {
        "apiVersion": lws.API_VERSION,
        "kind": lws.KIND,
        # `pulumi up` returns once it is created: Kueue admits each group when the quota allows.
        "metadata": meta(name, ctx, labels, {SKIP_AWAIT: TRUE}),
        "spec": {
            "replicas": replicas,
            "startupPolicy": lws.LEADER_CREATED,
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": lws.RECREATE_GROUP,
                "leaderTemplate": leader,
                "workerTemplate": worker,
            },
        },
    }


def leader_selector(name: str, pod_labels: dict[str, str]) -> dict[str, str]:
    """The leaders of set `name`: the pods a client's request may reach."""
    return {**pod_labels, lws.NAME_LABEL: name, lws.WORKER_INDEX_LABEL: LEADER}


def leader_service(service_name: str, set_name: str, ctx: Context, pod_labels: dict[str, str], port: int) -> Obj:
    """A ClusterIP Service over the leaders only (a worker listens on no HTTP port)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(service_name, ctx, pod_labels),
        "spec": {
            "type": "ClusterIP",
            "selector": leader_selector(set_name, pod_labels),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def group_peers(set_name: str, ctx: Context) -> Obj:
    """The pods of one set reach each other on every port, and nothing else through this policy:
    the workers' torch.distributed rendezvous on the leader (--master-port), the message queues
    the leader's executor opens on ports it picks at run time, and NCCL's bootstrap sockets (and
    its socket transport where the image has no EFA provider). EFA's own traffic bypasses the IP
    stack and NetworkPolicy alike. Peers by the set's name label, which LWS puts on every pod."""
    peers = [{"podSelector": {"matchLabels": {lws.NAME_LABEL: set_name}}}]
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(f"{set_name}-peers", ctx, app_labels("network")),
        "spec": {
            "podSelector": {"matchLabels": {lws.NAME_LABEL: set_name}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers}],
            "egress": [{"to": peers}],
        },
    }


def disruption_budget(
    set_name: str, ctx: Context, object_labels: dict[str, str], groups: int = 1, size: int = 1
) -> Obj:
    """One budget over every pod of the set, for `groups` groups (of `size` pods) down at once.
    A pod evicted recreates its whole group, whose pods are then unavailable until it is ready
    again: with groups-1 groups down, (groups-1) x size + 1 pods leave one more eviction and no
    more (one group: one pod). A budget per group would allow one eviction in every group at
    once: all of them down."""
    pods = (groups - 1) * size + 1
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(set_name, ctx, object_labels),
        "spec": {"maxUnavailable": pods, "selector": {"matchLabels": {lws.NAME_LABEL: set_name}}},
    }
