"""The Helm charts of the cluster add-ons and the values we give them (pure functions).

Every release goes only where it belongs. Node selectors and tolerations come from the
node-group catalog (`NodeGroup`), never typed by hand.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from facts import eks_addons, instances, leaderworkerset, load_balancer_controller
from facts.names import ACCELERATOR_LABEL, EFA_LABEL, INSTANCE_TYPE_LABEL, NODE_GROUP_LABEL, SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup

FSX_CSI_CONTROLLER_SA = "fsx-csi-controller-sa"
SYSTEM_NODE_SELECTOR = {NODE_GROUP_LABEL: SYSTEM_NODE_GROUP}
# The Neuron chart (1.1.x) puts its node problem detector in this namespace
# (npd.namespaceOverride) and does not create it; nor does its service account get credentials
# (values.yaml and templates/_helpers.tpl of aws-neuron/neuron-helm-charts 1.1.2).
NEURON_HEALTH_NAMESPACE = "neuron-healthcheck-system"
NEURON_NPD_SA = "node-problem-detector"
# The MPI operator's Deployment in its release manifest (deploy/v2beta1/mpi-operator.yaml).
MPI_OPERATOR_DEPLOYMENT = ("mpi-operator", "mpi-operator", "mpi-operator")
"""Namespace, Deployment name and container name."""


@dataclass(frozen=True)
class HelmChart:
    """Where a chart comes from (the version is pinned in config)."""

    release: str
    chart: str
    repo: str | None = None
    """Helm repository URL; None for an OCI chart (the chart is then an oci:// reference)."""


EFA_DEVICE_PLUGIN = HelmChart(
    "aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts"
)
NVIDIA_DEVICE_PLUGIN = HelmChart(
    "nvidia-device-plugin", "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin"
)
NEURON = HelmChart("neuron", "oci://public.ecr.aws/neuron/neuron-helm-chart")
FSX_CSI_DRIVER = HelmChart(
    "aws-fsx-csi-driver", "aws-fsx-csi-driver", "https://kubernetes-sigs.github.io/aws-fsx-csi-driver"
)
KUEUE = HelmChart("kueue", "oci://registry.k8s.io/kueue/charts/kueue")
LWS = HelmChart("lws", leaderworkerset.CHART)
LWS_NAMESPACE = leaderworkerset.NAMESPACE
AWS_LOAD_BALANCER_CONTROLLER = HelmChart(
    "aws-load-balancer-controller", "aws-load-balancer-controller", load_balancer_controller.CHART_REPOSITORY
)

METRICS_SERVER = HelmChart("metrics-server", "metrics-server", "https://kubernetes-sigs.github.io/metrics-server/")


def mpi_operator_manifest_url(version: str) -> str:
    """The operator's single-file install manifest of a release (kubeflow/mpi-operator README)."""
    return f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{version}/deploy/v2beta1/mpi-operator.yaml"


# --------------------------------------------------------------------------- placement (pure)


def tolerations_for(groups: Iterable[NodeGroup]) -> list[dict[str, str]]:
    """Exactly the taints of the node groups served, each once, in a stable order."""
    seen: dict[tuple[str, str, str], dict[str, str]] = {}
    for g in groups:
        for t in g.instance.taints:
            seen.setdefault((t.key, t.value, t.effect), t.toleration())
    return [seen[k] for k in sorted(seen)]


def efa_groups(groups: Iterable[NodeGroup]) -> list[NodeGroup]:
    return [g for g in groups if g.instance.efa]


def accelerator_groups(groups: Iterable[NodeGroup], accelerator: instances.Accelerator) -> list[NodeGroup]:
    return [g for g in groups if g.accelerator == accelerator]


def efa_device_plugin_values(groups: Sequence[NodeGroup]) -> dict[str, Any]:
    """EFA nodes only: elsewhere the plugin crash-loops with "No devices found". The chart also
    keeps its DaemonSet to an allow-list of instance types (supportedInstanceLabels, a required
    node affinity): a type missing from the pinned chart's list gets no plugin, no EFA devices,
    and NCCL falls back to TCP without an error. The list is the stack's own EFA types."""
    return {
        "nodeSelector": {EFA_LABEL: "true"},
        "tolerations": tolerations_for(groups),
        "supportedInstanceLabels": {
            "keys": [INSTANCE_TYPE_LABEL],
            "values": sorted({g.instance.name for g in groups}),
        },
    }


def nvidia_device_plugin_values(groups: Sequence[NodeGroup]) -> dict[str, Any]:
    """GPU nodes only. Our nodes carry `nvidia.com/gpu.present=true`, which the chart's default
    affinity selects on when node-feature-discovery is not installed."""
    return {
        "nodeSelector": {ACCELERATOR_LABEL: "nvidia"},
        "tolerations": tolerations_for(groups),
    }


def neuron_values(
    groups: Sequence[NodeGroup], scheduler: bool, health_role_arn: str, kubernetes_version: str
) -> dict[str, Any]:
    """Device plugin and node problem detector on Neuron nodes. The detector only reports
    (`NeuronHealth`): EKS node auto-repair is the one component that remediates (two remediators
    would fight over a node). Its health container always runs and publishes metrics to
    CloudWatch; with IMDS closed to pods (hop limit 1) it gets its own IRSA role.

    The scheduler extension (off unless `addons.neuronScheduler`) runs on system nodes with a
    second kube-scheduler, which the chart (1.1.2) takes from EKS Distro at 1.28
    (`scheduler.customScheduler.image`): it gets the EKS Distro kube-scheduler of the cluster's
    minor instead (facts/eks_addons.py)."""
    on_neuron = {"nodeSelector": {ACCELERATOR_LABEL: "neuron"}, "tolerations": tolerations_for(groups)}
    custom: dict[str, Any] = {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)}
    if scheduler:
        tag = eks_addons.KUBE_SCHEDULER_TAGS[kubernetes_version]
        custom["image"] = {"repository": eks_addons.KUBE_SCHEDULER_REPOSITORY, "tag": tag}
    return {
        "devicePlugin": dict(on_neuron),
        "npd": {
            **on_neuron,
            "enabled": True,
            "nodeRecovery": {"enabled": False},
            "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": health_role_arn}},
        },
        "scheduler": {"enabled": scheduler, "nodeSelector": dict(SYSTEM_NODE_SELECTOR), "customScheduler": custom},
    }


