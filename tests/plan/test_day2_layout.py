"""Day 2: editing `nodeGroups` moves no subnet, no file system and no other node group. Before, the VPC's AZs were derived from the node groups: a group added at the top (or
removed) re-ordered them, so both private subnets changed CIDR (replaced), the system node group
was replaced delete-first and the protected file system's subnet changed (the update stopped
there). Now the AZs and the file system's AZ are given once a node group names its AZ
(config/placement.py)."""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import plan_exit, run_plan, stack_plan, stack_values
from tests.plan import day2

STACK = "dev"
SUBNET, FSX, NODE_GROUP = (
    "aws:ec2/subnet:Subnet",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:eks/nodeGroup:NodeGroup",
)
NEW_GROUP = {
    "name": "trn1a",
    "instanceType": "trn1.32xlarge",
    "desiredSize": 0,
    "minSize": 0,
    "maxSize": 2,
    "availabilityZone": "us-west-2a",
    "capacity": {"type": "on-demand"},
}


def with_groups(groups: list[dict[str, Any]], **network: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values["llm-training-eks:nodeGroups"] = groups
    if network:
        values["llm-training-eks:network"] = {**values["llm-training-eks:network"], **network}
    return run_plan(values, STACK)


def cloud_steps(update: day2.Update) -> dict[str, day2.Step]:
    """What the update does to real resources (components are not deployed objects)."""
    return {u: s for u, s in update.touched().items() if not s.type.startswith("llm-training-eks:")}


def _kept(update: day2.Update, plan: dict[str, Any]) -> dict[str, str]:
    """The subnets, the file system and every node group of `plan`: what the update does to each."""
    return {
        r["urn"].rsplit("::", 1)[1]: update.steps[r["urn"]].op
        for r in plan["resources"]
        if r["type"] in (SUBNET, FSX, NODE_GROUP)
    }


def test_adding_a_node_group_at_the_top_creates_it_and_moves_nothing() -> None:
    before = stack_plan(STACK)
    groups = stack_values(STACK)["llm-training-eks:nodeGroups"]
    after = with_groups([NEW_GROUP, *groups])
    update = day2.diff(before, after)
    steps = cloud_steps(update)
    assert {s.op for s in steps.values()} <= {"create", "update"}, {u: s.op for u, s in steps.items()}
    kept = _kept(update, before)
    assert kept and set(kept.values()) == {"same"}, kept
    # Only Kueue's view of the groups changes in place (a flavor more in the default queue).
    updated = {s.type for s in steps.values() if s.op == "update"}
    assert updated <= {"kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"}, updated
    created_groups = [u for u, s in steps.items() if s.op == "create" and s.type == NODE_GROUP]
    assert [u.rsplit("::", 1)[1] for u in created_groups] == ["ng-trn1a-ng"]


def test_removing_a_node_group_deletes_only_its_own_resources() -> None:
    groups = stack_values(STACK)["llm-training-eks:nodeGroups"]
    before = with_groups([NEW_GROUP, *groups])
    after = stack_plan(STACK)
    update = day2.diff(before, after)
    steps = cloud_steps(update)
    deleted = {u.rsplit("::", 1)[1] for u, s in steps.items() if s.op == "delete"}
    assert deleted and all("trn1a" in name for name in deleted), deleted
    assert {s.op for s in steps.values()} <= {"delete", "update"}
    assert set(_kept(update, after).values()) == {"same"}
    assert update.blocked == []


def test_a_stack_whose_node_group_names_its_az_must_say_the_vpc_and_file_system_azs(tmp_path: Any) -> None:
    values = copy.deepcopy(stack_values(STACK))
    del values["llm-training-eks:network"]
    del values["llm-training-eks:storage"]
    code, err = plan_exit(values, tmp_path)
    lines = err.splitlines()
    assert code == 2 and len(lines) == 2, err
    assert lines[0].startswith("network.availabilityZones: required once a node group names its AZ")
    assert "set it to [us-west-2d, us-west-2a] (what this stack has today)" in lines[0]
    assert lines[1].startswith("storage.availabilityZone: required once a node group names its AZ")
    assert "set it to us-west-2d" in lines[1]


def test_the_file_system_az_must_be_one_of_the_vpc_azs(tmp_path: Any) -> None:
    values = copy.deepcopy(stack_values(STACK))
    values["llm-training-eks:storage"] = {"availabilityZone": "us-west-2b"}
    code, err = plan_exit(values, tmp_path)
    assert (code, err.strip()) == (
        2,
        "storage.availabilityZone: us-west-2b is not one of network.availabilityZones (us-west-2d, us-west-2a)",
    )
