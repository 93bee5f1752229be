"""The update engine `make diff` and the day-2 tests share (tools/offline/plan_diff.py), its rules
(facts/replacements.py) held to their recorded sources, and which node group changes roll nodes."""

from __future__ import annotations

from typing import Any

from facts import replacements
from tests import upstream
from tools.offline.edit_effects import rolls
from tools.offline.plan_diff import Step, diff

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def test_the_rules_are_the_recorded_ones() -> None:
    """facts/replacements.py is what tests/upstream/pulumi-replacements-2026-11.yaml and
    terraform-provider-aws-launch-template-versions.yaml record, with their sources
    (terraform-provider-aws, pulumi-kubernetes, the bridge, the engine)."""
    facts = upstream.facts("pulumi-replacements-2026-11")
    assert facts["aws_force_new"] == replacements.AWS_FORCE_NEW
    assert facts["aws_force_new_if_decreased"] == replacements.AWS_FORCE_NEW_IF_DECREASED
    assert facts["aws_sets"] == replacements.AWS_SETS
    assert facts["aws_autonamed"] == replacements.AWS_AUTONAMED
    assert facts["kubernetes_force_new"] == replacements.KUBERNETES_FORCE_NEW
    rolls_facts = upstream.facts("terraform-provider-aws-launch-template-versions")["node_group_version_update"]
    assert list(replacements.EKS_NODE_GROUP_ROLLS) == rolls_facts


def _group(**inputs: Any) -> dict[str, Any]:
    base = {"scalingConfig": {"desiredSize": 2}, "labels": {"a": "b"}, "launchTemplate": {"id": "lt-1", "version": "1"}}
    return {
        "urn": "urn:pulumi:s::p::aws:eks/nodeGroup:NodeGroup::ng",
        "type": NODE_GROUP,
        "name": "ng",
        "custom": True,
        "protect": False,
        "id": "ng-id",
        "inputs": {**base, **inputs},
    }


def _step(**inputs: Any) -> Step:
    return diff({"resources": [_group()]}, {"resources": [_group(**inputs)]}).named("ng")


def test_a_launch_template_version_release_or_kubernetes_version_rolls_the_nodes() -> None:
    """node_group.go resourceNodeGroupUpdate: these go through UpdateNodegroupVersion."""
    assert rolls(_step(launchTemplate={"id": "lt-1", "version": "2"})) == ("launchTemplate.version",)
    assert rolls(_step(releaseVersion="1.35.6-20260714")) == ("releaseVersion",)
    assert rolls(_step(version="1.36")) == ("version",)


def test_scaling_labels_and_taints_do_not_roll_the_nodes() -> None:
    """UpdateNodegroupConfig: labels, scaling_config, taint, update_config replace no node."""
    assert rolls(_step(scalingConfig={"desiredSize": 0})) == ()
    assert rolls(_step(labels={"a": "c"})) == ()
    assert rolls(_step(taints=[{"key": "k", "effect": "NO_SCHEDULE"}])) == ()


def test_a_replaced_group_rolls_its_nodes() -> None:
    step = _step(instanceTypes=["p5.48xlarge"])
    assert step.op == "replace" and rolls(step) == ("instanceTypes[0]",)


def test_a_type_without_rules_is_an_unknown_update_unless_strict() -> None:
    r = {"urn": "u::x", "type": "aws:foo/bar:Bar", "name": "x", "custom": True, "protect": False, "inputs": {"a": 1}}
    after = {**r, "inputs": {"a": 2}}
    step = diff({"resources": [r]}, {"resources": [after]}, strict=False).named("x")
    assert (step.op, step.unknown, step.changed) == ("update", True, ("a",))
    try:
        diff({"resources": [r]}, {"resources": [after]})
    except Exception as e:  # noqa: BLE001 - the strict diff raises NoFacts
        assert type(e).__name__ == "NoFacts"
    else:
        raise AssertionError("a strict diff gives no verdict without the rules")
