"""Day-2 verdicts about nodes and the work on them, over two plans and their `day2.diff`.

Launch templates are versioned as EC2 versions them (tools/offline/versions.py): plan the after
stack over the before plan (`run_plan(values, stack, deployed=before)`), and a template whose data
changed gets `latestVersion + 1`; a node group naming it then updates `launchTemplate.version`,
which EKS carries out by replacing every node (`rolls`; `runs_on` names the workloads whose pods
the roll drains). `awaited_but_held` names the steps `pulumi up` would wait for although Kueue
admits nothing on their node group (a group at desiredSize 0).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from facts import awaits
from tests.plan.day2 import Step, Update
from tools.offline import edit_effects

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODE_GROUP_LABEL = "llm-training-eks/node-group"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
AWAITED_KINDS = awaits.COMPLETION_KINDS


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every leaf, list indexes left out."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, prefix)
    else:
        yield prefix, value


def rolls(update: Update) -> dict[str, Step]:
    """Node groups updated in place on an input EKS applies by replacing every node (a new launch
    template version, AMI release or Kubernetes version): their pods are drained (the product's
    rule, tools.offline.edit_effects.rolls, which `make diff` reports)."""
    return {u: s for u, s in update.steps.items() if s.op == "update" and edit_effects.rolls(s)}


def group_label(plan: Mapping[str, Any], urn: str) -> str:
    """The project's name of the node group at `urn` (its node label)."""
    (r,) = [r for r in plan["resources"] if r["urn"] == urn]
    return str(r["inputs"]["labels"][NODE_GROUP_LABEL])


def kind_of(plan: Mapping[str, Any], urn: str) -> str | None:
    """The Kubernetes kind of the resource at `urn` (None for other resources)."""
    (r,) = [r for r in plan["resources"] if r["urn"] == urn]
    return r["inputs"].get("kind") if r["type"].startswith("kubernetes:") else None


def _selected(inputs: Mapping[str, Any]) -> set[str]:
    return {str(v) for p, v in _leaves(inputs) if p.endswith(f"nodeSelector.{NODE_GROUP_LABEL}")}


def runs_on(plan: Mapping[str, Any], group: str) -> list[str]:
    """The workloads with a Kubernetes object whose pods select node group `group`: what a roll or
    a replacement of the group evicts."""
    parents = {r["urn"]: r for r in plan["resources"]}
    out = set()
    for r in plan["resources"]:
        parent = parents.get(r["parent"]) or {}
        workload = str(parent.get("type", "")).endswith(":Workload")
        if workload and r["type"].startswith("kubernetes:") and group in _selected(r["inputs"]):
            out.add(parent["name"])
    return sorted(out)


def awaited_on(plan: Mapping[str, Any], group: str) -> list[str]:
    """Names of the queued Jobs and MPIJobs whose pods select node group `group` and that
    `pulumi up` awaits to completion (facts.awaits, the provider's rule)."""
    out = []
    for r in plan["resources"]:
        inputs = r["inputs"]
        if not r["type"].startswith("kubernetes:") or not awaits.awaits_completion(inputs):
            continue
        meta = inputs.get("metadata") or {}
        if QUEUE_LABEL in (meta.get("labels") or {}) and group in _selected(inputs):
            out.append(str(meta.get("name")))
    return sorted(out)


def awaited_but_held(plan: Mapping[str, Any]) -> list[str]:
    """`awaited_on` every node group at desiredSize 0: Kueue admits none of them, so `pulumi up`
    would wait for each until its timeout."""
    empty = [
        str(r["inputs"]["labels"][NODE_GROUP_LABEL])
        for r in plan["resources"]
        if r["type"] == NODE_GROUP and (r["inputs"].get("scalingConfig") or {}).get("desiredSize") == 0
    ]
    return sorted(n for g in empty for n in awaited_on(plan, g))
