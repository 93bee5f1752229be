"""Stack rules (across resources): per rule one passing, one failing fixture, and the first
preview's shape, where ids are unknown and references are followed through the engine's
property dependencies. Then the example stacks and the offline plan's exit codes, and the
exception paths end to end (stack config -> tag -> rule passes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policy import rules
from policy.rules import props
from tests.conftest import EXAMPLE_STACKS, MINIMAL, plan_exit, run_plan, stack_plan
from tests.unit.policy_fixtures import GOOD_LT, U, messages, res, urn
from tools import plan as plan_mod

# --------------------------------------------------------------------------- EFA security groups


def efa_fixture(*, self_egress: bool = True, unknown_ids: bool = False) -> list[dict[str, Any]]:
    """An EFA launch template, its group and the group's self-referencing rules. With
    `unknown_ids`, every id is unknown (a first preview) and the engine's property
    dependencies say which resource each input names."""
    sg_id = U if unknown_ids else "efa-id"
    sg = urn(props.T_SG, "efa")
    rule = {"securityGroupId": sg_id, "referencedSecurityGroupId": sg_id, "ipProtocol": "-1", "description": "EFA"}
    deps = {"securityGroupId": [sg], "referencedSecurityGroupId": [sg]} if unknown_ids else None
    lt_inputs = {**GOOD_LT, "networkInterfaces": [{"interfaceType": "efa-only", "securityGroups": [sg_id]}]}
    out = [
        res(props.T_SG, "efa", {"description": "EFA"}, id_=None if unknown_ids else "efa-id"),
        res(props.T_LAUNCH_TEMPLATE, "lt", lt_inputs, prop_deps={"networkInterfaces": [sg]} if unknown_ids else None),
        res(props.T_INGRESS, "in", rule, prop_deps=deps),
    ]
    if self_egress:
        out.append(res(props.T_EGRESS, "out", rule, prop_deps=deps))
    return out


def test_efa_security_groups_pass_self_referencing_both_ways():
    assert messages(efa_fixture(), "efa-security-groups") == []


def test_efa_security_groups_fail_without_self_egress():
    assert any("EFA" in m for m in messages(efa_fixture(self_egress=False), "efa-security-groups"))


def test_efa_security_groups_on_a_first_preview_follow_property_dependencies():
    assert messages(efa_fixture(unknown_ids=True), "efa-security-groups") == []
    assert messages(efa_fixture(self_egress=False, unknown_ids=True), "efa-security-groups")


def test_combined_ingress_of_one_group_admitting_the_internet_fails():
    sg = res(props.T_SG, "web", {})
    half = {"securityGroupId": "web-id", "ipProtocol": "tcp", "fromPort": 443, "toPort": 443}
    a = res(props.T_INGRESS, "a", {**half, "cidrIpv4": "0.0.0.0/1"})
    b = res(props.T_INGRESS, "b", {**half, "cidrIpv4": "128.0.0.0/1"})
    assert messages([sg, a, b], "security-group-ingress-combined") == [
        "ingress rules together admit the whole internet (0.0.0.0/1, 128.0.0.0/1)"
    ]
    b["inputs"]["cidrIpv4"] = "10.0.0.0/8"
    assert messages([sg, a, b], "security-group-ingress-combined") == []
    b["inputs"]["cidrIpv4"] = U
    assert messages([sg, a, b], "security-group-ingress-combined") == []


# --------------------------------------------------------------------------- EFA node groups


def efa_node_group(
    *, subnets: tuple[str, ...] = ("s1-id",), cards: int = 8, reservation: str | None = None, unknown_ids: bool = False
) -> list[dict[str, Any]]:
    lt_inputs: dict[str, Any] = {
        "networkInterfaces": [{"interfaceType": "efa-only", "networkCardIndex": i} for i in range(cards)]
    }
    if reservation:
        lt_inputs["capacityReservationSpecification"] = {
            "capacityReservationTarget": {"capacityReservationId": reservation}
        }
    ng = {
        "subnetIds": [U] * len(subnets) if unknown_ids else list(subnets),
        "instanceTypes": ["trn1.32xlarge"],
        "launchTemplate": {"id": U if unknown_ids else "lt-id", "version": U},
    }
    deps = {"subnetIds": [urn(props.T_SUBNET, s.removesuffix("-id")) for s in subnets]}
    deps["launchTemplate"] = [urn(props.T_LAUNCH_TEMPLATE, "lt")]
    return [
        res(props.T_SUBNET, "s1", {"availabilityZone": "us-west-2d"}, id_=None if unknown_ids else "s1-id"),
        res(props.T_SUBNET, "s2", {"availabilityZone": "us-west-2a"}, id_=None if unknown_ids else "s2-id"),
        res(props.T_LAUNCH_TEMPLATE, "lt", lt_inputs, id_=None if unknown_ids else "lt-id"),
        res(props.T_NODE_GROUP, "ng", ng, prop_deps=deps if unknown_ids else None),
    ]


def test_efa_node_group_passes_one_subnet_all_cards():
    ctx = rules.Context(reservation_azs={"cr-1": "us-west-2d"})
    assert messages(efa_node_group(reservation="cr-1"), "efa-node-groups", ctx) == []


def test_efa_node_group_fails_two_subnets_and_missing_cards():
    msgs = messages(efa_node_group(subnets=("s1-id", "s2-id"), cards=4), "efa-node-groups")
    assert any("2 subnets" in m for m in msgs)
    assert any("AZs" in m for m in msgs)
    assert any("4 EFA interfaces" in m and "8 EFA cards" in m for m in msgs)


def test_efa_node_group_fails_reservation_in_other_az():
    ctx = rules.Context(reservation_azs={"cr-1": "us-west-2a"})
    msgs = messages(efa_node_group(reservation="cr-1"), "efa-node-groups", ctx)
    assert msgs == ["capacity reservation cr-1 is in us-west-2a but the node group's subnet is in us-west-2d"]


def test_efa_node_group_on_a_first_preview_follows_property_dependencies():
    ctx = rules.Context(reservation_azs={"cr-1": "us-west-2a"})
    msgs = messages(efa_node_group(reservation="cr-1", unknown_ids=True, cards=4), "efa-node-groups", ctx)
    assert any("4 EFA interfaces" in m for m in msgs) and any("reservation cr-1 is in us-west-2a" in m for m in msgs)
    assert messages(efa_node_group(unknown_ids=True), "efa-node-groups") == []


# --------------------------------------------------------------------------- FSx security group and S3


def fsx_group(cidr: str | None) -> list[dict[str, Any]]:
    rule = {"securityGroupId": "fsx-id", "ipProtocol": "tcp", "fromPort": 988, "toPort": 988}
    rule.update({"cidrIpv4": cidr} if cidr else {"referencedSecurityGroupId": "nodes-id"})
    return [
        res(props.T_SG, "fsx", {"description": "Lustre"}),
        res(props.T_INGRESS, "lustre-988", rule),
        res(props.T_FSX, "fs", {"deploymentType": "PERSISTENT_2", "securityGroupIds": ["fsx-id"]}),
    ]


def test_fsx_security_group_passes_node_groups_fails_cidrs_ignores_unknowns():
    assert messages(fsx_group(None), "fsx-security-group") == []
    assert any("10.0.0.0/16" in m for m in messages(fsx_group("10.0.0.0/16"), "fsx-security-group"))
    assert messages(fsx_group(U), "fsx-security-group") == []


def buckets(*, good: bool, bucket_ref: str = "data-bucket") -> list[dict[str, Any]]:
    out = [res("aws:s3/bucket:Bucket", "data", {"bucket": "data-bucket"}, id_="data-bucket")]
    if good:
        ref = {"bucket": bucket_ref}
        out += [
            res(props.T_VERSIONING[0], "v", {**ref, "versioningConfiguration": {"status": "Enabled"}}),
            res(
                props.T_SSE[0],
                "e",
                {**ref, "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]},
            ),
            res(
                props.T_PUBLIC_ACCESS_BLOCK,
                "p",
                {
                    **ref,
                    **dict.fromkeys(
                        ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"), True
                    ),
                },
            ),
            res(props.T_LIFECYCLE[0], "l", {**ref, "rules": [bounded_versions()]}),
        ]
    return out


def bounded_versions(**over: Any) -> dict[str, Any]:
    return {
        "id": "bounded-versions",
        "status": "Enabled",
        "noncurrentVersionExpiration": {"noncurrentDays": 14},
        "abortIncompleteMultipartUpload": {"daysAfterInitiation": 7},
        **over,
    }


def test_buckets_pass_versioned_encrypted_private():
    assert messages(buckets(good=True), "s3-buckets") == []


def test_buckets_fail_bare():
    msgs = messages(buckets(good=False), "s3-buckets")
    assert len(msgs) == 3


@pytest.mark.parametrize(
    "rule",
    [
        bounded_versions(status="Disabled"),
        bounded_versions(noncurrentVersionExpiration=None),
        bounded_versions(abortIncompleteMultipartUpload=None),
    ],
)
def test_a_versioned_bucket_without_a_rule_bounding_its_versions_fails(rule: dict[str, Any]):
    found = buckets(good=True)
    found[-1]["inputs"]["rules"] = [rule]
    (msg,) = messages(found, "s3-buckets")
    assert "keeps every old version forever" in msg
    assert len(messages(buckets(good=True)[:-1], "s3-buckets")) == 1


def test_buckets_on_a_first_preview_follow_dependencies():
    unknown = buckets(good=True, bucket_ref=U)
    for companion in unknown[1:]:
        companion["propertyDependencies"] = {"bucket": [unknown[0]["urn"]]}
    assert messages(unknown, "s3-buckets") == []


# --------------------------------------------------------------------------- flow-log groups


def flow_logs(
    *, protect: bool, destination: str = "arn:aws:logs:us-west-2:1:log-group:/vpc/x/flow-logs"
) -> list[dict[str, Any]]:
    group = res(
        props.T_LOG_GROUP,
        "flow",
        {"name": "/vpc/x/flow-logs", "arn": "arn:aws:logs:us-west-2:1:log-group:/vpc/x/flow-logs"},
        protect=protect,
    )
    fl = res(
        props.T_FLOW_LOG,
        "fl",
        {"logDestination": destination, "logDestinationType": "cloud-watch-logs"},
        prop_deps={"logDestination": [urn(props.T_LOG_GROUP, "flow")]},
    )
    return [group, fl]


def test_flow_log_groups_pass_protected_or_turned_off_and_fail_unprotected():
    assert messages(flow_logs(protect=True), "flow-log-groups-protected") == []
    assert (
        messages(flow_logs(protect=False), "flow-log-groups-protected", rules.Context(protect_stateful_resources=False))
        == []
    )
    assert messages(flow_logs(protect=False), "flow-log-groups-protected")
    assert messages(flow_logs(protect=False, destination=U), "flow-log-groups-protected")  # found through the graph


# --------------------------------------------------------------------------- example stacks and the plan


def test_rules_are_robust_to_empty_and_odd_input():
    assert rules.check([]) == []
    odd = [
        {"type": props.T_NODE_GROUP},
        {"type": props.T_LAUNCH_TEMPLATE, "inputs": "x"},
        {"type": props.T_SG, "inputs": {"ingress": "x"}},
    ]
    assert [v.rule for v in rules.check(odd)] == ["launch-template-hardening", "launch-template-hardening"]


PUBLIC = {**MINIMAL, "llm-training-eks:cluster": {"publicAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"]}}


def test_public_endpoint_split_in_two_is_refused_at_config_time(tmp_path: Path):
    # Config refuses it before anything is planned, naming the key (the policy would too).
    code, err = plan_exit(PUBLIC, tmp_path)
    assert code == 2
    assert err.splitlines() == [
        "cluster.publicAccessCidrs: 0.0.0.0/1, 128.0.0.0/1 opens the API endpoint to the whole internet; list your"
        " networks instead, or set allowPublicAccessFromAnywhere: true on purpose"
    ]


@pytest.mark.parametrize(
    "config",
    [
        {"llm-training-eks:cluster": {"publicAccessCidrs": ["0.0.0.0/0"], "allowPublicAccessFromAnywhere": True}},
        {
            "llm-training-eks:cluster": {
                "publicAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"],
                "allowPublicAccessFromAnywhere": True,
            }
        },
        {"llm-training-eks:registry": {"repositories": {"nemo": {"scanOnPush": False}}}},
        {"llm-training-eks:storage": {"availabilityZone": "us-west-2d", "deploymentType": "SCRATCH_2"}},
    ],
    ids=["public-anywhere", "public-anywhere-split", "no-scan-on-push", "scratch"],
)
def test_config_options_the_policy_refuses_have_a_working_exception_path(config: dict[str, Any]):
    values = {**MINIMAL, **config}
    plan = run_plan(values)
    assert plan["policy"] == []
    excepted = [
        r
        for r in plan["resources"]
        if any("policy-exception" in k for k in (r["inputs"].get("tags") or r["inputs"].get("clusterTags") or {}))
    ]
    assert len(excepted) == 1  # exactly the resource the option is about, tagged with its reason
    # Without the tag the same resource fails: the tag is what the rule honours.
    for r in excepted:
        for key in ("tags", "clusterTags"):
            r["inputs"][key] = {k: v for k, v in (r["inputs"].get(key) or {}).items() if "policy-exception" not in k}
    assert rules.mandatory(rules.check(plan["resources"]))


def test_plan_json_has_policy_key():
    plan = json.loads(plan_mod.to_json(stack_plan(EXAMPLE_STACKS[0])))
    assert plan["policy"] == []
