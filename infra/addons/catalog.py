"""The add-on catalog: one entry per cluster add-on, as data.

An entry says where the add-on comes from (an EKS managed add-on, a Helm chart, a release
manifest), the config key that pins its version, its namespace, the IAM role its service
account assumes, the function that renders its values, its layer (aws: EKS add-ons and IAM
roles; cluster: Helm releases and manifests) and which node kinds need it. `infra.addons.
components` builds one small component per entry; `stack.py` picks the entries a stack wants
(`wanted`). Adding an add-on is one entry here plus its values function in `infra.charts`
(docs/contributing.md, "Checklists": add an add-on).
"""

# size: the catalog is data read side by side: the entry kinds, every entry and the switches that pick them

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pulumi

from config.addons import AddonsConfig, EksAddonVersions
from facts import load_balancer_controller
from facts.names import CLOUDWATCH_NAMESPACE, KUEUE_NAMESPACE, SYSTEM_NAMESPACE
from facts.nodegroups import NodeGroup
from infra import charts, metrics
from infra.charts import HelmChart
from infra.iam import fsx_csi_controller_policy, neuron_health_policy

Layer = Literal["aws", "cluster"]
Need = Literal["always", "efa", "nvidia", "neuron"]
"""Which node groups an add-on serves: every one (`always`), or those with EFA, NVIDIA GPUs or
Neuron devices; an add-on that serves none is not installed."""

PREFIX = "addons"
"""The prefix of every add-on resource's name (the name of the one component that held them
all before the catalog; kept so no live resource is replaced)."""

LOAD_BALANCER_CONTROLLER_SWITCH = "addons.loadBalancerController"
LEADER_WORKER_SET_SWITCH = "addons.leaderWorkerSet"
METRICS_SERVER_SWITCH = "addons.metricsServer"

# The CloudWatch Observability add-on turns on Container Insights and Application Signals; its
# agent needs both policies (EKS user guide, amazon-cloudwatch-observability, required IAM
# permissions).
CLOUDWATCH_AGENT_SA = "cloudwatch-agent"
CLOUDWATCH_POLICIES = {
    "cloudwatch": "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy",
    "xray": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
}
# NetworkPolicy enforcement by the VPC CNI's network policy agent (EKS user guide,
# cni-network-policy-configure: the add-on's configuration value, a string; VPC CNI >= 1.14,
# kernel >= 5.10; tests/upstream/aws-eks-network-policy-2024-12.yaml). Without it the
# NetworkPolicies of the tenant namespaces are stored and never enforced.
VPC_CNI_CONFIGURATION = json.dumps({"enableNetworkPolicy": "true"})


# --------------------------------------------------------------------------- what entries read


@dataclass(frozen=True)
class RoleInputs:
    """What an add-on role's policy is made from (aws layer)."""

    cluster_name: str
    file_system_arn: pulumi.Input[str]


@dataclass(frozen=True)
class ReleaseInputs:
    """What a Helm add-on's values are made from (cluster layer): the stack's add-on config, the
    node groups the add-on serves, its version and the IAM role the aws layer made for it."""

    config: AddonsConfig
    groups: Sequence[NodeGroup]
    version: str
    region: str
    kubernetes_version: str
    kueue_config: str
    cluster_name: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    role_arn: pulumi.Input[str] | None = None


@dataclass(frozen=True)
class EksInputs:
    """What an EKS managed add-on's configuration values are made from (aws layer)."""

    config: AddonsConfig
    cluster_name: str
    region: str
    scrape: Sequence[str] | None
    """The serving namespaces the CloudWatch add-on's scraper reads; None: no scraper."""


# --------------------------------------------------------------------------- the entry kinds


@dataclass(frozen=True)
class IrsaRole:
    """An IAM role one service account assumes through the cluster's OIDC provider (IRSA), with
    an inline policy. Made in the aws layer; its ARN goes to the cluster layer in `ClusterInputs`."""

    name: str
    """The role's key in `ClusterInputs.role_arns` and the suffix of its resource names."""
    namespace: str
    service_account: str
    what: str
    policy: Callable[[RoleInputs], pulumi.Input[str]]


