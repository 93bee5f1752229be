"""The EKS control plane, its node IAM role, the system node group and the Kubernetes provider.

pulumi-eks defaults are not secure (public endpoint open to the world, no secrets
encryption, no audit logs), so every security-relevant argument is set here explicitly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from config.cluster import ClusterConfig, SystemNodeGroupConfig
from facts import instances
from facts.names import NODE_GROUP_LABEL, PUBLIC_ENDPOINT_EXCEPTION_TAG, SYSTEM_NODE_GROUP, component_type
from facts.networks import covers_internet
from infra.context import StackContext
from infra.iam import kms_envelope_policy, kms_key, service_trust_policy
from infra.network import Network
from infra.protection import audit_trail, policy_exception

CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"

# Managed policies every EKS node needs. ECR access is pull-only (AmazonEC2ContainerRegistryPullOnly,
# narrower than ReadOnly); SSM gives shell access without SSH keys or open ports.
NODE_POLICIES = {
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "cni": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "ecr-pull": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    "ssm": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}


# What the launch templates tag: the instances, their volumes and network interfaces. Provider
# default tags reach the launch template itself, never what EC2 launches from it.
LAUNCHED_RESOURCE_TYPES = ("instance", "volume", "network-interface")


def node_launch_template_args(
    *,
    name: str,
    root_volume_size_gib: int,
    tags: Mapping[str, str],
    kms_key_arn: pulumi.Input[str] | None = None,
) -> dict[str, object]:
    """Launch-template arguments every node of the cluster shares: IMDSv2 only with hop
    limit 1 (pods cannot borrow the node role through IMDS), an encrypted gp3 root volume
    large enough for multi-GB training images, and the stack's tags on every instance,
    volume and network interface launched (so accelerator spend can be charged back)."""
    return {
        "metadata_options": aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
        ),
        "block_device_mappings": [
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=root_volume_size_gib,
                    volume_type="gp3",
                    iops=6000,
                    throughput=500,
                    encrypted="true",
                    kms_key_id=kms_key_arn,
                    delete_on_termination="true",
                ),
            )
        ],
        "tag_specifications": [
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={**tags, "Name": name})
            for kind in LAUNCHED_RESOURCE_TYPES
        ],
        "update_default_version": True,
    }


def node_group_name_prefix(name: str) -> str:
    """The EKS name of a managed node group is this prefix and a unique suffix terraform-provider-aws
    makes at create (`create.Name`, terraform-plugin-sdk `id.PrefixedUniqueId`: 26 characters).
    EKS cannot change what defines a node group (instance types, capacity type, subnets, AMI type:
    ForceNew, tests/upstream/pulumi-replacements-2026-11.yaml), and a fixed name made `pulumi up`
    delete the running group before creating the new one (the bridge deletes first when a name is
    set). A fresh name per group lets the new group come up before the old one is drained."""
    return f"{name}-"


REPLACED_FIRST: dict[str, Any] = {
    # A group deployed with its fixed name (`system`, `<group>`) keeps it: the prefix only names
    # the group that replaces it. Its state's explicit name would make the provider ask for
    # delete-before-replace; the new name never collides, so the replacement is created first.
    "ignore_changes": ["nodeGroupName", "nodeGroupNamePrefix"],
    "delete_before_replace": False,
}
"""Options of every managed node group: an existing group keeps its name; a replacement comes first."""


def principal_key(arn: str) -> str:
    """A name for an IAM principal that no other principal has: account, kind and name (IAM
    names are unique per account and kind, whatever their path)."""
    parts = arn.split(":", 5)
    kind, _, path_and_name = parts[5].partition("/")
    return f"{parts[4]}-{kind}-{path_and_name.rsplit('/', 1)[-1]}"


def kubernetes_provider(name: str, kubeconfig: pulumi.Input[str], opts: pulumi.ResourceOptions) -> k8s.Provider:
    """The Kubernetes provider of every in-cluster resource: server-side apply (the MPIJob CRD is
    too big for client-side apply's annotation)."""
    return k8s.Provider(name, kubeconfig=kubeconfig, enable_server_side_apply=True, opts=opts)


class Cluster(pulumi.ComponentResource):
    """EKS control plane with private endpoint, KMS-encrypted secrets, all five audit log
    types, API access entries and OIDC; plus a multi-AZ system node group and the
    Kubernetes provider every in-cluster resource uses."""

    name: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    """The EKS-managed cluster security group: control plane <-> nodes."""
    node_role: aws.iam.Role
    provider: k8s.Provider | None
    """None in an aws-layer stack, which never talks to the Kubernetes API."""
    oidc_provider_arn: pulumi.Output[str]
    oidc_provider_url: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    secrets_key: aws.kms.Key
    node_policy_attachments: list[aws.iam.RolePolicyAttachment]
    system_node_group: aws.eks.NodeGroup
    kubernetes_version: str
    """The control plane's Kubernetes minor version; node groups follow it."""

    def __init__(
        self,
        name: str,
        cluster: ClusterConfig,
        system: SystemNodeGroupConfig,
        ctx: StackContext,
        network: Network,
        opts: pulumi.ResourceOptions | None = None,
        *,
        with_kubernetes_provider: bool = True,
    ):
        super().__init__(component_type("infra", "Cluster"), name, None, opts)
        self._name = name
        self._config = cluster
        self._tags = ctx.owned_tags
        self.kubernetes_version = cluster.kubernetes_version
        self.secrets_key = kms_key(
            f"{name}-secrets",
            description=f"EKS secrets envelope encryption for {cluster.name}",
            alias=f"{cluster.name}-eks-secrets",
            protect=ctx.protect,
            parent=self,
        )
        # Created before the cluster so EKS does not make one with infinite retention.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/eks/{cluster.name}/cluster",
            retention_in_days=cluster.log_retention_days,
            opts=audit_trail(ctx.protect, pulumi.ResourceOptions(parent=self)),
        )
        self._node_role()
        self.eks = self._control_plane(ctx, network, depends_on=[log_group, *self._control_plane_role_parts()])
        self.name = self.eks.eks_cluster.name
        self.arn = self.eks.eks_cluster.arn
        self.security_group_id = self.eks.eks_cluster.vpc_config.cluster_security_group_id
        self.oidc_provider_arn = self.eks.oidc_provider_arn
        self.oidc_provider_url = self.eks.oidc_provider_url
        self.kubeconfig = pulumi.Output.secret(self.eks.kubeconfig_json)
        # Every Kubernetes object goes through this provider, so it waits for the deployer's path
        # to the private endpoint.
        self.api_access_rules = self._api_access()
        self.admin_entries = self._admin_access()
        self.provider = (
            kubernetes_provider(
                f"{name}-k8s", self.kubeconfig, pulumi.ResourceOptions(parent=self, depends_on=self.api_access_rules)
            )
            if with_kubernetes_provider
            else None
        )
        self.system_node_group = self._system_node_group(system, network)
        self.register_outputs(
            {"name": self.name, "oidcProviderArn": self.oidc_provider_arn, "securityGroupId": self.security_group_id}
        )

    def _node_role(self) -> None:
        """The role of every node, with the managed policies every EKS node needs."""
        child = pulumi.ResourceOptions(parent=self)
        self.node_role = aws.iam.Role(
            f"{self._name}-node",
            assume_role_policy=service_trust_policy("ec2.amazonaws.com"),
            description=f"EKS nodes of {self._config.name}",
            opts=child,
        )
        self.node_policy_attachments = [
            aws.iam.RolePolicyAttachment(
                f"{self._name}-node-{short}", role=self.node_role.name, policy_arn=arn, opts=child
            )
            for short, arn in NODE_POLICIES.items()
        ]

    def _api_access(self) -> list[pulumi.Resource]:
        """TCP 443 on the EKS-managed cluster security group from the networks and security
        groups routed into the VPC (`privateAccessCidrs`, `privateAccessSecurityGroupIds`):
        with a private endpoint nothing else reaches the API (EKS user guide, "Cluster API
        server endpoint"). Public CIDRs need no rule; EKS filters them at the public endpoint."""
        c, child = self._config, pulumi.ResourceOptions(parent=self)
        sources = [(cidr, cidr.replace("/", "-"), {"cidr_ipv4": cidr}) for cidr in c.private_access_cidrs]
        sources += [(sg, sg, {"referenced_security_group_id": sg}) for sg in c.private_access_security_group_ids]
        return [
            aws.vpc.SecurityGroupIngressRule(
                f"{self._name}-api-from-{label}",
                security_group_id=self.security_group_id,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description=f"Kubernetes API (private endpoint) from {source}",
                opts=child,
                **peer,
            )
            for source, label, peer in sources
        ]

    def _admin_access(self) -> list[aws.eks.AccessEntry]:
        """Cluster admin for each of `adminPrincipalArns`: an access entry and its policy
        association, named by the principal. EKS takes one entry per principal (a second
        CreateAccessEntry fails with 409 ResourceInUseException), so an entry keyed by list
        position would be replaced by another principal's, create-before-delete, whenever an
        admin above it is removed or the list reordered. pulumi-eks made these entries itself,
        keyed `admin-<position>`; the alias to that URN keeps a stack's existing entries (taken
        over by position, so the list must not change in the update that brings this in)."""
        entries = []
        for i, arn in enumerate(self._config.admin_principal_arns):
            key, legacy = f"{self._name}-admin-{principal_key(arn)}", f"{self._name}-eks-admin-{i}"
            entry = aws.eks.AccessEntry(
                key,
                cluster_name=self.name,
                principal_arn=arn,
                opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=legacy, parent=self.eks)]),
            )
            legacy_entry_urn = pulumi.resource.create_urn(legacy, "aws:eks/accessEntry:AccessEntry", parent=self.eks)
            aws.eks.AccessPolicyAssociation(
                f"{key}-cluster-admin",
                cluster_name=self.name,
                principal_arn=arn,
                policy_arn=CLUSTER_ADMIN_POLICY,
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=pulumi.ResourceOptions(
                    parent=entry,
                    depends_on=[entry],
                    aliases=[pulumi.Alias(name=f"{legacy}-cluster-admin", parent=legacy_entry_urn)],
                ),
            )
            entries.append(entry)
        return entries

    def _control_plane_role_parts(self) -> list[pulumi.Resource]:
        """Our own control-plane role (pulumi-eks would make one without the key): EKS needs to
        use the secrets key for envelope encryption, and only this key."""
        child = pulumi.ResourceOptions(parent=self)
        self._service_role = aws.iam.Role(
            f"{self._name}-control-plane",
            assume_role_policy=service_trust_policy("eks.amazonaws.com", tag_session=True),
            description=f"EKS control plane of {self._config.name}",
            opts=child,
        )
        return [
            aws.iam.RolePolicyAttachment(
                f"{self._name}-control-plane",
                role=self._service_role.name,
                policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
                opts=child,
            ),
            aws.iam.RolePolicy(
                f"{self._name}-control-plane-kms",
                role=self._service_role.id,
                policy=self.secrets_key.arn.apply(kms_envelope_policy),
                opts=child,
            ),
        ]

    def _control_plane(self, ctx: StackContext, network: Network, depends_on: list[pulumi.Resource]) -> eks.Cluster:
        c = self._config
        public = bool(c.public_access_cidrs)
        anywhere = public and c.allow_public_access_from_anywhere and covers_internet(c.public_access_cidrs)
        return eks.Cluster(
            f"{self._name}-eks",
            name=c.name,
            version=c.kubernetes_version,
            vpc_id=network.vpc_id,
            private_subnet_ids=list(network.private_subnet_ids.values()),
            # An existing VPC may have no public subnets: pulumi-eks's private-only shape.
            public_subnet_ids=list(network.public_subnet_ids.values()) or None,
            endpoint_private_access=True,
            endpoint_public_access=public,
            public_access_cidrs=c.public_access_cidrs if public else None,
            enabled_cluster_log_types=CONTROL_PLANE_LOG_TYPES,
            encryption_config_key_arn=self.secrets_key.arn,
            service_role=self._service_role,
            authentication_mode=eks.AuthenticationMode.API,
            create_oidc_provider=True,
            skip_default_node_group=True,
            skip_default_security_groups=True,
            # The EKS add-ons are all ours (infra.addons), pinned and tagged alike. pulumi-eks 4.x
            # would create vpc-cni and kube-proxy itself unless told not to, and a second
            # CreateAddon of the same name fails with 409 "Addon already exists"
            # (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts; tests/upstream/pulumi-eks-4.4.0.yaml).
            use_default_vpc_cni=True,
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=False),
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            # EKS installs its self-managed vpc-cni, kube-proxy and CoreDNS at creation, so nodes
            # join before our managed add-ons adopt them (resolveConflictsOnCreate OVERWRITE).
            bootstrap_self_managed_addons=True,
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type="STANDARD"),
            tags=dict(self._tags),
            cluster_tags=policy_exception(
                PUBLIC_ENDPOINT_EXCEPTION_TAG,
                "stack config cluster.allowPublicAccessFromAnywhere" if anywhere else None,
            )
            or None,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )

    def _system_node_group(self, s: SystemNodeGroupConfig, network: Network) -> aws.eks.NodeGroup:
        """General-purpose nodes across every AZ for controllers, add-ons and MPI launchers."""
        c = self._config
        system_lt = aws.ec2.LaunchTemplate(
            f"{self._name}-system",
            description=f"{c.name} system nodes",
            vpc_security_group_ids=[self.security_group_id],
            **node_launch_template_args(
                name=f"{c.name}-system", root_volume_size_gib=s.root_volume_size_gib, tags=self._tags
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return aws.eks.NodeGroup(
            f"{self._name}-system",
            cluster_name=self.name,
            node_group_name_prefix=node_group_name_prefix(SYSTEM_NODE_GROUP),
            node_role_arn=self.node_role.arn,
            subnet_ids=list(network.private_subnet_ids.values()),
            instance_types=[s.instance_type],
            ami_type=instances.GENERAL_PURPOSE[s.instance_type].ami_type,
            version=c.kubernetes_version,
            capacity_type="ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=s.desired_size, min_size=s.min, max_size=s.max
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=system_lt.id, version=system_lt.latest_version.apply(str)
            ),
            labels={NODE_GROUP_LABEL: SYSTEM_NODE_GROUP},
            # A new instance type (or AZ) brings the new nodes up before the old group is drained,
            # so the controllers move over instead of going down at once.
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.node_policy_attachments, **REPLACED_FIRST),
        )
