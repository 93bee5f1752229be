"""Every pod an example stack renders (MPIJob replicas included) runs with a security context fit
for its process, and reaches only what it needs over the network.

The rules are those of checkov's Kubernetes checks, named by ID; tests/plan/test_checkov.py runs
checkov itself over the same pods. Facts about what Kubernetes, containerd, EKS and
mpi-operator do come from tests/upstream/.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from facts import serving
from facts.leaderworkerset import NAME_LABEL as LWS_NAME_LABEL
from facts.names import (
    EGRESS_INTERNET,
    EGRESS_LABEL,
    MPI_JOB_NAME_LABEL,
    PRIVILEGED_EXCEPTION_ANNOTATION,
    SYSTEM_NAMESPACE,
)
from infra import tenancy
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, ROOT, stack_plan, stack_values
from tests.pods import ROLES, VARIANT, Pod, plan_of, pods, rendered_stacks
from tools import plan as plan_mod
from workloads.manifests import security

NON_ROOT = {"image check", "data step", "TensorBoard", "shell", "conversion step", "vLLM server", "vLLM group worker"}
ADDED = {"MPI worker": set(security.WORKER_CAPABILITIES), "directory step": set(security.DIRS_CAPABILITIES)}
STACKS_WITH_PODS = rendered_stacks()


def all_pods() -> Iterator[tuple[str, Pod]]:
    for stack in STACKS_WITH_PODS:
        for pod in pods(plan_of(stack)):
            yield stack, pod


def test_every_role_is_rendered_by_some_example_stack() -> None:
    assert {pod.role for _, pod in all_pods()} == set(ROLES.values())


# --------------------------------------------------------------------------- security contexts


@pytest.mark.parametrize("stack", STACKS_WITH_PODS)
def test_every_pod_has_the_runtime_seccomp_profile_no_token_and_no_escalation(stack: str) -> None:
    """CKV_K8S_31 (seccomp RuntimeDefault), CKV_K8S_38 (no service-account token: none of these
    pods calls the Kubernetes API), CKV_K8S_16/20 (not privileged, no escalation), CKV_K8S_28/37
    (every capability dropped, NET_RAW with them)."""
    for pod in pods(plan_of(stack)):
        where = f"{stack} {pod.name} ({pod.role})"
        assert pod.spec["automountServiceAccountToken"] is False, where
        assert pod.spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert "serviceAccountName" not in pod.spec and "hostNetwork" not in pod.spec, where
        for c in [*pod.spec["containers"], *pod.spec.get("initContainers", [])]:
            sc = c["securityContext"]
            assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False, (where, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (where, c["name"])


@pytest.mark.parametrize("stack", STACKS_WITH_PODS)
def test_pods_run_as_non_root_where_the_process_allows(stack: str) -> None:
    """CKV_K8S_23 (non-root) and CKV_K8S_40 (a UID of 10000 or more) for every pod but the MPI
    launcher and workers (sshd and its key, the images' and the operator's design) and the
    directory step (it hands `data/` to the non-root user)."""
    for pod in pods(plan_of(stack)):
        context = pod.spec["securityContext"]
        if pod.role in NON_ROOT:
            assert context["runAsNonRoot"] is True, pod.name
            assert context["runAsUser"] == context["runAsGroup"] == security.NON_ROOT_UID >= 10000, pod.name
            for c in pod.spec["containers"]:
                assert {"name": "HOME", "value": "/tmp"} in c["env"], (pod.name, "a non-root user has no home")
        else:
            assert context == {"runAsNonRoot": False, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}


@pytest.mark.parametrize("stack", STACKS_WITH_PODS)
def test_capabilities_are_added_only_where_the_process_needs_them(stack: str) -> None:
    """CKV_K8S_25/37: only the MPI worker (sshd) and the directory step (chown) add any, each
    named with its reason in the object's exception annotation (policy pack, pod-security)."""
    for pod in pods(plan_of(stack)):
        for c in pod.spec["containers"]:
            added = set(c["securityContext"]["capabilities"].get("add", []))
            assert added == ADDED.get(pod.role, set()), (pod.name, pod.role, added)
            note = pod.owner["metadata"].get("annotations", {}).get(PRIVILEGED_EXCEPTION_ANNOTATION, "")
            if added:
                assert note.startswith(f"{c['name']}: ") and len(note) > 40, (pod.name, note)


