"""Bring your own network: an existing VPC's ids and subnets, validated where AWS would refuse them
(tests/upstream/aws-ec2-resource-ids-2026-11.yaml, aws-eks-network-reqs-2024-12.yaml)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import botocore.session
import pytest

import config
from config.network import NetworkConfig
from tests import upstream
from tests.conftest import API_PATH, plan_exit

VPC = "vpc-0a1b2c3d4e5f67890"
SUBNETS = {"us-west-2a": "subnet-0a1b2c3d4e5f60001", "us-west-2d": "subnet-0a1b2c3d4e5f60002"}
EXISTING = {"vpcId": VPC, "privateSubnetIds": SUBNETS}


def stack(network: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "aws:region": "us-west-2",
        "llm-training-eks:cluster": API_PATH,
        "llm-training-eks:network": network,
        **more,
    }


def problems(network: dict[str, Any], **more: Any) -> list[str]:
    values = {k.rpartition(":")[2] if k.startswith("llm") else "region": v for k, v in stack(network, **more).items()}
    with pytest.raises(config.ConfigError) as e:
        config.parse(values)
    return e.value.problems


def test_an_existing_vpc_gives_the_stack_its_azs_and_subnets() -> None:
    cfg = config.parse({"region": "us-west-2", "cluster": API_PATH, "network": EXISTING})
    assert cfg.network.existing
    assert cfg.availability_zones == ["us-west-2a", "us-west-2d"]
    assert cfg.file_system_az == "us-west-2a"


# --------------------------------------------------------------------------- ids as AWS knows them


def _botocore_pattern(service: str, shape: str) -> str:
    return str(botocore.session.get_session().get_service_model(service).shape_for(shape).metadata["pattern"])


def test_the_recorded_id_patterns_are_botocores() -> None:
    facts = upstream.facts("aws-ec2-resource-ids-2026-11")["botocore"]
    assert _botocore_pattern("ds", "VpcId") == facts["ds_vpc_id"]
    assert _botocore_pattern("ds", "SubnetId") == facts["ds_subnet_id"]
    assert _botocore_pattern("fsx", "SubnetId") == facts["fsx_subnet_id"]
    ec2 = botocore.session.get_session().get_service_model("ec2")
    for shape in facts["unconstrained"]:
        assert "pattern" not in ec2.shape_for(shape.split(":")[1]).metadata, f"{shape} gained a pattern: use it"


CANDIDATES = [
    "vpc-0123abcd",
    "vpc-0123456789abcdef0",
    "vpc-0123456789ABCDEF0",  # upper case: not an EC2 id
    "vpc-0123456",
    "vpc-0123456789abcdef",
    "vpc-0123456789abcdef0\n",  # a trailing newline must not pass
    "vpc-٠١٢٣٤٥٦٧",  # Arabic-Indic digits
    "subnet-0123abcd",
    "subnet-0123456789abcdef0",
    "subnet-0123456789abcdef01",
    "subnet-01234567 ",
    " vpc-0123abcd",
]


@pytest.mark.parametrize("value", CANDIDATES)
def test_ids_are_accepted_exactly_when_the_documented_format_accepts_them(value: str) -> None:
    facts = upstream.facts("aws-ec2-resource-ids-2026-11")["botocore"]
    kind = "vpc" if value.strip().startswith("vpc") else "subnet"
    documented = re.fullmatch(facts[f"ds_{kind}_id"].strip("^$"), value) is not None
    network = {"vpcId": value if kind == "vpc" else VPC, "privateSubnetIds": SUBNETS}
    if kind == "subnet":
        network["privateSubnetIds"] = {**SUBNETS, "us-west-2d": value}
    try:
        NetworkConfig.model_validate(network)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == documented, value


def test_a_bad_id_is_refused_naming_its_key(tmp_path: Path) -> None:
    code, err = plan_exit(
        stack({"vpcId": "vpc-123", "privateSubnetIds": {**SUBNETS, "us-west-2b": "subnet-x"}}), tmp_path
    )
    assert code == 2
    assert "network.vpcId: 'vpc-123' is not a vpc id" in err
    assert "network.privateSubnetIds.us-west-2b: 'subnet-x' is not a subnet id" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- what the VPC must give


def test_eks_needs_subnets_in_two_azs() -> None:
    assert upstream.facts("aws-eks-network-reqs-2024-12")["cluster_subnets"]["min_availability_zones"] == 2
    (line,) = problems({"vpcId": VPC, "privateSubnetIds": {"us-west-2a": SUBNETS["us-west-2a"]}})
    assert line.startswith("network.privateSubnetIds: 1 given; EKS needs subnets in at least two AZs")


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        ({**EXISTING, "cidr": "10.0.0.0/16"}, "network.cidr: describes the VPC the stack creates"),
        ({**EXISTING, "natGateways": "per-az"}, "network.natGateways: describes the VPC the stack creates"),
        ({**EXISTING, "availabilityZones": ["us-west-2a", "us-west-2d"]}, "network.availabilityZones: describes"),
        ({"privateSubnetIds": SUBNETS}, "network.privateSubnetIds: only with vpcId"),
        ({"s3EndpointRouteTableIds": ["rtb-0123456789abcdef0"]}, "network.s3EndpointRouteTableIds: only with vpcId"),
        (
            {
                **EXISTING,
                "privateSubnetIds": {"us-west-2a": SUBNETS["us-west-2a"], "us-west-2b": SUBNETS["us-west-2a"]},
            },
            "is given for more than one AZ",
        ),
        ({**EXISTING, "publicSubnetIds": {"us-west-2a": SUBNETS["us-west-2a"]}}, "is also a private subnet"),
        ({**EXISTING, "s3EndpointRouteTableIds": ["rtb-12"]}, "'rtb-12' is not a rtb id"),
        ({**EXISTING, "privateSubnetIds": {"us-west-2": SUBNETS["us-west-2a"]}}, "'us-west-2' is not an AZ name"),
    ],
)
def test_one_kind_of_vpc_at_a_time(network: dict[str, Any], expected: str) -> None:
    assert any(expected in p for p in problems(network)), problems(network)


def test_subnets_belong_to_the_region_and_node_groups_to_the_subnets() -> None:
    groups = [{"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 1, "availabilityZone": "us-west-2b"}]
    found = problems(
        {**EXISTING, "privateSubnetIds": {**SUBNETS, "us-east-1a": "subnet-0a1b2c3d4e5f60003"}},
        **{"llm-training-eks:nodeGroups": groups},
    )
    assert "network.privateSubnetIds.us-east-1a: us-east-1a is not in region us-west-2" in found
    assert any(
        p.startswith("nodeGroups[0].availabilityZone: us-west-2b is not one of network.privateSubnetIds") for p in found
    ), found