def metrics_server_values() -> dict[str, Any]:
    """metrics-server on system nodes, as the chart's own high-availability manifest runs it: two
    replicas, one kept through a node drain, preferably on two nodes (required would leave one
    pending on a one-node system group). It serves an aggregated API: with no replica up, API
    discovery fails for every client, so the chart's single replica would break the cluster at each
    system node roll. TLS stays the chart's default (a certificate made at each start, nothing to
    expire a year on)."""
    return {
        "replicas": 2,
        "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "metrics-server"}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
    }


def kueue_values(manager_config: str) -> dict[str, Any]:
    """The Kueue controller on system nodes with our configuration (MPIJob integration,
    all-or-nothing admission). Its webhooks fail closed (failurePolicy: Fail), so one replica
    restarting would refuse every MPIJob: two replicas, and the chart's PDB keeps one up."""
    return {
        "controllerManager": {
            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
            "replicas": 2,
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        },
        "managerConfig": {"controllerManagerConfigYaml": manager_config},
    }


def lws_values(chart_version: str) -> dict[str, Any]:
    """The LeaderWorkerSet controller on system nodes. Its webhooks fail closed (failurePolicy:
    Fail; a group's pods are created through them) and it elects a leader: two replicas. Its image
    is pinned to the chart's release (the released chart sets that tag; the repository's values
    say `main`, pulled Always), so a chart bump moves the controller and nothing else does."""
    return {
        "replicaCount": 2,
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "image": {
            "manager": {
                "repository": f"{leaderworkerset.IMAGE_REPOSITORY}",
                "tag": f"v{chart_version.removeprefix('v')}",
                "pullPolicy": "IfNotPresent",
            }
        },
    }


