"""Cluster add-ons: EKS managed add-ons (node monitoring agent included), device plugins, GPU
health metrics, the FSx CSI driver, the MPI operator and Kueue.

A Helm release is declared only when a node group needs it: no NVIDIA plugin on a
Trainium-only stack, and the reverse. What each chart gets is in `infra.charts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from config.addons import AddonsConfig
from facts.names import KUEUE_NAMESPACE, SYSTEM_NAMESPACE, WORKLOADS_NAMESPACE, app_labels, component_type
from infra import charts
from infra.charts import HelmChart
from infra.cluster import Cluster
from infra.context import StackContext
from infra.iam import POD_IDENTITY_TRUST, fsx_csi_controller_policy, irsa_trust_policy
from infra.platform import NodeGroupFacts

CLOUDWATCH_AGENT_SA = "cloudwatch-agent"


class ClusterAddons(pulumi.ComponentResource):
    """EKS managed add-ons, the workloads namespace, device plugins, FSx CSI driver and MPI operator.

    Two halves, one per layer: `declare_aws` (through the AWS API) and `declare_kubernetes`
    (through the Kubernetes API). An all-in-one stack declares both on one component; a
    layered stack declares its half on a component of the same name, so resource names and
    URNs are the same either way. `finish` registers the outputs.
    """

    namespace: k8s.core.v1.Namespace
    releases: dict[str, k8s.helm.v3.Release]
    mpi_operator: pulumi.Resource
    eks_addons: dict[str, aws.eks.Addon]
    kueue: k8s.helm.v3.Release
    fsx_csi_role_arn: pulumi.Output[str]
    """The FSx CSI controller's IAM role (aws layer), which the driver's release names."""
    fsx_csi_policy: aws.iam.RolePolicy

    def __init__(
        self,
        name: str,
        addons: AddonsConfig,
        ctx: StackContext,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "ClusterAddons"), name, None, opts)
        self._name = name
        self._ctx = ctx
        self._config = addons
        self.eks_addons = {}
        self.releases = {}

    def declare_aws(self, cluster: Cluster, file_system_arn: pulumi.Input[str]) -> None:
        """The aws-layer half: EKS managed add-ons and the IAM roles of add-on service accounts."""
        self._cluster = cluster
        self._eks_managed_addons(self._config)
        self.fsx_csi_role_arn, self.fsx_csi_policy = self._fsx_csi_role(file_system_arn)

    def declare_kubernetes(
        self,
        provider: k8s.Provider,
        groups: Sequence[NodeGroupFacts],
        fsx_csi_role_arn: pulumi.Input[str],
        kueue_config: str,
        nodes_ready: Sequence[pulumi.Resource] = (),
        role_ready: Sequence[pulumi.Resource] = (),
    ) -> None:
        """The cluster-layer half: namespace, device plugins, Kueue, FSx CSI driver, MPI operator.

        `nodes_ready` (the system node group) and `role_ready` (the FSx CSI role's policy) are
        waited for when one stack declares both halves; a cluster-layer stack finds them built.
        """
        addons = self._config
        name = self._name
        # Pods need somewhere to run before their add-on or release can become ready.
        self._k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(nodes_ready))
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-workloads",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=WORKLOADS_NAMESPACE, labels=app_labels()),
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self._device_plugins(addons, groups)
        # Queues: the Kueue controller and webhook (MPIJob integration). Its CRDs come with the
        # chart, so the queue objects (infra.queues) are created after it is ready.
        self.kueue = self._release(charts.KUEUE, addons.kueue_chart, charts.kueue_values(kueue_config), KUEUE_NAMESPACE)
        self._release(
            charts.FSX_CSI_DRIVER,
            addons.fsx_csi_driver_chart,
            pulumi.Output.from_input(fsx_csi_role_arn).apply(lambda arn: charts.fsx_csi_values(groups, arn)),
            depends_on=role_ready,
        )
        # MPI operator: the upstream release manifest, applied server-side (the MPIJob CRD is
        # over 256 KB, too big for client-side apply's annotation; the provider has
        # enable_server_side_apply). yaml/v2 orders the CRD first and awaits every object, so a
        # resource that depends on this one is created only once the operator runs.
        self.mpi_operator = k8s.yaml.v2.ConfigFile(
            f"{name}-mpi-operator",
            file=charts.mpi_operator_manifest_url(addons.mpi_operator_version),
            opts=self._k8s_opts,
        )

    def finish(self) -> None:
        """Register the component's outputs, once both halves (or the one of this layer) are declared."""
        self.register_outputs({"releases": {k: r.status for k, r in self.releases.items()}})

    def _addon(
        self, addon_name: str, version: str | None, opts: pulumi.ResourceOptions, **kwargs: Any
    ) -> aws.eks.Addon:
        res = aws.eks.Addon(
            f"{self._name}-{addon_name}",
            cluster_name=self._cluster.name,
            addon_name=addon_name,
            addon_version=version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=dict(self._ctx.tags) or None,
            opts=opts,
            **kwargs,
        )
        self.eks_addons[addon_name] = res
        return res

    def _eks_managed_addons(self, addons: AddonsConfig) -> None:
        v = addons.eks_addon_versions
        child = pulumi.ResourceOptions(parent=self)
        on_nodes = pulumi.ResourceOptions(parent=self, depends_on=[self._cluster.system_node_group])
        self._addon("vpc-cni", v.vpc_cni, child)
        self._addon("kube-proxy", v.kube_proxy, child)
        pod_identity = self._addon("eks-pod-identity-agent", v.pod_identity_agent, child)
        self._addon("coredns", v.coredns, on_nodes, configuration_values=charts.COREDNS_CONFIGURATION)
        # Node health: sets AcceleratedHardwareReady, NetworkingReady, KernelReady, ... on every
        # node, which EKS node auto repair acts on (the one component that remediates).
        self._addon("eks-node-monitoring-agent", v.node_monitoring_agent, on_nodes)

        cw_role = aws.iam.Role(
            f"{self._name}-cloudwatch",
            assume_role_policy=POD_IDENTITY_TRUST,
            description=f"CloudWatch agent (Container Insights) of {self._ctx.cluster_name}",
            opts=child,
        )
        cw_policy = aws.iam.RolePolicyAttachment(
            f"{self._name}-cloudwatch",
            role=cw_role.name,
            policy_arn="arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy",
            opts=child,
        )
        # Container Insights with enhanced observability; it collects Neuron and EFA metrics too.
        self._addon(
            "amazon-cloudwatch-observability",
            v.cloudwatch_observability,
            pulumi.ResourceOptions(parent=self, depends_on=[self._cluster.system_node_group, pod_identity, cw_policy]),
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=cw_role.arn, service_account=CLOUDWATCH_AGENT_SA)
            ],
        )

    def _release(
        self,
        chart: HelmChart,
        version: str,
        values: pulumi.Input[dict[str, Any]],
        namespace: str = SYSTEM_NAMESPACE,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> k8s.helm.v3.Release:
        res = k8s.helm.v3.Release(
            f"{self._name}-{chart.release}",
            name=chart.release,
            chart=chart.chart,
            version=version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
            namespace=namespace,
            create_namespace=True if namespace != SYSTEM_NAMESPACE else None,
            values=values,
            atomic=True,
            cleanup_on_fail=True,
            opts=pulumi.ResourceOptions.merge(self._k8s_opts, pulumi.ResourceOptions(depends_on=list(depends_on))),
        )
        self.releases[chart.release] = res
        return res

    def _device_plugins(self, addons: AddonsConfig, groups: Sequence[NodeGroupFacts]) -> None:
        """Device plugins (and GPU health metrics) only where a node group has the hardware."""
        efa = charts.efa_groups(groups)
        if efa:
            self._release(
                charts.EFA_DEVICE_PLUGIN, addons.efa_device_plugin_chart, charts.efa_device_plugin_values(efa)
            )
        nvidia = charts.accelerator_groups(groups, "nvidia")
        if nvidia:
            self._release(
                charts.NVIDIA_DEVICE_PLUGIN,
                addons.nvidia_device_plugin_chart,
                charts.nvidia_device_plugin_values(nvidia),
            )
            self._release(charts.DCGM_EXPORTER, addons.dcgm_exporter_chart, charts.dcgm_exporter_values(nvidia))
        neuron = charts.accelerator_groups(groups, "neuron")
        if neuron:
            self._release(charts.NEURON, addons.neuron_chart, charts.neuron_values(neuron, addons.neuron_scheduler))

    def _fsx_csi_role(self, file_system_arn: pulumi.Input[str]) -> tuple[pulumi.Output[str], aws.iam.RolePolicy]:
        """The FSx CSI controller's IRSA role, which may describe and grow this file system."""
        child = pulumi.ResourceOptions(parent=self)
        cluster = self._cluster
        role = aws.iam.Role(
            f"{self._name}-fsx-csi",
            assume_role_policy=pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_provider_url).apply(
                lambda o: irsa_trust_policy(o[0], o[1], SYSTEM_NAMESPACE, charts.FSX_CSI_CONTROLLER_SA)
            ),
            description=f"FSx CSI controller of {self._ctx.cluster_name}",
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{self._name}-fsx-csi",
            role=role.id,
            policy=pulumi.Output.from_input(file_system_arn).apply(fsx_csi_controller_policy),
            opts=child,
        )
        return role.arn, policy
