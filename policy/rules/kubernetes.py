"""Rules over Kubernetes objects: accelerator taints and tolerations, pod security."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from facts import instances
from facts.names import NEURONCORE_RESOURCE
from policy.rules.model import Context, Finding
from policy.rules.props import (
    T_HELM_RELEASE,
    T_NODE_GROUP,
    Resource,
    as_list,
    as_map,
    containers,
    dig,
    inputs,
    is_true,
    of_type,
    pod_workloads,
)


def _tolerates(tolerations: list[Any], taint: instances.Taint) -> bool:
    for t in tolerations:
        if not isinstance(t, Mapping) or t.get("key") != taint.key:
            continue
        if t.get("effect") not in (None, "", taint.effect):
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint.value:
            return True
    return False


def check_accelerator_taints(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """Accelerated nodes carry the catalog's taints; workloads that ask for accelerators
    tolerate exactly those taints (no blanket tolerations)."""
    for ng in of_type(resources, T_NODE_GROUP):
        for t in as_list(inputs(ng).get("instanceTypes")):
            inst = instances.CATALOG.get(t)
            if inst is None or inst.accelerator is None:
                continue
            have = {(dig(x, "key"), dig(x, "value"), dig(x, "effect")) for x in as_list(inputs(ng).get("taints"))}
            for taint in inst.taints:
                if (taint.key, taint.value, taint.eks_effect) not in have:
                    yield ng, f"{t} nodes lack the taint {taint.key}={taint.value}:{taint.effect}"
    taints_by_resource = {
        res: inst.taints
        for inst in instances.ACCELERATED.values()
        for res in (inst.device_resource, NEURONCORE_RESOURCE if inst.accelerator == "neuron" else None)
        if res
    }
    for r, where, ps in pod_workloads(resources):
        tolerations = as_list(ps.get("tolerations"))
        for t in tolerations:
            if isinstance(t, Mapping) and not t.get("key") and t.get("operator") == "Exists":
                yield r, f"{where} tolerates every taint; tolerate the accelerator taints by key"
        asked = sorted(
            {
                res
                for c in containers(ps)
                for part in ("requests", "limits")
                for res in (dig(c, "resources", part) or {})
                if res in taints_by_resource
            }
        )
        for res in asked:
            for taint in taints_by_resource[res]:
                if not _tolerates(tolerations, taint):
                    yield (
                        r,
                        f"{where} requests {res} but does not tolerate {taint.key}={taint.value}:{taint.effect}",
                    )


def _pinned(image: Any) -> bool:
    if not isinstance(image, str) or not image:
        return False
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    return ":" in last and last.rsplit(":", 1)[1] not in ("", "latest")


def _device_plugin(r: Resource, c: Mapping[str, Any]) -> bool:
    names = (str(dig(inputs(r), "metadata", "name") or ""), str(c.get("name") or ""), str(c.get("image") or ""))
    return any("device-plugin" in n for n in names)


def check_pods(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """Pods: pinned image tags, not privileged (device plugins excepted), requests and limits
    set, not in the `default` namespace."""
    for r, where, ps in pod_workloads(resources):
        ns = dig(inputs(r), "metadata", "namespace")
        if ns in (None, "", "default"):
            yield r, "runs in the default namespace; give it its own namespace"
        for c in containers(ps):
            name = c.get("name")
            if not _pinned(c.get("image")):
                yield r, f"{where} container {name}: image {c.get('image')!r} is not pinned to a tag or digest"
            if is_true(dig(c, "securityContext", "privileged")) and not _device_plugin(r, c):
                yield r, f"{where} container {name} is privileged; only device plugins may be"
            res = as_map(c.get("resources"))
            if not res.get("requests") or not res.get("limits"):
                yield r, f"{where} container {name} lacks resource requests and limits"
    for rel in of_type(resources, T_HELM_RELEASE):
        if inputs(rel).get("namespace") in (None, "", "default"):
            yield rel, "Helm release installs into the default namespace; set namespace"
