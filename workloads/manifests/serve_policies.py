"""Who reaches a vLLM server (recipe `vllm-serve`), on its port only: the clients the config names
(and their own egress to it, their namespace denying egress by default), and the CloudWatch add-on's
metrics scraper. The internal load balancer's policy is serve_endpoint's."""

from __future__ import annotations

from config.workloads import VllmServeWorkload
from facts import serving
from facts.names import CLOUDWATCH_NAMESPACE
from infra import metrics
from infra.tenancy import NETWORK_POLICY_API_VERSION
from workloads.manifests.objects import Context, Obj, labels, meta

PORT = [{"protocol": "TCP", "port": serving.PORT}]


def server_ingress(name: str, workload_name: str, ctx: Context, peers: list[Obj]) -> Obj:
    """A NetworkPolicy admitting `peers` to the server's pods on the server's port."""
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(name, ctx, labels(workload_name, "network")),
        "spec": {
            "podSelector": {"matchLabels": labels(workload_name, "serve")},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": PORT}],
        },
    }


CLIENT_LABEL = "llm-training-eks/client-of"
"""What a client pod in the server's namespace carries when `clients.podLabels` names none:
`llm-training-eks/client-of: <workload>` (no pod is a client by default)."""


def client_labels(workload_name: str, run: VllmServeWorkload) -> dict[str, str]:
    return dict(run.clients.pod_labels) or {CLIENT_LABEL: workload_name}


def clients_policy(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """Who reaches the server, on its port only: the pods of its own namespace that carry the
    client labels (`clients.podLabels`, or `llm-training-eks/client-of: <workload>`), and the pods
    of the namespaces `clients.namespaces` names (those with `clients.podLabels`, or all of them)."""
    peers: list[Obj] = [{"podSelector": {"matchLabels": client_labels(workload_name, run)}}]
    for ns in run.clients.namespaces:
        peers.append(
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "podSelector": {"matchLabels": dict(run.clients.pod_labels)},
            }
        )
    return server_ingress(f"{workload_name}-clients", workload_name, ctx, peers)


def client_egress(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """The clients of the server's own namespace may open connections to it (their namespace
    denies egress by default)."""
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(f"{workload_name}-clients-egress", ctx, labels(workload_name, "network")),
        "spec": {
            "podSelector": {"matchLabels": client_labels(workload_name, run)},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"podSelector": {"matchLabels": labels(workload_name, "serve")}}],
                    "ports": PORT,
                }
            ],
        },
    }


def metrics_policy(workload_name: str, ctx: Context) -> Obj:
    """The CloudWatch add-on's serving scraper (infra.metrics: its namespace, and the labels its
    operator gives its pods) reaches the server's port, where vLLM answers /metrics; nothing else
    is admitted by this policy. The scraper runs on the pod network, so these selectors match it."""
    scraper = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": CLOUDWATCH_NAMESPACE}},
        "podSelector": {"matchLabels": metrics.scraper_pod_labels()},
    }
    return server_ingress(f"{workload_name}-metrics", workload_name, ctx, [scraper])
