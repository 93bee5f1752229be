"""The EKS control plane, its node IAM role, the system node group and the Kubernetes provider.

pulumi-eks defaults are not secure (public endpoint open to the world, no secrets
encryption, no audit logs), so every security-relevant argument is set here explicitly.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from infra import catalog
from infra.config import StackConfig
from infra.iam import service_trust_policy
from infra.network import Network
from infra.protection import stateful

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


def node_launch_template_args(
    *, name: str, root_volume_size_gib: int, kms_key_arn: pulumi.Input[str] | None = None
) -> dict[str, object]:
    """Launch-template arguments every node of the cluster shares: IMDSv2 only with hop
    limit 1 (pods cannot borrow the node role through IMDS), and an encrypted gp3 root
    volume large enough for multi-GB training images."""
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
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={"Name": name})
            for kind in ("instance", "volume", "network-interface")
        ],
        "update_default_version": True,
    }


class Cluster(pulumi.ComponentResource):
    """EKS control plane with private endpoint, KMS-encrypted secrets, all five audit log
    types, API access entries and OIDC; plus a multi-AZ system node group and the
    Kubernetes provider every in-cluster resource uses."""

    name: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    """The EKS-managed cluster security group: control plane <-> nodes."""
    node_role: aws.iam.Role
    provider: k8s.Provider
    oidc_provider_arn: pulumi.Output[str]
    oidc_provider_url: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    secrets_key: aws.kms.Key

    def __init__(self, name: str, cfg: StackConfig, network: Network, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-training-eks:infra:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        c = cfg.cluster

        self.secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"EKS secrets envelope encryption for {c.name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            opts=stateful(cfg.protect_stateful_resources, child),
        )
        aws.kms.Alias(
            f"{name}-secrets", name=f"alias/{c.name}-eks-secrets", target_key_id=self.secrets_key.key_id, opts=child
        )

        # Created before the cluster so EKS does not make one with infinite retention.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/eks/{c.name}/cluster",
            retention_in_days=c.log_retention_days,
            opts=child,
        )

        self.node_role = aws.iam.Role(
            f"{name}-node",
            assume_role_policy=service_trust_policy("ec2.amazonaws.com"),
            description=f"EKS nodes of {c.name}",
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{short}", role=self.node_role.name, policy_arn=arn, opts=child)
            for short, arn in NODE_POLICIES.items()
        ]

        access_entries = {
            f"admin-{i}": eks.AccessEntryArgs(
                principal_arn=arn,
                access_policies={
                    "cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=CLUSTER_ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    )
                },
            )
            for i, arn in enumerate(c.admin_principal_arns)
        }

        # Our own control-plane role (pulumi-eks would make one without the key): EKS needs to
        # use the secrets key for envelope encryption, and only this key.
        service_role = aws.iam.Role(
            f"{name}-control-plane",
            assume_role_policy=service_trust_policy("eks.amazonaws.com", tag_session=True),
            description=f"EKS control plane of {c.name}",
            opts=child,
        )
        control_plane_attachments: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-control-plane",
                role=service_role.name,
                policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
                opts=child,
            ),
            aws.iam.RolePolicy(
                f"{name}-control-plane-kms",
                role=service_role.id,
                policy=self.secrets_key.arn.apply(
                    lambda arn: json.dumps(
                        {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
                                    "Resource": arn,
                                }
                            ],
                        }
                    )
                ),
                opts=child,
            ),
        ]

        public = bool(c.public_access_cidrs)
        self.eks = eks.Cluster(
            f"{name}-eks",
            name=c.name,
            version=c.kubernetes_version,
            vpc_id=network.vpc_id,
            private_subnet_ids=list(network.private_subnet_ids.values()),
            public_subnet_ids=list(network.public_subnet_ids.values()),
            endpoint_private_access=True,
            endpoint_public_access=public,
            public_access_cidrs=c.public_access_cidrs if public else None,
            enabled_cluster_log_types=CONTROL_PLANE_LOG_TYPES,
            encryption_config_key_arn=self.secrets_key.arn,
            service_role=service_role,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries or None,
            create_oidc_provider=True,
            skip_default_node_group=True,
            skip_default_security_groups=True,
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type="STANDARD"),
            tags=cfg.tags or None,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[log_group, *control_plane_attachments]),
        )
        self.name = self.eks.eks_cluster.name
        self.security_group_id = self.eks.eks_cluster.vpc_config.cluster_security_group_id
        self.oidc_provider_arn = self.eks.oidc_provider_arn
        self.oidc_provider_url = self.eks.oidc_provider_url
        self.kubeconfig = pulumi.Output.secret(self.eks.kubeconfig_json)

        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=child,
        )

        s = cfg.system_node_group
        system_lt = aws.ec2.LaunchTemplate(
            f"{name}-system",
            description=f"{c.name} system nodes",
            vpc_security_group_ids=[self.security_group_id],
            **node_launch_template_args(name=f"{c.name}-system", root_volume_size_gib=s.root_volume_size_gib),
            opts=child,
        )
        self.system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.name,
            node_group_name="system",
            node_role_arn=self.node_role.arn,
            subnet_ids=list(network.private_subnet_ids.values()),
            instance_types=[s.instance_type],
            ami_type=catalog.GENERAL_PURPOSE[s.instance_type].ami_type,
            version=c.kubernetes_version,
            capacity_type="ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=s.desired_size, min_size=s.min, max_size=s.max
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=system_lt.id, version=system_lt.latest_version.apply(str)
            ),
            labels={catalog.NODE_GROUP_LABEL: "system"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
        )
        self.node_policy_attachments = attachments

        self.register_outputs(
            {"name": self.name, "oidcProviderArn": self.oidc_provider_arn, "securityGroupId": self.security_group_id}
        )
