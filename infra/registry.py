"""ECR repositories for the training images: immutable tags, scan on push, KMS, protected (and
emptied by a destroy only when the stack does not protect its data)."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from config.registry import RegistryConfig, RepositoryConfig
from facts.names import NO_SCAN_EXCEPTION_TAG, component_type, image_repository
from infra.context import StackContext
from infra.iam import ecr_pull_policy, kms_key
from infra.protection import empties_on_delete, policy_exception, stateful


def lifecycle_policy(repo: RepositoryConfig) -> str:
    """Expire untagged images (failed pushes, overwritten builds) after the configured days.
    Tagged images are kept: a training run names its image by tag and must find it again."""
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": f"expire untagged images after {repo.untagged_expiry_days} days",
                    "selection": {
                        "tagStatus": "untagged",
                        "countType": "sinceImagePushed",
                        "countUnit": "days",
                        "countNumber": repo.untagged_expiry_days,
                    },
                    "action": {"type": "expire"},
                }
            ]
        },
        sort_keys=True,
    )


class Registry(pulumi.ComponentResource):
    """One KMS key and one ECR repository per configured image, named `<cluster>/<key>`."""

    urls: dict[str, pulumi.Output[str]]
    """Repository key (as in config) -> repository URL."""

    def __init__(
        self,
        name: str,
        registry: RegistryConfig,
        ctx: StackContext,
        node_role_arn: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "Registry"), name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = stateful(ctx.protect, child)
        cluster = ctx.cluster_name
        tags = ctx.owned_tags
        key = kms_key(
            f"{name}-key",
            description=f"ECR images of {cluster}",
            alias=f"{cluster}-ecr",
            protect=ctx.protect,
            parent=self,
            tags=tags,
        )

        self.urls = {}
        for repo_key, repo in sorted(registry.repositories.items()):
            repository = aws.ecr.Repository(
                f"{name}-{repo_key}",
                name=image_repository(cluster, repo_key),
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=repo.scan_on_push
                ),
                encryption_configurations=[
                    aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS", kms_key=key.arn)
                ],
                force_delete=empties_on_delete(ctx.protect),
                tags={
                    **tags,
                    **policy_exception(
                        NO_SCAN_EXCEPTION_TAG,
                        None
                        if repo.scan_on_push
                        else f"stack config registry.repositories.{repo_key}.scanOnPush false",
                    ),
                },
                opts=keep,
            )
            aws.ecr.LifecyclePolicy(
                f"{name}-{repo_key}", repository=repository.name, policy=lifecycle_policy(repo), opts=child
            )
            aws.ecr.RepositoryPolicy(
                f"{name}-{repo_key}",
                repository=repository.name,
                policy=pulumi.Output.from_input(node_role_arn).apply(ecr_pull_policy),
                opts=child,
            )
            self.urls[repo_key] = repository.repository_url

        self.register_outputs({"urls": self.urls})
