"""Day 2 on launch templates: an edit of a node group's launch template rolls the group's nodes.

EC2 keeps every version of a launch template: an edit of its data makes a new version and
`latestVersion` goes up by one; an edit of its name, description, default version or tags makes
none (terraform-provider-aws internal/service/ec2/ec2_launch_template.go, resourceLaunchTemplateUpdate
and its CustomizeDiff on latest_version). A managed node group that names the template's latest
version then changes `launchTemplate.version`, and the provider calls UpdateNodegroupVersion
(internal/service/eks/node_group.go, resourceNodeGroupUpdate: `d.HasChanges("launch_template",
"release_version", "version")`): EKS replaces every node of the group, draining its pods (EKS user
guide, managed-node-update-behavior). Before, the mocks fixed every version at 1, so the same edit
showed as an update of the template alone and the roll, with the runs on the group, was invisible.
The after plan is planned over the before plan (`deployed`), as `pulumi up` runs over the state.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import upstream
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2, day2_nodes

FACTS = upstream.facts("terraform-provider-aws-launch-template-versions")
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NS = "llm-training-eks:"


def edited_group(stack: str, before: dict[str, Any], index: int, **keys: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    values[NS + "nodeGroups"][index].update(keys)
    return run_plan(values, stack, deployed=before)


def versions(plan: dict[str, Any]) -> dict[str, int]:
    return {r["name"]: r["latestVersion"] for r in plan["resources"] if r["type"] == TEMPLATE}


STACK = "trn1-llama2"
GROUP = stack_values(STACK)[NS + "nodeGroups"][0]
EDITS = {
    "root volume": {"rootVolumeSizeGiB": GROUP.get("rootVolumeSizeGiB", 200) + 100},
    "next reservation": {"capacity": {**GROUP["capacity"], "reservationId": "cr-0fedcba9876543210"}},
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_launch_template_edit_rolls_the_group_and_names_its_runs(edit: str) -> None:
    before = stack_plan(STACK)
    after = edited_group(STACK, before, 0, **EDITS[edit])
    update = day2.diff(before, after)
    name = f"ng-{GROUP['name']}-lt"
    assert update.named(name).op == "update"
    assert versions(after)[name] == versions(before)[name] + 1
    rolls = day2_nodes.rolls(update)
    assert [s.changed for s in rolls.values()] == [("launchTemplate.version",)], rolls
    (urn,) = rolls
    assert day2_nodes.group_label(after, urn) == GROUP["name"]
    # The runs placed on the group: the roll drains their pods.
    assert day2_nodes.runs_on(after, GROUP["name"]) == sorted(stack_values(STACK)[NS + "workloads"])
    assert update.blocked == []


def test_the_same_config_again_rolls_nothing() -> None:
    """The next `pulumi up` of the same config: the template's version stays."""
    before = stack_plan(STACK)
    again = run_plan(copy.deepcopy(stack_values(STACK)), STACK, deployed=before)
    assert versions(again) == versions(before)
    assert day2.diff(before, again).touched() == {}


def test_a_new_description_makes_no_version() -> None:
    """Keys outside the template's data (the provider's CustomizeDiff list) make no new version."""
    assert {"name", "namePrefix", "description", "defaultVersion", "updateDefaultVersion"} <= set(
        FACTS["no_new_version"]
    )
    from tools.offline import versions as mocks

    assert set(mocks.LAUNCH_TEMPLATE_UNVERSIONED) == set(FACTS["no_new_version"])
    before = {"inputs": {"description": "a", "userData": "x", "tags": {"a": "1"}}, "latestVersion": 3}
    assert mocks.launch_template_version(None, before["inputs"]) == FACTS["first_version"]
    assert mocks.launch_template_version(before, {"description": "b", "userData": "x", "tags": {"a": "2"}}) == 3
    assert mocks.launch_template_version(before, {"description": "a", "userData": "y", "tags": {"a": "1"}}) == 4
