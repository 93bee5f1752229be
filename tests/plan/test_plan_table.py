"""The plan table reads what the plans have: every input and child type it asks for is set in
some example stack, and every top-level component has facts or is listed as resources-only; so
a renamed input or component fails here instead of dropping a line. Also: distinct names for
types that share one, "nothing to build", and what the cost leaves out."""

from __future__ import annotations

import copy
from typing import Any

from estimates import cost
from facts.names import component_type
from tests.conftest import EXAMPLE_STACKS, stack_plan
from tools.offline.plan_table import render_table
from tools.offline.plan_view import Reads, display_names

LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"


def reads_of(plans: list[dict[str, Any]]) -> Reads:
    reads = Reads()
    for plan in plans:
        render_table(plan, reads)
    return reads


def test_everything_the_table_reads_is_set_in_some_example_stack() -> None:
    reads = reads_of([stack_plan(s) for s in EXAMPLE_STACKS])
    assert reads.never_found() == []
    assert reads.undescribed == set(), "components the table says nothing of: add facts or RESOURCES_ONLY"
    # the record sees the table's reads, nested keys and children of components included
    assert (LUSTRE, "automaticBackupRetentionDays") in reads.keys
    assert ("aws:eks/nodeGroup:NodeGroup", "scalingConfig.desiredSize") in reads.keys
    assert (component_type("infra", "Network"), "aws:ec2/vpc:Vpc") in reads.children


def test_a_renamed_input_fails_instead_of_dropping_a_line() -> None:
    plan = copy.deepcopy(stack_plan("trn1-llama2"))
    for r in plan["resources"]:
        if r["type"] == LUSTRE:
            r["inputs"]["backupRetentionDays"] = r["inputs"].pop("automaticBackupRetentionDays")
    before = set(reads_of([stack_plan("trn1-llama2")]).never_found())
    after = set(reads_of([plan]).never_found())
    assert after - before == {f"{LUSTRE}: input automaticBackupRetentionDays is never set"}


def test_a_renamed_child_type_or_component_fails() -> None:
    plan = copy.deepcopy(stack_plan("trn1-llama2"))
    for r in plan["resources"]:
        if r["type"] == "aws:ec2/vpc:Vpc":
            r["type"] = "aws:ec2/vpc:VirtualPrivateCloud"
        if r["type"] == component_type("infra", "Registry"):
            r["type"] = component_type("infra", "ImageRegistry")
    reads = reads_of([plan])
    assert f"{component_type('infra', 'Network')}: no child of type aws:ec2/vpc:Vpc" in reads.never_found()
    assert reads.undescribed == {component_type("infra", "ImageRegistry")}


def test_types_that_share_a_name_are_told_apart() -> None:
    for stack in EXAMPLE_STACKS:
        names = display_names({r["type"] for r in stack_plan(stack)["resources"]})
        assert len(set(names.values())) == len(names), stack
    names = display_names([component_type("infra", "Cluster"), "eks:index:Cluster", "aws:eks/cluster:Cluster"])
    assert sorted(names.values()) == ["Cluster", "Cluster (aws:eks)", "Cluster (pulumi-eks)"]
    table = render_table(stack_plan("trn1-llama2"))
    assert "\nCluster cluster\n" in table and "1 Cluster (pulumi-eks)" in table and "1 Cluster (aws:eks)" in table


def test_an_image_component_with_nothing_to_build_says_so() -> None:
    assert "\nImageBuilds images\n    nothing to build: no run takes its image from images/\n" in render_table(
        stack_plan("dev")
    )
    assert "builds tag" in render_table(stack_plan("trn1-llama2"))


def test_the_cost_says_what_it_leaves_out() -> None:
    table = render_table(stack_plan("trn1-llama2"))
    total = table.index("\nCost: $")
    listed = table.index("    not counted (billed besides, by use or size):", total)
    for what, _ in cost.NOT_COUNTED:
        assert table.index(f"        {what}\n", listed) > listed
    byo = stack_plan("byo-vpc")["cost"]["notCounted"]  # an existing VPC: no NAT gateway, no Elastic IP
    assert not [w for w in byo if w.startswith("public IPv4")] and len(byo) == len(cost.NOT_COUNTED) - 1
