"""An existing VPC and an existing placement group, planned: what the program creates (nothing of
the network), what it takes from the configured ids, and what it needs from the VPC."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import config
from config.checks.network import EKS_INTERFACE_ADDRESSES, addresses_needed
from config.stackfile import read_stack_file
from facts import instances
from tests import upstream
from tests.conftest import (
    API_PATH,
    EXAMPLES,
    placed_values,
    plan_exit,
    resources,
    run_plan,
    stack_plan,
    stack_values,
)
from tools import plan as plan_mod

NETWORK_TYPES = (
    "aws:ec2/vpc:Vpc",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/eip:Eip",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
)
BYO = stack_values("byo-vpc")
NETWORK = BYO["llm-training-eks:network"]


def with_network(**network: Any) -> dict[str, Any]:
    values = dict(BYO)
    values["llm-training-eks:network"] = {**NETWORK, **network}
    return values


def test_an_existing_vpc_gets_no_network_of_ours() -> None:
    plan = stack_plan("byo-vpc")
    for t in NETWORK_TYPES:
        assert not resources(plan, t), f"{t} created in an existing VPC"
    # flowLogs: false and no s3EndpointRouteTableIds: nothing at all under the Network component.
    network = next(r for r in plan["resources"] if r["type"] == "llm-training-eks:infra:Network")
    assert not [r for r in plan["resources"] if r["parent"] == network["urn"]]


def test_everything_lands_in_the_configured_vpc_and_subnets() -> None:
    plan = stack_plan("byo-vpc")
    vpc, private = NETWORK["vpcId"], NETWORK["privateSubnetIds"]
    public = NETWORK["publicSubnetIds"]
    (cluster,) = resources(plan, "eks:index:Cluster")
    assert cluster["inputs"]["vpcId"] == vpc
    assert cluster["inputs"]["privateSubnetIds"] == list(private.values())
    assert cluster["inputs"]["publicSubnetIds"] == list(public.values())
    groups = {
        g["inputs"]["labels"]["llm-training-eks/node-group"]: g["inputs"]["subnetIds"]
        for g in resources(plan, "aws:eks/nodeGroup:NodeGroup")
    }
    assert groups == {"system": list(private.values()), "p4de": [private["us-east-1c"]]}
    (fs,) = resources(plan, "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs["inputs"]["subnetIds"] == private["us-east-1c"]  # the first accelerated group's AZ
    for sg in resources(plan, "aws:ec2/securityGroup:SecurityGroup"):
        assert sg["inputs"]["vpcId"] == vpc


def test_the_s3_endpoint_and_flow_logs_on_request() -> None:
    tables = ["rtb-0a1b2c3d4e5f60021", "rtb-0a1b2c3d4e5f60022"]
    plan = run_plan(with_network(s3EndpointRouteTableIds=tables, flowLogs=True), "byo-vpc")
    (endpoint,) = resources(plan, "aws:ec2/vpcEndpoint:VpcEndpoint")
    i = endpoint["inputs"]
    assert (i["vpcId"], i["vpcEndpointType"], i["routeTableIds"]) == (NETWORK["vpcId"], "Gateway", tables)
    assert i["serviceName"] == "com.amazonaws.us-east-1.s3"
    (flow,) = resources(plan, "aws:ec2/flowLog:FlowLog")
    assert flow["inputs"]["vpcId"] == NETWORK["vpcId"]
    for t in NETWORK_TYPES:
        assert not resources(plan, t)


def test_private_only_vpc_leaves_public_subnets_out_of_the_cluster() -> None:
    values = with_network()
    values["llm-training-eks:network"].pop("publicSubnetIds")
    (cluster,) = resources(run_plan(values, "byo-vpc"), "eks:index:Cluster")
    assert "publicSubnetIds" not in cluster["inputs"]  # pulumi-eks's private-only shape


def test_no_nat_cost_for_an_existing_vpc() -> None:
    plan = stack_plan("byo-vpc")
    assert not [i for i in plan["cost"]["items"] if i["kind"] == "nat"]
    assert plan["outputs"]["hourlyCost"] == plan["cost"]["totalHourly"]


def test_the_plan_says_what_the_vpc_must_have() -> None:
    out = io.StringIO()
    assert plan_mod.main(["--stack", "byo-vpc"], stdout=out, stderr=io.StringIO()) == 0
    table = out.getvalue()
    assert "existing VPC vpc-0a1b2c3d4e5f67890: creates no VPC, subnets, NAT gateway or internet gateway" in table
    assert "S3 gateway endpoint: the VPC's own" in table
    assert "free addresses needed (VPC CNI, WARM_ENI_TARGET=1): us-east-1a 136, us-east-1c 336" in table
    assert "AZ us-east-1c (1 subnet)" in table


def test_addresses_needed_follow_the_vpc_cni_and_the_instance_data() -> None:
    """Per node, WARM_ENI_TARGET=1 holds two interfaces' worth of addresses (EKS user guide);
    the per-interface figure is held against EC2's data in tests/unit/test_instances.py."""
    assert upstream.facts("aws-eks-network-reqs-2024-12")["vpc_cni"]["warm_eni_target_default"] == 1
    assert upstream.facts("aws-eks-network-reqs-2024-12")["cluster_subnets"]["recommended_free_addresses"] == (
        EKS_INTERFACE_ADDRESSES
    )
    cfg = config.parse_stack_values(BYO)
    system = instances.GENERAL_PURPOSE["m6i.2xlarge"]
    p4de = instances.ACCELERATED["p4de.24xlarge"]
    base = cfg.system_node_group.max * 2 * system.ipv4_per_interface + EKS_INTERFACE_ADDRESSES
    assert addresses_needed(cfg) == {"us-east-1a": base, "us-east-1c": base + 2 * 2 * p4de.ipv4_per_interface}


