"""The in-VPC CI runners: AWS CodeBuild projects that serve as self-hosted GitHub Actions runners
in the private subnets, so the jobs that need the private cluster API (the cluster and runs
layers) can reach it.

GitHub queues a job whose `runs-on` is `codebuild-<project>-${{ github.run_id }}-${{
github.run_attempt }}`; the project's webhook (event `WORKFLOW_JOB_QUEUED`) starts a build
that registers as an ephemeral runner, takes that one job and ends (CodeBuild user guide,
"Self-hosted GitHub Actions runners in AWS CodeBuild").

Two runners, one role each, as the CodeBuild guide's webhook best practices ask ("create one
project for testing and another for deployment"):
- `preview` takes pull-request previews and drift checks: it reads the Pulumi state, decrypts
  the stacks' secrets (a preview runs the program, which reads them) and reads the cluster;
- `deploy` takes reviewed deploys: it writes the state of this environment's stacks only and is
  cluster admin.
Each webhook starts builds only for the jobs of the listed GitHub accounts (`ACTOR_ACCOUNT_ID`)
and of its own workflows (`WORKFLOW_NAME`); a fork's pull request needs a maintainer's comment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from config.ci_runner import CiRunnerConfig
from facts.names import PROJECT, ci_runner_project, component_type
from infra.cluster import CLUSTER_ADMIN_POLICY, Cluster
from infra.context import StackContext
from infra.iam import account_and_partition, scoped_trust_policy
from infra.network import Network

WORKFLOW_JOB_QUEUED = "WORKFLOW_JOB_QUEUED"
"""The webhook event that starts a runner build (botocore codebuild model, WebhookFilter)."""
ADMIN_VIEW_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"
"""get/list/watch on every resource, Secrets included, and nothing else (EKS user guide, access
policy permissions). AmazonEKSViewPolicy would do for `pulumi preview` alone (pulumi-kubernetes
falls back to a client-side diff when a read or dry-run is Forbidden), not for the drift check:
`pulumi preview --refresh` reads every object it manages, and the View policy covers no custom
resource (MPIJob, Kueue), no cluster-scoped object and no Secret (Helm release records, the run's
Secrets); pulumi-kubernetes fails a refresh on Forbidden."""
ACCESS_POLICY = {"preview": ADMIN_VIEW_POLICY, "deploy": CLUSTER_ADMIN_POLICY}
WORKFLOWS = {"preview": ("pull request", "drift"), "deploy": ("deploy",)}
"""The `name:` of the workflows whose jobs each runner takes (.github/workflows)."""
# Pull-request comment approval (CodeBuild user guide, pull-request-build-policy): the pull
# requests that need a `/codebuild_run(<sha>)` comment by one of these repository roles first. A
# fork's pull request never previews unasked; no pull request ever reaches the deploy runner.
PULL_REQUEST_APPROVAL = {
    "preview": ("FORK_PULL_REQUESTS", ["GITHUB_MAINTAIN", "GITHUB_ADMIN"]),
    "deploy": ("ALL_PULL_REQUESTS", ["GITHUB_ADMIN"]),
}
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
# Pulumi's DIY backend (pulumi/pulumi pkg/backend/diy): a preview reads `.pulumi/meta.yaml` and
# the stacks (its own and those it references) and writes nothing, not even a lock; an update
# also writes the stack's checkpoint (`stacks/<project>/<stack>.json`, `.bak`), history, backups
# and lock (`locks/organization/<project>/<stack>/<id>.json`).
STATE_PREFIX = ".pulumi/"
STATE_WRITE_ACTIONS = ["s3:PutObject", "s3:DeleteObject"]
# The cloud secrets manager decrypts the stack's data key once (pulumi/pulumi
# pkg/secrets/cloud/manager.go); kms:Encrypt is needed only to make a stack's key (`stack init`).
SECRETS_KEY_ACTIONS = ["kms:Decrypt"]
# `python -m tools.images wait`: whether the run's image is pushed, or how its build went.
IMAGE_STATUS_ACTIONS = {
    "codebuild": ["codebuild:BatchGetBuilds", "codebuild:ListBuildsForProject"],
    "ecr": ["ecr:DescribeImages"],
}


def runner_label(project: str) -> str:
    """The `runs-on` label of a job for this runner (CodeBuild user guide, action-runner)."""
    return f"codebuild-{project}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}"


def actor_pattern(account_ids: Sequence[int]) -> str:
    """ACTOR_ACCOUNT_ID filter: exactly these GitHub account ids (a regular expression)."""
    return "^(" + "|".join(str(i) for i in sorted(account_ids)) + ")$"


def workflow_pattern(kind: str) -> str:
    """WORKFLOW_NAME filter: exactly the workflows of this runner."""
    return "^(" + "|".join(WORKFLOWS[kind]) + ")$"


@dataclass(frozen=True)
class StateAccess:
    """What a runner may do with the Pulumi state: the bucket, and the stacks it writes (none: read)."""

    bucket: str
    writes: tuple[str, ...] = ()


def state_statements(partition: str, state: StateAccess) -> list[dict[str, object]]:
    """Read every object under `.pulumi/` (stack references read the layer below); write only
    the checkpoint, history, backups and lock of the stacks in `state.writes`."""
    bucket = f"arn:{partition}:s3:::{state.bucket}"
    out: list[dict[str, object]] = [
        {
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket,
            "Condition": {"StringLike": {"s3:prefix": [STATE_PREFIX, f"{STATE_PREFIX}*"]}},
        },
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{bucket}/{STATE_PREFIX}*"},
    ]
    if state.writes:
        keys = []
        for stack in sorted(state.writes):
            keys += [
                f"{bucket}/{STATE_PREFIX}stacks/{PROJECT}/{stack}.json*",
                f"{bucket}/{STATE_PREFIX}history/{PROJECT}/{stack}/*",
                f"{bucket}/{STATE_PREFIX}backups/{PROJECT}/{stack}/*",
                f"{bucket}/{STATE_PREFIX}locks/organization/{PROJECT}/{stack}/*",
            ]
        out.append({"Effect": "Allow", "Action": STATE_WRITE_ACTIONS, "Resource": keys})
    return out


def runner_policy(
    *,
    log_group_arn: str,
    subnet_arns: Sequence[str],
    network_interfaces_arn: str,
    connection_arn: str | None = None,
    state: StateAccess | None = None,
    secrets_key_arn: str | None = None,
    image_status: tuple[str, str] | None = None,
    partition: str = "aws",
) -> str:
    """What a runner build needs: its logs, its network interface in the given subnets, the
    GitHub connection, the Pulumi state (read, and writes where `state.writes` names stacks), the
    secrets key (decrypt), and (`image_status`: the image projects' and repositories' ARN
    patterns) the image builds' status."""
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
    if state:
        statements += state_statements(partition, state)
    if secrets_key_arn:
        statements.append({"Effect": "Allow", "Action": SECRETS_KEY_ACTIONS, "Resource": secrets_key_arn})
    if image_status:
        projects, repositories = image_status
        statements.append({"Effect": "Allow", "Action": IMAGE_STATUS_ACTIONS["codebuild"], "Resource": projects})
        statements.append({"Effect": "Allow", "Action": IMAGE_STATUS_ACTIONS["ecr"], "Resource": repositories})
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def webhook_filters(kind: str, runner: CiRunnerConfig) -> list[aws.codebuild.WebhookFilterGroupFilterArgs]:
    """One filter group (all must match): a queued workflow job, of this runner's workflows, by
    one of its GitHub accounts."""
    ids = runner.preview_actor_ids if kind == "preview" else runner.deploy_actor_ids
    flt = aws.codebuild.WebhookFilterGroupFilterArgs
    return [
        flt(type="EVENT", pattern=WORKFLOW_JOB_QUEUED),
        flt(type="ACTOR_ACCOUNT_ID", pattern=actor_pattern(ids)),
        flt(type="WORKFLOW_NAME", pattern=workflow_pattern(kind)),
    ]


