"""Every Helm release against its chart at the pinned version.

For each release of every example stack: the chart version has facts read from the chart's
repository at that version (tests/upstream/chart-<name>-<version>.yaml: the published archive or
the release tag), every value key we set exists in that version's values.yaml, and its
templates read it (a key the templates never read is silently ignored by Helm). A chart bump
without new facts, or a renamed key, fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import config
from infra import charts
from infra.addons import catalog
from infra.charts import HelmChart
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, MINIMAL, resources, stack_plan, stack_values

RELEASE = "kubernetes:helm.sh/v3:Release"


def releases() -> Iterator[tuple[str, dict[str, Any]]]:
    for stack in EXAMPLE_STACKS:
        for r in resources(stack_plan(stack), RELEASE):
            yield stack, r["inputs"]


def chart_facts(release: Mapping[str, Any]) -> dict[str, Any]:
    name = str(release["chart"]).rsplit("/", 1)[-1]
    return upstream.facts(f"chart-{name}-{release['version']}")


def value_paths(values: Any, open_at: set[str], prefix: str = "") -> Iterator[str]:
    """Dotted paths of what we set, not descending into lists or into the chart's free-form maps."""
    if not isinstance(values, Mapping):
        return
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        yield path
        if isinstance(value, Mapping) and path not in open_at:
            yield from value_paths(value, open_at, path)


def read_by_templates(path: str, reads: list[str]) -> bool:
    """The templates read the key, one of its parents (passed on whole with toYaml), or a child."""
    return any(r == path or path.startswith(r + ".") or r.startswith(path + ".") for r in reads)


def _release_ids() -> list[str]:
    return [f"{stack}:{r['name']}" for stack, r in releases()]


@pytest.mark.parametrize(("stack", "release"), list(releases()), ids=_release_ids())
def test_release_values_exist_in_the_chart_and_are_read(stack: str, release: dict[str, Any]) -> None:
    facts = chart_facts(release)
    assert facts["version"] == release["version"]
    keys, reads = set(facts["value_keys"]), facts["template_reads"]
    ours = list(value_paths(release["values"], set(facts["open_maps"])))
    unknown = [p for p in ours if p not in keys]
    assert not unknown, f"{release['name']} {release['version']}: not in the chart's values.yaml: {unknown}"
    unread = [p for p in ours if not read_by_templates(p, reads)]
    assert not unread, f"{release['name']} {release['version']}: no template reads {unread}"


def test_every_pinned_chart_has_facts() -> None:
    """The default pin of every Helm add-on of the catalog (config/addons.py), each with facts read
    at exactly that version."""
    a = config.addons.AddonsConfig()
    helm = [e for e in catalog.CATALOG if isinstance(e.source, HelmChart)]
    assert helm
    for entry in helm:
        assert isinstance(entry.source, HelmChart)
        version = getattr(a, entry.version_key)
        assert chart_facts({"chart": entry.source.chart, "version": version})["version"] == version, entry.config_key


def test_every_helm_add_on_is_held_by_an_example_stack() -> None:
    """A chart no example stack installs has values nothing here holds to the chart: a new
    catalog entry needs an example stack with the node kind or switch that installs it."""
    installed = {r["name"] for _, r in releases()}
    missing = [e.name for e in catalog.CATALOG if isinstance(e.source, HelmChart) and e.source.release not in installed]
    assert not missing, f"no example stack installs {missing}"


def test_published_versions() -> None:
    """Charts served from a Helm repository are in its index; Kueue's OCI chart is pushed for each
    release tag (hack/helm-chart-package.sh), and 0.19.2 is the newest v0.19 tag (0.19.7 is not one)."""
    a = config.addons.AddonsConfig()
    for name, version in [
        ("aws-efa-k8s-device-plugin", a.efa_device_plugin_chart),
        ("aws-fsx-csi-driver", a.fsx_csi_driver_chart),
    ]:
        assert upstream.facts(f"chart-{name}-{version}")["published_in_index"] is True
    kueue = upstream.facts(f"chart-kueue-{a.kueue_chart}")
    assert f"v{a.kueue_chart}" in kueue["release_tags_v0_19"] and "v0.19.7" not in kueue["release_tags_v0_19"]
    assert kueue["oci_repository"] == charts.KUEUE.chart


