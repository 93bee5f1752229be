"""What pulumi-eks creates for our arguments is in the plan, and no EKS add-on is created twice.

The model of pulumi-eks (tools/offline/remote_components.py) is held against the conditions read from
its source (tests/upstream/pulumi-eks-4.4.0.yaml); the plan then shows exactly the add-ons that
would exist on the cluster.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests import upstream
from tests.conftest import MINIMAL, resources, run_plan, stack_plan
from tools.offline import remote_components
from tools.offline.remote_components import NotModelled, eks_cluster_children

ADDON = "aws:eks/addon:Addon"
FACTS = upstream.facts("pulumi-eks-4.4.0")
# Every add-on the platform needs on the cluster, each exactly once.
EXPECTED_ADDONS = {
    "vpc-cni",
    "kube-proxy",
    "coredns",
    "eks-pod-identity-agent",
    "amazon-cloudwatch-observability",
    "eks-node-monitoring-agent",
}
# The arguments infra/cluster.py gives pulumi-eks, in the shape the SDK sends them.
OURS: dict[str, Any] = {
    "name": "c",
    "serviceRole": "urn:role",
    "skipDefaultNodeGroup": True,
    "skipDefaultSecurityGroups": True,
    "authenticationMode": "API",
    "createOidcProvider": True,
    "useDefaultVpcCni": True,
    "kubeProxyAddonOptions": {"enabled": False},
    "corednsAddonOptions": {"enabled": False},
}


def addon_names(plan: dict[str, Any]) -> list[str]:
    return [r["inputs"]["addonName"] for r in resources(plan, ADDON)]


def test_no_eks_addon_is_created_twice(example_stack: str) -> None:
    """A second CreateAddon of the same name on one cluster fails with ResourceInUseException
    (409, botocore's eks CreateAddon errors); every stack has one cluster, so every add-on name
    appears once among all the add-ons the plan creates, pulumi-eks's included."""
    names = addon_names(stack_plan(example_stack))
    twice = sorted(n for n, count in Counter(names).items() if count > 1)
    assert not twice, f"created twice on one cluster: {twice}"
    assert set(names) == EXPECTED_ADDONS


def test_duplicate_addon_is_refused_by_eks() -> None:
    import botocore.session

    errors = botocore.session.get_session().get_service_model("eks").operation_model("CreateAddon").error_shapes
    codes = {e.name: e.metadata["error"]["httpStatusCode"] for e in errors}
    assert codes["ResourceInUseException"] == 409
    assert FACTS["duplicate_addon_error"].startswith("ResourceInUseException")


def test_the_plan_shows_what_pulumi_eks_creates(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    (component,) = resources(plan, "eks:index:Cluster")
    children = {(r["type"], r["name"]) for r in plan["resources"] if r["parent"] == component["urn"]}
    assert children == {
        ("aws:eks/cluster:Cluster", "cluster-eks-eksCluster"),
        ("pulumi:providers:kubernetes", "cluster-eks-eks-k8s"),
        ("aws:iam/openIdConnectProvider:OpenIdConnectProvider", "cluster-eks-oidcProvider"),
    }
    (cluster,) = resources(plan, "aws:eks/cluster:Cluster")
    # Self-managed add-ons at creation, so nodes join before our managed add-ons adopt them.
    assert cluster["inputs"]["bootstrapSelfManagedAddons"] is True
    assert cluster["inputs"]["accessConfig"] == {
        "authenticationMode": "API",
        "bootstrapClusterCreatorAdminPermissions": True,
    }
    assert cluster["inputs"]["tags"]["Name"] == "cluster-eks-eksCluster"


def test_admin_access_entries_appear_with_their_policies() -> None:
    arn = "arn:aws:iam::123456789012:role/platform-admins"
    values = {
        **MINIMAL,
        "llm-training-eks:cluster": {**MINIMAL["llm-training-eks:cluster"], "adminPrincipalArns": [arn]},
    }
    plan = run_plan(values)
    (entry,) = resources(plan, "aws:eks/accessEntry:AccessEntry")
    (assoc,) = resources(plan, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert entry["inputs"]["principalArn"] == arn and assoc["parent"] == entry["urn"]
    assert assoc["inputs"]["policyArn"].endswith("AmazonEKSClusterAdminPolicy")


# ----------------------------------------------------------------- the model against the source


def _types(children: list[remote_components.Child]) -> list[tuple[str, str]]:
    return [(c.type, c.name) for c in children]


def test_model_with_our_arguments_creates_no_addon() -> None:
    kids = eks_cluster_children("c", OURS, role_arn="arn", oidc_issuer="issuer")
    assert [c for c in kids if c.type == ADDON] == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # cluster.ts 1092: vpc-cni unless useDefaultVpcCni is true.
        ({"useDefaultVpcCni": None}, {"c-vpc-cni"}),
        ({"useDefaultVpcCni": False}, {"c-vpc-cni"}),
        # cluster.ts 764: kube-proxy unless kubeProxyAddonOptions.enabled is false.
        ({"kubeProxyAddonOptions": None}, {"c-kube-proxy"}),
        ({"kubeProxyAddonOptions": {"enabled": True}}, {"c-kube-proxy"}),
        # cluster.ts 1176: coredns only when enabled explicitly (no default node group, Fargate or Auto Mode).
        ({"corednsAddonOptions": None}, set()),
        ({"corednsAddonOptions": {"enabled": True}}, {"c-coredns"}),
    ],
)
def test_model_follows_the_addon_conditions_of_cluster_ts(change: dict[str, Any], expected: set[str]) -> None:
    args = {k: v for k, v in {**OURS, **change}.items() if v is not None}
    kids = eks_cluster_children("c", args, role_arn="arn", oidc_issuer="issuer")
    assert {c.name for c in kids if c.type == ADDON} == expected
    conditions = {row[0]: row[2] for row in FACTS["children"]}
    assert "useDefaultVpcCni" in conditions["eks:index:VpcCniAddon + aws:eks/addon:Addon vpc-cni"]
    assert "kubeProxyAddonOptions.enabled" in conditions["aws:eks/addon:Addon kube-proxy"]


def test_pulumi_eks_addons_would_clash_with_ours() -> None:
    """What the issue found: with pulumi-eks's defaults, vpc-cni and kube-proxy come twice."""
    defaults = {k: v for k, v in OURS.items() if k not in ("useDefaultVpcCni", "kubeProxyAddonOptions")}
    kids = eks_cluster_children("c", defaults, role_arn="arn", oidc_issuer="issuer")
    theirs = [c.inputs["addonName"] for c in kids if c.type == ADDON]
    assert sorted(set(theirs) & EXPECTED_ADDONS) == ["kube-proxy", "vpc-cni"]


@pytest.mark.parametrize(
    "change",
    [
        {"skipDefaultNodeGroup": False},
        {"skipDefaultSecurityGroups": None},
        {"authenticationMode": "API_AND_CONFIG_MAP"},
        {"serviceRole": None},
        {"fargate": True},
        {"storageClasses": "gp3"},
    ],
)
def test_arguments_the_model_does_not_cover_are_refused(change: dict[str, Any]) -> None:
    args = {k: v for k, v in {**OURS, **change}.items() if v is not None}
    with pytest.raises(NotModelled):
        eks_cluster_children("c", args, role_arn="arn", oidc_issuer="issuer")


def test_public_cidrs_without_a_public_endpoint_fail_like_pulumi_eks() -> None:
    args = {**OURS, "endpointPublicAccess": False, "publicAccessCidrs": ["203.0.113.0/24"]}
    with pytest.raises(ValueError, match="publicAccessCidrs"):
        eks_cluster_children("c", args, role_arn="arn", oidc_issuer="issuer")
    assert FACTS["eks_cluster_inputs"]["publicAccessCidrs_without_public_endpoint"] == "ResourceError"


def test_model_children_in_source_order() -> None:
    args = {
        **OURS,
        "useDefaultVpcCni": False,
        "kubeProxyAddonOptions": {},
        "accessEntries": {"a": {"principalArn": "p"}},
    }
    order = [t for t, _ in _types(eks_cluster_children("c", args, role_arn="arn", oidc_issuer="i"))]
    assert order == [
        "aws:eks/cluster:Cluster",
        ADDON,  # kube-proxy
        "pulumi:providers:kubernetes",
        "aws:eks/accessEntry:AccessEntry",
        "eks:index:VpcCniAddon",
        ADDON,  # vpc-cni
        "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
    ]
    assert [row[3] for row in FACTS["children"] if isinstance(row[3], int)] == sorted(
        row[3] for row in FACTS["children"] if isinstance(row[3], int)
    )
