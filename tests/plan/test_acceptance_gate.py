"""An acceptance run gates the other runs of its node group: their objects are created only once
it passed (pulumi-kubernetes waits for its MPIJob's Succeeded condition), so no training run holds
the group's Kueue quota while `pulumi up` waits for the acceptance run, and a failed acceptance
trains nothing. Runs on other node groups do not wait."""

from __future__ import annotations

import copy
from typing import Any

from facts.names import SYSTEM_NODE_GROUP
from tests.conftest import run_plan, stack_plan, stack_values
from tools.offline.plan_table import render_table

NS = "llm-training-eks:"
RUN = "llm-training-eks:workloads:Workload"


def _children(plan: dict[str, Any], workload: str) -> list[dict[str, Any]]:
    parent = next(r["urn"] for r in plan["resources"] if r["type"] == RUN and r["name"] == workload)
    return [r for r in plan["resources"] if r.get("parent") == parent]


def _accept_urn(plan: dict[str, Any]) -> str:
    (mpijob,) = [r["urn"] for r in _children(plan, "fabric") if r["type"].endswith(":MPIJob")]
    return mpijob


def test_every_object_of_a_run_on_the_accepted_group_waits_for_the_acceptance_run() -> None:
    plan = stack_plan("trn2")
    accept = _accept_urn(plan)
    titan = _children(plan, "titan")
    assert titan and all(accept in r["dependencies"] for r in titan), [r["name"] for r in titan]
    titan_urns = {r["urn"] for r in titan}
    assert not any(titan_urns & set(r["dependencies"]) for r in _children(plan, "fabric"))
    assert "created once fabric-accept-001-accept passed" in render_table(plan)


def test_a_run_on_another_node_group_does_not_wait() -> None:
    values = copy.deepcopy(stack_values("trn2"))
    values[NS + "workloads"]["ddp"] = {"recipe": "ddp-cpu", "nodeGroup": SYSTEM_NODE_GROUP, "nodes": 2, "runId": "r1"}
    plan = run_plan(values, "trn2")
    accept = _accept_urn(plan)
    ddp = _children(plan, "ddp")
    assert ddp and not any(accept in r["dependencies"] for r in ddp)
    assert all(accept in r["dependencies"] for r in _children(plan, "titan"))
