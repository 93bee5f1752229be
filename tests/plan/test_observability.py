"""The CloudWatch observability add-on: bounded logs the stack owns, and one
DCGM exporter per GPU node.

Held against the chart the pinned add-on version runs
(tests/upstream/chart-amazon-cloudwatch-observability-6.4.0.yaml): the configuration values we
set are chart values its templates read, the log groups are the ones its Fluent Bit writes, and
its own DCGM exporter and Neuron monitor reach every accelerated type of the catalog.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import config
from facts import eks_addons, instances
from infra.addons.components import container_insights_log_group
from tests import upstream
from tests.conftest import (
    EXAMPLE_STACKS,
    LAYERED_STACKS,
    MINIMAL,
    by_urn,
    deleted_after,
    resources,
    run_plan,
    stack_plan,
    stack_values,
)

CHART = "chart-amazon-cloudwatch-observability-6.4.0"
ADDON = "amazon-cloudwatch-observability"
AWS_STACKS = [s for s in EXAMPLE_STACKS if s not in LAYERED_STACKS or s.endswith("-aws")]
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


def cw_addon(plan: dict[str, Any]) -> dict[str, Any]:
    (addon,) = [r for r in resources(plan, "aws:eks/addon:Addon") if r["inputs"]["addonName"] == ADDON]
    return addon


def insights_groups(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        r["inputs"]["name"]: r
        for r in resources(plan, LOG_GROUP)
        if str(r["inputs"].get("name", "")).startswith("/aws/containerinsights/")
    }


def cluster_name(stack: str) -> str:
    return config.parse_stack_values(stack_values(stack)).cluster.name


def test_the_pinned_addon_runs_the_chart_whose_facts_we_hold():
    facts = upstream.facts(CHART)
    for minor, versions in eks_addons.ADDON_VERSIONS.items():
        assert versions[ADDON] == facts["addon_version"], minor
    assert (
        eks_addons.chart_version_of(facts["addon_version"]) == facts["version"] == eks_addons.CLOUDWATCH_CHART_VERSION
    )


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_the_addons_log_groups_are_the_stacks_with_a_retention(stack: str):
    """Fluent Bit writes application, dataplane and host (auto_create_group true: without the
    stack's groups it makes its own, with no retention, outliving a destroy); the agent writes
    performance. Fluent Bit takes an existing group as it is."""
    facts = upstream.facts(CHART)
    assert facts["fluent_bit_auto_create_group"] == ["true"] and facts["fluent_bit_takes_an_existing_group"]
    plan, name = stack_plan(stack), cluster_name(stack)
    written = {g.replace("${CLUSTER_NAME}", name) for g in facts["fluent_bit_log_groups"].values()}
    written.add(facts["performance_log_group"].replace("${CLUSTER_NAME}", name))
    if config.parse_stack_values(stack_values(stack)).scrapes_serving:  # the serving scraper's
        prometheus = upstream.facts("cloudwatch-agent-prometheus-2026-11")["default_log_group"]
        written.add(prometheus.replace("${CLUSTER_NAME}", name))
    groups = insights_groups(plan)
    assert set(groups) == written
    assert {g["inputs"]["retentionInDays"] for g in groups.values()} == {14}
    addon = cw_addon(plan)
    assert {g["urn"] for g in groups.values()} <= set(addon["dependencies"]), "groups exist before Fluent Bit starts"


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_a_destroy_deletes_the_groups_only_after_the_cluster_and_its_nodes(stack: str):
    """The cluster component depends on the groups: a destroy deletes every node (and so every
    Fluent Bit and agent pod) and the control plane before them, so nothing re-creates them
    unowned."""
    plan = stack_plan(stack)
    urns = by_urn(plan)
    groups = {g["urn"] for g in insights_groups(plan).values()}
    writers = [*resources(plan, "aws:eks/nodeGroup:NodeGroup"), *resources(plan, "aws:eks/cluster:Cluster")]
    assert writers
    for writer in writers:
        assert groups <= deleted_after(urns, writer["urn"]), writer["name"]


def test_the_configuration_values_are_chart_values_its_templates_read():
    facts = upstream.facts(CHART)
    keys, reads = set(facts["value_keys_to_depth_2"]), facts["template_reads_to_depth_2"]
    for stack in AWS_STACKS:
        values = json.loads(cw_addon(stack_plan(stack))["inputs"]["configurationValues"])
        # `agents` is a list (the serving scraper's entries: tests/plan/test_serving_metrics.py).
        paths = [f"{k}.{sub}" for k, v in values.items() if isinstance(v, dict) for sub in v] + list(values)
        assert all(p in keys for p in paths), paths
        assert all(any(r == p or r.startswith(p + ".") for r in reads) for p in paths), paths
        assert values["containerLogs"] == {"enabled": True}
        assert set(values) == {"containerLogs", *(["agents"] if "agents" in values else [])}


def test_shipping_no_container_logs_leaves_only_the_agents_group():
    plan = run_plan({**MINIMAL, "llm-training-eks:addons": {"observability": {"containerLogs": False}}})
    assert json.loads(cw_addon(plan)["inputs"]["configurationValues"]) == {"containerLogs": {"enabled": False}}
    assert list(insights_groups(plan)) == [container_insights_log_group("llm-training", "performance")]


def test_the_retention_is_a_cloudwatch_value_named_by_its_key():
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values({**MINIMAL, "llm-training-eks:addons": {"observability": {"logRetentionDays": 13}}})
    assert any(p.startswith("addons.observability.logRetentionDays: CloudWatch Logs accepts") for p in e.value.problems)


def test_the_observability_keys_belong_to_the_aws_layer():
    """The add-on and its log groups go through the AWS API: a cluster-layer stack refuses them."""
    values = {
        **stack_values("trn1-llama2-cluster"),
        "llm-training-eks:addons": {"observability": {"logRetentionDays": 7}},
    }
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    assert any(p.startswith("addons.observability: read by the aws layer") for p in e.value.problems)


# --------------------------------------------------------------------------- one DCGM exporter (item 14)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_one_dcgm_exporter_per_gpu_node(stack: str):
    """The dcgm-exporter chart ran beside the add-on's own exporter on every GPU node; its metrics
    were scraped by nothing (the chart's way in is a ServiceMonitor, and no Prometheus operator is
    installed). The add-on's exporter feeds Container Insights and reaches every GPU type of the
    catalog, tolerating every taint."""
    plan = stack_plan(stack)
    releases = {r["inputs"]["name"] for r in resources(plan, "kubernetes:helm.sh/v3:Release")}
    assert "dcgm-exporter" not in releases
    assert "serviceMonitor.enabled" in upstream.facts("chart-dcgm-exporter-4.1.1")["value_keys"]
    assert not [r for r in plan["resources"] if r["type"].startswith("kubernetes:monitoring.coreos.com")]


def test_the_addons_own_exporters_reach_every_accelerated_type_of_the_catalog():
    facts = upstream.facts(CHART)
    assert facts["defaults"]["dcgmExporter.enabled"] and facts["defaults"]["neuronMonitor.enabled"]
    by_accelerator = {"nvidia": facts["dcgm_exporter_node_affinity"], "neuron": facts["neuron_monitor_node_affinity"]}
    for itype in instances.ACCELERATED.values():
        affinity = by_accelerator[str(itype.accelerator)]
        assert affinity["key"] == "node.kubernetes.io/instance-type"
        assert itype.name in affinity["instance_types"], itype.name
    # The chart's default toleration (no key, operator Exists) tolerates every taint.
    assert facts["defaults"]["tolerations"] == [{"operator": "Exists"}]
    assert "dcgmExporter" not in json.loads(cw_addon(stack_plan("p4de-nemo"))["inputs"]["configurationValues"])


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_every_log_group_the_stack_makes_has_a_retention(stack: str):
    """Siblings: the control-plane, flow-log, FSx, image-build, runner and add-on groups alike."""
    groups = resources(stack_plan(stack), LOG_GROUP)
    assert groups and [g["inputs"]["name"] for g in groups if not g["inputs"].get("retentionInDays")] == []
