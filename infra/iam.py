"""IAM policy documents and KMS keys the components share, as plain tested functions.

Each document function returns the JSON text AWS takes; each states exactly the access one
principal needs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws

from infra.protection import stateful

# What a node needs to pull an image, and nothing more.
ECR_PULL_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


def service_trust_policy(
    service: str,
    *,
    tag_session: bool = False,
    source_account: str | None = None,
    source_arns: Sequence[str] = (),
) -> str:
    """Trust policy letting one AWS service principal assume a role (and tag the session, which
    EKS needs). With `source_account` / `source_arns`, the service may assume it only when it
    acts for this account and these resources (`aws:SourceAccount`, `aws:SourceArn`): the
    confused-deputy conditions the service's guide recommends (tests/upstream/aws-trust-conditions-2026-11.yaml).
    Without them, the shape the guide documents for services that set no source keys (the EKS
    cluster role, the EC2 node role)."""
    action: str | list[str] = ["sts:AssumeRole", "sts:TagSession"] if tag_session else "sts:AssumeRole"
    statement: dict[str, object] = {"Effect": "Allow", "Principal": {"Service": service}, "Action": action}
    condition: dict[str, object] = {}
    if source_account:
        condition["StringEquals"] = {"aws:SourceAccount": source_account}
    if source_arns:
        condition["ArnLike"] = {"aws:SourceArn": source_arns[0] if len(source_arns) == 1 else list(source_arns)}
    if condition:
        statement["Condition"] = condition
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]}, sort_keys=True)


def pod_identity_trust_policy(cluster_arn: str, namespace: str, service_account: str) -> str:
    """Trust of a role EKS Pod Identity hands to one service account of one cluster: the
    principal and actions of the EKS user guide (pod-id-role), conditioned on the session tags
    EKS Pod Identity sets on every AssumeRole (`eks-cluster-arn`, `kubernetes-namespace`,
    `kubernetes-service-account`; pod-id-abac), so no other cluster, namespace or service
    account of the account can use the role through an association of its own."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                    "Condition": {
                        "StringEquals": {
                            "aws:RequestTag/eks-cluster-arn": cluster_arn,
                            "aws:RequestTag/kubernetes-namespace": namespace,
                            "aws:RequestTag/kubernetes-service-account": service_account,
                        }
                    },
                }
            ],
        },
        sort_keys=True,
    )


def account_and_partition(parent: pulumi.Resource) -> pulumi.Output[tuple[str, str]]:
    """The deploying account and its partition, through the parent's AWS provider."""
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    caller = aws.get_caller_identity_output(opts=invoke)
    partition = aws.get_partition_output(opts=invoke)
    return pulumi.Output.all(caller.account_id, partition.partition).apply(lambda a: (str(a[0]), str(a[1])))


def scoped_trust_policy(
    parent: pulumi.Resource, service: str, arn_service: str, region: str, resources: Sequence[str]
) -> pulumi.Output[str]:
    """`service_trust_policy` for resources of this account and region, whose ARNs are known
    before they exist (`arn:<partition>:<arn_service>:<region>:<account>:<resource>`)."""
    return account_and_partition(parent).apply(
        lambda a: service_trust_policy(
            service,
            source_account=a[0],
            source_arns=[f"arn:{a[1]}:{arn_service}:{region}:{a[0]}:{r}" for r in resources],
        )
    )


def irsa_trust_policy(oidc_provider_arn: str, oidc_provider_url: str, namespace: str, service_account: str) -> str:
    """Trust one Kubernetes service account of this cluster through its OIDC provider (IRSA)."""
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


def kms_envelope_policy(key_arn: str) -> str:
    """What the EKS control plane needs of the secrets key for envelope encryption, on that key only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
                    "Resource": key_arn,
                }
            ],
        }
    )


def log_writer_policy(log_group_arn: str) -> str:
    """What VPC flow logs need to publish to one CloudWatch log group (and its streams): the
    flow-logs guide's role policy, scoped to that group. DescribeLogGroups cannot be scoped to a
    group ARN (it lists), so it gets the account's log groups in the region of the group."""
    region_account = ":".join(log_group_arn.split(":")[:5])  # arn:aws:logs:<region>:<account>
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    "Resource": [log_group_arn, f"{log_group_arn}:*"],
                },
                {
                    "Effect": "Allow",
                    "Action": ["logs:DescribeLogGroups"],
                    "Resource": [f"{region_account}:log-group:*"],
                },
            ],
        }
    )


