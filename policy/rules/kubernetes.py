"""Resource rules over node groups and Kubernetes objects: accelerator taints and
tolerations, pod security. Each looks at one resource (a node group, or one Kubernetes object
with its pod templates)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from facts import instances
from facts.names import (
    HOST_ACCESS_EXCEPTION_ANNOTATION,
    INTERNET_FACING_EXCEPTION_ANNOTATION,
    NEURONCORE_RESOURCE,
    PRIVILEGED_EXCEPTION_ANNOTATION,
)
from policy.rules.model import Context
from policy.rules.props import (
    T_HELM_RELEASE,
    T_NODE_GROUP,
    Resource,
    annotations_of,
    as_list,
    as_map,
    containers,
    dig,
    has_reason,
    inputs,
    is_true,
    known,
    pod_specs,
    type_of,
    unknown,
)

# Resource name -> the taints of the nodes that offer it, from the instance catalog.
_TAINTS_BY_RESOURCE = {
    res: inst.taints
    for inst in instances.ACCELERATED.values()
    for res in (inst.device_resource, NEURONCORE_RESOURCE if inst.accelerator == "neuron" else None)
    if res
}
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


def _tolerates(tolerations: list[Any], taint: instances.Taint) -> bool:
    for t in map(as_map, tolerations):
        if t.get("key") != taint.key:
            continue
        if t.get("effect") not in (None, "", taint.effect):
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint.value:
            return True
    return False


def _node_group_taints(ng: Resource) -> Iterator[str]:
    taints = inputs(ng).get("taints")
    if unknown(taints):
        return
    have = {(dig(x, "key"), dig(x, "value"), dig(x, "effect")) for x in as_list(taints)}
    for t in as_list(inputs(ng).get("instanceTypes")):
        inst = instances.CATALOG.get(t) if known(t) else None
        for taint in inst.taints if inst is not None and inst.accelerator else ():
            if (taint.key, taint.value, taint.eks_effect) not in have:
                yield f"{t} nodes lack the taint {taint.key}={taint.value}:{taint.effect}"


def check_accelerator_taints(r: Resource, context: Context) -> Iterator[str]:
    """Accelerated nodes carry the catalog's taints; pods that ask for accelerators tolerate
    exactly those taints (no blanket tolerations)."""
    if type_of(r) == T_NODE_GROUP:
        yield from _node_group_taints(r)
        return
    for where, ps in pod_specs(r):
        tolerations = as_list(ps.get("tolerations"))
        for t in map(as_map, tolerations):
            if not t.get("key") and t.get("operator") == "Exists":
                yield f"{where} tolerates every taint; tolerate the accelerator taints by key"
        asked = sorted(
            {
                res
                for c in containers(ps)
                for part in ("requests", "limits")
                for res in as_map(dig(c, "resources", part))
                if res in _TAINTS_BY_RESOURCE
            }
        )
        for res in asked:
            for taint in _TAINTS_BY_RESOURCE[res]:
                if not unknown(ps.get("tolerations")) and not _tolerates(tolerations, taint):
                    yield f"{where} requests {res} but does not tolerate {taint.key}={taint.value}:{taint.effect}"


def _pinned(image: Any) -> bool:
    if unknown(image):
        return True  # a registry URL not known yet; the tag is checked at `pulumi up`
    if not isinstance(image, str) or not image:
        return False
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    return ":" in last and last.rsplit(":", 1)[1] not in ("", "latest")


def privileged_exempt(r: Resource) -> set[str]:
    """The containers the workload's exception annotation names, if it gives a reason:
    `<container>[,<container>...]: <reason>`."""
    value = annotations_of(r).get(PRIVILEGED_EXCEPTION_ANNOTATION)
    if not isinstance(value, str) or ":" not in value:
        return set()
    names, reason = value.split(":", 1)
    return {n.strip() for n in names.split(",") if n.strip()} if reason.strip() else set()


def _host_access(r: Resource, where: str, ps: Mapping[str, Any]) -> Iterator[str]:
    if has_reason(annotations_of(r), HOST_ACCESS_EXCEPTION_ANNOTATION):
        return
    hint = f"(or annotate the object {HOST_ACCESS_EXCEPTION_ANNOTATION}: <reason>)"
    for ns in HOST_NAMESPACES:
        if is_true(ps.get(ns)):
            yield f"{where} shares the node's namespaces ({ns}: true); remove it {hint}"
    for v in map(as_map, as_list(ps.get("volumes"))):
        if "hostPath" in v:
            path = dig(v, "hostPath", "path")
            yield f"{where} mounts the node's file system (volume {v.get('name')}: hostPath {path}); {hint}"


def _container(r: Resource, where: str, c: Mapping[str, Any], exempt: set[str]) -> Iterator[str]:
    name = c.get("name")
    if not _pinned(c.get("image")):
        yield f"{where} container {name}: image {c.get('image')!r} is not pinned to a tag or digest"
    hint = f"(or list it in the annotation {PRIVILEGED_EXCEPTION_ANNOTATION}: <containers>: <reason>)"
    if is_true(dig(c, "securityContext", "privileged")) and name not in exempt:
        yield f"{where} container {name} is privileged {hint}"
    added = [a for a in as_list(dig(c, "securityContext", "capabilities", "add")) if not unknown(a)]
    if added and name not in exempt:
        yield f"{where} container {name} adds capabilities {', '.join(map(str, added))} {hint}"
    res = c.get("resources")
    if not unknown(res) and (not as_map(res).get("requests") or not as_map(res).get("limits")):
        yield f"{where} container {name} lacks resource requests and limits"


def check_pods(r: Resource, context: Context) -> Iterator[str]:
    """Pods: not in the `default` namespace; pinned image tags; not privileged, no added
    capabilities, no host namespaces or hostPath volumes (each only by an explicit exception
    annotation on the object, naming containers and a reason); requests and limits set.
    Helm releases: not into `default`."""
    if type_of(r) == T_HELM_RELEASE:
        if inputs(r).get("namespace") in (None, "", "default"):
            yield "Helm release installs into the default namespace; set namespace"
        return
    specs = pod_specs(r)
    if specs and dig(inputs(r), "metadata", "namespace") in (None, "", "default"):
        yield "runs in the default namespace; give it its own namespace"
    exempt = privileged_exempt(r)
    for where, ps in specs:
        yield from _host_access(r, where, ps)
        for c in containers(ps):
            yield from _container(r, where, c, exempt)


T_SERVICE = "kubernetes:core/v1:Service"
T_K8S_INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
LB_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
LB_INTERNAL = "service.beta.kubernetes.io/aws-load-balancer-internal"
ALB_SCHEME = "alb.ingress.kubernetes.io/scheme"
"""AWS Load Balancer Controller v3.5.0's annotations (tests/upstream/aws-load-balancer-controller-v3.5.0.yaml)."""


