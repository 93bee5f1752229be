"""Day 2 on a paused node group: `pulumi up` awaits nothing Kueue cannot admit.

pulumi-kubernetes awaits a Job until it completes and an MPIJob with `pulumi.com/waitFor` until
its condition holds (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/await/job.go, jobInitAwaiter;
the `pulumi.com/skipAwait` and `pulumi.com/waitFor` annotations, provider/pkg/metadata). Kueue
admits a queued job only within its ClusterQueue's quota, which this project sizes to the node
group's nodes (infra/queues.py; Kueue v0.19.2 concepts/cluster_queue: a workload waits until it
fits the nominal quota). A group at `desiredSize: 0` (the docs' way to pause) has no quota, so
before, a data, image-check, Hub or conversion Job, or an awaited MPIJob, on it held `pulumi up`
for its whole timeout, then failed it. Now such objects are created and not awaited
(workloads.manifests.objects.held); Kueue starts them when the nodes are back.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2, day2_nodes

STACK = "trn1-llama2"
NS = "llm-training-eks:"


def paused(stack: str) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    group = values[NS + "nodeGroups"][0]
    group.update(desiredSize=0, minSize=0, maxSize=group.get("maxSize", group["desiredSize"]))
    return run_plan(values, stack)


def test_a_paused_group_holds_no_awaited_step() -> None:
    before = stack_plan(STACK)
    assert day2_nodes.awaited_but_held(before) == []
    after = paused(STACK)
    assert day2_nodes.awaited_on(after, "trn1") == day2_nodes.awaited_but_held(after)
    held = day2_nodes.awaited_but_held(after)
    assert held == [], f"pulumi up would wait for these until their timeout: {held}"


def test_pausing_and_resuming_restart_nothing() -> None:
    """Pausing changes the await annotations of the run's Jobs and MPIJobs only (an in-place
    update of each); resuming puts them back. Only the image check follows the nodes (one pod per
    node: `completions` is the group's size, a replace-forcing field), so resumed nodes pull the
    image again; Kueue's quota follows the nodes too. No other step is replaced or runs again."""
    before, after = stack_plan(STACK), paused(STACK)
    assert day2_nodes.awaited_on(before, "trn1"), "the running group's steps are awaited"
    for update in (day2.diff(before, after), day2.diff(after, before)):
        jobs = {
            u: s
            for u, s in update.touched().items()
            if s.type.startswith("kubernetes:") and day2_nodes.kind_of(after, u) in day2_nodes.AWAITED_KINDS
        }
        replaced = {u.rsplit("::", 1)[1] for u, s in jobs.items() if s.op == "replace"}
        assert replaced == {n for n in replaced if "-image-" in n} and len(replaced) == 1, replaced
        updated = [s for s in jobs.values() if s.op == "update"]
        assert updated and all(p.startswith("metadata.annotations.") for s in updated for p in s.changed)
        assert update.blocked == []