@dataclass(frozen=True)
class PodIdentityRole:
    """An IAM role an EKS add-on's service account gets through EKS Pod Identity, with AWS
    managed policies (short name -> ARN; the short name is the attachment's resource suffix)."""

    name: str
    namespace: str
    service_account: str
    what: str
    managed_policies: Mapping[str, str]


@dataclass(frozen=True)
class EksManaged:
    """An EKS managed add-on, its version in `addons.eksAddonVersions` (or facts/eks_addons.py)."""

    addon_name: str


@dataclass(frozen=True)
class Manifest:
    """A release manifest applied as it is (yaml/v2), from the URL of its version."""

    url: Callable[[str], str]
    transforms: Callable[[AddonsConfig], list[Any]] = lambda config: []
    """Pulumi transforms of the manifest's objects the stack's config asks for."""


@dataclass(frozen=True)
class Addon:
    """One cluster add-on."""

    name: str
    source: HelmChart | EksManaged | Manifest
    layer: Layer
    version_key: str
    """The field of `AddonsConfig` (or of `EksAddonVersions`, for an EKS add-on) pinning its version."""
    namespace: str = SYSTEM_NAMESPACE
    needs: Need = "always"
    switch: str | None = None
    """A config switch that must be on as well (`addons.loadBalancerController`, ...)."""
    role: IrsaRole | PodIdentityRole | None = None
    values: Callable[[ReleaseInputs], pulumi.Input[dict[str, Any]]] | None = None
    """A Helm add-on's values (the pure functions of `infra.charts` behind it)."""
    configuration: Callable[[EksInputs], str] | None = None
    """An EKS add-on's configuration values (a JSON string)."""
    after_nodes: bool = True
    """Created once the system node group exists (its pods need somewhere to run)."""
    after: tuple[str, ...] = ()
    """Other add-ons of the same layer it is created after."""
    namespace_first: tuple[str, str] | None = None
    """(resource suffix, name) of a namespace the chart uses but does not create."""

    @property
    def config_key(self) -> str:
        """The stack-file key of its version pin, e.g. `addons.kueueChart`."""
        if isinstance(self.source, EksManaged):
            return f"addons.eksAddonVersions.{EksAddonVersions.model_fields[self.version_key].alias}"
        return f"addons.{AddonsConfig.model_fields[self.version_key].alias}"

    def serves(self, groups: Sequence[NodeGroup]) -> list[NodeGroup]:
        """The node groups it serves (placement of its node-side pods)."""
        if self.needs == "always":
            return list(groups)
        if self.needs == "efa":
            return charts.efa_groups(groups)
        return charts.accelerator_groups(groups, self.needs)

    def wanted(self, groups: Sequence[NodeGroup], switches: Mapping[str, bool]) -> bool:
        """Whether a stack with these node groups and config switches installs it."""
        served = self.needs == "always" or bool(self.serves(groups))
        return served and (self.switch is None or switches.get(self.switch, False))


def wanted(entries: Sequence[Addon], groups: Sequence[NodeGroup], switches: Mapping[str, bool]) -> list[Addon]:
    """The entries a stack installs, in catalog order."""
    return [a for a in entries if a.wanted(groups, switches)]


def config_switches(config: AddonsConfig) -> dict[str, bool]:
    """Every true-or-false `addons` key as a switch (`addons.metricsServer` -> its value): an entry
    whose switch is such a key needs nothing more to be turned on. An unset key (None, such as
    `addons.leaderWorkerSet`) is decided by the layer (`cluster_entries`)."""
    return {
        f"addons.{field.alias}": value
        for name, field in AddonsConfig.model_fields.items()
        if isinstance(value := getattr(config, name), bool)
    }


def aws_entries(groups: Sequence[NodeGroup], config: AddonsConfig) -> list[Addon]:
    """The entries whose aws-layer part (an EKS add-on, an IAM role) a stack with these node
    groups declares."""
    return wanted(CATALOG, groups, config_switches(config))


def cluster_entries(
    groups: Sequence[NodeGroup], role_arns: Mapping[str, Any], leader_worker_set: bool, config: AddonsConfig
) -> list[Addon]:
    """The cluster layer's entries; the Load Balancer Controller's chart goes where the aws layer
    made its role (`role_arns`, the hand-over)."""
    switches = {
        **config_switches(config),
        LOAD_BALANCER_CONTROLLER_SWITCH: LOAD_BALANCER_CONTROLLER_ROLE.name in role_arns,
        LEADER_WORKER_SET_SWITCH: leader_worker_set,
    }
    return wanted(CLUSTER_ADDONS, groups, switches)


