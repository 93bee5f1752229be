"""A load-balanced server through rollouts, drains and preemptions, and its TLS listener.

Every server of the example stacks, planned behind an internal NLB (the AWS Load Balancer
Controller v3.5.0, ip targets), is held to one rule: its namespace carries the controller's
readiness-gate label (docs/deploy/pod_readiness_gate.md: a new pod is ready only once its
target is healthy, so a rollout never leaves the target group empty); it keeps serving through a
preStop that outlasts the target group's deregistration delay (ELB's 300 s unless set); its
grace period covers that and vLLM's own stop. A TLS listener gets a TLS 1.2+/1.3 policy, not the
controller's default ELBSecurityPolicy-2016-08 (pkg/config/controller_config.go, v3.5.0), which
accepts TLS 1.0 and 1.1 (tests/upstream/aws-elb-nlb-listeners-2026-12.yaml)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import upstream
from tests.conftest import EXAMPLE_STACKS, run_plan, stack_plan, stack_values

FACTS = upstream.facts("aws-elb-nlb-listeners-2026-12")
NS = "llm-training-eks:"
CERTIFICATE = "arn:aws:acm:{region}:123456789012:certificate/0f6a8c2e-5b1d-4e7a-9c3f-2d8e6b4a1c90"
SERVING = [
    s
    for s in EXAMPLE_STACKS
    if any(w.get("recipe") == "vllm-serve" for w in stack_values(s).get(f"{NS}workloads", {}).values())
]
SHUTDOWN_FLOOR = 30
"""Seconds vLLM has at least after its preStop, before the kubelet kills it."""


def balanced(stack: str) -> dict[str, Any]:
    """The stack's plan with every server behind an internal NLB with TLS (as trn2-serve is)."""
    values = copy.deepcopy(stack_values(stack))
    servers = {k: w for k, w in values[f"{NS}workloads"].items() if w.get("recipe") == "vllm-serve"}
    if all(w.get("endpoint") == "internalLoadBalancer" for w in servers.values()):
        return stack_plan(stack)
    values.setdefault(f"{NS}addons", {})["loadBalancerController"] = True
    for w in servers.values():
        w["endpoint"] = "internalLoadBalancer"
        w["certificateArn"] = CERTIFICATE.format(region=values["aws:region"])
    return run_plan(values, stack)


def kubernetes(plan: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [
        r["inputs"]
        for r in plan["resources"]
        if r["type"].startswith("kubernetes:") and r["inputs"].get("kind") == kind
    ]


def templates(plan: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(namespace, pod template) of every server: Deployments and LeaderWorkerSets' leaders."""
    out = [(d["metadata"]["namespace"], d["spec"]["template"]) for d in kubernetes(plan, "Deployment")]
    for s in kubernetes(plan, "LeaderWorkerSet"):
        out.append((s["metadata"]["namespace"], s["spec"]["leaderWorkerTemplate"]["leaderTemplate"]))
    return out


def targets(plan: dict[str, Any]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(LoadBalancer Service, namespace, pod template) of every pod template a load balancer selects."""
    out = []
    for svc in kubernetes(plan, "Service"):
        if svc["spec"].get("type") != "LoadBalancer":
            continue
        selector = svc["spec"]["selector"].items()
        for namespace, template in templates(plan):
            if namespace == svc["metadata"]["namespace"] and selector <= template["metadata"]["labels"].items():
                out.append((svc, namespace, template))
    return out


@pytest.mark.parametrize("stack", SERVING)
def test_every_load_balanced_server_outlasts_its_deregistration(stack: str) -> None:
    plan = balanced(stack)
    found = targets(plan)
    assert found, f"{stack}: no server behind a load balancer"
    namespaces = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in kubernetes(plan, "Namespace")}
    (label,) = FACTS["readiness_gate_namespace_label"].items()
    for svc, namespace, template in found:
        assert label in namespaces[namespace].items(), (stack, namespace, namespaces[namespace])
        attributes = svc["metadata"]["annotations"].get(FACTS["target_group_attributes_annotation"], "")
        pairs = dict(a.split("=", 1) for a in attributes.split(",") if a)
        delay = int(pairs.get(FACTS["deregistration_delay_attribute"], FACTS["deregistration_delay_default_seconds"]))
        (container,) = template["spec"]["containers"]
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        grace = template["spec"].get("terminationGracePeriodSeconds", 30)
        assert pre_stop > delay, (stack, pre_stop, delay)
        assert grace >= pre_stop + SHUTDOWN_FLOOR, (stack, grace, pre_stop)


@pytest.mark.parametrize("stack", SERVING)
def test_every_tls_listener_refuses_tls_1_0_and_1_1(stack: str) -> None:
    found = targets(balanced(stack))
    annotation = FACTS["ssl_negotiation_policy_annotation"]
    for svc, _, _ in found:
        policy = svc["metadata"]["annotations"].get(annotation, FACTS["controller_default_ssl_policy"])
        protocols = set(FACTS["policies"][policy])
        assert protocols and not protocols & {"TLSv1", "TLSv1.1"}, (stack, policy, protocols)