def test_nvidia_versions_with_mofed_on_by_default_are_refused() -> None:
    facts = upstream.facts("chart-nvidia-device-plugin-0.19.3")
    for bad in facts["mofed_default_on_in"]:
        with pytest.raises(ValueError, match="MOFED"):
            config.addons.AddonsConfig(nvidiaDevicePluginChart=bad)
    assert config.addons.AddonsConfig().nvidia_device_plugin_chart == facts["mofed_default_reverted_in"]


def test_efa_device_plugin_image_is_new_enough() -> None:
    """EFA device plugin images below v0.5.10 miscount devices on newer instances (FACTS)."""
    tag = upstream.facts("chart-aws-efa-k8s-device-plugin-v0.5.30")["app_version"]
    assert tuple(int(x) for x in tag.removeprefix("v").split(".")) >= (0, 5, 10)


# ----------------------------------------------------------------- namespaces the charts expect


@pytest.mark.parametrize("stack", ["dev", "trn1-llama2", "trn1-shared", "trn1-bert"])
def test_neuron_health_namespace_exists_before_the_chart(stack: str) -> None:
    """The Neuron chart 1.1.2 renders its node problem detector into npd.namespaceOverride and
    creates no Namespace; the release must wait for ours, or it fails and rolls back atomically."""
    facts = upstream.facts("chart-neuron-helm-chart-1.1.2")
    assert facts["creates_namespace"] is False
    assert upstream.facts("neuron-npd-permissions-2026-11")["namespace"] == facts["npd_namespace"]
    plan = stack_plan(stack)
    (ns,) = [r for r in resources(plan, "kubernetes:core/v1:Namespace") if r["name"] == "addons-neuron-health"]
    assert ns["inputs"]["metadata"]["name"] == facts["npd_namespace"] == charts.NEURON_HEALTH_NAMESPACE
    (neuron,) = [r for r in resources(plan, RELEASE) if r["inputs"]["name"] == "neuron"]
    assert ns["urn"] in neuron["dependencies"]


