"""Resource rules over node groups and Kubernetes objects: accelerator taints and pod
security. Per rule one passing, one failing and one unknown-value fixture; exceptions only by
an explicit annotation naming the containers and a reason (no exemption by name)."""

from __future__ import annotations

from typing import Any

import pytest

from facts.names import (
    HOST_ACCESS_EXCEPTION_ANNOTATION,
    INTERNET_FACING_EXCEPTION_ANNOTATION,
    PRIVILEGED_EXCEPTION_ANNOTATION,
)
from policy.rules import kubernetes, props
from tests import upstream
from tests.unit.policy_fixtures import U, messages, res

NEURON_TAINT = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NO_SCHEDULE"}
NEURON_TOLERATION = {"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def pod(
    tolerations: Any, annotations: dict[str, str] | None = None, spec: dict[str, Any] | None = None, **container: Any
) -> dict:
    c = {
        "name": "train",
        "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1.0",
        "resources": {"requests": {"aws.amazon.com/neuron": 16, "cpu": "8"}, "limits": {"aws.amazon.com/neuron": 16}},
        **container,
    }
    meta: dict[str, Any] = {"name": "p", "namespace": "training"}
    if annotations:
        meta["annotations"] = annotations
    return res(
        "kubernetes:core/v1:Pod",
        "p",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"containers": [c], "tolerations": tolerations, **(spec or {})},
        },
    )


# --------------------------------------------------------------------------- taints


def test_taints_pass_tainted_nodes_and_tolerating_pod():
    ng = res(props.T_NODE_GROUP, "ng", {"instanceTypes": ["trn1.32xlarge"], "taints": [NEURON_TAINT]})
    assert messages([ng, pod([NEURON_TOLERATION])], "accelerator-taints") == []


def test_taints_fail_untainted_nodes_and_pod_without_toleration():
    ng = res(props.T_NODE_GROUP, "ng", {"instanceTypes": ["p5.48xlarge"], "taints": []})
    msgs = messages([ng, pod([{"operator": "Exists"}])], "accelerator-taints")
    assert any("lack the taint nvidia.com/gpu" in m for m in msgs)
    assert any("tolerates every taint" in m for m in msgs)
    assert any("does not tolerate aws.amazon.com/neuron" in m for m in msgs)


def test_taints_unknowns_make_no_violation():
    ng = res(props.T_NODE_GROUP, "ng", {"instanceTypes": ["p5.48xlarge"], "taints": U})
    assert messages([ng, pod(U)], "accelerator-taints") == []


def test_taints_checked_in_mpijob_replica_templates():
    worker = {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}
    job = res(
        "kubernetes:kubeflow.org/v2beta1:MPIJob",
        "j",
        {"metadata": {"namespace": "t"}, "spec": {"mpiReplicaSpecs": {"Worker": worker}}},
    )
    assert messages([job], "accelerator-taints") == [
        "spec.mpiReplicaSpecs.Worker.template.spec requests nvidia.com/gpu but does not tolerate"
        " nvidia.com/gpu=true:NoSchedule"
    ]


# --------------------------------------------------------------------------- pod security


def test_pods_pass_pinned_limited_namespaced():
    assert messages([pod([NEURON_TOLERATION])], "pod-security") == []


def test_pods_fail_latest_privileged_unbounded_default():
    p = pod([], image="busybox:latest", securityContext={"privileged": True}, resources={})
    p["inputs"]["metadata"]["namespace"] = "default"
    assert len(messages([p], "pod-security")) == 4


def test_pods_unknown_image_and_resources_make_no_violation():
    # An image in the stack's ECR repository: its URL is unknown until the repository exists.
    assert messages([pod([], image=U, resources=U)], "pod-security") == []


