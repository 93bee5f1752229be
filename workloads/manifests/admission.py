"""What `pulumi up` may wait for: only work Kueue can admit now.

pulumi-kubernetes awaits a Job until it completes, and an MPIJob annotated `pulumi.com/waitFor`
until its condition holds (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/await/job.go,
jobInitAwaiter; the annotations of provider/pkg/metadata). Kueue admits a queued job only within
its ClusterQueue's quota (Kueue v0.19.2, concepts/cluster_queue), which this project sizes to the
nodes of the node group (infra/queues.py). A group at `desiredSize: 0`, the way to pause it, has
no quota: an awaited step there would hold `pulumi up` until its timeout, then fail it. Such a
step is created all the same and not awaited (`pulumi.com/skipAwait`); Kueue starts it when the
nodes are back. The order between steps is then Kueue's alone: the steps after a held one are
created at once, and its BestEffortFIFO queue (infra/queues.py) may admit a later step with an
earlier one when both fit. Steps that already ran only change annotations; a run started while its
group is paused should be started again (a new runId) after the nodes are back, or wait for them.

The one shared rule: every builder's steps pass through `unawaited_where_held` (manifests.steps);
a builder placing a step on another group than the run's (a conversion on the training run's
group) is covered as long as that group is in `context_groups`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from facts.awaits import COMPLETION_KINDS, SKIP_AWAIT, TIMEOUT, TRUE, WAIT_FOR
from facts.names import NODE_GROUP_LABEL, QUEUE_LABEL
from facts.nodegroups import NodeGroup
from workloads.manifests.objects import Context, Obj, Step


def admits(group: NodeGroup) -> bool:
    """Whether Kueue admits queued work on `group` now: its quota is the group's nodes."""
    return group.nodes > 0


def context_groups(ctx: Context) -> dict[str, NodeGroup]:
    """The node groups a run's steps may select: its own, and the source run's for a conversion."""
    groups = [ctx.node_group, *([ctx.source.node_group] if ctx.source else [])]
    return {g.name: g for g in groups}


def _selected(value: Any) -> Iterator[str]:
    """The node groups named by every nodeSelector in an object."""
    if isinstance(value, Mapping):
        selector = value.get("nodeSelector")
        if isinstance(selector, Mapping) and NODE_GROUP_LABEL in selector:
            yield str(selector[NODE_GROUP_LABEL])
        for v in value.values():
            yield from _selected(v)
    elif isinstance(value, list):
        for v in value:
            yield from _selected(v)


def held(obj: Obj, groups: Mapping[str, NodeGroup]) -> bool:
    """A queued Job or MPIJob with pods on a group Kueue admits nothing on now."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if obj.get("kind") not in COMPLETION_KINDS or QUEUE_LABEL not in labels:
        return False
    return any(name in groups and not admits(groups[name]) for name in _selected(obj.get("spec")))


def unawaited_where_held(step: Step, groups: Mapping[str, NodeGroup]) -> Step:
    """`step`, not awaited when Kueue holds it (its waitFor and timeout go, skipAwait comes)."""
    if not held(step.obj, groups):
        return step
    meta = step.obj["metadata"]
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in (WAIT_FOR, TIMEOUT)}
    annotations[SKIP_AWAIT] = TRUE
    obj = {**step.obj, "metadata": {**meta, "annotations": annotations}}
    return dataclasses.replace(step, obj=obj, awaited=False)
