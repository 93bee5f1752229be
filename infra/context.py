"""The few stack-wide values every component reads besides its own config section."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi_aws as aws
from pulumi.runtime import settings

from config.stack import StackConfig
from config.storage import BucketLifecycleConfig
from facts.names import CLUSTER_TAG


@dataclass(frozen=True)
class StackContext:
    """Cluster name, region, tags, protection, log retention and bucket lifecycle: shared by every
    component."""

    cluster_name: str
    region: str
    protect: bool
    """`protectStatefulResources`: stateful resources are protected from deletion."""
    log_retention_days: int
    tags: Mapping[str, str] = field(default_factory=dict)
    """The stack's `tags`."""
    bucket_lifecycle: BucketLifecycleConfig = field(default_factory=BucketLifecycleConfig)
    """`bucketLifecycle`: what every bucket keeps of old object versions and unfinished uploads."""

    @classmethod
    def from_config(cls, cfg: StackConfig) -> StackContext:
        return cls(
            cluster_name=cfg.cluster.name,
            region=cfg.region,
            protect=cfg.protect_stateful_resources,
            log_retention_days=cfg.cluster.log_retention_days,
            tags=dict(cfg.tags),
            bucket_lifecycle=cfg.bucket_lifecycle,
        )

    @property
    def owned_tags(self) -> dict[str, str]:
        """The stack's tags plus the tag that names the cluster a resource belongs to."""
        return {**self.tags, CLUSTER_TAG: self.cluster_name}


_providers: weakref.WeakKeyDictionary[Any, tuple[StackContext, aws.Provider]] = weakref.WeakKeyDictionary()
"""The AWS provider of each program run, by the run's resource monitor."""


def aws_provider(ctx: StackContext) -> aws.Provider:
    """The AWS provider of every component: the stack's region, and the stack's tags as default
    tags, so every taggable AWS resource carries them, pulumi-eks's children included (a remote
    component inherits its parent's providers). Default tags do not reach what EC2 launches from
    a launch template: the templates tag their instances, volumes and interfaces themselves.

    One per program run: preflight's invokes (`__main__.py`, before anything is declared) and
    every component get the same provider, so the checks ask AWS as the deployment will."""
    monitor = settings.get_monitor()
    known = _providers.get(monitor) if monitor is not None else None
    if known is not None:
        if known[0] != ctx:
            raise ValueError("one AWS provider per program: it was built for another stack context")
        return known[1]
    provider = aws.Provider(
        "aws",
        region=ctx.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=ctx.owned_tags),
    )
    if monitor is not None:
        _providers[monitor] = (ctx, provider)
    return provider
