"""Cluster add-ons: EKS managed add-ons (node monitoring agent included), device plugins, GPU
health metrics, the FSx CSI driver, the MPI operator and Kueue.

A Helm release is declared only when a node group needs it: no NVIDIA plugin on a
Trainium-only stack, and the reverse. What each chart gets is in `infra.charts`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from config.addons import AddonsConfig
from facts import load_balancer_controller
from facts.names import (
    CLOUDWATCH_NAMESPACE,
    DEFAULT_QUEUE,
    KUEUE_NAMESPACE,
    SYSTEM_NAMESPACE,
    app_labels,
    component_type,
)
from facts.nodegroups import NodeGroup
from infra import charts, metrics, tenancy
from infra.charts import HelmChart
from infra.cluster import Cluster
from infra.context import StackContext
from infra.iam import fsx_csi_controller_policy, irsa_trust_policy, neuron_health_policy, pod_identity_trust_policy
from infra.tenancy import Tenant

CLOUDWATCH_AGENT_SA = "cloudwatch-agent"
# The CloudWatch Observability add-on turns on Container Insights and Application Signals; its
# agent needs both policies (EKS user guide, amazon-cloudwatch-observability, required IAM
# permissions).
CLOUDWATCH_POLICIES = {
    "cloudwatch": "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy",
    "xray": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
}
# The service accounts whose IAM roles the aws layer makes and the cluster layer names.
FSX_CSI_ROLE = "fsx-csi"
NEURON_HEALTH_ROLE = "neuron-health"
LOAD_BALANCER_CONTROLLER_ROLE = "load-balancer-controller"  # only with addons.loadBalancerController
# NetworkPolicy enforcement by the VPC CNI's network policy agent (EKS user guide,
# cni-network-policy-configure: the add-on's configuration value, a string; VPC CNI >= 1.14,
# kernel >= 5.10; tests/upstream/aws-eks-network-policy-2024-12.yaml). Without it the
# NetworkPolicies of the tenant namespaces are stored and never enforced.
VPC_CNI_CONFIGURATION = json.dumps({"enableNetworkPolicy": "true"})


def container_insights_log_group(cluster: str, kind: str) -> str:
    """The log group the CloudWatch add-on writes `kind` to: Fluent Bit's application, dataplane
    and host (chart 6.4.0 values), the agent's performance events (CloudWatch user guide)."""
    return f"/aws/containerinsights/{cluster}/{kind}"


