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

The internet host stands in for a public address (PUBLIC_ADDRESS, a documentation address
outside every private range): a pod reaches it when one of the egress policies that select it
has a rule whose ipBlock holds that address (and not in its `except`) and whose ports include
the port the stand-in serves (TCP 443); pods not selected by any egress policy reach it too.
"""

from __future__ import annotations

import ipaddress
from typing import Any

Obj = dict[str, Any]
PUBLIC_ADDRESS = ipaddress.ip_address("198.51.100.7")  # RFC 5737: public, in no private range


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