def test_the_worker_capabilities_are_what_sshd_and_the_seccomp_profile_need() -> None:
    """SYS_NICE: containerd's default profile lets mbind/set_mempolicy/get_mempolicy through only
    with it; SYS_CHROOT: chroot (sshd's privilege separation) likewise. Port 22 needs
    NET_BIND_SERVICE: the operator's own non-root design moves sshd to 2222 and sets that
    capability on the binary instead."""
    seccomp = upstream.facts("containerd-seccomp-default")
    assert {"mbind", "set_mempolicy", "get_mempolicy"} <= set(seccomp["syscalls_by_capability"]["CAP_SYS_NICE"])
    assert seccomp["syscalls_by_capability"]["CAP_SYS_CHROOT"] == ["chroot"]
    assert seccomp["default_action"] == "ActErrno"
    non_root = upstream.facts("mpi-operator-v0.8.0-pods")["nonRootExample"]
    assert non_root["sshdPort"] != 22 and non_root["sshdFileCapability"] == "CAP_NET_BIND_SERVICE"
    assert {"SYS_NICE", "SYS_CHROOT", "NET_BIND_SERVICE", "SETUID", "SETGID"} <= set(security.WORKER_CAPABILITIES)
    assert not {"SYS_ADMIN", "NET_RAW", "DAC_OVERRIDE", "SYS_PTRACE"} & set(security.WORKER_CAPABILITIES)


def test_the_operator_leaves_the_pod_security_settings_as_the_template_has_them() -> None:
    facts = upstream.facts("mpi-operator-v0.8.0-pods")
    assert {"securityContext", "automountServiceAccountToken", "serviceAccountName"} <= set(facts["podSpecUntouched"])
    # The launcher's key is root's: the operator mounts it 0600 only at /root/.ssh.
    assert facts["sshDefaultModeAtRootSshPath"] == "0600"
    for _, pod in all_pods():
        if pod.role.startswith("MPI"):
            assert pod.owner["spec"]["sshAuthMountPath"] == "/root/.ssh"


def test_read_only_root_file_systems_where_the_process_is_known() -> None:
    """CKV_K8S_22: the image check, TensorBoard and the directory step run read-only (with an
    emptyDir on /tmp where they write); docs/security.md lists the others and why."""
    for _, pod in all_pods():
        read_only = all(c["securityContext"]["readOnlyRootFilesystem"] for c in pod.spec["containers"])
        read_only_roles = {"image check", "TensorBoard", "directory step", "vLLM server", "vLLM group worker"}
        assert read_only == (pod.role in read_only_roles), pod.name
        mounts = {m["mountPath"] for c in pod.spec["containers"] for m in c["volumeMounts"]}
        if read_only and pod.role != "directory step":
            assert "/tmp" in mounts, pod.name


# --------------------------------------------------------------------------- network


def policies(stack: str, namespace: str) -> list[dict[str, Any]]:
    """The NetworkPolicies of a namespace: the stack's own and, for a layered stack, those of
    the layers below it (a runs stack's namespaces are the cluster stack's)."""
    lower = "" if stack == VARIANT else stack_values(stack).get("llm-training-eks:lowerStack", "")
    below = policies(lower.rpartition("/")[2], namespace) if lower else []
    return below + [
        o
        for o in plan_mod.kubernetes_objects(plan_of(stack))
        if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == namespace
    ]


def selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    wanted = policy["spec"]["podSelector"].get("matchLabels", {})
    return all(labels.get(k) == v for k, v in wanted.items())


@pytest.mark.parametrize("stack", STACKS_WITH_PODS)
def test_every_pod_is_isolated_and_reaches_only_what_it_needs(stack: str) -> None:
    """CKV2_K8S_6 and more: every pod is selected by its namespace's default deny; it may ask
    the cluster DNS; MPI pods reach their own job's pods (by the operator's job-name label) and
    nothing else; only the download steps, and runs with internetEgress, reach HTTPS outside."""
    plan = plan_of(stack)
    balancers = {
        r["inputs"]["metadata"]["name"]
        for r in plan["resources"]
        if r["type"] == "kubernetes:core/v1:Service" and r["inputs"]["spec"].get("type") == "LoadBalancer"
    }
    for pod in pods(plan):
        mine = [p for p in policies(stack, pod.namespace) if selects(p, pod.labels)]
        names = {p["metadata"]["name"] for p in mine}
        assert {"default-deny", "allow-dns"} <= names, (pod.name, names)
        job = pod.labels.get(MPI_JOB_NAME_LABEL)
        expected = {"default-deny", "allow-dns"}
        if job:
            expected.add(f"{job}-peers")
        if pod.labels.get(EGRESS_LABEL) == EGRESS_INTERNET:
            expected.add("allow-internet-egress")
        server = pod.role == "vLLM server"
        if server:  # reached by the clients its config names and the metrics scraper, on its port
            name = pod.owner["metadata"]["name"].removesuffix("-serve")
            expected |= {f"{name}-clients", f"{name}-metrics"}
            if f"{name}-lb" in balancers:  # and by its internal load balancer (serve_endpoint)
                expected.add(f"{name}-lb-ingress")
        group = pod.labels.get(LWS_NAME_LABEL)
        if group:  # a group's pods reach each other (the leader's rendezvous, NCCL), and only them
            expected.add(f"{group}-peers")
        assert names == expected, (pod.name, names)
        for p in mine:
            for rule in p["spec"].get("ingress", []):
                if group and p["metadata"]["name"] == f"{group}-peers":
                    assert rule["from"] == [{"podSelector": {"matchLabels": {LWS_NAME_LABEL: group}}}], rule
                    continue
                if server:
                    assert rule["ports"] == [{"protocol": "TCP", "port": serving.PORT}], (pod.name, rule)
                    continue
                for peer in rule["from"]:
                    assert peer == {"podSelector": {"matchLabels": {MPI_JOB_NAME_LABEL: job}}}, (pod.name, peer)