class ClusterAddons(pulumi.ComponentResource):
    """EKS managed add-ons, the tenants' namespaces and NetworkPolicies, device plugins, FSx CSI
    driver and MPI operator.

    Two halves, one per layer: `declare_aws` (through the AWS API: EKS add-ons and the IAM
    roles of add-on service accounts) and `declare_kubernetes` (through the Kubernetes API).
    An all-in-one stack declares both on one component; a layered stack declares its half on a
    component of the same name, so resource names and URNs are the same either way. `finish`
    registers the outputs.
    """

    namespaces: dict[str, k8s.core.v1.Namespace]
    """Tenant (team, or `default`) -> its namespace."""
    network_policies: dict[str, list[k8s.networking.v1.NetworkPolicy]]
    """Tenant -> the NetworkPolicies of its namespace."""
    releases: dict[str, k8s.helm.v3.Release]
    mpi_operator: pulumi.Resource
    eks_addons: dict[str, aws.eks.Addon]
    kueue: k8s.helm.v3.Release
    role_arns: dict[str, pulumi.Output[str]]
    """Service-account role (FSX_CSI_ROLE, NEURON_HEALTH_ROLE) -> its IAM role ARN (aws layer)."""
    role_policies: list[aws.iam.RolePolicy]

    def __init__(
        self,
        name: str,
        addons: AddonsConfig,
        ctx: StackContext,
        opts: pulumi.ResourceOptions | None = None,
        scrape: Sequence[str] | None = None,
    ):
        """`scrape`: the serving namespaces the add-on's serving scraper reads (empty: every
        namespace), None: no scraper (infra.metrics)."""
        super().__init__(component_type("infra", "ClusterAddons"), name, None, opts)
        self._name = name
        self._ctx = ctx
        self._config = addons
        self._scrape = scrape
        self.eks_addons, self.releases, self.role_arns, self.namespaces, self.network_policies = {}, {}, {}, {}, {}
        self.role_policies = []
        self.log_groups: list[aws.cloudwatch.LogGroup] = []

    def declare_log_groups(self) -> list[aws.cloudwatch.LogGroup]:
        """The log groups the CloudWatch add-on writes to (/aws/containerinsights/<cluster>/...),
        owned by the stack with the configured retention. Left to the add-on, its Fluent Bit and
        agent create them without retention and they outlive `pulumi destroy`. Declare them before
        the cluster and make the cluster depend on them: a destroy then deletes them only after the
        cluster and every node are gone, when nothing can write to (and re-create) them."""
        obs, ctx = self._config.observability, self._ctx
        self.log_groups = [
            aws.cloudwatch.LogGroup(
                f"{self._name}-containerinsights-{kind}",
                name=container_insights_log_group(ctx.cluster_name, kind),
                retention_in_days=obs.log_retention_days,
                tags=ctx.owned_tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for kind in obs.log_groups(scrapes=self._scrape is not None)
        ]
        return self.log_groups

    def declare_aws(self, cluster: Cluster, groups: Sequence[NodeGroup], file_system_arn: pulumi.Input[str]) -> None:
        """The aws-layer half: EKS managed add-ons and the IAM roles of add-on service accounts."""
        self._cluster = cluster
        self._eks_managed_addons(self._config)
        self._role(
            FSX_CSI_ROLE,
            SYSTEM_NAMESPACE,
            charts.FSX_CSI_CONTROLLER_SA,
            "FSx CSI controller",
            pulumi.Output.from_input(file_system_arn).apply(fsx_csi_controller_policy),
        )
        if charts.accelerator_groups(groups, "neuron"):
            # The node problem detector's health container publishes CloudWatch metrics.
            self._role(
                NEURON_HEALTH_ROLE,
                charts.NEURON_HEALTH_NAMESPACE,
                charts.NEURON_NPD_SA,
                "Neuron health",
                neuron_health_policy(),
            )
        if self._config.load_balancer_controller:
            policy = json.dumps(load_balancer_controller.iam_policy(self._ctx.cluster_name))
            account = load_balancer_controller.SERVICE_ACCOUNT
            self._role(LOAD_BALANCER_CONTROLLER_ROLE, SYSTEM_NAMESPACE, account, "AWS Load Balancer Controller", policy)

    def declare_kubernetes(
        self,
        provider: k8s.Provider,
        groups: Sequence[NodeGroup],
        role_arns: Mapping[str, pulumi.Input[str]],
        kueue_config: str,
        tenants: Mapping[str, Tenant],
        kubernetes_version: str,
        nodes_ready: Sequence[pulumi.Resource] = (),
        role_ready: Sequence[pulumi.Resource] = (),
        leader_worker_set: bool = False,
        cluster_and_vpc: tuple[pulumi.Input[str], pulumi.Input[str]] = ("", ""),
    ) -> None:
        """The cluster-layer half: the tenants' namespaces, device plugins, Kueue, FSx CSI driver, MPI
        operator, Load Balancer Controller (where the aws layer made its role; told `cluster_and_vpc`).

        `nodes_ready` (the system node group) and `role_ready` (the roles' policies) are
        waited for when one stack declares both halves; a cluster-layer stack finds them built.
        `kubernetes_version`: the control plane's minor (the Neuron scheduler extension runs its
        kube-scheduler). `leader_worker_set`: install the LeaderWorkerSet controller (serving
        replicas larger than one node).
        """
        addons = self._config
        self._provider = provider
        self._kubernetes_version = kubernetes_version
        # Pods need somewhere to run before their add-on or release can become ready.
        self._k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(nodes_ready))
        for tenant in tenants.values():
            self._tenant(tenant)
        self._device_plugins(addons, groups, role_arns, role_ready)
        # Queues: the Kueue controller and webhook (MPIJob integration). Its CRDs come with the
        # chart, so the queue objects (infra.queues) are created after it is ready.
        self.kueue = self._release(charts.KUEUE, addons.kueue_chart, charts.kueue_values(kueue_config), KUEUE_NAMESPACE)
        if leader_worker_set:
            # CRD in the chart; Kueue 0.19.2 sets up its integration once the API is served (WaitForAPI).
            self._release(charts.LWS, addons.lws_chart, charts.lws_values(addons.lws_chart), charts.LWS_NAMESPACE)
        self._release(
            charts.FSX_CSI_DRIVER,
            addons.fsx_csi_driver_chart,
            pulumi.Output.from_input(role_arns[FSX_CSI_ROLE]).apply(
                lambda arn: charts.fsx_csi_values(groups, arn, self._ctx.region)
            ),
            depends_on=role_ready,
        )
        if LOAD_BALANCER_CONTROLLER_ROLE in role_arns:
            self._load_balancer_controller(role_arns[LOAD_BALANCER_CONTROLLER_ROLE], cluster_and_vpc, role_ready)
        # MPI operator: the release manifest, applied server-side (the MPIJob CRD is over 256 KB, too big for
        # client-side apply); yaml/v2 orders the CRD first and awaits every object, so what depends on this
        # is created once the operator runs. Its image is on Docker Hub only; mpiOperatorImage names a copy.
        image = addons.mpi_operator_image
        self.mpi_operator = k8s.yaml.v2.ConfigFile(
            f"{self._name}-mpi-operator",
            file=charts.mpi_operator_manifest_url(addons.mpi_operator_version),
            opts=pulumi.ResourceOptions.merge(
                self._k8s_opts,
                pulumi.ResourceOptions(transforms=[charts.mpi_operator_image_transform(image)] if image else None),
            ),
        )

    def _load_balancer_controller(self, arn: Any, cluster_and_vpc: tuple[Any, Any], ready: Sequence[Any]) -> None:
        values = pulumi.Output.all(arn, *cluster_and_vpc).apply(
            lambda a: charts.load_balancer_controller_values(a[1], self._ctx.region, a[2], a[0])
        )
        chart = self._config.load_balancer_controller_chart
        self._release(charts.AWS_LOAD_BALANCER_CONTROLLER, chart, values, depends_on=ready)

    def _tenant(self, tenant: Tenant) -> None:
        """A tenant's namespace and its NetworkPolicies (infra.tenancy). The namespace of a stack
        without teams keeps the resource name it always had (`<name>-workloads`)."""
        child = pulumi.ResourceOptions(parent=self, provider=self._provider)
        short = "workloads" if tenant.key == DEFAULT_QUEUE else f"team-{tenant.key}"
        namespace = k8s.core.v1.Namespace(
            f"{self._name}-{short}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=tenant.namespace, labels=app_labels()),
            opts=child,
        )
        self.namespaces[tenant.key] = namespace
        in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[namespace]))
        policies = self.network_policies.setdefault(tenant.key, [])
        for policy in tenancy.namespace_policies(tenant.namespace):
            policies.append(
                k8s.networking.v1.NetworkPolicy(
                    f"{self._name}-{short}-{policy['metadata']['name']}",
                    metadata=policy["metadata"],
                    spec=policy["spec"],
                    opts=in_namespace,
                )
            )

    def finish(self) -> None:
        """Register the component's outputs, once both halves (or the one of this layer) are declared."""
        self.register_outputs({"releases": {k: r.status for k, r in self.releases.items()}})

    def _addon(self, addon_name: str, opts: pulumi.ResourceOptions, **kwargs: Any) -> aws.eks.Addon:
        """One EKS add-on at the version the stack names, or the one facts/eks_addons.py pins for
        the cluster's Kubernetes minor (config.checks refuses a minor with neither), never EKS's
        moving default. OVERWRITE on create adopts what EKS bootstrapped."""
        version = self._versions[addon_name]
        assert version is not None, f"config.checks lets no {addon_name} version through unresolved"
        res = aws.eks.Addon(
            f"{self._name}-{addon_name}",
            cluster_name=self._cluster.name,
            addon_name=addon_name,
            addon_version=version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=dict(self._ctx.owned_tags),
            opts=opts,
            **kwargs,
        )
        self.eks_addons[addon_name] = res
        return res

    def _eks_managed_addons(self, addons: AddonsConfig) -> None:
        self._versions = addons.eks_addon_versions.resolved(self._cluster.kubernetes_version)
        child = pulumi.ResourceOptions(parent=self)
        on_nodes = pulumi.ResourceOptions(parent=self, depends_on=[self._cluster.system_node_group])
        self._addon("vpc-cni", child, configuration_values=VPC_CNI_CONFIGURATION)
        self._addon("kube-proxy", child)
        pod_identity = self._addon("eks-pod-identity-agent", child)
        self._addon("coredns", on_nodes, configuration_values=charts.COREDNS_CONFIGURATION)
        # Node health: sets AcceleratedHardwareReady, NetworkingReady, KernelReady, ... on every
        # node, which EKS node auto repair acts on (the one component that remediates).
        self._addon("eks-node-monitoring-agent", on_nodes)

        cw_role = aws.iam.Role(
            f"{self._name}-cloudwatch",
            # Only the add-on's agent of this cluster (the session tags EKS Pod Identity sets).
            assume_role_policy=self._cluster.arn.apply(
                lambda arn: pod_identity_trust_policy(arn, CLOUDWATCH_NAMESPACE, CLOUDWATCH_AGENT_SA)
            ),
            description=f"CloudWatch agent (Container Insights) of {self._ctx.cluster_name}",
            opts=child,
        )
        cw_policies = [
            aws.iam.RolePolicyAttachment(f"{self._name}-{short}", role=cw_role.name, policy_arn=arn, opts=child)
            for short, arn in CLOUDWATCH_POLICIES.items()
        ]
        # Container Insights with enhanced observability (it collects Neuron and EFA metrics too)
        # and Application Signals, both on by default in the add-on.
        self._addon(
            "amazon-cloudwatch-observability",
            pulumi.ResourceOptions(
                parent=self,
                depends_on=[self._cluster.system_node_group, pod_identity, *cw_policies, *self.log_groups],
            ),
            configuration_values=charts.cloudwatch_observability_configuration(
                addons.observability.container_logs,
                None
                if self._scrape is None
                else metrics.agents(self._ctx.cluster_name, self._ctx.region, self._scrape),
            ),
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=cw_role.arn, service_account=CLOUDWATCH_AGENT_SA)
            ],
        )

    def _role(self, short: str, namespace: str, service_account: str, what: str, policy: pulumi.Input[str]) -> None:
        """An IAM role one service account of this cluster assumes through the OIDC provider
        (IRSA), with its inline policy."""
        cluster = self._cluster
        role = aws.iam.Role(
            f"{self._name}-{short}",
            assume_role_policy=pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_provider_url).apply(
                lambda o: irsa_trust_policy(o[0], o[1], namespace, service_account)
            ),
            description=f"{what} of {self._ctx.cluster_name}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.role_policies.append(
            aws.iam.RolePolicy(
                f"{self._name}-{short}", role=role.id, policy=policy, opts=pulumi.ResourceOptions(parent=self)
            )
        )
        self.role_arns[short] = role.arn

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

    def _device_plugins(
        self,
        addons: AddonsConfig,
        groups: Sequence[NodeGroup],
        role_arns: Mapping[str, pulumi.Input[str]],
        role_ready: Sequence[pulumi.Resource],
    ) -> None:
        """Device plugins only where a node group has the hardware. GPU and Neuron health metrics
        come from the CloudWatch add-on's own DCGM exporter and Neuron monitor: one exporter per node
        (a second DCGM exporter competed for the same GPUs and fed nothing)."""
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
        neuron = charts.accelerator_groups(groups, "neuron")
        if neuron:
            self._neuron(addons, neuron, role_arns[NEURON_HEALTH_ROLE], role_ready)

    def _neuron(
        self,
        addons: AddonsConfig,
        groups: Sequence[NodeGroup],
        health_role_arn: pulumi.Input[str],
        role_ready: Sequence[pulumi.Resource],
    ) -> None:
        """The Neuron chart: device plugin, node problem detector, scheduler extension if asked. The chart
        puts the detector in a namespace it does not create (the Neuron SDK's guide creates it
        first); without it the install fails and the atomic release rolls back the device plugin
        too. The detector's health container gets its IRSA role for its CloudWatch metrics."""
        namespace = k8s.core.v1.Namespace(
            f"{self._name}-neuron-health",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=charts.NEURON_HEALTH_NAMESPACE, labels=app_labels()),
            opts=pulumi.ResourceOptions(parent=self, provider=self._provider),
        )
        self._release(
            charts.NEURON,
            addons.neuron_chart,
            pulumi.Output.from_input(health_role_arn).apply(
                lambda arn: charts.neuron_values(groups, addons.neuron_scheduler, arn, self._kubernetes_version)
            ),
            depends_on=[namespace, *role_ready],
        )
