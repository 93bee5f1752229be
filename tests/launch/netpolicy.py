"""The NetworkPolicies of a workload's namespace, enforced between the pods of one job, and
between a pod and the stand-in internet (tests/launch/internet.py), the way a policy engine would (Kubernetes NetworkPolicy semantics: a pod selected by a policy of a
type is isolated for that direction, and then allowed only what one of those policies' rules
allows; a connection needs the sender's egress and the receiver's ingress).

Enforced per pair of pods at the address level, with blackhole routes in the pods' network
namespaces: a pair denied both ways cannot reach each other at all. What that cannot express
fails the harness, naming it: a pair allowed one way only (a stateful filter would let the
replies through), a rule between the job's pods that allows some ports only, a selector with
matchExpressions. Peers given by namespaceSelector (other namespaces) or ipBlock (addresses
outside the cluster; this cluster's pod addresses stand in for the VPC's, which the policies
here keep out of every ipBlock) never match a pod of the job.

Between pods of any namespace (a server and its clients), `ports_allowed` answers per port:
a connection from pod A to pod B on a TCP port needs A's egress (the policies of A's namespace
that select A) and B's ingress (those of B's namespace that select B) to allow it, each rule's
peers matched as Kubernetes does (a podSelector alone: pods of the policy's own namespace; a
namespaceSelector: the namespaces whose labels match, `kubernetes.io/metadata.name` being
every namespace's own, narrowed by a podSelector beside it), its ports by number or by the
receiving container's port name. Pods enforces the answer with policy-routing rules
(pods.Cluster.connect).

The internet host stands in for a public address (PUBLIC_ADDRESS, a documentation address
outside every private range): a pod reaches it when one of the egress policies that select it
has a rule whose ipBlock holds that address (and not in its `except`) and whose ports include
the port the stand-in serves (TCP 443); pods not selected by any egress policy reach it too.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
PUBLIC_ADDRESS = ipaddress.ip_address("198.51.100.7")  # RFC 5737: public, in no private range


ALL_PORTS = None
"""`ports_allowed`'s answer when every port is allowed."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server sets on every namespace: its name."""


@dataclass(frozen=True)
class Peer:
    """A pod as the policies see it: its namespace, labels and named container ports."""

    name: str
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    if selector.get("matchExpressions"):
        raise NotImplementedError(f"podSelector matchExpressions are not modelled: {selector}")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(peer: Obj, labels: dict[str, str]) -> bool:
    if "ipBlock" in peer or "namespaceSelector" in peer:
        return False
    return _selects(peer.get("podSelector") or {}, labels)


def _allowed(policies: list[Obj], pod: dict[str, str], other: dict[str, str], direction: str) -> bool:
    """Whether `pod` may send to (Egress) or receive from (Ingress) `other`, on every port."""
    isolating = [
        p for p in policies if direction in p["spec"].get("policyTypes", []) and _selects(p["spec"]["podSelector"], pod)
    ]
    if not isolating:
        return True
    key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    for policy in isolating:
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            if peers is not None and not any(_peer_matches(p, other) for p in peers):
                continue
            if rule.get("ports"):
                raise NotImplementedError(
                    f"{policy['metadata']['name']}: a rule between the job's pods on some ports only"
                )
            return True
    return False


def denied_pairs(policies: list[Obj], pods: dict[str, dict[str, str]]) -> set[tuple[str, str]]:
    """(a, b) for every pair of pods (name -> labels) where a cannot open a connection to b."""
    denied = set()
    for a, la in pods.items():
        for b, lb in pods.items():
            if a != b and not (_allowed(policies, la, lb, "Egress") and _allowed(policies, lb, la, "Ingress")):
                denied.add((a, b))
    for a, b in denied:
        if (b, a) not in denied:
            raise NotImplementedError(f"{a} -> {b} denied but {b} -> {a} allowed: a one-way policy is not modelled")
    return denied


def _admits_public(peer: Obj) -> bool:
    block = peer.get("ipBlock")
    if not block:
        return False  # a pod or namespace selector names cluster pods, not the internet
    inside = PUBLIC_ADDRESS in ipaddress.ip_network(block["cidr"])
    return inside and not any(PUBLIC_ADDRESS in ipaddress.ip_network(c) for c in block.get("except", []))


def reaches_internet(policies: list[Obj], pod: dict[str, str], port: int) -> bool:
    """Whether a pod with these labels may open a TCP connection to a public address on `port`."""
    isolating = [
        p for p in policies if "Egress" in p["spec"].get("policyTypes", []) and _selects(p["spec"]["podSelector"], pod)
    ]
    if not isolating:
        return True
    for policy in isolating:
        for rule in policy["spec"].get("egress", []):
            peers = rule.get("to")
            if peers is not None and not any(_admits_public(p) for p in peers):
                continue
            ports = rule.get("ports")
            if ports and not any(p.get("protocol", "TCP") == "TCP" and p.get("port") == port for p in ports):
                continue
            return True
    return False


def _peer_selects(peer: Obj, policy_namespace: str, other: Peer) -> bool:
    """Whether a rule's peer (podSelector and/or namespaceSelector) names `other`."""
    if "ipBlock" in peer:
        return False  # pod addresses stand in for the VPC's, kept out of every ipBlock here
    if "namespaceSelector" in peer:
        namespace_labels = {NAMESPACE_NAME_LABEL: other.namespace}
        if not _selects(peer["namespaceSelector"], namespace_labels):
            return False
    elif other.namespace != policy_namespace:
        return False
    return _selects(peer.get("podSelector") or {}, other.labels)


def _rule_ports(rule: Obj, receiver: Peer) -> frozenset[int] | None:
    """The TCP ports a rule allows (None: every port); a named port is the receiver's."""
    if not rule.get("ports"):
        return ALL_PORTS
    found = set()
    for p in rule["ports"]:
        if p.get("protocol", "TCP") != "TCP" or "port" not in p:
            continue
        if "endPort" in p:
            raise NotImplementedError(f"port ranges (endPort) are not modelled: {p}")
        port = p["port"]
        if isinstance(port, str):
            if port not in receiver.ports:
                continue  # a name the receiving pod does not declare matches none of its ports
            port = receiver.ports[port]
        found.add(int(port))
    return frozenset(found)


def _direction(policies: list[Obj], pod: Peer, other: Peer, receiver: Peer, direction: str) -> frozenset[int] | None:
    """The ports `pod`'s own policies allow it towards (Egress) or from (Ingress) `other`."""
    isolating = [
        p
        for p in policies
        if p["metadata"].get("namespace") == pod.namespace
        and direction in p["spec"].get("policyTypes", [])
        and _selects(p["spec"]["podSelector"], pod.labels)
    ]
    if not isolating:
        return ALL_PORTS
    key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    allowed: set[int] = set()
    for policy in isolating:
        namespace = policy["metadata"]["namespace"]
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            if peers is not None and not any(_peer_selects(p, namespace, other) for p in peers):
                continue
            ports = _rule_ports(rule, receiver)
            if ports is ALL_PORTS:
                return ALL_PORTS
            allowed |= ports
    return frozenset(allowed)


def ports_allowed(policies: list[Obj], source: Peer, dest: Peer) -> frozenset[int] | None:
    """The TCP ports on which `source` may open a connection to `dest` (None: all of them):
    the source's egress and the destination's ingress, each from its own namespace's policies."""
    out = _direction(policies, source, dest, dest, "Egress")
    into = _direction(policies, dest, source, dest, "Ingress")
    if out is ALL_PORTS:
        return into
    if into is ALL_PORTS:
        return out
    return out & into
