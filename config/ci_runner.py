"""The in-VPC CI runner (`ciRunner`): a CodeBuild project serving as a self-hosted GitHub
Actions runner in the private subnets, so CI can reach the private cluster API."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from config.base import KeyProblem, Model, Refusal, matches
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

# Pulumi stack names (pulumi/pulumi sdk/go/common/tokens: letters, digits, '-', '_' and '.').
_STACK_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}", re.ASCII)
# CodeBuild's limits (botocore codebuild model: BuildTimeOut 5-2160, TimeOut 5-480 minutes).
BUILD_TIMEOUT_RANGE = (5, 2160)
QUEUED_TIMEOUT_RANGE = (5, 480)
DEPLOY_BUILD_TIMEOUT_MINUTES = 1200
"""The deploy runner's default life: above the longest deploy job the example runs stacks need
(tools.ci derives each job's `timeout-minutes` from the awaited objects and refuses a runner that
dies first) and below the 24 hours a job's GITHUB_TOKEN lives (GitHub Actions docs)."""

# The Linux container sizes of the CodeBuild API's ComputeType enum (botocore codebuild model;
# tests/unit/test_ci_runner.py holds them against it). Pulumi, Python and the Kubernetes
# provider run comfortably in MEDIUM (4 vCPU, 7 GB).
ComputeType = Literal["BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_MEDIUM", "BUILD_GENERAL1_LARGE"]
# CodeBuild's curated Ubuntu 22.04 image: git, make, AWS CLI v2 and Python 3.11
# (aws/aws-codebuild-docker-images ubuntu/standard/7.0/Dockerfile; tests/upstream/).
DEFAULT_IMAGE = "aws/codebuild/standard:7.0"


class CiRunnerConfig(Model):
    """A CodeBuild-hosted GitHub Actions runner in the VPC's private subnets (aws layer)."""

    enabled: bool = Field(
        False,
        description=(
            "Declare the in-VPC CI runners (CodeBuild-hosted GitHub Actions runners: one that previews, one that "
            "deploys)."
        ),
    )
    repository: str | None = Field(
        None,
        description="GitHub repository (owner/name) whose jobs the runner takes.",
        json_schema_extra={"x-default": "(required when enabled)"},
    )
    connection_arn: str | None = Field(
        None,
        description="CodeConnections connection to GitHub (a GitHub App); default: the account's CodeBuild"
        " source credential.",
        json_schema_extra={"x-default": "the account's CodeBuild GitHub credential"},
    )
    compute_type: ComputeType = Field("BUILD_GENERAL1_MEDIUM", description="CodeBuild Linux container size.")
    image: str = Field(
        DEFAULT_IMAGE, description="CodeBuild image of the runners (needs make, Python 3.11 and the AWS CLI v2)."
    )
    build_timeout_minutes: int = Field(
        DEPLOY_BUILD_TIMEOUT_MINUTES,
        ge=BUILD_TIMEOUT_RANGE[0],
        le=BUILD_TIMEOUT_RANGE[1],
        description="Life of the deploy runner, minutes (CodeBuild allows 5 to 2160): longer than every deploy"
        " job it takes (`python -m tools.ci stacks` refuses it otherwise).",
    )
    preview_build_timeout_minutes: int = Field(
        60,
        ge=BUILD_TIMEOUT_RANGE[0],
        le=BUILD_TIMEOUT_RANGE[1],
        description="Life of the preview runner, minutes: longer than every preview and drift job.",
    )
    queued_timeout_minutes: int = Field(
        60,
        ge=QUEUED_TIMEOUT_RANGE[0],
        le=QUEUED_TIMEOUT_RANGE[1],
        description="How long a runner build may wait for CodeBuild capacity, minutes (CodeBuild allows 5 to 480).",
    )
    preview_actor_ids: list[int] = Field(
        default_factory=list,
        description="GitHub account ids (numeric) whose workflow jobs the preview runner takes: who opens pull"
        " requests and starts drift checks. `gh api users/<login> --jq .id` prints one.",
        json_schema_extra={"x-default": "(required when enabled)"},
    )
    deploy_actor_ids: list[int] = Field(
        default_factory=list,
        description="GitHub account ids (numeric) whose workflow jobs the deploy runner takes: who merges to main.",
        json_schema_extra={"x-default": "(required when enabled)"},
    )
    deploy_stacks: list[str] | None = Field(
        None,
        description="Stacks whose state the deploy runner may write (default: <cluster.name>-cluster and"
        " <cluster.name>-runs); the preview runner only reads state.",
        json_schema_extra={"x-default": "`<cluster.name>-cluster`, `<cluster.name>-runs`"},
    )
    state_bucket: str | None = Field(
        None,
        description="S3 bucket of the Pulumi state backend the runner reads and writes (none: Pulumi Cloud).",
        json_schema_extra={"x-default": "none (Pulumi Cloud)"},
    )
    secrets_key_arn: str | None = Field(
        None,
        description="KMS key of the stacks' secrets provider (none: passphrase or Pulumi Cloud).",
        json_schema_extra={"x-default": "none (passphrase or Pulumi Cloud)"},
    )

    @field_validator("repository", "connection_arn", "secrets_key_arn", "state_bucket", "image")
    @classmethod
    def _pattern(cls, v: str | None, info: ValidationInfo) -> str | None:
        pattern, example = _PATTERNS[info.field_name or ""]
        if v is not None and not matches(pattern, v):
            raise Refusal(f"{v!r} is not {example}", "invalid")
        return v

    @field_validator("preview_actor_ids", "deploy_actor_ids")
    @classmethod
    def _account_ids(cls, v: list[int]) -> list[int]:
        bad = [i for i in v if i < 1]
        if bad or len(set(v)) != len(v):
            raise Refusal(
                f"{v}: GitHub account ids are positive integers, each once (`gh api users/<login> --jq .id`)", "invalid"
            )
        return v

    @field_validator("deploy_stacks")
    @classmethod
    def _stacks(cls, v: list[str] | None) -> list[str] | None:
        bad = [s for s in v or [] if not matches(_STACK_RE, s)]
        if bad:
            raise Refusal(f"{bad}: Pulumi stack names are 1-100 letters, digits, '-', '_' or '.'", "invalid")
        return v

    @model_validator(mode="after")
    def _needs_repository(self) -> CiRunnerConfig:
        if self.enabled and self.repository is None:
            raise KeyProblem(
                "repository", "required when enabled: the GitHub repository (owner/name) of the workflows", "required"
            )
        for key, ids in (("previewActorIds", self.preview_actor_ids), ("deployActorIds", self.deploy_actor_ids)):
            if self.enabled and not ids:
                # The webhook would otherwise take any queued job of the repository, a fork's included
                # (CodeBuild user guide, "Best practices for using webhooks").
                raise KeyProblem(
                    key,
                    "required when enabled: the GitHub account ids whose jobs this runner may take, e.g. [1234567]"
                    " (`gh api users/<login> --jq .id`)",
                    "required",
                )
        return self

    def stacks_written(self, cluster_name: str) -> list[str]:
        """The stacks whose state the deploy runner writes."""
        if self.deploy_stacks is not None:
            return list(self.deploy_stacks)
        return [f"{cluster_name}-cluster", f"{cluster_name}-runs"]