# --------------------------------------------------------------------------- values adapters


def _with_role(a: ReleaseInputs, render: Callable[[str], dict[str, Any]]) -> pulumi.Output[dict[str, Any]]:
    assert a.role_arn is not None, "an add-on with a role gets its ARN (infra.layers checks the hand-over)"
    return pulumi.Output.from_input(a.role_arn).apply(render)


def _neuron_values(a: ReleaseInputs) -> pulumi.Input[dict[str, Any]]:
    scheduler = a.config.neuron_scheduler
    return _with_role(a, lambda arn: charts.neuron_values(a.groups, scheduler, arn, a.kubernetes_version))


def _fsx_values(a: ReleaseInputs) -> pulumi.Input[dict[str, Any]]:
    return _with_role(a, lambda arn: charts.fsx_csi_values(a.groups, arn, a.region))


def _load_balancer_controller_values(a: ReleaseInputs) -> pulumi.Input[dict[str, Any]]:
    return pulumi.Output.all(a.role_arn, a.cluster_name, a.vpc_id).apply(
        lambda v: charts.load_balancer_controller_values(v[1], a.region, v[2], v[0])
    )


def _cloudwatch_configuration(e: EksInputs) -> str:
    agents = None if e.scrape is None else metrics.agents(e.cluster_name, e.region, e.scrape)
    return charts.cloudwatch_observability_configuration(e.config.observability.container_logs, agents)


# --------------------------------------------------------------------------- the catalog

FSX_CSI_ROLE = IrsaRole(
    "fsx-csi",
    SYSTEM_NAMESPACE,
    charts.FSX_CSI_CONTROLLER_SA,
    "FSx CSI controller",
    lambda r: pulumi.Output.from_input(r.file_system_arn).apply(fsx_csi_controller_policy),
)
# The node problem detector's health container publishes CloudWatch metrics.
NEURON_HEALTH_ROLE = IrsaRole(
    "neuron-health",
    charts.NEURON_HEALTH_NAMESPACE,
    charts.NEURON_NPD_SA,
    "Neuron health",
    lambda r: neuron_health_policy(),
)
LOAD_BALANCER_CONTROLLER_ROLE = IrsaRole(
    "load-balancer-controller",
    SYSTEM_NAMESPACE,
    load_balancer_controller.SERVICE_ACCOUNT,
    "AWS Load Balancer Controller",
    lambda r: json.dumps(load_balancer_controller.iam_policy(r.cluster_name)),
)

EKS_ADDONS: tuple[Addon, ...] = (
    Addon(
        "vpc-cni",
        EksManaged("vpc-cni"),
        "aws",
        "vpc_cni",
        after_nodes=False,
        configuration=lambda e: VPC_CNI_CONFIGURATION,
    ),
    Addon("kube-proxy", EksManaged("kube-proxy"), "aws", "kube_proxy", after_nodes=False),
    Addon(
        "eks-pod-identity-agent", EksManaged("eks-pod-identity-agent"), "aws", "pod_identity_agent", after_nodes=False
    ),
    Addon("coredns", EksManaged("coredns"), "aws", "coredns", configuration=lambda e: charts.COREDNS_CONFIGURATION),
    # Node health: sets AcceleratedHardwareReady, NetworkingReady, KernelReady, ... on every
    # node, which EKS node auto repair acts on (the one component that remediates).
    Addon("eks-node-monitoring-agent", EksManaged("eks-node-monitoring-agent"), "aws", "node_monitoring_agent"),
    # Container Insights with enhanced observability (it collects Neuron and EFA metrics too)
    # and Application Signals, both on by default in the add-on; its log groups are the stack's
    # (components.ContainerInsightsLogs), made before the cluster.
    Addon(
        "amazon-cloudwatch-observability",
        EksManaged("amazon-cloudwatch-observability"),
        "aws",
        "cloudwatch_observability",
        namespace=CLOUDWATCH_NAMESPACE,
        after=("eks-pod-identity-agent",),
        role=PodIdentityRole(
            "cloudwatch",
            CLOUDWATCH_NAMESPACE,
            CLOUDWATCH_AGENT_SA,
            "CloudWatch agent (Container Insights)",
            CLOUDWATCH_POLICIES,
        ),
        configuration=_cloudwatch_configuration,
    ),
)
"""The EKS managed add-ons (aws layer), in the order they are declared."""

