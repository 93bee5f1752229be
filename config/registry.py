"""ECR repositories (`registry`)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.aws import problems
from config.base import Model, Refusal, matches
from config.workloads import RECIPES

BUILT = [recipe.REPOSITORY for recipe in RECIPES.values() if recipe.REPOSITORY]
"""The repositories of the recipes whose images the stack builds."""
_ECR_NAME_RE = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", re.ASCII)


class RepositoryConfig(Model):
    """One ECR repository. Tags are always immutable and images always KMS-encrypted."""

    scan_on_push: bool = Field(True, description="Scan each pushed image for vulnerabilities.")
    untagged_expiry_days: int = Field(7, ge=1, le=3650, description="Delete untagged images after this many days.")
    rebuild: int = Field(
        0,
        ge=0,
        description="Raise by one to build this repository's image again through a reviewed deploy (its source"
        " is uploaded anew); a build that exists already is skipped.",
    )


def _default_repositories() -> dict[str, RepositoryConfig]:
    # One repository per recipe whose image the stack builds.
    return {repository: RepositoryConfig() for repository in BUILT}


class RegistryConfig(Model):
    """ECR repositories for the training images."""

    repositories: dict[str, RepositoryConfig] = Field(
        default_factory=_default_repositories,
        description="Repository key -> options; created as <cluster.name>/<key>. Replaces the defaults"
        f" ({', '.join(BUILT)}) when given.",
    )

    @field_validator("repositories")
    @classmethod
    def _names(cls, v: dict[str, RepositoryConfig]) -> dict[str, RepositoryConfig]:
        for key in v:
            # The repository is `<cluster>/<key>`: the key must be a valid name segment for ECR.
            refused = problems(f"cluster/{key}", "ecr:CreateRepository:repositoryName")
            if refused or len(key) > 128 or not matches(_ECR_NAME_RE, key):
                raise Refusal(
                    f"{key!r} is not an ECR repository name: lowercase letters and digits, separated by . _ or -",
                    "invalid",
                )
        return v
