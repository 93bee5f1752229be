"""EKS add-on versions pinned per Kubernetes minor, and the Neuron scheduler
extension: off by default, and on, the kube-scheduler of the cluster's minor.

Before, every add-on left unpinned was looked up as EKS's default at each preview and update
(`aws.eks.get_addon_version`): plans reviewed one day deployed other versions the next, drift
checks reported changes nobody made, and add-ons upgraded unasked. Now the program asks AWS for
nothing to choose a version: facts/eks_addons.py names each minor's versions, recorded with their
source in tests/upstream/eks-addon-versions-2026-11.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest

import config
import stack
from config.cluster import SUPPORTED_KUBERNETES_VERSIONS
from facts import eks_addons
from tests import upstream
from tests.conftest import MINIMAL, resources, run_plan, stack_plan, stack_values
from tests.unit.preflight_sources import InvokeMocks, under_provider

FACTS = "eks-addon-versions-2026-11"
UNRECORDED_136 = {"vpcCni": "v1.22.4-eksbuild.3", "podIdentityAgent": "v1.3.10-eksbuild.3",
                  "nodeMonitoringAgent": "v1.6.4-eksbuild.1"}  # fmt: skip
"""What a 1.36 stack names itself (no source records these for 1.36)."""


def with_version(minor: str, versions: dict[str, str] | None = None, **addons: Any) -> dict[str, Any]:
    cluster = {**MINIMAL["llm-training-eks:cluster"], "kubernetesVersion": minor}
    extra = {"eksAddonVersions": versions} if versions else {}
    return {**MINIMAL, "llm-training-eks:cluster": cluster, "llm-training-eks:addons": {**extra, **addons}}


def planned_versions(plan: dict[str, Any]) -> dict[str, str]:
    return {r["inputs"]["addonName"]: r["inputs"]["addonVersion"] for r in resources(plan, "aws:eks/addon:Addon")}


def test_the_pins_are_the_recorded_ones():
    facts = upstream.facts(FACTS)
    for minor, row in eks_addons.ADDON_VERSIONS.items():
        recorded = {addon: cell["version"] for addon, cell in facts["versions"].get(minor, {}).items()}
        assert {a: v for a, v in row.items() if v is not None} == recorded, minor
        assert sorted(a for a, v in row.items() if v is None) == sorted(facts["unrecorded"].get(minor, [])), minor
        for cell in facts["versions"].get(minor, {}).values():
            assert cell["source"] in facts["sources"]
    assert set(eks_addons.ADDON_KEYS.values()) == {a for row in eks_addons.ADDON_VERSIONS.values() for a in row}
    assert facts["kube_scheduler"]["tags"] == eks_addons.KUBE_SCHEDULER_TAGS
    assert facts["kube_scheduler"]["repository"] == eks_addons.KUBE_SCHEDULER_REPOSITORY


def test_every_supported_minor_has_a_row_and_a_kube_scheduler():
    assert set(SUPPORTED_KUBERNETES_VERSIONS) == set(eks_addons.ADDON_VERSIONS) == set(eks_addons.KUBE_SCHEDULER_TAGS)
    for minor, row in eks_addons.ADDON_VERSIONS.items():
        # kube-proxy follows the control plane's minor (EKS user guide, managing-kube-proxy).
        assert str(row["kube-proxy"]).startswith(f"v{minor}."), minor


def test_a_preview_asks_aws_for_no_addon_version():
    """The program runs with invokes recorded: choosing versions calls nothing."""
    cfg = config.parse(config.from_stack_values(MINIMAL))
    mocks = InvokeMocks({})
    under_provider(mocks, lambda: stack.build_layer(cfg))
    assert [tok for tok, _, _ in mocks.calls if "getAddonVersion" in tok] == []


def test_every_example_stack_deploys_the_pinned_versions(example_stack: str):
    plan = stack_plan(example_stack)
    values = config.parse_stack_values(stack_values(example_stack))
    pinned = {a: v for a, v in values.addons.eks_addon_versions.resolved(values.cluster.kubernetes_version).items()}
    for addon, version in planned_versions(plan).items():
        assert version == pinned[addon], (addon, version)


def test_a_minor_without_recorded_versions_needs_them_named():
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(with_version("1.36"))
    named = sorted(p.split(":", 1)[0] for p in e.value.problems)
    assert named == [f"addons.eksAddonVersions.{k}" for k in sorted(UNRECORDED_136)], e.value.problems
    assert all("aws eks describe-addon-versions --addon-name" in p for p in e.value.problems)


def test_an_upgrade_moves_the_minor_bound_addons_in_the_same_change():
    """1.35 -> 1.36 with the unrecorded ones named: kube-proxy and CoreDNS move to the 1.36 row;
    nothing else about the add-ons changes."""
    before = planned_versions(run_plan(with_version("1.35", UNRECORDED_136)))
    after = planned_versions(run_plan(with_version("1.36", UNRECORDED_136)))
    changed = {a for a in before if before[a] != after[a]}
    assert changed == {"kube-proxy", "coredns"} - {
        a
        for a in ("kube-proxy", "coredns")
        if eks_addons.addon_version("1.35", a) == eks_addons.addon_version("1.36", a)
    }
    assert after["kube-proxy"] == eks_addons.addon_version("1.36", "kube-proxy")


# --------------------------------------------------------------------------- Neuron scheduler extension (item 13)


def neuron_scheduler(plan: dict[str, Any]) -> dict[str, Any]:
    (release,) = [r for r in resources(plan, "kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "neuron"]
    return release["inputs"]["values"]["scheduler"]


def test_the_scheduler_extension_is_off_unless_asked():
    """Off by default (the chart's default too): a training run takes whole nodes and sets no
    schedulerName; only servers sharing a Neuron node name the extension's scheduler
    (tests/plan/test_neuron_placement.py). The chart's own kube-scheduler is 1.28's, replaced below."""
    chart = upstream.facts("chart-neuron-helm-chart-1.1.2")
    assert chart["scheduler_enabled_default"] is False
    assert config.addons.AddonsConfig().neuron_scheduler is False
    scheduler = neuron_scheduler(stack_plan("trn1-llama2"))
    assert scheduler["enabled"] is False and "image" not in scheduler["customScheduler"]
    pods = [r for r in stack_plan("trn1-llama2")["resources"] if r["type"].startswith("kubernetes:")]
    assert "schedulerName" not in str([r["inputs"] for r in pods if r["type"] != "kubernetes:helm.sh/v3:Release"])


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_VERSIONS)
def test_asked_for_it_runs_the_kube_scheduler_of_the_clusters_minor(minor: str):
    chart = upstream.facts("chart-neuron-helm-chart-1.1.2")
    versions = (
        UNRECORDED_136
        if minor == "1.36"
        else ({"nodeMonitoringAgent": "v1.6.4-eksbuild.1"} if minor == "1.34" else None)
    )
    scheduler = neuron_scheduler(run_plan(with_version(minor, versions, neuronScheduler=True)))
    image = scheduler["customScheduler"]["image"]
    assert scheduler["enabled"] is True
    assert image["repository"] == chart["custom_scheduler_image"]["repository"]
    assert image["tag"].startswith(f"v{minor}.") and f"-eks-{minor.replace('.', '-')}-" in image["tag"]
    assert chart["custom_scheduler_image"]["tag"].startswith("v1.28."), "the chart's own, which we replace"
    for key in ("scheduler.customScheduler.image.repository", "scheduler.customScheduler.image.tag"):
        assert key in chart["value_keys"] and key in chart["template_reads"]


def test_a_layered_cluster_stack_takes_the_minor_from_the_aws_layer():
    """The cluster layer cannot read `cluster.kubernetesVersion` (an aws-layer key): the aws layer
    exports it, and the scheduler extension of a cluster-layer stack runs that minor's scheduler."""
    assert stack_plan("trn1-llama2-aws")["outputs"]["awsLayer"]["kubernetesVersion"] == "1.35"
    values = {**stack_values("trn1-llama2-cluster"), "llm-training-eks:addons": {"neuronScheduler": True}}
    scheduler = neuron_scheduler(run_plan(values, "trn1-llama2-cluster"))
    assert scheduler["customScheduler"]["image"]["tag"] == eks_addons.KUBE_SCHEDULER_TAGS["1.35"]
