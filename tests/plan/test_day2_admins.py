"""Day 2: editing `cluster.adminPrincipalArns` touches only the entries of the principals added
or removed (entries keyed by list position would replace another admin's entry create-before-delete,
and EKS refuses the duplicate principal: 409 ResourceInUseException), and a stack deployed with the
entries pulumi-eks made
(`admin-<position>`) keeps them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import MINIMAL, run_plan
from tests.plan import day2
from tools.offline import remote_components

ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
A, B, C = (f"arn:aws:iam::123456789012:role/{n}" for n in ("platform-admins", "sre", "ml-leads"))


def plan_with(admins: list[str]) -> dict[str, Any]:
    values = copy.deepcopy(MINIMAL)
    values["llm-training-eks:cluster"] = {**values["llm-training-eks:cluster"], "adminPrincipalArns": admins}
    return run_plan(values)


def by_principal(update: day2.Update, plan: dict[str, Any]) -> dict[str, str]:
    """Principal -> what the update does to its access entry."""
    entries = {r["urn"]: r["inputs"]["principalArn"] for r in plan["resources"] if r["type"] == ENTRY}
    return {arn: update.steps[urn].op for urn, arn in entries.items()}


EDITS = {
    "remove the first": ([A, B, C], [B, C]),
    "remove the middle": ([A, B, C], [A, C]),
    "reorder": ([A, B, C], [C, A, B]),
    "add at the top": ([B, C], [A, B, C]),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_admin_list_edit_touches_only_the_principals_it_adds_or_removes(edit: str) -> None:
    old, new = EDITS[edit]
    before, after = plan_with(old), plan_with(new)
    update = day2.diff(before, after)
    entries = {**by_principal(update, before), **by_principal(update, after)}
    assert entries == {
        p: ("same" if p in old and p in new else "create" if p in new else "delete") for p in {*old, *new}
    }, entries
    assert not [s for s in update.touched().values() if s.type in (ENTRY, ASSOCIATION) and s.op == "replace"]
    # EKS takes one entry per principal: 409 ResourceInUseException for a second one.
    assert day2.conflicting_creates(update, before, after, ENTRY, "principalArn") == []


def _as_pulumi_eks_made_them(plan: dict[str, Any], admins: list[str]) -> dict[str, Any]:
    """The plan as the previous version of the program declared it: the admin entries were
    pulumi-eks children keyed `admin-<position>` (tools.offline.remote_components models them)."""
    (component,) = [r for r in plan["resources"] if r["type"] == "eks:index:Cluster"]
    entries = {f"admin-{i}": {"principalArn": arn, "accessPolicies": {"cluster-admin": {
        "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        "accessScope": {"type": "cluster"}}}} for i, arn in enumerate(admins)}  # fmt: skip
    cluster = remote_components.Child("aws:eks/cluster:Cluster", f"{component['name']}-eksCluster", {})
    kids = remote_components._access_entries(component["name"], entries, cluster)
    stack_prefix = component["urn"].rsplit("::", 2)[0]
    entry_type = component["urn"].rsplit("::", 2)[1].rsplit("$", 1)[-1] + "$" + ENTRY
    urns = {k.key: f"{stack_prefix}::{entry_type}::{k.name}" for k in kids if k.type == ENTRY}
    legacy = [
        {
            "urn": urns[k.key] if k.type == ENTRY else f"{stack_prefix}::{ENTRY}${ASSOCIATION}::{k.name}",
            "id": f"{k.name}-id",
            "type": k.type,
            "name": k.name,
            "custom": True,
            "protect": False,
            "inputs": k.inputs,
        }
        for k in kids
    ]
    kept = [r for r in plan["resources"] if r["type"] not in (ENTRY, ASSOCIATION)]
    return {**plan, "resources": kept + legacy}


def test_a_stack_deployed_with_position_keyed_entries_keeps_them() -> None:
    admins = [A, B, C]
    after = plan_with(admins)
    before = _as_pulumi_eks_made_them(after, admins)
    assert {r["name"] for r in before["resources"] if r["type"] == ENTRY} == {
        "cluster-eks-admin-0",
        "cluster-eks-admin-1",
        "cluster-eks-admin-2",
    }
    update = day2.diff(before, after)
    touched = {u: s.op for u, s in update.touched().items() if s.type in (ENTRY, ASSOCIATION)}
    assert touched == {}, touched
