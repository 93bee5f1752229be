"""Every taggable AWS resource carries the stack's tags, and so does everything EC2 launches.

Which resource types take tags is read from the AWS provider's own Python SDK (a `tags`
argument in the resource's signature), not from a list we keep. A resource's tags are its own
`tags` plus its provider's default tags; the launch templates tag the instances, volumes and
network interfaces they launch, which default tags never reach.
"""

from __future__ import annotations

import importlib
import inspect
import json
from functools import cache
from typing import Any

import pytest

from facts.names import CLUSTER_TAG
from tests.conftest import MINIMAL, by_urn, resources, run_plan, stack_plan

TAGS = {"team": "ml-platform", "cost-center": "4242"}
TAGGED = {**MINIMAL, "llm-training-eks:tags": TAGS}


@cache
def tagged_plan() -> dict[str, Any]:
    return run_plan(TAGGED, "tagged")


@cache
def takes_tags(type_token: str) -> bool:
    """`aws:ec2/launchTemplate:LaunchTemplate` -> does pulumi_aws.ec2.LaunchTemplate take `tags`?"""
    module, cls = type_token.split(":")[1].split("/")[0], type_token.split(":")[2]
    sdk = importlib.import_module(f"pulumi_aws.{module}" if module != "index" else "pulumi_aws")
    return "tags" in inspect.signature(getattr(sdk, cls)._internal_init).parameters


def default_tags(provider: dict[str, Any] | None) -> dict[str, str]:
    if provider is None:
        return {}
    raw = provider["inputs"].get("defaultTags") or {}
    return dict((json.loads(raw) if isinstance(raw, str) else raw).get("tags") or {})


def effective_tags(plan: dict[str, Any], r: dict[str, Any]) -> dict[str, str]:
    providers = {p["urn"]: p for p in plan["resources"] if p["type"] == "pulumi:providers:aws"}
    return {**default_tags(providers.get(r.get("provider") or "")), **(r["inputs"].get("tags") or {})}


def test_taggable_types_come_from_the_provider_sdk() -> None:
    assert takes_tags("aws:ec2/vpc:Vpc") and takes_tags("aws:iam/role:Role")
    assert not takes_tags("aws:iam/rolePolicy:RolePolicy") and not takes_tags(
        "aws:ec2/routeTableAssociation:RouteTableAssociation"
    )


def test_every_taggable_resource_carries_the_stack_tags() -> None:
    plan = tagged_plan()
    wanted = {**TAGS, CLUSTER_TAG: "llm-training"}
    taggable = [r for r in plan["resources"] if r["custom"] and r["type"].startswith("aws:") and takes_tags(r["type"])]
    missing = [f"{r['type']} {r['name']}" for r in taggable if not wanted.items() <= effective_tags(plan, r).items()]
    assert len(taggable) > 50
    assert not missing, f"{len(missing)} of {len(taggable)} taggable resources miss the stack's tags: {missing}"


def test_every_aws_resource_uses_the_tagging_provider(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    (provider,) = resources(plan, "pulumi:providers:aws")
    stray = [
        r["name"]
        for r in plan["resources"]
        if r["custom"] and r["type"].startswith("aws:") and r["provider"] != provider["urn"]
    ]
    assert not stray


@pytest.mark.parametrize("kind", ["instance", "volume", "network-interface"])
def test_launch_templates_tag_what_they_launch(kind: str) -> None:
    plan = tagged_plan()
    lts = resources(plan, "aws:ec2/launchTemplate:LaunchTemplate")
    assert len(lts) == 2  # the system nodes and the accelerated group
    for lt in lts:
        (spec,) = [s for s in lt["inputs"]["tagSpecifications"] if s["resourceType"] == kind]
        assert {**TAGS, CLUSTER_TAG: "llm-training"}.items() <= spec["tags"].items() and spec["tags"]["Name"]


def test_pulumi_eks_children_get_the_tags_through_the_provider() -> None:
    plan = tagged_plan()
    urns = by_urn(plan)
    (component,) = resources(plan, "eks:index:Cluster")
    children = [r for r in plan["resources"] if r["parent"] == component["urn"] and r["type"].startswith("aws:")]
    assert children
    for r in children:
        assert TAGS.items() <= effective_tags(plan, r).items(), r["name"]
        assert urns[r["provider"]]["type"] == "pulumi:providers:aws"