def fsx_csi_values(groups: Sequence[NodeGroup], controller_role_arn: str, region: str) -> dict[str, Any]:
    """Controller (two replicas) on system nodes with its IRSA role; the node plugin on every
    node, accelerated ones included (that is where jobs mount `/shared`). The controller, which
    calls the FSx API, gets the region explicitly: with IMDS closed to pods (hop limit 1) it
    would wait on IMDS before falling back to the Kubernetes API (aws-fsx-csi-driver
    pkg/cloud/metadata.go). The node plugin only mounts; `node.region` is not a value of the
    chart (its template reads it, values.yaml does not declare it), so it is left to that fallback."""
    return {
        "controller": {
            "region": region,
            "replicaCount": 2,
            # The chart's own PDB (maxUnavailable 1 at two replicas). A second PDB over the same
            # pods would make every eviction fail, so none is added beside it.
            "podDisruptionBudget": {"enabled": True},
            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
            "serviceAccount": {
                "create": True,
                "name": FSX_CSI_CONTROLLER_SA,
                "annotations": {"eks.amazonaws.com/role-arn": controller_role_arn},
            },
        },
        "node": {"tolerateAllTaints": False, "tolerations": tolerations_for(groups)},
    }


def load_balancer_controller_values(cluster: str, region: str, vpc_id: str, role_arn: str) -> dict[str, Any]:
    """The controller on system nodes, two replicas behind the chart's PDB (one stays through a
    drain), told its cluster, region and VPC: with IMDS closed to pods (hop limit 1) it cannot
    read them from the instance. Its IRSA role is the aws layer's. The Service mutator webhook
    (on by default, failurePolicy Fail, every Service of type LoadBalancer) stays off: it would
    take every LoadBalancer Service and refuse Service creation while the controller is down; the
    controller reconciles only Services annotated `aws-load-balancer-type: external`."""
    return {
        "clusterName": cluster,
        "region": region,
        "vpcId": vpc_id,
        "replicaCount": 2,
        "podDisruptionBudget": {"maxUnavailable": 1},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "enableServiceMutatorWebhook": False,
        "serviceAccount": {
            "create": True,
            "name": load_balancer_controller.SERVICE_ACCOUNT,
            "annotations": {"eks.amazonaws.com/role-arn": role_arn},
        },
    }


def mpi_operator_image_transform(image: str) -> Callable[[pulumi.ResourceTransformArgs], Any]:
    """A Pulumi transform (applied to the children of the release manifest) that runs the
    operator's container from `image` instead of the manifest's Docker Hub image."""
    namespace, deployment, container = MPI_OPERATOR_DEPLOYMENT

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        props: dict[str, Any] = dict(args.props)
        meta = props.get("metadata") or {}
        if props.get("kind") != "Deployment" or (meta.get("namespace"), meta.get("name")) != (namespace, deployment):
            return None
        new = copy.deepcopy(props)
        for c in new["spec"]["template"]["spec"]["containers"]:
            if c.get("name") == container:
                c["image"] = image
        return pulumi.ResourceTransformResult(props=new, opts=args.opts)

    return transform


# CoreDNS runs two replicas; keep one up through node drains and upgrades (EKS add-on
# configuration values of coredns).
COREDNS_CONFIGURATION = json.dumps(
    {"replicaCount": 2, "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1}}, sort_keys=True
)


def cloudwatch_observability_configuration(
    container_logs: bool, agents: Sequence[Mapping[str, Any]] | None = None
) -> str:
    """The amazon-cloudwatch-observability add-on's configuration values (a JSON string): every
    other value stays the chart's (6.4.0). Its own DCGM exporter and Neuron monitor stay on: they
    are the one exporter of GPU and Neuron health metrics on these nodes, feeding Container
    Insights (the chart places them on every GPU and Neuron type of the catalog, tolerating every
    taint). Fluent Bit ships only when asked, into the stack's own log groups (infra.addons).
    `agents`: the chart's agents and the serving scraper (infra.metrics), when the stack scrapes."""
    values: dict[str, Any] = {"containerLogs": {"enabled": container_logs}}
    if agents:
        values["agents"] = list(agents)
    return json.dumps(values, sort_keys=True)