def _internet_facing(r: Resource) -> str | None:
    """Why a Service or Ingress would be reached from the internet (None: internal, or unknown)."""
    notes = annotations_of(r)
    if type_of(r) == T_K8S_INGRESS:
        scheme = notes.get(ALB_SCHEME)
        return f"{ALB_SCHEME}: {scheme}" if scheme == "internet-facing" else None
    kind = dig(inputs(r), "spec", "type")
    if unknown(kind) or kind != "LoadBalancer":
        return None
    scheme, internal = notes.get(LB_SCHEME), notes.get(LB_INTERNAL)
    if unknown(scheme) or unknown(internal):
        return None
    if scheme is not None:  # the controller's precedence: the scheme over the deprecated flag
        return None if scheme == "internal" else f"{LB_SCHEME}: {scheme}"
    if str(internal).lower() == "true":
        return None
    # Unstated, the scheme is whatever the controller that takes the Service defaults to.
    return f"type LoadBalancer without {LB_SCHEME}: internal"


def check_endpoints(r: Resource, context: Context) -> Iterator[str]:
    """Services of type LoadBalancer and Ingresses are internal, stated on the object; an
    internet-facing one only by the explicit exception annotation with a reason."""
    if type_of(r) not in (T_SERVICE, T_K8S_INGRESS):
        return
    why = _internet_facing(r)
    if why and not has_reason(annotations_of(r), INTERNET_FACING_EXCEPTION_ANNOTATION):
        yield (
            f"may be reached from the internet ({why}); set {LB_SCHEME if type_of(r) == T_SERVICE else ALB_SCHEME}:"
            f" internal (or annotate the object {INTERNET_FACING_EXCEPTION_ANNOTATION}: <reason>)"
        )
