"""metrics-server, added by following docs/contributing.md's "Add an add-on" checklist: the Metrics
API (`kubectl top`, a HorizontalPodAutoscaler on a server's CPU or memory) from the kubernetes-sigs
chart at a pinned version (tests/upstream/chart-metrics-server-3.13.1.yaml: chart 3.13.1, metrics-server
0.8.1, read at tag metrics-server-helm-chart-3.13.1), off unless `addons.metricsServer`.

Over time: it is an aggregated API (v1beta1.metrics.k8s.io), so while no replica answers, API
discovery is incomplete for every client (the namespace controller cannot finish deleting a
namespace). The chart's one replica would go down at the next system node roll; two replicas, a
disruption budget and anti-affinity (the chart's own high-availability manifest) keep one up. Its TLS
stays the chart's `metrics-server` kind (a certificate made at each start): `helm` would make one at
install that expires after 365 days. Turning it on later creates objects and replaces nothing."""

from __future__ import annotations

import copy
from typing import Any

import config
from facts import eks_addons
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, MINIMAL, resources, run_plan, stack_plan, stack_values
from tests.plan import day2

CHART = upstream.facts("chart-metrics-server-3.13.1")
RELEASE = "kubernetes:helm.sh/v3:Release"
ON = {**MINIMAL, "llm-training-eks:addons": {"metricsServer": True}}


def _release(plan: dict[str, Any]) -> dict[str, Any] | None:
    found = [r["inputs"] for r in resources(plan, RELEASE) if r["inputs"]["chart"] == CHART["chart"]]
    return found[0] if found else None


def test_the_switch_installs_the_pinned_chart_highly_available_on_system_nodes() -> None:
    release = _release(run_plan(ON, "metrics-test"))
    assert release is not None
    assert (release["version"], release["repositoryOpts"]["repo"]) == (CHART["version"], CHART["repository_url"])
    assert release["namespace"] == "kube-system"
    values = release["values"]
    assert values["replicas"] >= CHART["high_availability_replicas"] > CHART["defaults"]["replicas"]
    assert values["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}
    assert values["nodeSelector"] == {"llm-training-eks/node-group": "system"}
    affinity = values["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert affinity[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    # A year from now: no certificate made at install that expires (tls.helm.certDurationDays).
    assert values.get("tls", {}).get("type", CHART["defaults"]["tls.type"]) == "metrics-server"


def test_off_by_default_and_on_in_exactly_the_example_stacks_that_ask() -> None:
    assert config.addons.AddonsConfig().metrics_server is False
    asked = {s for s in EXAMPLE_STACKS if stack_values(s).get("llm-training-eks:addons", {}).get("metricsServer")}
    assert asked, "an example stack installs it"
    for stack in EXAMPLE_STACKS:
        assert (_release(stack_plan(stack)) is not None) == (stack in asked), stack


def test_every_kubernetes_minor_the_stack_accepts_is_one_the_chart_supports() -> None:
    """Next release: a new minor in facts/eks_addons.py below the chart's floor would fail here."""
    floor = tuple(int(p) for p in CHART["kubernetes_minimum"].split("."))
    assert all(tuple(int(p) for p in m.split(".")) >= floor for m in eks_addons.ADDON_VERSIONS)


def test_turning_it_on_later_creates_and_replaces_nothing() -> None:
    before = run_plan(MINIMAL, "metrics-test")
    after_values = copy.deepcopy(ON)
    update = day2.diff(before, run_plan(after_values, "metrics-test"))
    assert not update.of("delete") and not update.of("replace") and not update.of("update")
    created = {s.type for s in update.of("create").values()}
    assert RELEASE in created, created