@pytest.mark.parametrize("stack", STACKS_WITH_PODS)
def test_only_the_steps_that_download_reach_the_internet(stack: str) -> None:
    """...and the MPI pods of a run with `internetEgress`."""
    plan = plan_of(stack)
    internet = {pod.name for pod in pods(plan) if pod.labels.get(EGRESS_LABEL) == EGRESS_INTERNET}
    wanted = {
        pod.name
        for pod in pods(plan)
        if any(x in pod.name for x in ("-tokenizer-", "-dataset-", "-hub-", "-assets-"))
        or (pod.role.startswith("MPI") and stack == VARIANT)
    }
    assert internet == wanted


def test_namespace_policies_follow_the_eks_and_kubernetes_facts() -> None:
    """DNS: EKS's CoreDNS pods and ports; internet egress never into the VPC's private ranges or
    the node's instance metadata; default deny both ways."""
    eks = upstream.facts("aws-eks-network-policy-2024-12")
    deny, dns, internet = tenancy.namespace_policies("ns")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    (rule,) = dns["spec"]["egress"]
    (peer,) = rule["to"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": eks["kube_dns"]["namespace"]}}
    assert eks["kube_dns"]["namespace"] == SYSTEM_NAMESPACE
    assert peer["podSelector"] == {"matchLabels": eks["kube_dns"]["selector"]}
    assert sorted(f"{p['port']}/{p['protocol']}" for p in rule["ports"]) == sorted(eks["kube_dns"]["ports"])
    (rule,) = internet["spec"]["egress"]
    (block,) = rule["to"]
    closed = [ipaddress.ip_network(c) for c in block["ipBlock"]["except"]]
    for address in ("10.1.2.3", "172.20.0.10", "192.168.1.1", "169.254.169.254", "100.64.0.1"):
        assert any(ipaddress.ip_address(address) in net for net in closed), address
    assert rule["ports"] == [{"protocol": "TCP", "port": 443}]


def test_kubelet_probes_and_port_forward_need_no_ingress_rule() -> None:
    """TensorBoard has a default-deny namespace and no ingress rule: the kubelet's probes come
    from the pod's node, which NetworkPolicy always allows (the API's own definition, in the
    schema kubernetes-validate ships), and `kubectl port-forward` connects inside the pod's
    network namespace (containerd's CRI port forward)."""
    import kubernetes_validate

    schema = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / "v1.35.0-local"
    spec = json.loads((schema / "networkpolicyspec-networking-v1.json").read_text())
    assert "OR if the traffic source is the pod's local node" in spec["properties"]["ingress"]["description"]
    assert "inside the pod sandbox's network namespace" in upstream.facts("containerd-seccomp-default")["port_forward"]


def test_every_pod_has_an_owner_so_the_vpc_cni_applies_its_policies() -> None:
    """EKS user guide: standalone pods (no ownerReferences) can't have network policies applied.
    Every pod here is made by a Job, a Deployment, the MPI operator (workers: owned by the
    MPIJob; launcher: by its Job) or the LWS controller (a StatefulSet's)."""
    assert any("standalone pods" in c for c in upstream.facts("aws-eks-network-policy-2024-12")["considerations"])
    facts = upstream.facts("mpi-operator-v0.8.0-pods")
    assert (facts["workerOwner"], facts["launcherOwner"]) == ("MPIJob", "Job")
    assert upstream.facts("lws-v0.9.0")["pod_owner"] == "StatefulSet"  # a group's pods, LeaderWorkerSet's
    assert {pod.owner["kind"] for _, pod in all_pods()} == {"Job", "Deployment", "MPIJob", "LeaderWorkerSet"}


def test_the_vpc_cni_enforces_network_policies() -> None:
    """The policies above are stored, not enforced, unless the vpc-cni add-on has the network
    policy agent on (EKS user guide, cni-network-policy-configure)."""
    eks = upstream.facts("aws-eks-network-policy-2024-12")
    for stack in EXAMPLE_STACKS:
        for r in stack_plan(stack)["resources"]:
            if r["type"] == "aws:eks/addon:Addon" and r["inputs"]["addonName"] == eks["addon"]:
                assert json.loads(r["inputs"]["configurationValues"]) == eks["configuration_values"], stack


def test_security_docs_list_the_root_and_capability_exceptions() -> None:
    page = (ROOT / "docs" / "security.md").read_text()
    for capability in security.WORKER_CAPABILITIES:
        assert capability in page, capability
