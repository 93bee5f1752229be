"""Who shares the cluster and what each tenant's namespace lets its pods do (pure builders).

A tenant is a team of `teams` (or, without teams, the one `default` tenant). Each tenant has
its own namespace, its own claim of the shared file system seen through its own sub-path
(infra.storage.SharedVolume), its own LocalQueue (infra.queues) and these NetworkPolicies:

- `default-deny`: every pod of the namespace is isolated both ways; nothing reaches in or out
  unless another policy of the namespace allows it (NetworkPolicy semantics: the allowed
  traffic is the union of the policies that select a pod).
- `allow-dns`: every pod may ask the cluster DNS (EKS CoreDNS pods `k8s-app: kube-dns` in
  kube-system, port 53 UDP and TCP; the Service port equals the container port, which the VPC
  CNI's policy agent needs).
- `allow-internet-egress`: pods labelled `llm-training-eks/egress: internet` (the download
  steps, and runs with `internetEgress`) may open HTTPS connections outside the VPC:
  Hugging Face, and S3 through the VPC's gateway endpoint, whose addresses are S3's public
  ones. Private, shared and link-local ranges (the VPC, the node's IMDS) stay closed.

What a job needs between its own pods (launcher and workers: ssh, the rendezvous, NCCL and
Neuron bootstrap sockets on ephemeral ports) is one policy per MPIJob, made with the job
(workloads.manifests.network). The shared file system needs no rule here: the FSx CSI node
plugin mounts Lustre on the node (NodePublishVolume, driver v1.9.0), so file traffic is the
node's, not the pod's. `kubectl port-forward` (TensorBoard) connects to localhost inside the
pod's network namespace (containerd's CRI port forward), so it needs no ingress rule either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from facts.names import (
    DEFAULT_QUEUE,
    EGRESS_INTERNET,
    EGRESS_LABEL,
    SYSTEM_NAMESPACE,
    WORKLOADS_NAMESPACE,
    app_labels,
    team_namespace,
    team_sub_path,
)

Obj = dict[str, Any]
NETWORK_POLICY_API_VERSION = "networking.k8s.io/v1"
KUBE_DNS_LABELS = {"k8s-app": "kube-dns"}
"""The labels of EKS's CoreDNS pods (and the selector of the kube-dns Service)."""
DNS_PORT = 53
HTTPS_PORT = 443
CLOSED_RANGES = ("10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16")
"""Never reached by internet egress: RFC 1918 (the VPC), shared address space (RFC 6598) and
link-local (the node's instance metadata service)."""
POLICY_NAMES = ("default-deny", "allow-dns", "allow-internet-egress")


@dataclass(frozen=True)
class Tenant:
    """Where one team's runs live: its namespace and the directory of the shared file system
    its pods see as `/shared` ("": the whole file system)."""

    key: str
    """The team's name, or `default` in a stack without teams."""
    namespace: str
    sub_path: str


def tenants_of(teams: Iterable[str], default_queue: bool = False) -> dict[str, Tenant]:
    """One tenant per team (`team-<name>`, `teams/<name>/`), and the `default` tenant over the
    whole file system in `training` when there are no teams or `default_queue` keeps it beside
    them (`queueing.defaultQueue`: the runs of the stack from before its first team stay where
    they run; a team's namespace never takes a run over)."""
    names = list(teams)
    default = {DEFAULT_QUEUE: Tenant(DEFAULT_QUEUE, WORKLOADS_NAMESPACE, "")}
    if not names:
        return default
    return {
        **(default if default_queue else {}),
        **{name: Tenant(name, team_namespace(name), team_sub_path(name)) for name in names},
    }


def _policy(name: str, namespace: str, spec: Obj) -> Obj:
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": app_labels("network")},
        "spec": spec,
    }


def default_deny(namespace: str) -> Obj:
    """Every pod of the namespace isolated for ingress and egress."""
    return _policy("default-deny", namespace, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})


def allow_dns(namespace: str) -> Obj:
    """Every pod of the namespace may ask the cluster DNS."""
    peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": SYSTEM_NAMESPACE}},
        "podSelector": {"matchLabels": dict(KUBE_DNS_LABELS)},
    }
    ports = [{"protocol": p, "port": DNS_PORT} for p in ("UDP", "TCP")]
    return _policy(
        "allow-dns",
        namespace,
        {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [peer], "ports": ports}]},
    )


def allow_internet_egress(namespace: str) -> Obj:
    """Pods that download (labelled `egress: internet`) may reach HTTPS outside the VPC."""
    to = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(CLOSED_RANGES)}}]
    return _policy(
        "allow-internet-egress",
        namespace,
        {
            "podSelector": {"matchLabels": {EGRESS_LABEL: EGRESS_INTERNET}},
            "policyTypes": ["Egress"],
            "egress": [{"to": to, "ports": [{"protocol": "TCP", "port": HTTPS_PORT}]}],
        },
    )


def namespace_policies(namespace: str) -> list[Obj]:
    """The NetworkPolicies every tenant namespace gets, in POLICY_NAMES order."""
    return [default_deny(namespace), allow_dns(namespace), allow_internet_egress(namespace)]
