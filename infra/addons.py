"""Cluster add-ons: EKS managed add-ons (node monitoring agent included), device plugins, GPU
health metrics, the FSx CSI driver, the MPI operator and Kueue.

Every Helm release goes only where it belongs. Node selectors and tolerations come from the
node-group catalog (`NodeGroupFacts`), never typed by hand, and a release is declared only
when a node group needs it: no NVIDIA plugin on a Trainium-only stack, and the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra import catalog
from infra.cluster import Cluster
from infra.config import StackConfig
from infra.iam import service_trust_policy
from infra.platform import WORKLOADS_NAMESPACE, NodeGroupFacts
from infra.queues import kueue_manager_config

SYSTEM_NAMESPACE = "kube-system"
FSX_CSI_CONTROLLER_SA = "fsx-csi-controller-sa"
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"
CLOUDWATCH_AGENT_SA = "cloudwatch-agent"
SYSTEM_NODE_SELECTOR = {catalog.NODE_GROUP_LABEL: "system"}


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
KUEUE_NAMESPACE = "kueue-system"
DCGM_EXPORTER = HelmChart("dcgm-exporter", "dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts")


def mpi_operator_manifest_url(version: str) -> str:
    """The operator's single-file install manifest of a release (kubeflow/mpi-operator README)."""
    return f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{version}/deploy/v2beta1/mpi-operator.yaml"


# --------------------------------------------------------------------------- placement (pure)


def tolerations_for(groups: Iterable[NodeGroupFacts]) -> list[dict[str, str]]:
    """Exactly the taints of the node groups served, each once, in a stable order."""
    seen: dict[tuple[str, str, str], dict[str, str]] = {}
    for g in groups:
        for t in g.taints:
            seen.setdefault((t.key, t.value, t.effect), t.toleration())
    return [seen[k] for k in sorted(seen)]


def efa_groups(groups: Iterable[NodeGroupFacts]) -> list[NodeGroupFacts]:
    return [g for g in groups if g.efa_count > 0]


def accelerator_groups(groups: Iterable[NodeGroupFacts], accelerator: catalog.Accelerator) -> list[NodeGroupFacts]:
    return [g for g in groups if g.accelerator == accelerator]


def efa_device_plugin_values(groups: Sequence[NodeGroupFacts]) -> dict[str, Any]:
    """EFA nodes only: elsewhere the plugin crash-loops with "No devices found" (FACTS.md)."""
    return {"nodeSelector": {catalog.EFA_LABEL: "true"}, "tolerations": tolerations_for(groups)}


def nvidia_device_plugin_values(groups: Sequence[NodeGroupFacts]) -> dict[str, Any]:
    """GPU nodes only. Our nodes carry `nvidia.com/gpu.present=true`, which the chart's default
    affinity selects on when node-feature-discovery is not installed."""
    return {
        "nodeSelector": {catalog.ACCELERATOR_LABEL: "nvidia"},
        "tolerations": tolerations_for(groups),
    }


def neuron_values(groups: Sequence[NodeGroupFacts], scheduler: bool) -> dict[str, Any]:
    """Device plugin and node problem detector on Neuron nodes; the scheduler extension (a
    Deployment) on system nodes. The detector only reports (`NeuronHealth`): EKS node
    auto-repair is the one component that remediates (FACTS.md: not two)."""
    on_neuron = {"nodeSelector": {catalog.ACCELERATOR_LABEL: "neuron"}, "tolerations": tolerations_for(groups)}
    return {
        "devicePlugin": dict(on_neuron),
        "npd": {**on_neuron, "enabled": True, "nodeRecovery": {"enabled": False}},
        "scheduler": {
            "enabled": scheduler,
            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
            "customScheduler": {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)},
        },
    }


def dcgm_exporter_values(groups: Sequence[NodeGroupFacts]) -> dict[str, Any]:
    """GPU health metrics (XIDs, ECC, NVLink, thermals) on GPU nodes only. It only exports:
    EKS node auto repair, fed by the node monitoring agent, is the one component that
    remediates. No ServiceMonitor: the stack installs no Prometheus operator."""
    return {
        "nodeSelector": {catalog.ACCELERATOR_LABEL: "nvidia"},
        "tolerations": tolerations_for(groups),
        "serviceMonitor": {"enabled": False},
    }


