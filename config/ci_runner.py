"""The in-VPC CI runner (`ciRunner`): a CodeBuild project serving as a self-hosted GitHub
Actions runner in the private subnets, so CI can reach the private cluster API."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from config.base import KeyProblem, Model, matches
from facts.regions import PARTITION

# GitHub: an owner (user or organization) is 1-39 alphanumerics or single hyphens; a
# repository name is letters, digits, '.', '-' and '_' (up to 100).
_REPOSITORY_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}/[A-Za-z0-9._-]{1,100}", re.ASCII)
# CodeConnections (formerly CodeStar Connections) connection ARNs; both prefixes are current.
# ARNs of this program's partition only (facts.regions.PARTITION).
_CONNECTION_RE = re.compile(
    rf"arn:{PARTITION}:(?:codeconnections|codestar-connections):[a-z0-9-]+:[0-9]{{12}}:connection/[0-9a-f-]{{36}}",
    re.ASCII,
)
_KMS_KEY_RE = re.compile(rf"arn:{PARTITION}:kms:[a-z0-9-]+:[0-9]{{12}}:key/[0-9a-f-]{{36}}", re.ASCII)
# S3 bucket names: 3-63 lowercase letters, digits, '.', '-', starting and ending alphanumeric.
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", re.ASCII)
_PATTERNS = {
    "repository": (_REPOSITORY_RE, "a GitHub repository like my-org/llm-training-eks"),
    "connection_arn": (
        _CONNECTION_RE,
        "a connection ARN like arn:aws:codeconnections:us-west-2:123456789012:connection/<uuid>",
    ),
    "secrets_key_arn": (_KMS_KEY_RE, "a KMS key ARN like arn:aws:kms:us-west-2:123456789012:key/<uuid>"),
    "state_bucket": (_BUCKET_RE, "an S3 bucket name (3-63 lowercase letters, digits, '.', '-')"),
    # codebuild CreateProject environment.image: `<registry>/<repository>:<tag>` or `@<digest>` (botocore).
    "image": (re.compile(r"[a-z0-9][A-Za-z0-9._/:@-]{0,254}", re.ASCII), "an image like aws/codebuild/standard:7.0"),
}

# The Linux container sizes of the CodeBuild API's ComputeType enum (botocore codebuild model;
# tests/unit/test_ci_runner.py holds them against it). Pulumi, Python and the Kubernetes
# provider run comfortably in MEDIUM (4 vCPU, 7 GB).
ComputeType = Literal["BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_MEDIUM", "BUILD_GENERAL1_LARGE"]
# CodeBuild's curated Ubuntu 22.04 image: git, make, AWS CLI v2 and Python 3.11
# (aws/aws-codebuild-docker-images ubuntu/standard/7.0/Dockerfile; tests/upstream/).
DEFAULT_IMAGE = "aws/codebuild/standard:7.0"


class CiRunnerConfig(Model):
    """A CodeBuild-hosted GitHub Actions runner in the VPC's private subnets (aws layer)."""

    enabled: bool = Field(False, description="Declare the runner.")
    repository: str | None = Field(None, description="GitHub repository (owner/name) whose jobs the runner takes.")
    connection_arn: str | None = Field(
        None,
        description="CodeConnections connection to GitHub (a GitHub App); default: the account's CodeBuild"
        " source credential.",
    )
    compute_type: ComputeType = Field("BUILD_GENERAL1_MEDIUM", description="CodeBuild Linux container size.")
    image: str = Field(DEFAULT_IMAGE, description="CodeBuild image of the runner.")
    build_timeout_minutes: int = Field(
        120, ge=5, le=2160, description="Longest job, minutes (CodeBuild allows 5 to 2160)."
    )
    state_bucket: str | None = Field(
        None, description="S3 bucket of the Pulumi state backend the runner reads and writes (none: Pulumi Cloud)."
    )
    secrets_key_arn: str | None = Field(
        None, description="KMS key of the stacks' secrets provider (none: passphrase or Pulumi Cloud)."
    )

    @field_validator("repository", "connection_arn", "secrets_key_arn", "state_bucket", "image")
    @classmethod
    def _pattern(cls, v: str | None, info: ValidationInfo) -> str | None:
        pattern, example = _PATTERNS[info.field_name or ""]
        if v is not None and not matches(pattern, v):
            raise ValueError(f"{v!r} is not {example}")
        return v

    @model_validator(mode="after")
    def _needs_repository(self) -> CiRunnerConfig:
        if self.enabled and self.repository is None:
            raise KeyProblem("repository", "required when enabled: the GitHub repository (owner/name) of the workflows")
        return self
