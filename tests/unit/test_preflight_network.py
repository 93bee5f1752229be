"""Preflight reads what a bring-your-own VPC and a named placement group really are,
through both sources: boto3 (botocore Stubber, the real response shapes) and the stack's
AWS provider (its invokes under mocks, answered with the SDK's result types). The scenario is the
byo-vpc example stack: an existing VPC, two private and two public subnets, a p4de group in
us-east-1c launching into the placement group ml-p4de-cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pulumi_aws as aws
import pytest

import config
from config.checks.network import addresses_needed
from tests import upstream
from tests.conftest import stack_values
from tests.unit.preflight_sources import (
    PROVIDER_URN,
    TOKENS,
    InvokeMocks,
    boto_account,
    provider_account,
    under_provider,
    wire,
)
from tools.aws import account_boto3, account_invokes, network_checks

SOURCES = ("boto3", "provider")
CFG = config.parse_stack_values(stack_values("byo-vpc"))
VPC = str(CFG.network.vpc_id)
NEED = addresses_needed(CFG)
GROUP = "ml-p4de-cluster"


@dataclass(frozen=True)
class World:
    """What the account holds."""

    vpc: bool = True
    dns_hostnames: bool = True
    subnets: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    """subnet id -> (VPC, AZ, free addresses); a subnet not listed does not exist."""
    deployed: int | None = None
    """The p4de node group's desired size if deployed."""
    group: tuple[str, str] | None = ("cluster", "available")
    in_group: tuple[int, int] = (0, 0)
    """Instances in the placement group: in all, in us-east-1c."""


def world(**over: Any) -> World:
    subnets = {
        sid: (VPC, az, 8000) for ids in (CFG.network.private_subnet_ids, CFG.network.public_subnet_ids)
        for az, sid in ids.items()
    }  # fmt: skip
    return replace(World(subnets=subnets), **over)


def findings(source: str, w: World) -> list[str]:
    """Failing lines of check_vpc and check_placement_groups against `w`, through `source`."""
    if source == "boto3":
        account, stubbers = boto_account(ec2=[], eks=[])
        ec2, eks = stubbers
        if not w.vpc:
            ec2.add_client_error("describe_vpcs", "InvalidVpcID.NotFound")
        for operation, response in [*_vpc_answers(w), *_placement_answers(w)]:
            ec2.add_response(operation, response)
        if not w.vpc:
            pass  # the subnet checks (and their day-2 reads) stop at a missing VPC
        elif w.deployed is None:
            eks.add_response("list_clusters", {"clusters": []})
        else:
            eks.add_response("list_clusters", {"clusters": [CFG.cluster.name]})
            eks.add_response("list_nodegroups", {"nodegroups": ["p4de"]})
            group = {"nodegroupName": "p4de", "version": "1.35", "scalingConfig": {"desiredSize": w.deployed}}
            eks.add_response("describe_nodegroup", {"nodegroup": group})
        found = network_checks.check_vpc(account, CFG) + network_checks.check_placement_groups(account, CFG)
        for stub in stubbers:
            stub.assert_no_pending_responses()
    else:
        mocks = InvokeMocks(_provider_answers(w))
        (found,) = under_provider(
            mocks,
            lambda: (
                network_checks.check_vpc(provider_account(CFG), CFG)
                + network_checks.check_placement_groups(provider_account(CFG), CFG)
            ),
        )
        assert all(p.startswith(PROVIDER_URN + "::") for _, _, p in mocks.calls)
    return [f.line() for f in found if not f.ok]


def _vpc_answers(w: World) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if not w.vpc:
        return out
    out.append(("describe_vpcs", {"Vpcs": [{"VpcId": VPC, "State": "available", "CidrBlock": "10.0.0.0/16"}]}))
    out.append(("describe_vpc_attribute", {"VpcId": VPC, "EnableDnsSupport": {"Value": True}}))
    out.append(("describe_vpc_attribute", {"VpcId": VPC, "EnableDnsHostnames": {"Value": w.dns_hostnames}}))
    for ids in (CFG.network.private_subnet_ids, CFG.network.public_subnet_ids):
        for sid in ids.values():
            if sid in w.subnets:
                vpc, az, free = w.subnets[sid]
                subnet = {"SubnetId": sid, "VpcId": vpc, "AvailabilityZone": az, "AvailableIpAddressCount": free}
                out.append(("describe_subnets", {"Subnets": [subnet]}))
            else:
                out.append(("describe_subnets", {"Subnets": []}))
    return out


def _placement_answers(w: World) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if w.group is None:
        out.append(("describe_placement_groups", {"PlacementGroups": []}))
        return out
    strategy, state = w.group
    pg = {"GroupName": GROUP, "Strategy": strategy, "State": state}
    out.append(("describe_placement_groups", {"PlacementGroups": [pg]}))
    total, in_az = w.in_group
    out.append(("describe_instances", _instances(total)))
    if total:
        out.append(("describe_instances", _instances(in_az)))
    return out


def _instances(n: int) -> dict[str, Any]:
    found = [{"InstanceId": f"i-0123456789abcdef{i}"} for i in range(n)]
    return {"Reservations": [{"Instances": found}] if found else []}