class CiRunner(pulumi.ComponentResource):
    """Both runners (CodeBuild project + webhook, role, log group, access entry each), their
    security group and the cluster security group's rule that lets them reach the API on 443."""

    projects: dict[str, str]
    """Runner kind -> its CodeBuild project."""
    role_arns: dict[str, pulumi.Output[str]]

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
        self._name, self._runner, self._ctx, self._network = name, runner, ctx, network
        self.projects = {kind: ci_runner_project(ctx.cluster_name, kind) for kind in ("deploy", "preview")}
        self._ids = account_and_partition(self)  # through the stack's AWS provider, like every lookup
        sg = self._security_group(cluster)
        self.role_arns = {}
        for kind in self.projects:
            self.role_arns[kind] = self._runner_of(kind, sg.id, cluster)
        self.register_outputs({"projects": self.projects, "roleArns": self.role_arns})

    @property
    def label(self) -> str:
        """The `runs-on` label of the deploy runner."""
        return runner_label(self.projects["deploy"])

    def _res(self, kind: str, what: str) -> str:
        """Resource names: the deploy runner keeps the names the single runner had."""
        return f"{self._name}-{what}" if kind == "deploy" else f"{self._name}-{kind}-{what}"

    def _runner_of(self, kind: str, sg_id: pulumi.Input[str], cluster: Cluster) -> pulumi.Output[str]:
        child = pulumi.ResourceOptions(parent=self)
        project_name, ctx = self.projects[kind], self._ctx
        log_group = aws.cloudwatch.LogGroup(
            self._res(kind, "logs"),
            name=f"/aws/codebuild/{project_name}",
            retention_in_days=ctx.log_retention_days,
            tags=ctx.owned_tags,
            opts=child,
        )
        role, policy = self._role(kind, log_group.arn)
        project = self._project(kind, role.arn, sg_id, log_group.name, [policy])
        when, approvers = PULL_REQUEST_APPROVAL[kind]
        approval = aws.codebuild.WebhookPullRequestBuildPolicyArgs(
            requires_comment_approval=when, approver_roles=approvers
        )
        aws.codebuild.Webhook(
            self._res(kind, "webhook"),
            project_name=project.name,
            build_type="BUILD",
            filter_groups=[aws.codebuild.WebhookFilterGroupArgs(filters=webhook_filters(kind, self._runner))],
            pull_request_build_policy=approval,
            opts=child,
        )
        entry = aws.eks.AccessEntry(
            self._res(kind, "access"), cluster_name=cluster.name, principal_arn=role.arn, type="STANDARD", opts=child
        )
        aws.eks.AccessPolicyAssociation(
            self._res(kind, "admin" if kind == "deploy" else "view"),
            cluster_name=cluster.name,
            principal_arn=role.arn,
            policy_arn=ACCESS_POLICY[kind],
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
        )
        return role.arn

    def _role(self, kind: str, log_group_arn: pulumi.Output[str]) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
        """The role builds of `kind` run with: that project only may assume it; see `runner_policy`."""
        child = pulumi.ResourceOptions(parent=self)
        runner, ctx, region, project = self._runner, self._ctx, self._ctx.region, self.projects[kind]
        role = aws.iam.Role(
            self._res(kind, "role"),
            assume_role_policy=scoped_trust_policy(
                self, "codebuild.amazonaws.com", "codebuild", region, [f"project/{project}"]
            ),
            description=f"In-VPC CI {kind} runner of {ctx.cluster_name}",
            tags=ctx.owned_tags,
            opts=child,
        )
        subnets = list(self._network.private_subnet_ids.values())
        state = (
            StateAccess(runner.state_bucket, tuple(runner.stacks_written(ctx.cluster_name)) if kind == "deploy" else ())
            if runner.state_bucket
            else None
        )

        def document(a: list[Any]) -> str:
            (account, partition), log_arn, subnet_ids = a[0], a[1], a[2:]
            arn = f"arn:{partition}"
            return runner_policy(
                log_group_arn=str(log_arn),
                subnet_arns=[f"{arn}:ec2:{region}:{account}:subnet/{s}" for s in subnet_ids],
                network_interfaces_arn=f"{arn}:ec2:{region}:{account}:network-interface/*",
                connection_arn=runner.connection_arn,
                state=state,
                secrets_key_arn=runner.secrets_key_arn,
                image_status=(
                    f"{arn}:codebuild:{region}:{account}:project/{ctx.cluster_name}-*-image",
                    f"{arn}:ecr:{region}:{account}:repository/{ctx.cluster_name.lower()}/*",
                )
                if kind == "deploy"
                else None,
                partition=str(partition),
            )

        policy = aws.iam.RolePolicy(
            self._res(kind, "policy"),
            role=role.id,
            policy=pulumi.Output.all(self._ids, log_group_arn, *subnets).apply(document),
            opts=child,
        )
        return role, policy

    def _security_group(self, cluster: Cluster) -> aws.ec2.SecurityGroup:
        """Out on 443 only (GitHub, AWS APIs, package indexes, the cluster API); the cluster's
        security group admits it on 443. The VPC's DNS resolver is not filtered by groups."""
        child = pulumi.ResourceOptions(parent=self)
        name, ctx = self._name, self._ctx
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=self._network.vpc_id,
            description=f"In-VPC CI runner of {ctx.cluster_name}: HTTPS out only",
            tags={**ctx.owned_tags, "Name": self.projects["deploy"]},
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
        kind: str,
        role_arn: pulumi.Input[str],
        sg_id: pulumi.Input[str],
        log_group_name: pulumi.Input[str],
        depends_on: list[pulumi.Resource],
    ) -> aws.codebuild.Project:
        # CodeBuild checks the role's EC2 permissions when a VPC project is created, so the
        # project waits for the policy (aws/aws-cdk#2651).
        runner, ctx, network = self._runner, self._ctx, self._network
        auth = (
            aws.codebuild.ProjectSourceAuthArgs(type="CODECONNECTIONS", resource=runner.connection_arn)
            if runner.connection_arn
            else None
        )
        timeout = runner.build_timeout_minutes if kind == "deploy" else runner.preview_build_timeout_minutes
        return aws.codebuild.Project(
            self._res(kind, "project"),
            name=self.projects[kind],
            description=f"Self-hosted GitHub Actions {kind} runner in the VPC of {ctx.cluster_name}",
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
            build_timeout=timeout,
            queued_timeout=runner.queued_timeout_minutes,
            tags=ctx.owned_tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )
