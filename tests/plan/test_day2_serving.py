"""Day 2 of a served model: what an edit does to the running endpoint.

A multi-node replica is a LeaderWorkerSet that Kueue manages. Kueue 0.19.2's LWS webhook
(kubernetes-sigs/kueue v0.19.2, pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go
ValidateUpdate, lines 203-233) refuses, while the set is managed, any change to the group size
(feature LWSImmutableGroupSize, beta and on since 0.19) and to the pod templates' "shape"
(pkg/util/pod/pod.go SpecShape, lines 147-178: the containers' requests and ports, node
selector, affinity, tolerations, priority, runtime class, spread constraints, overhead, resource
claims). An in-place update of those fails `pulumi up`; the set is replaced instead, as the
MPIJobs are. Any other change (the image, vLLM's options) rolls the groups over in place.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2

STACK = "p5-serve-405b"
SET = "llama405-serve"


def edited(**changes: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values["llm-training-eks:workloads"]["llama405"].update(changes)
    return values


def test_a_new_group_size_replaces_the_set_delete_first() -> None:
    """nodes 2 -> 4 (pipelineParallel 4): Kueue refuses the new size on the queued set."""
    values = edited(nodes=4, pipelineParallel=4)
    values["llm-training-eks:nodeGroups"][0]["desiredSize"] = 4
    update = day2.diff(stack_plan(STACK), run_plan(values, STACK))
    step = update.named(SET)
    assert step.op == "replace" and step.delete_first, step
    assert "spec.leaderWorkerTemplate.size" in step.changed, step.changed


def test_a_new_option_rolls_the_groups_in_place() -> None:
    """maxModelLen changes vLLM's arguments only: Kueue allows it, LWS rolls the groups."""
    update = day2.diff(stack_plan(STACK), run_plan(edited(maxModelLen=16384), STACK))
    step = update.named(SET)
    assert step.op == "update", step
    assert all(".command[" in p or ".env[" in p or "probe" in p.lower() for p in step.changed), step.changed


def test_the_replacing_paths_are_kueues_immutable_shape() -> None:
    """The set's replaceOnChanges are the fields of Kueue's SpecShape under both templates, and size."""
    (obj,) = [r for r in stack_plan(STACK)["resources"] if r["name"] == SET]
    paths = set(obj["replaceOnChanges"])
    assert "spec.leaderWorkerTemplate.size" in paths
    for template in ("leaderTemplate", "workerTemplate"):
        base = f"spec.leaderWorkerTemplate.{template}.spec"
        assert {f"{base}.containers[*].resources.requests", f"{base}.containers[*].ports"} <= paths
        assert {f"{base}.nodeSelector", f"{base}.tolerations", f"{base}.affinity"} <= paths