# --------------------------------------------------------------------------- existing placement group


def one_group(**group: Any) -> dict[str, Any]:
    ng = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d", **group}
    return {
        "aws:region": "us-west-2",
        "llm-training-eks:cluster": API_PATH,
        "llm-training-eks:nodeGroups": [ng],
        **placed_values("us-west-2d"),
    }


@pytest.mark.parametrize("kind", ["on-demand", "spot"])
def test_on_demand_and_spot_launch_into_an_existing_placement_group(kind: str) -> None:
    plan = run_plan(one_group(capacity={"type": kind, "placementGroupName": "ml-trn1-cluster"}))
    assert not resources(plan, "aws:ec2/placementGroup:PlacementGroup")
    (lt,) = [r for r in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate") if r["name"] == "ng-trn1-lt"]
    assert lt["inputs"]["placement"] == {"groupName": "ml-trn1-cluster"}


def test_a_new_and_an_existing_placement_group_at_once_is_refused(tmp_path: Path) -> None:
    code, err = plan_exit(
        one_group(placementGroup=True, capacity={"type": "on-demand", "placementGroupName": "ml-trn1-cluster"}),
        tmp_path,
    )
    assert code == 2
    assert err.startswith("nodeGroups[0].placementGroup: true asks for a new placement group")


def test_without_the_new_options_a_stack_declares_what_it_did() -> None:
    """The URN snapshots of every example stack (tests/golden/*/urns.txt) hold this for the
    stacks; here a stack of the defaults keeps its VPC, subnets, NAT gateway and placement group."""
    plan = run_plan(one_group())
    names = {r["name"] for r in plan["resources"]}
    assert {"network-vpc", "network-igw", "network-nat-us-west-2d", "network-s3", "ng-trn1-pg"} <= names
    network = next(r for r in plan["resources"] if r["type"] == "llm-training-eks:infra:Network")
    assert network["inputs"] == {}  # no new inputs on the component of a created VPC


def test_the_example_stack_is_the_documented_shape() -> None:
    """Pulumi.byo-vpc.yaml follows the VPC template of awsome-distributed-training: two AZs of
    private and public subnets, its own S3 endpoint and flow logs (so neither is created here)."""
    facts = upstream.facts("awsome-distributed-training-vpc")["vpc_template_1_vpc_multi_az"]
    assert facts["defaults"]["CreateS3Endpoint"] == "true" and "s3EndpointRouteTableIds" not in NETWORK
    assert facts["flow_logs"]["traffic"] == "ALL" and NETWORK["flowLogs"] is False
    assert len(NETWORK["privateSubnetIds"]) in facts["number_of_azs"]
    assert read_stack_file(EXAMPLES / "Pulumi.byo-vpc.yaml") == BYO