def test_releases_install_into_namespaces_that_exist_or_are_created(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    declared = {r["inputs"]["metadata"]["name"] for r in resources(plan, "kubernetes:core/v1:Namespace")}
    for r in resources(plan, RELEASE):
        ns = r["inputs"]["namespace"]
        assert ns == "kube-system" or r["inputs"].get("createNamespace") or ns in declared, r["inputs"]["name"]


# ----------------------------------------------------------------- what the values must achieve


def test_kueue_runs_two_replicas_behind_its_own_pdb() -> None:
    """Kueue's webhooks fail closed (failurePolicy: Fail in the chart's webhook manifests): one
    replica restarting would refuse every MPIJob, so two run and the chart's PDB keeps one."""
    facts = upstream.facts("chart-kueue-0.19.2")
    assert "Fail" in facts["webhook_failure_policies"]
    values = charts.kueue_values("x")["controllerManager"]
    assert values["replicas"] >= 2
    assert values["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}


def test_fsx_csi_pdb_and_region_are_real_keys() -> None:
    """1.11.0 had no controller.podDisruptionBudget, so the PDB we asked for never existed; 1.17.0
    has it and controller.region, and the controller's service account is the one IRSA trusts."""
    facts = upstream.facts("chart-aws-fsx-csi-driver-1.17.0")
    for key in ("controller.podDisruptionBudget.enabled", "controller.region"):
        assert key in facts["value_keys"] and key in facts["template_reads"]
    assert facts["controller_service_account"] == charts.FSX_CSI_CONTROLLER_SA
    values = charts.fsx_csi_values([], "arn:aws:iam::123456789012:role/x", "us-west-2")
    assert values["controller"]["region"] == "us-west-2"


# ----------------------------------------------------------------- the EFA device plugin reaches every EFA node


def test_efa_plugin_chart_minimum_per_type_is_the_first_chart_with_a_correct_image() -> None:
    """The chart version config refuses below is the first whose image counts p6-b200's devices
    right (chart history and sagemaker-hyperpod-cli #282, recorded)."""
    facts = upstream.facts("eks-charts-efa-device-plugin-history")
    images = facts["app_version_by_chart"]
    for itype, first_chart in config.addons.EFA_PLUGIN_FIRST_CHART_FOR.items():
        want = config.addons.chart_version(facts["first_correct_image"][itype])
        good = sorted(
            (c for c, i in images.items() if config.addons.chart_version(i) >= want), key=config.addons.chart_version
        )
        assert first_chart == good[0]
    assert (
        images[config.addons.AddonsConfig().efa_device_plugin_chart]
        == upstream.facts("chart-aws-efa-k8s-device-plugin-v0.5.30")["image"].rsplit(":", 1)[1]
    )


def test_an_old_efa_plugin_on_p6_b200_is_refused(tmp_path) -> None:
    """Chart v0.5.17 runs image v0.5.9, which hands pods p6-b200's NVLink controllers as EFA
    devices: refused, naming the key and the first good chart."""
    from tests.conftest import plan_exit

    values = {
        **MINIMAL,
        "llm-training-eks:nodeGroups": [
            {"name": "b200", "instanceType": "p6-b200.48xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}
        ],
        "llm-training-eks:addons": {"efaDevicePluginChart": "v0.5.17"},
    }
    code, err = plan_exit(values, tmp_path)
    assert code == 2, err
    assert "addons.efaDevicePluginChart: v0.5.17" in err and "v0.5.18" in err


def test_efa_plugin_daemonset_allows_exactly_the_stacks_efa_types(example_stack: str) -> None:
    """The chart's DaemonSet has a required node affinity on its allow-list of instance types: a
    type missing there gets no plugin and NCCL runs on TCP without an error (aws-do-eks #56). The
    values carry the stack's own EFA types, so the pinned chart's list never decides."""
    facts = upstream.facts("eks-charts-efa-device-plugin-history")
    cfg = config.parse_stack_values(stack_values(example_stack))
    efa_types = sorted({ng.instance_type for ng in cfg.node_groups if ng.instance.efa})
    found = [
        r for r in resources(stack_plan(example_stack), RELEASE) if r["inputs"]["name"] == "aws-efa-k8s-device-plugin"
    ]
    if not efa_types:
        assert not found
        return
    (release,) = found
    allow = release["inputs"]["values"]["supportedInstanceLabels"]
    assert allow == {"keys": [facts["allow_list_key"]], "values": efa_types}


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def test_no_object_relies_on_ultraserver_labels_the_pinned_device_plugin_does_not_set() -> None:
    """The pinned Neuron chart's device plugin (1.1.2: 2.23.30.0) is below the 2.30.0.0 that sets
    the `neuron.amazonaws.com/ultraserver-*` node labels (Neuron 2.32 ultraserver.rst); the newest
    chart read (1.9.0) runs 2.31.0.0. Until the pin moves, no rendered object of any example stack
    may select, place or spread by those labels (the fabric acceptance run reads the UltraServer ids
    from sysfs); both charts' device plugins do run on trn2u nodes."""
    facts = upstream.facts("neuron-helm-chart-ultraserver-2026-11")
    pinned = facts["charts"][config.addons.AddonsConfig().neuron_chart]
    needed = _version(facts["labels_need_device_plugin"])
    assert _version(pinned["device_plugin"]) < needed <= _version(facts["charts"]["1.9.0"]["device_plugin"])
    assert all(c["neuron_instances_has_trn2u"] for c in facts["charts"].values())
    assert upstream.facts("chart-neuron-helm-chart-1.1.2")["version"] == "1.1.2"
    prefix = facts["label_prefix"]
    users = [
        f"{stack}: {r['name']}"
        for stack in EXAMPLE_STACKS
        for r in stack_plan(stack)["resources"]
        if r["type"].startswith("kubernetes:") and prefix in json.dumps(r["inputs"])
    ]
    assert not users, f"objects use {prefix}* labels, which device plugin {pinned['device_plugin']} never sets: {users}"
