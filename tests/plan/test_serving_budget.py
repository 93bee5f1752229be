"""A server's disruption budget, chosen by the user (`workloads.<server>.maxUnavailable`).

EKS upgrades a managed node group by draining its nodes; the drain honours PodDisruptionBudgets
and fails the update with PodEvictionFailure when a node's pods do not leave within 15 minutes
(EKS user guide, managed-node-update-behavior; tests/upstream/aws-eks-managed-node-update-2026-12.yaml).
The budget is the user's trade: one replica at a time keeps the endpoint up but cannot drain slow
starters in time; every replica at once lets the upgrade through with the endpoint down meanwhile.
Over time: the key is edited before an upgrade and back after it, so that edit must touch the
budget only, never restart a replica."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.conftest import plan_exit, run_plan, stack_plan, stack_values
from tests.plan import day2

NS = "llm-training-eks:"


def _edited(stack: str, server: str, **changes: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    values[f"{NS}workloads"][server].update(changes)
    return values


def _budget(plan: dict[str, Any]) -> dict[str, Any]:
    (pdb,) = [r["inputs"] for r in plan["resources"] if r["inputs"].get("kind") == "PodDisruptionBudget"]
    return pdb["spec"]


def test_the_budget_is_the_users() -> None:
    """trn2-serve's two replicas, both allowed down: the budget is the key's."""
    assert _budget(stack_plan("trn2-serve"))["maxUnavailable"] == 1
    plan = run_plan(_edited("trn2-serve", "qwen", maxUnavailable=2), "trn2-serve")
    assert _budget(plan)["maxUnavailable"] == 2


def test_a_group_budget_counts_its_pods() -> None:
    """A LeaderWorkerSet's budget is over pods, and an evicted pod takes its whole group down:
    with one group of two nodes down, a second group's first eviction needs a budget of 3 pods
    (2 would block it, 4 would let a third group's pod go in a set of more groups)."""
    values = _edited("p5-serve-405b", "llama405", replicas=2, maxUnavailable=2)
    values[f"{NS}nodeGroups"][0].update(desiredSize=4, maxSize=4)
    plan = run_plan(values, "p5-serve-405b")
    assert _budget(plan)["maxUnavailable"] == 3


def test_changing_the_budget_restarts_no_replica() -> None:
    """Before an upgrade and back after it: the PodDisruptionBudget updates, the servers stay."""
    update = day2.diff(
        stack_plan("trn2-serve"), run_plan(_edited("trn2-serve", "qwen", maxUnavailable=2), "trn2-serve")
    )
    assert update.named("qwen-serve-pdb").op == "update"
    assert update.named("qwen-serve").op == "same"


def test_a_budget_of_none_is_refused_naming_the_key(tmp_path: Path) -> None:
    """maxUnavailable 0 would block every drain for good: exit 2 naming the key."""
    code, err = plan_exit(_edited("trn2-serve", "qwen", maxUnavailable=0), tmp_path)
    assert code == 2 and "workloads.qwen.maxUnavailable" in err, err
