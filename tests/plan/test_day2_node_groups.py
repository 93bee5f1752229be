"""Day 2 on node groups: what EKS cannot change in a node group (capacity
type, instance types, subnets, AMI type) replaces it, and the replacement comes up before the old
group goes. Before, every group had a fixed EKS name (`system`, `<group>`), and the bridge deletes
a group with an explicitly set name before creating its replacement: every controller, or the
whole accelerated group, went down at once. Now each group is named `<name>-<unique suffix>` at
create (infra.cluster.node_group_name_prefix), and a group deployed with its fixed name keeps it."""

from __future__ import annotations

import copy
from typing import Any

from tests import upstream
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LABEL = "llm-training-eks/node-group"
BLOCK = {"type": "capacity-block", "reservationId": "cr-0a1b2c3d4e5f60718", "endsAt": "2027-03-01T11:30:00Z"}


def edited(stack: str, **keys: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    for key, value in keys.items():
        values[f"llm-training-eks:{key}"] = value
    return run_plan(values, stack)


def group_step(update: day2.Update, plan: dict[str, Any], name: str) -> day2.Step:
    (urn,) = [r["urn"] for r in plan["resources"] if r["type"] == NODE_GROUP and r["inputs"]["labels"][LABEL] == name]
    return update.steps[urn]


def test_a_new_system_instance_type_brings_the_new_group_up_first() -> None:
    """Item 26: the controllers move to the new nodes; they never all go down at once."""
    before = stack_plan("dev")
    after = edited("dev", systemNodeGroup={"instanceType": "m6i.4xlarge"})
    update = day2.diff(before, after)
    step = group_step(update, after, "system")
    assert (step.op, step.changed, step.delete_first, step.blocked) == ("replace", ("instanceTypes[0]",), False, False)
    others = {u: s.op for u, s in update.touched().items() if s.type == NODE_GROUP and u != step.urn}
    assert others == {}, others


def test_moving_a_group_to_a_capacity_block_brings_the_new_group_up_first() -> None:
    """Item 25: on-demand -> Capacity Block. The block is capacity of its own, so the new group can
    start beside the old one."""
    before = stack_plan("dev")
    groups = copy.deepcopy(stack_values("dev")["llm-training-eks:nodeGroups"])
    groups[0].update(capacity=BLOCK, placementGroup=False)
    update = day2.diff(before, edited("dev", nodeGroups=groups))
    step = group_step(update, before, "trn1")
    assert step.op == "replace" and "capacityType" in step.changed
    assert not step.delete_first and not step.blocked
    assert update.blocked == []


def test_a_new_az_at_the_end_replaces_only_the_system_group_and_first() -> None:
    """A third AZ of the VPC: its subnets are created, the others stay; the system node group spans
    every private subnet (subnetIds is ForceNew), so it is replaced, new group first."""
    before = stack_plan("dev")
    after = edited("dev", network={"availabilityZones": ["us-west-2d", "us-west-2a", "us-west-2b"]})
    update = day2.diff(before, after)
    subnets = {u.rsplit("::", 1)[1]: s.op for u, s in update.steps.items() if s.type == "aws:ec2/subnet:Subnet"}
    assert subnets == {
        "network-private-us-west-2d": "same",
        "network-private-us-west-2a": "same",
        "network-private-us-west-2b": "create",
        "network-public-us-west-2d": "same",
        "network-public-us-west-2a": "same",
        "network-public-us-west-2b": "create",
    }
    system = group_step(update, after, "system")
    assert (system.op, system.delete_first) == ("replace", False)
    assert group_step(update, after, "trn1").op == "same"
    assert update.blocked == []


def _as_fixed_names(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan as the previous version declared its node groups: a fixed `nodeGroupName`, no
    prefix, no options."""
    out = copy.deepcopy(plan)
    for r in out["resources"]:
        if r["type"] == NODE_GROUP:
            r["inputs"].pop("nodeGroupNamePrefix")
            r["inputs"]["nodeGroupName"] = r["inputs"]["labels"][LABEL]
            r["ignoreChanges"], r["deleteBeforeReplace"] = None, None
    return out


def test_a_stack_deployed_with_fixed_names_keeps_its_groups() -> None:
    after = stack_plan("dev")
    update = day2.diff(_as_fixed_names(after), after)
    touched = {u: s.op for u, s in update.touched().items() if s.type == NODE_GROUP}
    assert touched == {}


def test_the_suffix_fits_the_name_eks_takes() -> None:
    """terraform-provider-aws node_group_name_prefix: at most 63 - id.UniqueIDSuffixLength."""
    facts = upstream.facts("pulumi-replacements-2026-11")["eks_node_group_names"]
    from config.nodegroups import NodeGroupConfig

    longest = "a" * (facts["name_max"] - facts["unique_suffix_length"] - 1)
    NodeGroupConfig.model_validate({"name": longest, "instanceType": "trn1.32xlarge", "desiredSize": 0})
