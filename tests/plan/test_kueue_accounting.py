"""No pod of an example stack lands on an accelerated flavor's nodes outside Kueue's accounting.

Kueue hands whole nodes of an accelerated node group to the runs it admits (quota = nodes x one
worker's requests). A pod that can be placed on such a node must belong to an object Kueue
admits: the object names a queue (`kueue.x-k8s.io/queue-name`) and its kind's integration is in
Kueue's `integrations.frameworks` (tests/upstream/kueue-jobs-v0.19.2.yaml: each integration's
FrameworkName; an unlisted kind is never suspended nor counted). Whether a pod can be placed
there follows Kueue's own flavor rules (tests/upstream/kueue-flavor-assignment-v0.19.2.yaml):
its nodeSelector on the flavor's nodeLabels keys, and tolerations for the flavor's NoSchedule and
NoExecute nodeTaints.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from facts.names import QUEUE_LABEL
from tests import upstream
from tests.conftest import stack_plan
from tests.pods import Pod, pods, rendered_stacks
from tools import plan as plan_mod

KUEUE_JOBS = upstream.facts("kueue-jobs-v0.19.2")
FLAVOR_RULES = upstream.facts("kueue-flavor-assignment-v0.19.2")
RELEASE = "kubernetes:helm.sh/v3:Release"


def _tolerates(pod: Pod, taint: dict[str, str]) -> bool:
    for t in pod.spec.get("tolerations", []):
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def lands_on(pod: Pod, flavor: dict[str, Any]) -> bool:
    """Whether the scheduler may place the pod on a node of the flavor (its labels and taints)."""
    labels, taints = flavor["spec"].get("nodeLabels", {}), flavor["spec"].get("nodeTaints", [])
    selector = pod.spec.get("nodeSelector", {})
    if any(k in labels and labels[k] != v for k, v in selector.items()):
        return False
    checked = FLAVOR_RULES["taint_effects_checked"]
    return all(_tolerates(pod, t) for t in taints if t["effect"] in checked)


def frameworks(plan: dict[str, Any]) -> list[str]:
    (kueue,) = [r["inputs"] for r in plan["resources"] if r["type"] == RELEASE and r["inputs"]["name"] == "kueue"]
    manager = yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"])
    return list(manager["integrations"]["frameworks"])


def accounted(pod: Pod, listed: list[str]) -> bool:
    owner = pod.owner
    kind = f"{owner['apiVersion']}/{owner['kind']}"
    framework = KUEUE_JOBS["framework_of_kind"].get(kind)
    return QUEUE_LABEL in owner["metadata"].get("labels", {}) and framework in listed


def accelerated_flavors(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        o for o in plan_mod.kubernetes_objects(plan) if o["kind"] == "ResourceFlavor" and o["spec"].get("nodeTaints")
    ]


@pytest.mark.parametrize("stack", [s for s in rendered_stacks() if "+" not in s])
def test_no_pod_on_accelerated_nodes_outside_kueue(stack: str) -> None:
    plan = stack_plan(stack)
    flavors = accelerated_flavors(plan)
    if not flavors:
        pytest.skip(f"{stack}: its flavors are another layer's (its all-in-one twin is held here)")
    listed = frameworks(plan)
    outside = [
        f"{pod.owner['kind']} {pod.name} ({pod.role}) on {flavor['metadata']['name']}"
        for pod in pods(plan)
        for flavor in flavors
        if lands_on(pod, flavor) and not accounted(pod, listed)
    ]
    assert not outside, f"{stack}: pods on accelerated nodes that Kueue does not count: {outside}"


def test_the_rule_sees_an_unqueued_pod() -> None:
    """The check itself: a toleration and a matching selector place a pod; the wrong group or a
    missing toleration does not."""
    flavor = {
        "spec": {"nodeLabels": {"g": "trn1"}, "nodeTaints": [{"key": "n", "value": "true", "effect": "NoSchedule"}]}
    }
    tolerating = {"tolerations": [{"key": "n", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}

    def pod(spec: dict[str, Any]) -> Pod:
        return Pod("data step", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {}}, {"name": "x"}, spec)

    assert lands_on(pod({"nodeSelector": {"g": "trn1"}, **tolerating}), flavor)
    assert not lands_on(pod({"nodeSelector": {"g": "system"}, **tolerating}), flavor)
    assert not lands_on(pod({"nodeSelector": {"g": "trn1"}}), flavor)
    assert not accounted(pod({}), ["batch/job"])