CLUSTER_ADDONS: tuple[Addon, ...] = (
    # Device plugins only where a node group has the hardware. GPU and Neuron health metrics come
    # from the CloudWatch add-on's own DCGM exporter and Neuron monitor: one exporter per node.
    Addon(
        "efa-device-plugin",
        charts.EFA_DEVICE_PLUGIN,
        "cluster",
        "efa_device_plugin_chart",
        needs="efa",
        values=lambda a: charts.efa_device_plugin_values(a.groups),
    ),
    Addon(
        "nvidia-device-plugin",
        charts.NVIDIA_DEVICE_PLUGIN,
        "cluster",
        "nvidia_device_plugin_chart",
        needs="nvidia",
        values=lambda a: charts.nvidia_device_plugin_values(a.groups),
    ),
    # Device plugin, node problem detector, scheduler extension if asked. The chart puts the
    # detector in a namespace it does not create (the Neuron SDK's guide creates it first);
    # without it the install fails and the atomic release rolls back the device plugin too.
    Addon(
        "neuron",
        charts.NEURON,
        "cluster",
        "neuron_chart",
        needs="neuron",
        role=NEURON_HEALTH_ROLE,
        values=_neuron_values,
        namespace_first=("neuron-health", charts.NEURON_HEALTH_NAMESPACE),
    ),
    # The Kueue controller and webhook (MPIJob integration). Its CRDs come with the chart, so
    # the queue objects (infra.queues) are created after it is ready.
    Addon(
        "kueue",
        charts.KUEUE,
        "cluster",
        "kueue_chart",
        namespace=KUEUE_NAMESPACE,
        values=lambda a: charts.kueue_values(a.kueue_config),
    ),
    # CRD in the chart; Kueue 0.19.2 sets up its integration once the API is served (WaitForAPI).
    Addon(
        "lws",
        charts.LWS,
        "cluster",
        "lws_chart",
        namespace=charts.LWS_NAMESPACE,
        switch=LEADER_WORKER_SET_SWITCH,
        values=lambda a: charts.lws_values(a.version),
    ),
    Addon(
        "aws-fsx-csi-driver",
        charts.FSX_CSI_DRIVER,
        "cluster",
        "fsx_csi_driver_chart",
        role=FSX_CSI_ROLE,
        values=_fsx_values,
    ),
    Addon(
        "aws-load-balancer-controller",
        charts.AWS_LOAD_BALANCER_CONTROLLER,
        "cluster",
        "load_balancer_controller_chart",
        switch=LOAD_BALANCER_CONTROLLER_SWITCH,
        role=LOAD_BALANCER_CONTROLLER_ROLE,
        values=_load_balancer_controller_values,
    ),
    # The release manifest, applied server-side (the MPIJob CRD is over 256 KB, too big for
    # client-side apply); yaml/v2 orders the CRD first and awaits every object, so what depends
    # on it is created once the operator runs. Its image is on Docker Hub only; mpiOperatorImage
    # names a copy.
    Addon(
        "mpi-operator",
        Manifest(
            charts.mpi_operator_manifest_url,
            lambda c: [charts.mpi_operator_image_transform(c.mpi_operator_image)] if c.mpi_operator_image else [],
        ),
        "cluster",
        "mpi_operator_version",
    ),
    # The Metrics API (kubectl top, HorizontalPodAutoscalers) where a stack asks for it.
    Addon(
        "metrics-server",
        charts.METRICS_SERVER,
        "cluster",
        "metrics_server_chart",
        switch=METRICS_SERVER_SWITCH,
        values=lambda a: charts.metrics_server_values(),
    ),
)
"""The add-ons installed through the Kubernetes API (cluster layer), in the order they are declared."""

CATALOG: tuple[Addon, ...] = EKS_ADDONS + CLUSTER_ADDONS
