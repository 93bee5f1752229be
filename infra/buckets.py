"""The settings every bucket of the project gets, in one place.

Versioned, encrypted at rest (SSE-S3, or SSE-KMS with a bucket key when a key is given), every
public-access block on, ACLs off (`BucketOwnerEnforced`), and a policy that refuses requests
without TLS. Each setting is its own resource in pulumi-aws 7 (the inline arguments of
`aws.s3.Bucket` are deprecated), named `<prefix>` like the bucket's other parts; the policy is
`<prefix>-tls`.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.iam import deny_insecure_transport


def harden(
    prefix: str, bucket: aws.s3.Bucket, opts: pulumi.ResourceOptions, kms_key_arn: pulumi.Input[str] | None = None
) -> None:
    """Declare the bucket's versioning, encryption, public-access block, ownership and TLS policy."""
    aws.s3.BucketVersioning(
        prefix,
        bucket=bucket.id,
        versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
        opts=opts,
    )
    by_default = aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs
    encryption = (
        by_default(sse_algorithm="AES256")
        if kms_key_arn is None
        else by_default(sse_algorithm="aws:kms", kms_master_key_id=kms_key_arn)
    )
    aws.s3.BucketServerSideEncryptionConfiguration(
        prefix,
        bucket=bucket.id,
        rules=[
            aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=encryption,
                bucket_key_enabled=True if kms_key_arn is not None else None,
            )
        ],
        opts=opts,
    )
    aws.s3.BucketPublicAccessBlock(
        prefix,
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=opts,
    )
    aws.s3.BucketOwnershipControls(
        prefix,
        bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=opts,
    )
    aws.s3.BucketPolicy(f"{prefix}-tls", bucket=bucket.id, policy=bucket.arn.apply(deny_insecure_transport), opts=opts)
