"""Cluster add-ons: placement derived from the catalog, only where needed; the Platform value."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pulumi
import pytest

import config
import stack as program
from facts import eks_addons, names
from facts.names import STORAGE_CLAIM, WORKLOADS_NAMESPACE
from facts.nodegroups import NodeGroup
from infra.charts import (
    accelerator_groups,
    efa_groups,
    mpi_operator_manifest_url,
    tolerations_for,
)
from tests.conftest import (
    API_PATH,
    BASE,
    MINIMAL,
    placed_values,
    plan_exit,
    resources,
    run_plan,
    stack_plan,
    stack_values,
)
from tools.offline import mocks
from tools.plan import kubernetes_objects

RELEASE = "kubernetes:helm.sh/v3:Release"
MIXED = {
    "aws:region": "us-east-2",
    "llm-training-eks:cluster": API_PATH,
    "llm-training-eks:nodeGroups": [
        {"name": "trn", "instanceType": "trn1.32xlarge", "desiredSize": 1, "availabilityZone": "us-east-2a"},
        {"name": "gpu", "instanceType": "p5.48xlarge", "desiredSize": 1, "availabilityZone": "us-east-2a"},
    ],
    **placed_values("us-east-2a"),
}


def releases(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["name"]: r["inputs"] for r in resources(plan, RELEASE)}


def facts_of(values: dict[str, Any]) -> list[NodeGroup]:
    cfg = config.parse(config.from_stack_values(values))
    return [ng.node_group(cfg.node_group_az(ng)) for ng in cfg.node_groups]


def taints_as_tolerations(groups: list[NodeGroup]) -> list[dict[str, str]]:
    return sorted(
        (
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
            for g in groups
            for t in g.instance.taints
        ),
        key=lambda t: (t["key"], t["value"], t["effect"]),
    )


@pytest.mark.parametrize(
    ("stack", "present", "absent"),
    [
        ("dev", {"aws-efa-k8s-device-plugin", "neuron", "aws-fsx-csi-driver"}, {"nvidia-device-plugin"}),
        ("trn1-llama2", {"aws-efa-k8s-device-plugin", "neuron", "aws-fsx-csi-driver"}, {"nvidia-device-plugin"}),
        ("p4de-nemo", {"aws-efa-k8s-device-plugin", "nvidia-device-plugin", "aws-fsx-csi-driver"}, {"neuron"}),
        ("p5-capacity-block", {"aws-efa-k8s-device-plugin", "nvidia-device-plugin", "aws-fsx-csi-driver"}, {"neuron"}),
    ],
)
def test_releases_only_where_node_groups_need_them(stack: str, present: set[str], absent: set[str]) -> None:
    names = set(releases(stack_plan(stack)))
    assert present <= names
    assert not absent & names


def test_no_device_plugins_without_accelerated_node_groups() -> None:
    plan = run_plan(BASE)
    assert set(releases(plan)) == {"aws-fsx-csi-driver", "kueue"}


def test_tolerations_equal_the_taints_of_the_node_groups_served(example_stack: str) -> None:
    values = stack_values(example_stack)
    groups = facts_of(values)
    rel = releases(stack_plan(example_stack))
    assert rel["aws-efa-k8s-device-plugin"]["values"]["tolerations"] == taints_as_tolerations(efa_groups(groups))
    assert rel["aws-fsx-csi-driver"]["values"]["node"]["tolerations"] == taints_as_tolerations(groups)
    if "neuron" in rel:
        neuron = taints_as_tolerations(accelerator_groups(groups, "neuron"))
        assert rel["neuron"]["values"]["devicePlugin"]["tolerations"] == neuron
        assert rel["neuron"]["values"]["npd"]["tolerations"] == neuron
    if "nvidia-device-plugin" in rel:
        nvidia = taints_as_tolerations(accelerator_groups(groups, "nvidia"))
        assert rel["nvidia-device-plugin"]["values"]["tolerations"] == nvidia


def test_mixed_stack_gets_both_plugins_each_on_its_own_nodes() -> None:
    rel = releases(run_plan(MIXED))
    assert rel["nvidia-device-plugin"]["values"]["nodeSelector"] == {"llm-training-eks/accelerator": "nvidia"}
    assert rel["neuron"]["values"]["devicePlugin"]["nodeSelector"] == {"llm-training-eks/accelerator": "neuron"}
    assert rel["aws-efa-k8s-device-plugin"]["values"]["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    keys = [t["key"] for t in rel["aws-efa-k8s-device-plugin"]["values"]["tolerations"]]
    assert keys == ["aws.amazon.com/neuron", "nvidia.com/gpu"]
    assert [t["key"] for t in rel["nvidia-device-plugin"]["values"]["tolerations"]] == ["nvidia.com/gpu"]


def test_node_selectors_match_node_group_labels(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    labels = [
        r["inputs"]["labels"]
        for r in resources(plan, "aws:eks/nodeGroup:NodeGroup")
        if r["inputs"]["labels"]["llm-training-eks/node-group"] != "system"
    ]
    for name, values in releases(plan).items():
        selector = values.get("nodeSelector") or values.get("devicePlugin", {}).get("nodeSelector")
        if selector is None:
            continue
        assert any(selector.items() <= lab.items() for lab in labels), name


def test_tolerations_are_deduplicated_and_stable() -> None:
    groups = facts_of(MIXED) * 2
    assert tolerations_for(groups) == taints_as_tolerations(facts_of(MIXED))


def test_chart_versions_are_pinned(example_stack: str) -> None:
    for name, values in releases(stack_plan(example_stack)).items():
        assert values["version"][:1].isdigit() or values["version"][:2] in ("v0", "v1"), name


def test_mpi_operator_is_the_v0_8_release_manifest(example_stack: str) -> None:
    files = [r["inputs"]["file"] for r in resources(stack_plan(example_stack), "kubernetes:yaml/v2:ConfigFile")]
    assert files == [mpi_operator_manifest_url("v0.8.0")]
    assert "/v0.8.0/deploy/v2beta1/mpi-operator.yaml" in files[0]


def test_eks_managed_addons(example_stack: str) -> None:
    found = resources(stack_plan(example_stack), "aws:eks/addon:Addon")
    addons = {r["inputs"]["addonName"]: r["inputs"] for r in found}
    assert set(addons) == {
        "vpc-cni",
        "coredns",
        "kube-proxy",
        "eks-pod-identity-agent",
        "amazon-cloudwatch-observability",
        "eks-node-monitoring-agent",
    }
    (association,) = addons["amazon-cloudwatch-observability"]["podIdentityAssociations"]
    assert association["serviceAccount"] == "cloudwatch-agent"


def test_eks_addon_versions_come_from_config() -> None:
    values = {**MINIMAL, "llm-training-eks:addons": {"eksAddonVersions": {"vpcCni": "v1.20.1-eksbuild.3"}}}
    addons = {r["inputs"]["addonName"]: r["inputs"] for r in resources(run_plan(values), "aws:eks/addon:Addon")}
    assert addons["vpc-cni"]["addonVersion"] == "v1.20.1-eksbuild.3"
    # Not configured: the version facts/eks_addons.py pins for the cluster's minor.
    assert addons["coredns"]["addonVersion"] == eks_addons.addon_version("1.35", "coredns")


def test_fsx_csi_controller_role_is_least_privilege() -> None:
    import json

    plan = stack_plan("dev")
    policy = json.loads(
        next(r for r in resources(plan, "aws:iam/rolePolicy:RolePolicy") if r["name"] == "addons-fsx-csi")["inputs"][
            "policy"
        ]
    )
    actions = sorted(a for s in policy["Statement"] for a in s["Action"])
    assert actions == ["fsx:DescribeFileSystems", "fsx:UpdateFileSystem"]
    fs = resources(plan, "aws:fsx/lustreFileSystem:LustreFileSystem")[0]
    update = next(s for s in policy["Statement"] if s["Action"] == ["fsx:UpdateFileSystem"])
    assert update["Resource"].endswith(fs["id"])
    role = next(r for r in resources(plan, "aws:iam/role:Role") if r["name"] == "addons-fsx-csi")
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    cond = trust["Statement"][0]["Condition"]["StringEquals"]
    assert any(v == "system:serviceaccount:kube-system:fsx-csi-controller-sa" for v in cond.values())


def _k8s_version(values: dict[str, Any]) -> str:
    cfg = config.parse(config.from_stack_values(values))
    return f"{cfg.cluster.kubernetes_version}.0"


BUILTIN_GROUPS = {"", "apps", "batch", "policy", "rbac.authorization.k8s.io", "networking.k8s.io", "storage.k8s.io"}


def _api_group(obj: dict[str, Any]) -> str:
    return obj["apiVersion"].rpartition("/")[0]


def test_every_kubernetes_core_object_validates(example_stack: str) -> None:
    """Core objects against the Kubernetes schemas (MPIJobs have their own schema test)."""
    plan = stack_plan(example_stack)
    version = _k8s_version(stack_values(example_stack))
    objects = [o for o in kubernetes_objects(plan) if _api_group(o) in BUILTIN_GROUPS]
    assert {o["kind"] for o in objects} >= {"Namespace", "PersistentVolume", "PersistentVolumeClaim"}
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


# --------------------------------------------------------------------------- the Platform value


def build_platform(values: dict[str, Any]) -> dict[str, Any]:
    cfg = config.parse(config.from_stack_values(values))
    mocks.install(cfg.region, names.PROJECT, "platform-test")
    seen: dict[str, Any] = {}

    @pulumi.runtime.test
    def _program() -> Any:
        infra = program.build_infrastructure(cfg)
        seen["infra"] = infra
        urls = pulumi.Output.all(**infra.platform.registry_urls)
        return urls.apply(lambda u: seen.__setitem__("urls", u))

    _program()
    return seen


def test_platform_value_for_workloads() -> None:
    seen = build_platform(MIXED)
    infra = seen["infra"]
    p = infra.platform
    assert p.namespaces == {"default": WORKLOADS_NAMESPACE} and WORKLOADS_NAMESPACE == "training"
    assert p.namespace_for(None) == "training" and p.sub_path_for(None) == ""
    assert p.storage_claim == STORAGE_CLAIM == "shared-fsx"
    assert p.provider is infra.cluster.provider
    assert set(seen["urls"]) >= {"neuronx-nemo-megatron", "nemo"}
    assert seen["urls"]["nemo"].endswith(".amazonaws.com/llm-training/nemo")
    assert p.node_groups["gpu"].device_resource == "nvidia.com/gpu"
    assert p.node_groups["gpu"].instance.efa_interfaces == 32
    assert p.node_groups["trn"].instance.accelerator_count == 16
    assert p.node_groups["trn"].tolerations() == [
        {"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert infra.addons.manifest("mpi-operator") in p.depends_on
    assert infra.volume.claims["default"] in p.depends_on_for(None)


# --------------------------------------------------------------------------- bad config


BAD_ADDONS = [
    ({"nvidiaDevicePluginChart": "^0.17"}, "addons.nvidiaDevicePluginChart: '^0.17'"),
    ({"fsxCsiDriverChart": "latest"}, "addons.fsxCsiDriverChart: 'latest'"),
    ({"mpiOperatorVersion": "v0.7.0"}, "addons.mpiOperatorVersion: 'v0.7.0'"),
    ({"eksAddonVersions": {"coredns": "latest"}}, "addons.eksAddonVersions.coredns: 'latest'"),
    ({"eksAddonVersions": {"ebsCsi": "v1.0.0-eksbuild.1"}}, "addons.eksAddonVersions.ebsCsi: unknown key"),
    ({"neuronChrt": "1.1.2"}, "addons.neuronChrt: unknown key (did you mean 'neuronChart'?)"),
]


@pytest.mark.parametrize(("addons", "expected"), BAD_ADDONS)
def test_bad_addons_config_exits_2_naming_the_key(addons: dict[str, Any], expected: str, tmp_path: Any) -> None:
    code, err = plan_exit({**BASE, "llm-training-eks:addons": addons}, tmp_path)
    assert code == 2
    assert expected in err
