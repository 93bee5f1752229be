"""The kubelet's view of a pod's securityContext and volumes, as the harness plays it (no
namespaces needed): held to tests/upstream/kubelet-pod-security.yaml and the EKS AMI's runtime spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from facts import leaderworkerset as lws
from tests import upstream
from tests.launch import netpolicy, security

CONTAINER = {"name": "worker", "image": "x/nemo:1"}


def ctx(pod: dict[str, Any] | None = None, container: dict[str, Any] | None = None) -> security.Security:
    pod_spec = {"securityContext": pod} if pod is not None else {}
    return security.effective(pod_spec, {**CONTAINER, "securityContext": container or {}}, "job-worker-0")


def test_no_context_is_root_with_the_runtimes_capabilities() -> None:
    s = ctx()
    assert (s.uid, s.gid, s.refused, s.no_new_privs, s.read_only_root) == (0, 0, None, False, False)
    assert set(s.capabilities) == set(upstream.facts("amazon-eks-ami-base-runtime-spec")["capabilities"])


def test_run_as_non_root_on_a_root_image_is_refused_with_the_kubelets_message() -> None:
    assert ctx({"runAsNonRoot": True}).refused == (
        "container has runAsNonRoot and image will run as root (pod: job-worker-0, container: worker)"
    )
    assert ctx({"runAsNonRoot": True}, {"runAsUser": 0}).refused.startswith("container's runAsUser breaks non-root")
    assert ctx({"runAsNonRoot": True, "runAsUser": 1000}).refused is None


def test_the_container_overrides_the_pod_and_capabilities_are_the_containers() -> None:
    s = ctx({"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000}, {"runAsUser": 1001})
    assert (s.uid, s.gid, s.groups) == (1001, 1000, (2000,))
    dropped = ctx(container={"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}})
    assert dropped.capabilities == ("CAP_NET_BIND_SERVICE",)
    assert "CAP_SYS_CHROOT" not in ctx(container={"capabilities": {"drop": ["SYS_CHROOT"]}}).capabilities
    assert ctx(container={"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True}).read_only_root


def test_volumes_claim_and_empty_dir_only(tmp_path: Path) -> None:
    pod = {
        "volumes": [
            {"name": "shared", "persistentVolumeClaim": {"claimName": "fsx"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {"name": "cfg", "configMap": {"name": "c"}},
            {
                "name": "tok",
                "secret": {"secretName": "t", "items": [{"key": "K", "path": "token"}], "defaultMode": 0o444},
            },
        ]
    }
    mounts = [
        {"name": "shared", "mountPath": "/shared"},
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "tok", "mountPath": "/etc/t", "readOnly": True},
    ]
    found = security.volume_mounts(pod, {"volumeMounts": mounts}, tmp_path, False)
    assert found == [
        {"source": str(tmp_path), "target": "/shared", "readOnly": False},
        {"tmpfs": "1777", "target": "/dev/shm", "readOnly": False},
        {"secret": {"token": ["harness-secret-t-K", 0o444]}, "target": "/etc/t"},
    ]
    with pytest.raises(NotImplementedError, match="cfg \\(configMap\\)"):
        security.volume_mounts(pod, {"volumeMounts": [{"name": "cfg", "mountPath": "/c"}]}, tmp_path, False)


def test_network_policies_between_the_pods_of_a_job() -> None:
    deny = {"metadata": {"name": "default-deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}
    peers = {"podSelector": {"matchLabels": {"job": "j"}}}
    allow = {
        "metadata": {"name": "j-peers"},
        "spec": {
            "podSelector": peers["podSelector"],
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [peers]}],
            "egress": [{"to": [peers]}],
        },
    }
    pods = {"l": {"job": "j"}, "w0": {"job": "j"}, "x": {"job": "other"}}
    assert netpolicy.denied_pairs([], pods) == set()
    assert netpolicy.denied_pairs([deny, allow], pods) == {("l", "x"), ("x", "l"), ("w0", "x"), ("x", "w0")}
    assert len(netpolicy.denied_pairs([deny], pods)) == 6
    one_way = {
        "metadata": {"name": "in"},
        "spec": {"podSelector": {"matchLabels": {"x": "1"}}, "policyTypes": ["Ingress"]},
    }
    with pytest.raises(NotImplementedError, match="one-way"):
        netpolicy.denied_pairs([one_way], {"a": {}, "b": {"x": "1"}})


def test_serving_policies_admit_the_named_clients_on_the_servers_port_only() -> None:
    """The port- and namespace-aware model on the rendered policies of every serving example
    stack: the clients the config names reach the server's port and no other; a pod of the
    server's namespace without the labels, and one of another namespace, reach nothing; the
    server opens nothing to its clients (default-deny), whose replies come from its port."""
    from tests.launch import plans

    for stack, workload, _ in plans.workloads(serving=True):
        plan = plans.serving(stack, workload)
        (server,) = [o for o in plan["steps"] if o["kind"] in ("Deployment", "LeaderWorkerSet")]
        namespace = server["metadata"]["namespace"]
        pod = netpolicy.Peer("server", namespace, server_labels(server), {"http": 8000})
        clients = plans.serving_values(stack, workload)[f"{plans.PREFIX}workloads"][workload].get("clients", {})
        labels = clients.get("podLabels") or {"llm-training-eks/client-of": workload}
        admitted = [netpolicy.Peer("c", namespace, labels)]
        admitted += [netpolicy.Peer(f"c-{ns}", ns, {}) for ns in clients.get("namespaces", [])]
        for client in admitted:
            assert netpolicy.ports_allowed(plan["policies"], client, pod) == {8000}, (stack, client)
            assert netpolicy.ports_allowed(plan["policies"], pod, client) == set(), (stack, client)
        stranger = netpolicy.Peer("s", namespace, {"role": "other"})
        assert netpolicy.ports_allowed(plan["policies"], stranger, pod) == set(), stack
        if not clients.get("namespaces"):
            assert netpolicy.ports_allowed(plan["policies"], netpolicy.Peer("o", "elsewhere", labels), pod) == set()
        if server["kind"] == "LeaderWorkerSet":  # a worker: its leader's peer on every port, no client's
            template = server["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
            worker = netpolicy.Peer("w", namespace, {**template, lws.NAME_LABEL: server["metadata"]["name"]})
            assert netpolicy.ports_allowed(plan["policies"], worker, pod) is netpolicy.ALL_PORTS, stack
            assert netpolicy.ports_allowed(plan["policies"], pod, worker) is netpolicy.ALL_PORTS, stack
            assert all(netpolicy.ports_allowed(plan["policies"], c, worker) == set() for c in admitted), stack


def server_labels(server: dict) -> dict[str, str]:
    """The serving pod's labels: a Deployment's template's, or a LeaderWorkerSet leader's with the
    labels LWS adds (tests/launch/lws.py)."""
    if server["kind"] == "Deployment":
        return dict(server["spec"]["template"]["metadata"]["labels"])
    leader = server["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
    return {**leader, lws.NAME_LABEL: server["metadata"]["name"], lws.WORKER_INDEX_LABEL: "0"}


def test_a_named_port_is_the_receivers_and_a_port_range_is_refused() -> None:
    policy = {
        "metadata": {"name": "p", "namespace": "a"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"ports": [{"port": "http"}]}]},
    }
    source, dest = netpolicy.Peer("s", "b"), netpolicy.Peer("d", "a", {}, {"http": 8000})
    assert netpolicy.ports_allowed([policy], source, dest) == {8000}
    assert netpolicy.ports_allowed([policy], source, netpolicy.Peer("d", "a")) == set()
    policy["spec"]["ingress"] = [{"ports": [{"port": 8000, "endPort": 8010}]}]
    with pytest.raises(NotImplementedError, match="endPort"):
        netpolicy.ports_allowed([policy], source, dest)