def kueue_values(manager_config: str) -> dict[str, Any]:
    """The Kueue controller on system nodes with our configuration (MPIJob integration,
    all-or-nothing admission)."""
    return {
        "controllerManager": {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "replicas": 1},
        "managerConfig": {"controllerManagerConfigYaml": manager_config},
    }


def fsx_csi_values(groups: Sequence[NodeGroupFacts], controller_role_arn: str) -> dict[str, Any]:
    """Controller (two replicas) on system nodes with its IRSA role; the node plugin on every
    node, accelerated ones included (that is where jobs mount `/shared`)."""
    return {
        "controller": {
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


def fsx_csi_controller_policy(file_system_arn: str) -> str:
    """Least privilege for a statically provisioned file system: describe, and grow this one
    file system (storage scaling); no create or delete."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "Describe", "Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"},
                {
                    "Sid": "ScaleSharedFileSystem",
                    "Effect": "Allow",
                    "Action": ["fsx:UpdateFileSystem"],
                    "Resource": file_system_arn,
                },
            ],
        },
        sort_keys=True,
    )


def irsa_trust_policy(oidc_provider_arn: str, oidc_provider_url: str, namespace: str, service_account: str) -> str:
    """Trust one Kubernetes service account of this cluster through its OIDC provider."""
    issuer = oidc_provider_url.removeprefix("https://")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": oidc_provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                            f"{issuer}:aud": "sts.amazonaws.com",
                        }
                    },
                }
            ],
        },
        sort_keys=True,
    )


POD_IDENTITY_TRUST = service_trust_policy("pods.eks.amazonaws.com", tag_session=True)

# CoreDNS runs two replicas; keep one up through node drains and upgrades.
COREDNS_CONFIGURATION = json.dumps(
    {"replicaCount": 2, "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1}}, sort_keys=True
)


# --------------------------------------------------------------------------- component


class ClusterAddons(pulumi.ComponentResource):
    """EKS managed add-ons, the workloads namespace, device plugins, FSx CSI driver and MPI operator."""

    namespace: k8s.core.v1.Namespace
    releases: dict[str, k8s.helm.v3.Release]
    mpi_operator: pulumi.Resource
    eks_addons: dict[str, aws.eks.Addon]
    kueue: k8s.helm.v3.Release

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        cluster: Cluster,
        groups: Sequence[NodeGroupFacts],
        file_system_arn: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llm-training-eks:infra:ClusterAddons", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        a = cfg.addons
        cluster_name = cfg.cluster.name
        # Pods need somewhere to run before their add-on or release can become ready.
        on_nodes = pulumi.ResourceOptions(parent=self, depends_on=[cluster.system_node_group])
        k8s_opts = pulumi.ResourceOptions(
            parent=self, provider=cluster.provider, depends_on=[cluster.system_node_group]
        )

        # ---- EKS managed add-ons
        v = a.eks_addon_versions
        self.eks_addons = {}

        def addon(addon_name: str, version: str | None, **kwargs: Any) -> aws.eks.Addon:
            res = aws.eks.Addon(
                f"{name}-{addon_name}",
                cluster_name=cluster.name,
                addon_name=addon_name,
                addon_version=version,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="PRESERVE",
                tags=cfg.tags or None,
                **kwargs,
            )
            self.eks_addons[addon_name] = res
            return res

        addon("vpc-cni", v.vpc_cni, opts=child)
        addon("kube-proxy", v.kube_proxy, opts=child)
        pod_identity = addon("eks-pod-identity-agent", v.pod_identity_agent, opts=child)
        addon("coredns", v.coredns, configuration_values=COREDNS_CONFIGURATION, opts=on_nodes)
        # Node health: sets AcceleratedHardwareReady, NetworkingReady, KernelReady, ... on every
        # node, which EKS node auto repair acts on (the one component that remediates).
        addon("eks-node-monitoring-agent", v.node_monitoring_agent, opts=on_nodes)

        cw_role = aws.iam.Role(
            f"{name}-cloudwatch",
            assume_role_policy=POD_IDENTITY_TRUST,
            description=f"CloudWatch agent (Container Insights) of {cluster_name}",
            opts=child,
        )
        cw_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cloudwatch",
            role=cw_role.name,
            policy_arn="arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy",
            opts=child,
        )
        # Container Insights with enhanced observability; it collects Neuron and EFA metrics too.
        addon(
            "amazon-cloudwatch-observability",
            v.cloudwatch_observability,
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=cw_role.arn, service_account=CLOUDWATCH_AGENT_SA)
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.system_node_group, pod_identity, cw_policy]),
        )

        # ---- the workloads namespace
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-workloads",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=WORKLOADS_NAMESPACE, labels={"app.kubernetes.io/part-of": "llm-training-eks"}
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider),
        )

        # ---- Helm releases, only where a node group needs them
        self.releases = {}

        def release(
            chart: HelmChart, version: str, values: pulumi.Input[dict[str, Any]], namespace: str = SYSTEM_NAMESPACE
        ) -> k8s.helm.v3.Release:
            res = k8s.helm.v3.Release(
                f"{name}-{chart.release}",
                name=chart.release,
                chart=chart.chart,
                version=version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
                namespace=namespace,
                create_namespace=True if namespace != SYSTEM_NAMESPACE else None,
                values=values,
                atomic=True,
                cleanup_on_fail=True,
                opts=k8s_opts,
            )
            self.releases[chart.release] = res
            return res

        efa = efa_groups(groups)
        if efa:
            release(EFA_DEVICE_PLUGIN, a.efa_device_plugin_chart, efa_device_plugin_values(efa))
        nvidia = accelerator_groups(groups, "nvidia")
        if nvidia:
            release(NVIDIA_DEVICE_PLUGIN, a.nvidia_device_plugin_chart, nvidia_device_plugin_values(nvidia))
            release(DCGM_EXPORTER, a.dcgm_exporter_chart, dcgm_exporter_values(nvidia))
        neuron = accelerator_groups(groups, "neuron")
        if neuron:
            release(NEURON, a.neuron_chart, neuron_values(neuron, a.neuron_scheduler))

        # Queues: the Kueue controller and webhook (MPIJob integration). Its CRDs come with the
        # chart, so the queue objects (infra.queues) are created after it is ready.
        self.kueue = release(KUEUE, a.kueue_chart, kueue_values(kueue_manager_config(cfg)), KUEUE_NAMESPACE)

        fsx_role = aws.iam.Role(
            f"{name}-fsx-csi",
            assume_role_policy=pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_provider_url).apply(
                lambda o: irsa_trust_policy(o[0], o[1], SYSTEM_NAMESPACE, FSX_CSI_CONTROLLER_SA)
            ),
            description=f"FSx CSI controller of {cluster_name}",
            opts=child,
        )
        fsx_policy = aws.iam.RolePolicy(
            f"{name}-fsx-csi",
            role=fsx_role.id,
            policy=pulumi.Output.from_input(file_system_arn).apply(fsx_csi_controller_policy),
            opts=child,
        )
        fsx = k8s.helm.v3.Release(
            f"{name}-{FSX_CSI_DRIVER.release}",
            name=FSX_CSI_DRIVER.release,
            chart=FSX_CSI_DRIVER.chart,
            version=a.fsx_csi_driver_chart,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=FSX_CSI_DRIVER.repo),
            namespace=SYSTEM_NAMESPACE,
            values=fsx_role.arn.apply(lambda arn: fsx_csi_values(groups, arn)),
            atomic=True,
            cleanup_on_fail=True,
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[fsx_policy])),
        )
        self.releases[FSX_CSI_DRIVER.release] = fsx

        # ---- MPI operator: the upstream release manifest, applied server-side (the MPIJob CRD
        # is over 256 KB, too big for client-side apply's annotation; the provider has
        # enable_server_side_apply). yaml/v2 orders the CRD first and awaits every object, so a
        # resource that depends on this one is created only once the operator runs.
        self.mpi_operator = k8s.yaml.v2.ConfigFile(
            f"{name}-mpi-operator",
            file=mpi_operator_manifest_url(a.mpi_operator_version),
            opts=k8s_opts,
        )

        self.register_outputs({"releases": {k: r.status for k, r in self.releases.items()}})
