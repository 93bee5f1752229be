"""IAM policy documents and KMS keys the components share, as plain tested functions.

Each document function returns the JSON text AWS takes; each states exactly the access one
principal needs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from infra.protection import stateful

# What a node needs to pull an image, and nothing more.
ECR_PULL_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


def service_trust_policy(service: str, *, tag_session: bool = False) -> str:
    """Trust policy letting one AWS service principal assume a role (and tag the session,
    which EKS and EKS Pod Identity need)."""
    action: str | list[str] = ["sts:AssumeRole", "sts:TagSession"] if tag_session else "sts:AssumeRole"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": action}],
        },
        sort_keys=True,
    )


POD_IDENTITY_TRUST = service_trust_policy("pods.eks.amazonaws.com", tag_session=True)
"""Trust of a role that EKS Pod Identity hands to a service account."""


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
    """Write to one CloudWatch log group (and its streams) only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    "Resource": [log_group_arn, f"{log_group_arn}:*"],
                }
            ],
        }
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
) -> aws.kms.Key:
    """A customer-managed key with yearly rotation and a 30-day deletion window, protected like
    the data it encrypts, and its `alias/<alias>`."""
    key = aws.kms.Key(
        name,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=30,
        tags=dict(tags) if tags is not None else None,
        opts=stateful(protect, pulumi.ResourceOptions(parent=parent)),
    )
    aws.kms.Alias(name, name=f"alias/{alias}", target_key_id=key.key_id, opts=pulumi.ResourceOptions(parent=parent))
    return key
