"""Kueue's pod integration, explicit, and its webhook when Kueue is down.

Kueue 0.19.2's `deployment` integration turns on `pod` implicitly (tests/upstream/
kueue-integrations-v0.19.2.yaml), but the chart sets a webhook's failurePolicy to Fail only for a
framework named in the configuration's list, else Ignore (tests/upstream/kueue-pod-webhook-v0.19.2.yaml:
charts/kueue/templates/webhook/manifests.yaml). Left implicit, a serving pod created while Kueue's
webhook is down (a rollout, a restart, a node drained) is admitted by nobody and runs outside its
team's quota. Named, the webhook fails closed: the ReplicaSet retries until Kueue is back. Its
namespaces are then chosen too (managedJobsNamespaceSelector): the tenants', never a system
namespace, whose pods a Kueue outage must not stop. Over time: a team added later, its
namespace made with the label, is managed from its first pod."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests import upstream
from tests.conftest import resources, stack_plan

FACTS = upstream.facts("kueue-pod-webhook-v0.19.2")
NAMES = upstream.facts("kueue-integrations-v0.19.2")["framework_names"]
RELEASE = "kubernetes:helm.sh/v3:Release"
SERVING = ("trn2-serve", "p5-serve-405b", "p5-train-serve")
SERVER_KINDS = ("Deployment", "LeaderWorkerSet")


def _manager(plan: dict[str, Any]) -> tuple[dict[str, Any], str]:
    (kueue,) = [r["inputs"] for r in resources(plan, RELEASE) if str(r["inputs"]["chart"]).endswith("/kueue")]
    return yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"]), kueue["namespace"]


def _policy(manager: dict[str, Any], framework: str) -> str:
    """The chart's rule: Fail for a framework the configuration lists, Ignore otherwise."""
    listed = framework in manager["integrations"]["frameworks"]
    return FACTS["failure_policy_when_listed"] if listed else FACTS["failure_policy_when_not_listed"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


@pytest.mark.parametrize("stack", SERVING)
def test_serving_pods_fail_closed_while_kueue_is_down(stack: str) -> None:
    manager, _ = _manager(stack_plan(stack))
    assert _policy(manager, NAMES["pod"]) == "Fail" and _policy(manager, NAMES["deployment"]) == "Fail"


@pytest.mark.parametrize("stack", SERVING)
def test_kueue_manages_the_tenants_namespaces_and_no_system_one(stack: str) -> None:
    plan = stack_plan(stack)
    manager, kueue_namespace = _manager(plan)
    selector = manager[FACTS["namespace_selector_key"]]
    namespaces = {
        r["inputs"]["metadata"]["name"]: r["inputs"]["metadata"].get("labels") or {}
        for r in resources(plan, "kubernetes:core/v1:Namespace")
    }
    servers = [
        r["inputs"]["metadata"]["namespace"]
        for r in plan["resources"]
        if r["inputs"].get("kind") in SERVER_KINDS
        and "kueue.x-k8s.io/queue-name" in (r["inputs"]["metadata"].get("labels") or {})
    ]
    assert servers, stack
    assert all(_selects(selector, namespaces[n]) for n in servers), (selector, servers)
    system = {"kube-system", kueue_namespace, *(r["inputs"]["namespace"] for r in resources(plan, RELEASE))}
    assert not any(_selects(selector, namespaces.get(n, {})) for n in system), selector
