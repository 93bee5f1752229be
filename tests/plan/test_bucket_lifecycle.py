"""Every bucket keeps old versions and unfinished uploads for a bounded time.

The data bucket is versioned and linked to FSx: each changed file is exported again, leaving the
previous copy as a noncurrent version, and nothing expired any of them. The rule every bucket
gets (infra/buckets.py) is held against botocore's s3 model (tests/upstream/botocore-s3-lifecycle.yaml).
"""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest

import config
from config import aws
from config.storage import NEWER_NONCURRENT_VERSIONS, NONCURRENT_DAYS
from infra.buckets import LIFECYCLE_RULE_ID
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, MINIMAL, resources, run_plan, stack_plan

LIFECYCLE = "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"
RULE_SHAPE = "LifecycleRule"


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_bucket_expires_old_versions_and_unfinished_uploads(stack: str):
    plan = stack_plan(stack)
    buckets = resources(plan, "aws:s3/bucket:Bucket")
    versioning = {v["name"]: v["urn"] for v in resources(plan, "aws:s3/bucketVersioning:BucketVersioning")}
    for bucket in buckets:
        (config_,) = [c for c in resources(plan, LIFECYCLE) if c["name"] == bucket["name"]]
        # Declared after versioning (S3 applies noncurrent rules to a versioned bucket).
        assert versioning[bucket["name"]] in config_["dependencies"]
        # The first rule; the data bucket's run-output expiries follow (tests/plan/test_export_retention.py).
        rule = config_["inputs"]["rules"][0]
        assert rule["id"] == LIFECYCLE_RULE_ID and rule["status"] == "Enabled"
        assert rule["filter"] == {"prefix": ""}, "the whole bucket"
        assert rule["noncurrentVersionExpiration"]["noncurrentDays"] == 14
        assert rule["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == 7
        assert rule["expiration"] == {"expiredObjectDeleteMarker": True}


def test_the_rule_is_one_s3_accepts():
    """botocore's LifecycleRule members, and what their documentation says of the values."""
    facts = upstream.facts("botocore-s3-lifecycle")
    model = botocore.session.get_session().get_service_model("s3")
    rule = model.shape_for(RULE_SHAPE)
    assert set(facts["members"]) <= set(rule.members)
    assert rule.members["Status"].enum == facts["status_enum"]
    expiration = rule.members["Expiration"].members["ExpiredObjectDeleteMarker"]
    assert facts["expired_object_delete_marker"] in expiration.documentation
    assert facts["noncurrent_days"] in aws.shape(NONCURRENT_DAYS).documentation
    assert facts["newer_noncurrent_versions"] in aws.shape(NEWER_NONCURRENT_VERSIONS).documentation
    # What config.aws reads out of that documentation, and what it then refuses.
    assert aws.problems(0, NONCURRENT_DAYS) and not aws.problems(1, NONCURRENT_DAYS)
    assert aws.problems(101, NEWER_NONCURRENT_VERSIONS) and not aws.problems(100, NEWER_NONCURRENT_VERSIONS)


def test_the_stack_sets_the_rule():
    plan = run_plan(
        {
            **MINIMAL,
            "llm-training-eks:bucketLifecycle": {
                "noncurrentVersionDays": 3,
                "newerNoncurrentVersions": 2,
                "abortIncompleteUploadDays": 1,
            },
        }
    )
    for c in resources(plan, LIFECYCLE):
        rule = c["inputs"]["rules"][0]
        assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": 3, "newerNoncurrentVersions": 2}
        assert rule["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 1}


@pytest.mark.parametrize(
    ("lifecycle", "message"),
    [
        ({"noncurrentVersionDays": 0}, "bucketLifecycle.noncurrentVersionDays: 0 is below the minimum 1"),
        ({"newerNoncurrentVersions": 101}, "bucketLifecycle.newerNoncurrentVersions: 101 is above the maximum 100"),
        ({"abortIncompleteUploadDays": 0}, "bucketLifecycle.abortIncompleteUploadDays"),
    ],
)
def test_values_s3_refuses_are_refused_naming_the_key(lifecycle: dict[str, Any], message: str):
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values({**MINIMAL, "llm-training-eks:bucketLifecycle": lifecycle})
    assert any(p.startswith(message) for p in e.value.problems), e.value.problems
