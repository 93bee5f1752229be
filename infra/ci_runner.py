"""The in-VPC CI runner: an AWS CodeBuild project that serves as a self-hosted GitHub Actions
runner in the private subnets, so the jobs that need the private cluster API (the cluster
and runs layers) can reach it.

GitHub queues a job whose `runs-on` is `codebuild-<project>-${{ github.run_id }}-${{
github.run_attempt }}`; the project's webhook (event `WORKFLOW_JOB_QUEUED`) starts a build
that registers as an ephemeral runner, takes that one job and ends (CodeBuild user guide,
"Self-hosted GitHub Actions runners in AWS CodeBuild"). The build runs in the private
subnets with a security group that the cluster's security group admits on 443, under a
role with an EKS access entry: the runner can change the cluster through the Kubernetes API
and the Pulumi state it is given, and nothing else in the account.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from config.ci_runner import CiRunnerConfig
from facts.names import ci_runner_project, component_type
from infra.cluster import CLUSTER_ADMIN_POLICY, Cluster
from infra.context import StackContext
from infra.iam import account_and_partition, scoped_trust_policy
from infra.network import Network

WORKFLOW_JOB_QUEUED = "WORKFLOW_JOB_QUEUED"
"""The webhook event that starts a runner build (botocore codebuild model, WebhookFilter)."""
# What CodeBuild needs to put a build into a VPC (CodeBuild user guide, "Allow CodeBuild
# access to AWS services required to create a VPC network interface").
VPC_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
]
# A GitHub App connection (CodeBuild user guide, "GitHub App connections"); GetConnectionToken
# is a permission-only action (Service Authorization Reference, AWS CodeConnections).
CONNECTION_ACTIONS = ["codeconnections:GetConnection", "codeconnections:GetConnectionToken"]
# The Pulumi state backend (one object per stack and its history) and the secrets provider.
STATE_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
SECRETS_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt"]


def runner_label(project: str) -> str:
    """The `runs-on` label of a job for this runner (CodeBuild user guide, action-runner)."""
    return f"codebuild-{project}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}"


def runner_policy(
    *,
    log_group_arn: str,
    subnet_arns: Sequence[str],
    network_interfaces_arn: str,
    connection_arn: str | None = None,
    state_bucket: str | None = None,
    secrets_key_arn: str | None = None,
) -> str:
    """What a runner build needs: its logs, its network interface in the given subnets, the
    GitHub connection, and the Pulumi state and secrets key it deploys with."""
    statements: list[dict[str, object]] = [
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": [log_group_arn, f"{log_group_arn}:*"],
        },
        {"Effect": "Allow", "Action": VPC_ACTIONS, "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": "ec2:CreateNetworkInterfacePermission",
            "Resource": network_interfaces_arn,
            "Condition": {
                "StringEquals": {"ec2:AuthorizedService": "codebuild.amazonaws.com"},
                "ArnEquals": {"ec2:Subnet": sorted(subnet_arns)},
            },
        },
    ]
    if connection_arn:
        statements.append({"Effect": "Allow", "Action": CONNECTION_ACTIONS, "Resource": connection_arn})
    if state_bucket:
        statements += [
            {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{state_bucket}"},
            {"Effect": "Allow", "Action": STATE_OBJECT_ACTIONS, "Resource": f"arn:aws:s3:::{state_bucket}/*"},
        ]
    if secrets_key_arn:
        statements.append({"Effect": "Allow", "Action": SECRETS_KEY_ACTIONS, "Resource": secrets_key_arn})
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


class CiRunner(pulumi.ComponentResource):
    """CodeBuild project + webhook (the runner), its role and access entry, its security group
    and the cluster security group's rule that lets it reach the API on 443."""

    project_name: str
    label: str
    role_arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        runner: CiRunnerConfig,
        ctx: StackContext,
        network: Network,
        cluster: Cluster,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "CiRunner"), name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.project_name = ci_runner_project(ctx.cluster_name)
        self.label = runner_label(self.project_name)
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/codebuild/{self.project_name}",
            retention_in_days=ctx.log_retention_days,
            tags=ctx.owned_tags,
            opts=child,
        )
        role, policy = self._role(name, runner, ctx, network, log_group.arn)
        self.role_arn = role.arn
        sg = self._security_group(name, ctx, network, cluster)
        project = self._project(name, runner, ctx, network, role.arn, sg.id, log_group.name, [policy])
        aws.codebuild.Webhook(
            f"{name}-webhook",
            project_name=project.name,
            build_type="BUILD",
            filter_groups=[
                aws.codebuild.WebhookFilterGroupArgs(
                    filters=[aws.codebuild.WebhookFilterGroupFilterArgs(type="EVENT", pattern=WORKFLOW_JOB_QUEUED)]
                )
            ],
            opts=child,
        )
        self._cluster_access(name, cluster, role.arn)
        self.register_outputs({"project": self.project_name, "roleArn": role.arn})

    def _role(
        self, name: str, runner: CiRunnerConfig, ctx: StackContext, network: Network, log_group_arn: pulumi.Output[str]
    ) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
        """The role builds run with: this project only may assume it; see `runner_policy`."""
        child = pulumi.ResourceOptions(parent=self)
        ids = account_and_partition(self)  # through the stack's AWS provider, like every lookup
        region, project = ctx.region, self.project_name
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=scoped_trust_policy(
                self, "codebuild.amazonaws.com", "codebuild", region, [f"project/{project}"]
            ),
            description=f"In-VPC CI runner of {ctx.cluster_name}",
            tags=ctx.owned_tags,
            opts=child,
        )
        subnets = list(network.private_subnet_ids.values())
        subnet_arns = pulumi.Output.all(ids, *subnets).apply(
            lambda a: [f"arn:{a[0][1]}:ec2:{region}:{a[0][0]}:subnet/{s}" for s in a[1:]]
        )
        policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=role.id,
            policy=pulumi.Output.all(log_group_arn, subnet_arns, ids).apply(
                lambda a: runner_policy(
                    log_group_arn=a[0],
                    subnet_arns=a[1],
                    network_interfaces_arn=f"arn:{a[2][1]}:ec2:{region}:{a[2][0]}:network-interface/*",
                    connection_arn=runner.connection_arn,
                    state_bucket=runner.state_bucket,
                    secrets_key_arn=runner.secrets_key_arn,
                )
            ),
            opts=child,
        )
        return role, policy

    def _security_group(
        self, name: str, ctx: StackContext, network: Network, cluster: Cluster
    ) -> aws.ec2.SecurityGroup:
        """Out on 443 only (GitHub, AWS APIs, package indexes, the cluster API); the cluster's
        security group admits it on 443. The VPC's DNS resolver is not filtered by groups."""
        child = pulumi.ResourceOptions(parent=self)
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=network.vpc_id,
            description=f"In-VPC CI runner of {ctx.cluster_name}: HTTPS out only",
            tags={**ctx.owned_tags, "Name": self.project_name},
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-https-out",
            security_group_id=sg.id,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="HTTPS to GitHub, AWS APIs and the cluster API",
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-to-api",
            security_group_id=cluster.security_group_id,
            referenced_security_group_id=sg.id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="Kubernetes API from the in-VPC CI runner",
            opts=child,
        )
        return sg

    def _project(
        self,
        name: str,
        runner: CiRunnerConfig,
        ctx: StackContext,
        network: Network,
        role_arn: pulumi.Input[str],
        sg_id: pulumi.Input[str],
        log_group_name: pulumi.Input[str],
        depends_on: list[pulumi.Resource],
    ) -> aws.codebuild.Project:
        # CodeBuild checks the role's EC2 permissions when a VPC project is created, so the
        # project waits for the policy (aws/aws-cdk#2651).
        auth = (
            aws.codebuild.ProjectSourceAuthArgs(type="CODECONNECTIONS", resource=runner.connection_arn)
            if runner.connection_arn
            else None
        )
        return aws.codebuild.Project(
            f"{name}-project",
            name=self.project_name,
            description=f"Self-hosted GitHub Actions runner in the VPC of {ctx.cluster_name}",
            service_role=role_arn,
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                type="LINUX_CONTAINER",
                compute_type=runner.compute_type,
                image=runner.image,
                image_pull_credentials_type="CODEBUILD",
                privileged_mode=False,
            ),
            source=aws.codebuild.ProjectSourceArgs(
                type="GITHUB", location=f"https://github.com/{runner.repository}.git", auth=auth
            ),
            vpc_config=aws.codebuild.ProjectVpcConfigArgs(
                vpc_id=network.vpc_id, subnets=list(network.private_subnet_ids.values()), security_group_ids=[sg_id]
            ),
            logs_config=aws.codebuild.ProjectLogsConfigArgs(
                cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(
                    group_name=log_group_name, status="ENABLED"
                )
            ),
            build_timeout=runner.build_timeout_minutes,
            tags=ctx.owned_tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )

    def _cluster_access(self, name: str, cluster: Cluster, role_arn: pulumi.Input[str]) -> None:
        """Cluster admin for the runner's role: the cluster layer installs CRDs, charts and
        cluster-scoped queues (EKS access entries; type STANDARD, scope cluster)."""
        child = pulumi.ResourceOptions(parent=self)
        entry = aws.eks.AccessEntry(
            f"{name}-access", cluster_name=cluster.name, principal_arn=role_arn, type="STANDARD", opts=child
        )
        aws.eks.AccessPolicyAssociation(
            f"{name}-admin",
            cluster_name=cluster.name,
            principal_arn=role_arn,
            policy_arn=CLUSTER_ADMIN_POLICY,
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
        )
