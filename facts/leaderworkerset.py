"""LeaderWorkerSet (kubernetes-sigs/lws): the API a multi-node serving replica is rendered as, and
how its controller is installed.

Sources (tests/unit/test_leaderworkerset_facts.py holds these values to them):
- kubernetes-sigs/lws v0.9.0 (f056f611): api/leaderworkerset/v1/leaderworkerset_types.go (the
  fields, enums, labels and the LWS_* variables), pkg/utils/pod/pod_utils.go (the value of
  LWS_LEADER_ADDRESS), pkg/utils/controller/controller_utils.go (the headless Service publishes
  not-ready addresses), site/content/en/docs/installation (the chart and its namespace)
  (tests/upstream/lws-v0.9.0.yaml). v0.9.0 is the LWS module Kueue 0.19.2's go.mod builds against.
- kubernetes-sigs/kueue v0.19.2 (8eab6877): pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go
  ValidateUpdate and pkg/util/pod/pod.go SpecShape (what Kueue refuses to change on a set it
  manages; tests/upstream/kueue-lws-webhook-v0.19.2.yaml).
"""

from __future__ import annotations

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
CHART = "oci://registry.k8s.io/lws/charts/lws"
CHART_VERSION = "0.9.0"
IMAGE_REPOSITORY = "registry.k8s.io/lws/lws"
"""The controller's image (tagged with the release) that the released chart names."""
NAMESPACE = "lws-system"
"""Where the installation guide puts the controller (`--namespace lws-system`)."""

RECREATE_GROUP = "RecreateGroupOnPodRestart"
"""restartPolicy: any container restart in a group recreates every pod of it (a vLLM rank that
restarts alone can never rejoin its peers' process group)."""
LEADER_CREATED = "LeaderCreated"
"""startupPolicy: the workers are created with the leader, not after it is ready (LeaderReady):
the leader's /health answers only once the workers have joined, so waiting for it would deadlock."""

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""On every pod of a group: "0" on the leader, 1..size-1 on the workers."""

LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
"""`<lws>-<group>.<subdomain>.<namespace>`: the leader's name in the set's headless Service, which
publishes not-ready addresses (a worker resolves it before the leader is ready)."""
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
INJECTED_ENV = (LEADER_ADDRESS_ENV, GROUP_SIZE_ENV, WORKER_INDEX_ENV)
"""What the controller's pod webhook adds to every container of a group."""

MAX_GROUP_SIZE = 16
"""The nodes one replica may span here (a bound, not an LWS limit: a larger group is one failure
domain of that many nodes)."""


_POD_SHAPE = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
    "priority",
    "topologySpreadConstraints",
    "overhead",
    "resourceClaims",
)
_CONTAINER_SHAPE = ("resources.requests", "ports")


def kueue_immutable_paths() -> list[str]:
    """The set's fields Kueue 0.19.2's webhook refuses to change while it manages the set (group
    size; of each template, SpecShape: the containers' requests and ports, placement, priority),
    as Pulumi property paths: a change to any of them must replace the set, never update it."""
    paths = ["spec.leaderWorkerTemplate.size"]
    for template in ("leaderTemplate", "workerTemplate"):
        spec = f"spec.leaderWorkerTemplate.{template}.spec"
        for containers in ("initContainers", "containers"):
            paths += [f"{spec}.{containers}[*].{field}" for field in _CONTAINER_SHAPE]
        paths += [f"{spec}.{field}" for field in _POD_SHAPE]
        paths.append(f"{spec}.resources.requests")
    return paths


def env_ref(name: str) -> str:
    """A container-argument reference Kubernetes expands from the container's environment."""
    return f"$({name})"
