"""ECR repositories for the training images: immutable tags, scan on push, KMS, protected."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from infra.config import RepositoryConfig, StackConfig
from infra.protection import stateful

# What a node needs to pull an image, and nothing more.
PULL_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


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


def pull_policy(node_role_arn: str) -> str:
    """Repository policy: the cluster's node role may pull, read-only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "NodesPull",
                    "Effect": "Allow",
                    "Principal": {"AWS": node_role_arn},
                    "Action": PULL_ACTIONS,
                }
            ],
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
        cfg: StackConfig,
        node_role_arn: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llm-training-eks:infra:Registry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = stateful(cfg.protect_stateful_resources, child)
        cluster = cfg.cluster.name
        tags = {**cfg.tags, "llm-training-eks/cluster": cluster}

        key = aws.kms.Key(
            f"{name}-key",
            description=f"ECR images of {cluster}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=keep,
        )
        aws.kms.Alias(f"{name}-key", name=f"alias/{cluster}-ecr", target_key_id=key.key_id, opts=child)

        self.urls = {}
        for repo_key, repo in sorted(cfg.registry.repositories.items()):
            repository = aws.ecr.Repository(
                f"{name}-{repo_key}",
                name=f"{cluster.lower()}/{repo_key}",
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=repo.scan_on_push
                ),
                encryption_configurations=[
                    aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS", kms_key=key.arn)
                ],
                force_delete=False,
                tags=tags,
                opts=keep,
            )
            aws.ecr.LifecyclePolicy(
                f"{name}-{repo_key}", repository=repository.name, policy=lifecycle_policy(repo), opts=child
            )
            aws.ecr.RepositoryPolicy(
                f"{name}-{repo_key}",
                repository=repository.name,
                policy=pulumi.Output.from_input(node_role_arn).apply(pull_policy),
                opts=child,
            )
            self.urls[repo_key] = repository.repository_url

        self.register_outputs({"urls": self.urls})