# The role FSx for Lustre creates for each file system linked to S3 (FSx for Lustre guide,
# "Working with server-side encrypted Amazon S3 buckets"; the suffix is the file-system id).
FSX_S3_LINK_ROLE_PATH = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_"
FSX_S3_LINK_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"]


def data_key_policy(*, account_id: str, partition: str, region: str, bucket_arn: str) -> str:
    """Key policy of the training-data key: the account administers it (the default key policy,
    so IAM policies keep working), and FSx's S3 service-linked role of any file system of this
    account may use it through S3, on this bucket's objects only: the FSx guide's statement.
    The guide names the role with the file-system id; that id exists only after the file system,
    which itself uses this key, so the role is matched by its path instead (aws:PrincipalArn)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "AccountAdministersTheKey",
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                },
                {
                    "Sid": "FsxS3LinkThroughS3OnThisBucket",
                    "Effect": "Allow",
                    "Principal": {"AWS": "*"},
                    "Action": FSX_S3_LINK_KEY_ACTIONS,
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {
                            "kms:CallerAccount": account_id,
                            "kms:ViaService": f"s3.{region}.amazonaws.com",
                        },
                        # With S3 Bucket Keys the context is the bucket ARN; without, the object ARN.
                        "StringLike": {"kms:EncryptionContext:aws:s3:arn": [bucket_arn, f"{bucket_arn}/*"]},
                        "ArnLike": {"aws:PrincipalArn": f"arn:{partition}:iam::{account_id}:{FSX_S3_LINK_ROLE_PATH}*"},
                    },
                },
            ],
        },
        sort_keys=True,
    )


def neuron_health_policy() -> str:
    """What the Neuron node problem detector's health container needs with recovery off: publish
    its metrics to the NeuronHealthCheck namespace and look up the node's instance and group
    (Neuron SDK, "Permissions for Neuron Node Problem Detector and Recovery").
    autoscaling:SetInstanceHealth is left out on purpose: EKS node auto repair is the one
    component that remediates."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "Metrics",
                    "Effect": "Allow",
                    "Action": ["cloudwatch:PutMetricData"],
                    "Resource": "*",
                    "Condition": {"StringEquals": {"cloudwatch:Namespace": "NeuronHealthCheck"}},
                },
                {
                    "Sid": "Describe",
                    "Effect": "Allow",
                    "Action": ["ec2:DescribeInstances", "autoscaling:DescribeAutoScalingInstances"],
                    "Resource": "*",
                },
            ],
        },
        sort_keys=True,
    )


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


def ecr_pull_policy(node_role_arn: str) -> str:
    """Repository policy: the cluster's node role may pull, read-only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "NodesPull",
                    "Effect": "Allow",
                    "Principal": {"AWS": node_role_arn},
                    "Action": ECR_PULL_ACTIONS,
                }
            ],
        },
        sort_keys=True,
    )


def deny_insecure_transport(bucket_arn: str) -> str:
    """Bucket policy: refuse every request that does not use TLS."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


def kms_key(
    name: str,
    *,
    description: str,
    alias: str,
    protect: bool,
    parent: pulumi.Resource,
    tags: Mapping[str, str] | None = None,
    policy: pulumi.Input[str] | None = None,
) -> aws.kms.Key:
    """A customer-managed key with yearly rotation and a 30-day deletion window, protected like
    the data it encrypts, and its `alias/<alias>`. Without `policy`, KMS's default key policy
    (the account administers the key)."""
    key = aws.kms.Key(
        name,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=30,
        policy=policy,
        tags=dict(tags) if tags is not None else None,
        opts=stateful(protect, pulumi.ResourceOptions(parent=parent)),
    )
    aws.kms.Alias(name, name=f"alias/{alias}", target_key_id=key.key_id, opts=pulumi.ResourceOptions(parent=parent))
    return key
