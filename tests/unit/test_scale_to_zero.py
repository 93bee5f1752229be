"""Scaling an accelerated node group down, or to 0, while runs and teams exist.

A run or a team quota is held against what the node group can have (`maxSize`), not what
it runs today: a Capacity Block must be scaled to 0 before it ends and before an upgrade
(EKS user guide, capacity-blocks-mng), and the stack must still plan with its runs and teams.
Kueue's quotas follow the nodes present, so queued runs wait for the nodes instead of being
admitted onto nodes that are not there (then evicted and requeued by `waitForPodsReady`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import config
from facts.names import PROJECT
from infra.queues import present_quotas
from tests.conftest import run_plan, stack_values


def _scaled(stack: str, desired: int) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    values[f"{PROJECT}:nodeGroups"][0].update(desiredSize=desired, minSize=0, maxSize=4)
    return values


def _quotas(plan: dict[str, Any]) -> dict[str, str]:
    """ClusterQueue -> its nominal quota of Neuron devices on the trn1 flavor."""
    out = {}
    for r in plan["resources"]:
        if r["inputs"].get("kind") != "ClusterQueue":
            continue
        for flavor in r["inputs"]["spec"]["resourceGroups"][0]["flavors"]:
            if flavor["name"] == "trn1":
                (neuron,) = [x for x in flavor["resources"] if x["name"] == "aws.amazon.com/neuron"]
                out[r["inputs"]["metadata"]["name"]] = neuron["nominalQuota"]
    return out


@pytest.mark.parametrize("stack", ["trn1-llama2", "trn1-shared"])
def test_a_node_group_scales_to_zero_with_its_runs_and_teams(stack: str) -> None:
    values = _scaled(stack, 0)
    config.parse_stack_values(values)  # no problem: runs and quotas fit maxSize
    plan = run_plan(values, stack)
    assert set(_quotas(plan).values()) == {"0"}, "no quota on nodes that are not there"
    assert any(r["inputs"].get("kind") == "MPIJob" for r in plan["resources"]), "the runs stay declared"


def test_teams_keep_their_share_of_the_nodes_present() -> None:
    plan = run_plan(_scaled("trn1-shared", 2), "trn1-shared")
    # product and research ask for 2 nodes each; 2 nodes run: one each (16 Neuron devices a node).
    assert _quotas(plan) == {"product": "16", "research": "16"}
    plan = run_plan(_scaled("trn1-shared", 4), "trn1-shared")
    assert _quotas(plan) == {"product": "32", "research": "32"}


def test_present_quotas() -> None:
    assert present_quotas({"a": 2, "b": 2}, 4) == {"a": 2, "b": 2}
    assert present_quotas({"a": 2, "b": 2}, 0) == {"a": 0, "b": 0}
    assert present_quotas({"a": 3, "b": 1}, 2) == {"a": 2, "b": 0}
    assert present_quotas({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}
    for present in range(0, 8):
        got = present_quotas({"a": 5, "b": 2, "c": 1}, present)
        assert sum(got.values()) == min(present, 8)


def test_a_run_beyond_what_the_node_group_can_ever_have_is_refused() -> None:
    values = _scaled("trn1-llama2", 0)
    values[f"{PROJECT}:workloads"]["llama2"]["nodes"] = 8
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    assert e.value.problems[0].startswith(
        "workloads.llama2.nodes: 8 nodes, but node group 'trn1' can have at most 4 (nodeGroups[0].maxSize)"
    )


def test_team_quotas_beyond_what_the_node_group_can_ever_have_are_refused() -> None:
    values = _scaled("trn1-shared", 0)
    values[f"{PROJECT}:teams"]["research"]["nodes"] = 3
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    assert any(p.startswith("teams.research.nodes: the teams on node group 'trn1' ask for 5") for p in e.value.problems)