@pytest.mark.parametrize(
    ("spec", "container", "found"),
    [
        ({"hostNetwork": True}, {}, "hostNetwork: true"),
        ({"hostPID": True}, {}, "hostPID: true"),
        ({"hostIPC": "true"}, {}, "hostIPC: true"),
        ({"volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}]}, {}, "hostPath /dev"),
        ({}, {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, "adds capabilities SYS_ADMIN"),
        ({}, {"securityContext": {"privileged": True}}, "is privileged"),
    ],
)
def test_pods_fail_host_access_capabilities_and_privilege(spec, container, found):
    msgs = messages([pod([], spec=spec, **container)], "pod-security")
    assert len(msgs) == 1 and found in msgs[0]


def test_a_device_plugin_name_is_no_exemption():
    named = pod([], image="public.ecr.aws/eks/aws-efa-k8s-device-plugin:v0.5.6", securityContext={"privileged": True})
    named["inputs"]["metadata"]["name"] = "aws-efa-k8s-device-plugin"
    named["inputs"]["spec"]["containers"][0]["name"] = "device-plugin"
    assert any("is privileged" in m for m in messages([named], "pod-security"))


def test_privilege_exception_covers_the_named_containers_only_and_needs_a_reason():
    privileged = {"securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}}
    ok = {PRIVILEGED_EXCEPTION_ANNOTATION: "train: needs the host's devices"}
    assert messages([pod([], annotations=ok, **privileged)], "pod-security") == []
    for value in ("other: a reason", "train:", "train"):
        msgs = messages([pod([], annotations={PRIVILEGED_EXCEPTION_ANNOTATION: value}, **privileged)], "pod-security")
        assert len(msgs) == 2, value


def test_host_access_exception_needs_a_reason():
    spec = {"hostNetwork": True, "volumes": [{"name": "sys", "hostPath": {"path": "/sys"}}]}
    ok = {HOST_ACCESS_EXCEPTION_ANNOTATION: "node agent reads /sys"}
    assert messages([pod([], annotations=ok, spec=spec)], "pod-security") == []
    assert len(messages([pod([], annotations={HOST_ACCESS_EXCEPTION_ANNOTATION: ""}, spec=spec)], "pod-security")) == 2


def test_helm_release_in_default_namespace_fails():
    assert messages([res(props.T_HELM_RELEASE, "r", {"chart": "x"})], "pod-security")
    assert messages([res(props.T_HELM_RELEASE, "r", {"chart": "x", "namespace": "kube-system"})], "pod-security") == []


def test_objects_without_pods_are_not_pod_checked():
    ns = res("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "training"}})
    assert messages([ns], "pod-security") == []


# --------------------------------------------------------------------------- internal endpoints

LBC = upstream.facts("aws-load-balancer-controller-v3.5.0")


def service(kind: Any, annotations: dict[str, Any] | None = None) -> dict:
    meta: dict[str, Any] = {"name": "chat", "namespace": "training", "annotations": annotations or {}}
    return res("kubernetes:core/v1:Service", "s", {"apiVersion": "v1", "kind": "Service", "metadata": meta,
                                                   "spec": {"type": kind, "ports": [{"port": 8000}]}})  # fmt: skip


def ingress(annotations: dict[str, Any]) -> dict:
    meta = {"name": "chat", "namespace": "training", "annotations": annotations}
    return res("kubernetes:networking.k8s.io/v1:Ingress", "i", {"kind": "Ingress", "metadata": meta, "spec": {}})


def test_the_rule_reads_the_controllers_annotations() -> None:
    assert (
        LBC["service"]["scheme_annotation"],
        LBC["service"]["internal_annotation"],
    ) == (kubernetes.LB_SCHEME, kubernetes.LB_INTERNAL)
    assert LBC["ingress"]["scheme_annotation"] == kubernetes.ALB_SCHEME
    assert (
        {"internal", "internet-facing"} == set(LBC["service"]["scheme_values"]) == set(LBC["ingress"]["scheme_values"])
    )


def test_internal_endpoints_pass() -> None:
    scheme, internal = LBC["service"]["scheme_annotation"], LBC["service"]["internal_annotation"]
    for r in (
        service("ClusterIP"),
        service("LoadBalancer", {scheme: "internal"}),
        service("LoadBalancer", {internal: "true"}),
        ingress({}),  # the controller's default scheme for an Ingress is internal
        ingress({LBC["ingress"]["scheme_annotation"]: "internal"}),
    ):
        assert messages([r], "internal-endpoints") == [], r


def test_an_internet_facing_or_unstated_load_balancer_fails() -> None:
    scheme, internal = LBC["service"]["scheme_annotation"], LBC["service"]["internal_annotation"]
    for r in (
        service("LoadBalancer"),  # the default depends on the controller that takes it
        service("LoadBalancer", {scheme: "internet-facing"}),
        service("LoadBalancer", {scheme: "internet-facing", internal: "true"}),  # the scheme wins
        ingress({LBC["ingress"]["scheme_annotation"]: "internet-facing"}),
    ):
        (msg,) = messages([r], "internal-endpoints")
        assert "internet" in msg and INTERNET_FACING_EXCEPTION_ANNOTATION in msg


def test_an_internet_facing_endpoint_passes_only_with_a_reason() -> None:
    scheme = LBC["service"]["scheme_annotation"]
    public = {scheme: "internet-facing"}
    ok = {**public, INTERNET_FACING_EXCEPTION_ANNOTATION: "the public demo, behind a WAF"}
    assert messages([service("LoadBalancer", ok)], "internal-endpoints") == []
    blank = {**public, INTERNET_FACING_EXCEPTION_ANNOTATION: " "}
    assert len(messages([service("LoadBalancer", blank)], "internal-endpoints")) == 1


def test_unknown_endpoint_values_make_no_violation() -> None:
    scheme = LBC["service"]["scheme_annotation"]
    assert messages([service(U)], "internal-endpoints") == []
    assert messages([service("LoadBalancer", {scheme: U})], "internal-endpoints") == []
