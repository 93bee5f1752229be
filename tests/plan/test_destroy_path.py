"""The documented way to delete everything: `protectStatefulResources: false`,
`pulumi up` (lifts protection, and sets the switches that let a destroy empty what holds data),
then `pulumi destroy`. Offline, as far as a plan can show it: the first step is an update of
nothing but those switches, and after it nothing the destroy meets is protected, retained, or
refused by AWS for holding data (a bucket with objects, a repository with images), and every
log group a service writes to is the stack's own, deleted after the writer.

The provider facts (what `forceDestroy` and `forceDelete` do, and that they act only once a
`pulumi up` has put them in state) are held against the pinned SDK's text here.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pulumi_aws as aws
import pytest

from tests import upstream
from tests.conftest import by_urn, deleted_after, run_plan, stack_plan, stack_values

STACKS = ("trn1-llama2", "trn1-llama2-aws", "p5-capacity-block")
"""An all-in-one stack with image builds, a layered aws stack, a GPU stack."""
KEY = "llm-training-eks:protectStatefulResources"
EMPTIED = {"aws:s3/bucket:Bucket": "forceDestroy", "aws:ecr/repository:Repository": "forceDelete"}
"""What AWS refuses to delete while it holds data, and the input that empties it on delete."""


def unprotected(stack: str) -> dict[str, Any]:
    return run_plan({**stack_values(stack), KEY: False}, stack)


def test_the_switches_mean_what_the_pinned_provider_says():
    facts = upstream.facts("pulumi-aws-destroy-7.51.1")
    bucket_doc = " ".join(inspect.getdoc(aws.s3.BucketArgs.force_destroy.fget).split())  # type: ignore[union-attr]
    repo_doc = " ".join(inspect.getdoc(aws.ecr.RepositoryArgs.force_delete.fget).split())  # type: ignore[union-attr]
    for fact in ("deletes_objects", "needs_prior_update", "not_with_delete_in_same_operation"):
        assert facts["bucket"][fact] in bucket_doc, fact
    assert facts["repository"]["deletes_images"] in repo_doc
    lifecycle = Path(inspect.getfile(aws.s3.BucketLifecycleConfiguration)).read_text()
    assert facts["lifecycle_after_versioning"] in lifecycle
    assert {facts["bucket"]["input"], facts["repository"]["input"]} == {"force_destroy", "force_delete"}


@pytest.mark.parametrize("stack", STACKS)
def test_lifting_protection_changes_only_the_protection_switches(stack: str):
    """Step 2 of the path (`pulumi up` with protection off) replaces and creates nothing: the same
    resources, whose only differences are protect, retainOnDelete and the empty-on-delete inputs
    (state-only updates: the SDK says a `pulumi up` writes them to state)."""
    before, after = by_urn(stack_plan(stack)), by_urn(unprotected(stack))
    assert before.keys() == after.keys()
    changed: dict[str, set[str]] = {}
    for urn, old in before.items():
        new = after[urn]
        keys = {k for k in ("protect", "retainOnDelete") if old[k] != new[k]}
        keys |= {
            f"inputs.{k}"
            for k in old["inputs"].keys() | new["inputs"].keys()
            if old["inputs"].get(k) != new["inputs"].get(k)
        }
        if keys:
            changed[old["type"]] = changed.get(old["type"], set()) | keys
    allowed = {"protect", "retainOnDelete", *(f"inputs.{i}" for i in EMPTIED.values())}
    assert changed and all(keys <= allowed for keys in changed.values()), changed


@pytest.mark.parametrize("stack", STACKS)
def test_after_lifting_protection_a_destroy_meets_nothing_that_blocks_it(stack: str):
    plan = unprotected(stack)
    assert [r["urn"] for r in plan["resources"] if r.get("protect")] == []
    assert [r["urn"] for r in plan["resources"] if r.get("retainOnDelete")] == []
    holders = [r for r in plan["resources"] if r["type"] in EMPTIED]
    assert holders, "the stack makes buckets or repositories"
    assert [r["name"] for r in holders if r["inputs"].get(EMPTIED[r["type"]]) is not True] == []


@pytest.mark.parametrize("stack", STACKS)
def test_a_protected_stack_never_empties_its_data(stack: str):
    plan = stack_plan(stack)
    holders = [r for r in plan["resources"] if r["type"] in EMPTIED]
    assert holders and all(r["protect"] and r["inputs"].get(EMPTIED[r["type"]]) is False for r in holders)


WRITERS: dict[str, tuple[str, ...]] = {
    "aws:eks/cluster:Cluster": ("/aws/eks/",),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("/aws/fsx/lustre/",),
    "aws:ec2/flowLog:FlowLog": ("",),
    "aws:codebuild/project:Project": ("/codebuild/", "/aws/codebuild/"),
}
"""Resources whose service writes to a log group, and the prefixes of that group's name."""


@pytest.mark.parametrize("stack", STACKS)
def test_every_service_log_group_is_the_stacks_and_outlives_its_writer_in_a_destroy(stack: str):
    """A group the service made itself would outlive the stack (and block the next stack of the
    same name); a group deleted before its writer stops could be re-created by it. A destroy
    deletes dependents first, so the writer must depend on its group."""
    plan = unprotected(stack)
    urns = by_urn(plan)
    groups = {r["urn"]: r["inputs"].get("name", "") for r in plan["resources"] if r["type"].endswith(":LogGroup")}
    for r in plan["resources"]:
        if r["type"] not in WRITERS:
            continue
        needed = deleted_after(urns, r["urn"])
        mine = [name for urn, name in groups.items() if urn in needed]
        prefix = WRITERS[r["type"]]
        assert mine, f"{r['name']} writes to a log group the stack does not make before it"
        assert any(n.startswith(prefix) for n in mine), (r["name"], mine)
