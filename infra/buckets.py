"""The settings every bucket of the project gets, in one place.

Versioned, encrypted at rest (SSE-S3, or SSE-KMS with a bucket key when a key is given), every
public-access block on, ACLs off (`BucketOwnerEnforced`), a policy that refuses requests
without TLS, and a lifecycle rule (`bucketLifecycle`) that bounds what versioning keeps: old
versions expire, unfinished multipart uploads are aborted, delete markers left alone are
removed. Each setting is its own resource in pulumi-aws 7 (the inline arguments of
`aws.s3.Bucket` are deprecated), named `<prefix>` like the bucket's other parts; the policy is
`<prefix>-tls`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from config.storage import BucketLifecycleConfig
from infra.iam import deny_insecure_transport

LIFECYCLE_RULE_ID = "bounded-versions"
EXPIRY_RULE_ID = "expire-run-outputs"


@dataclass(frozen=True)
class Expiry:
    """Objects under `prefix` expire `days` after they were last written. On a versioned bucket an
    expiry adds a delete marker; the bounded-versions rule then removes the old version after
    `noncurrentVersionDays`, and the marker once it is alone (S3 user guide, lifecycle
    expiration on versioning-enabled buckets)."""

    rule_id: str
    prefix: str
    days: int


def harden(
    prefix: str,
    bucket: aws.s3.Bucket,
    opts: pulumi.ResourceOptions,
    lifecycle: BucketLifecycleConfig,
    kms_key_arn: pulumi.Input[str] | None = None,
    expiries: tuple[Expiry, ...] = (),
) -> None:
    """Declare the bucket's versioning, encryption, public-access block, ownership, TLS policy and
    lifecycle rule."""
    versioning = aws.s3.BucketVersioning(
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
    after_versioning = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[versioning]))
    lifecycle_rules(prefix, bucket, lifecycle, after_versioning, expiries)


def lifecycle_rules(
    prefix: str,
    bucket: aws.s3.Bucket,
    lifecycle: BucketLifecycleConfig,
    opts: pulumi.ResourceOptions,
    expiries: tuple[Expiry, ...] = (),
) -> aws.s3.BucketLifecycleConfiguration:
    """One rule over the whole bucket (an empty prefix filter): noncurrent versions expire after
    `noncurrentVersionDays` (keeping `newerNoncurrentVersions` newest, if set), unfinished multipart
    uploads are aborted, and a delete marker whose versions have all expired is removed (S3 takes
    ExpiredObjectDeleteMarker only without Days or Date in the same Expiration: botocore's s3 model).
    Then one rule per `expiries` (their own rules: an Expiration with Days cannot also carry
    ExpiredObjectDeleteMarker). Declared after versioning, as the provider's documentation does
    for a versioned bucket."""
    rule = aws.s3.BucketLifecycleConfigurationRuleArgs
    return aws.s3.BucketLifecycleConfiguration(
        prefix,
        bucket=bucket.id,
        rules=[
            rule(
                id=LIFECYCLE_RULE_ID,
                status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                    noncurrent_days=lifecycle.noncurrent_version_days,
                    newer_noncurrent_versions=lifecycle.newer_noncurrent_versions,
                ),
                abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                    days_after_initiation=lifecycle.abort_incomplete_upload_days
                ),
                expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(expired_object_delete_marker=True),
            ),
            *(
                rule(
                    id=e.rule_id,
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=e.prefix),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=e.days),
                )
                for e in expiries
            ),
        ],
        opts=opts,
    )