def _provider_answers(w: World) -> dict[str, Any]:
    def subnet(args: dict[str, Any]) -> Any:
        sid = args["id"]
        if sid not in w.subnets:
            return "no matching EC2 Subnet found"
        vpc, az, free = w.subnets[sid]
        return wire(aws.ec2.GetSubnetResult, id=sid, vpc_id=vpc, availability_zone=az, available_ip_address_count=free)

    def instances(args: dict[str, Any]) -> Any:
        in_az = any(f["name"] == "availability-zone" for f in args.get("filters", []))
        n = w.in_group[1] if in_az else w.in_group[0]
        return wire(aws.ec2.GetInstancesResult, id="x", ids=[f"i-{i}" for i in range(n)])

    vpc = wire(aws.ec2.GetVpcResult, id=VPC, enable_dns_support=True, enable_dns_hostnames=w.dns_hostnames)
    name = CFG.cluster.name
    group = None if w.group is None else {"GroupName": GROUP, "Strategy": w.group[0]}
    return {
        TOKENS["vpc"]: vpc if w.vpc else "no matching EC2 VPC found",
        TOKENS["subnet"]: subnet,
        TOKENS["clusters"]: wire(aws.eks.GetClustersResult, id="x", names=[name] if w.deployed is not None else []),
        TOKENS["node_groups"]: wire(aws.eks.GetNodeGroupsResult, cluster_name=name, id=name, names=["p4de"]),
        TOKENS["node_group"]: wire(
            aws.eks.GetNodeGroupResult,
            cluster_name=name,
            node_group_name="p4de",
            version="1.35",
            scaling_configs=[wire(aws.eks.outputs.GetNodeGroupScalingConfigResult, desired_size=w.deployed or 0)],
        ),
        TOKENS["cloudcontrol"]: (
            wire(aws.cloudcontrol.GetResourceResult, id=GROUP, identifier=GROUP, properties=json.dumps(group))
            if group
            else f"reading Cloud Control API (AWS::EC2::PlacementGroup) Resource ({GROUP}): couldn't find resource"
        ),
        TOKENS["instances"]: instances,
    }


@pytest.mark.parametrize("source", SOURCES)
def test_a_vpc_that_gives_what_the_plan_needs_passes(source: str):
    assert findings(source, world()) == []


@pytest.mark.parametrize("source", SOURCES)
def test_a_subnet_keyed_by_the_wrong_az_is_refused(source: str):
    sid = CFG.network.private_subnet_ids["us-east-1c"]
    (line,) = findings(source, world(subnets={**world().subnets, sid: (VPC, "us-east-1b", 8000)}))
    assert f"network.privateSubnetIds.us-east-1c: {sid} lies in us-east-1b, not us-east-1c" in line


@pytest.mark.parametrize("source", SOURCES)
def test_a_subnet_of_another_vpc_is_refused(source: str):
    sid = CFG.network.public_subnet_ids["us-east-1a"]
    (line,) = findings(source, world(subnets={**world().subnets, sid: ("vpc-0ffffffffffffffff", "us-east-1a", 50)}))
    assert f"{sid} is in vpc-0ffffffffffffffff, not network.vpcId {VPC}" in line


@pytest.mark.parametrize("source", SOURCES)
def test_a_missing_subnet_is_refused(source: str):
    sid = CFG.network.private_subnet_ids["us-east-1a"]
    subnets = {k: v for k, v in world().subnets.items() if k != sid}
    (line,) = findings(source, world(subnets=subnets))
    assert f"network.privateSubnetIds.us-east-1a: {sid} not found" in line


@pytest.mark.parametrize("source", SOURCES)
def test_too_few_free_addresses_are_refused_before_the_first_deploy_not_on_day_2(source: str):
    """The plan's need at maximum size (config.checks.network.addresses_needed); on day 2 the addresses the
    stack's own nodes hold count as its own."""
    sid = CFG.network.private_subnet_ids["us-east-1c"]
    short = NEED["us-east-1c"] - 10
    subnets = {**world().subnets, sid: (VPC, "us-east-1c", short)}
    (line,) = findings(source, world(subnets=subnets))
    assert f"has {short} free addresses (+0 this stack's nodes hold), the plan needs {NEED['us-east-1c']}" in line
    assert findings(source, world(subnets=subnets, deployed=2)) == []


@pytest.mark.parametrize("source", SOURCES)
def test_a_missing_vpc_is_refused(source: str):
    (line,) = findings(source, world(vpc=False))
    assert line == f"FAIL vpc network.vpcId: {VPC} not found in us-east-1: check the id"


@pytest.mark.parametrize("source", SOURCES)
def test_a_vpc_without_dns_hostnames_is_refused(source: str):
    (line,) = findings(source, world(dns_hostnames=False))
    assert "DNS hostnames OFF: nodes cannot join the cluster" in line


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"group": None}, f"nodeGroups[p4de] {GROUP}: not found in us-east-1: create it"),
        ({"group": ("spread", "available")}, "is a spread group; EFA collectives need a cluster group"),
        ({"in_group": (4, 2)}, "holds instances outside us-east-1c: a cluster group lives in one AZ"),
    ],
)
def test_a_placement_group_that_cannot_hold_the_group_is_refused(source: str, over: dict[str, Any], expected: str):
    (line,) = findings(source, world(**over))
    assert expected in line


def test_a_placement_group_being_deleted_is_refused_where_ec2_says_so():
    """DescribePlacementGroups reports the state; Cloud Control's resource has none."""
    (line,) = findings("boto3", world(group=("cluster", "deleting")))
    assert "is deleting, not available" in line


def test_the_missing_codes_and_invokes_follow_the_recorded_facts():
    codes = upstream.facts("aws-ec2-missing-codes-2026-11")["missing"]
    assert {k: list(v) for k, v in account_boto3.MISSING.items()} == codes
    invokes = upstream.facts("pulumi-aws-invokes-7.51.1")
    assert invokes["singular_not_found_text"] in account_invokes._NOT_FOUND
    assert invokes["placement_group_type"] == account_invokes.PLACEMENT_GROUP_TYPE
    assert {"GroupName", "Strategy"} <= set(invokes["placement_group_properties"])
