"""UltraServer Capacity Blocks: a node group launches into a Capacity Reservation resource group
(the EC2 guide's way to target UltraServer Capacity Blocks, cb-group) instead of one reservation.
Held to botocore: the launch template's CapacityReservationTarget takes either field, and the ARN
is checked against the resource-groups model's GroupArn pattern."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest

import config
from tests.conftest import API_PATH, BASE, EXAMPLE_STACKS, plan_exit, resources, run_plan, stack_values
from tools import preflight
from tools.aws.account_boto3 import Boto3Account

GROUP_ARN = "arn:aws:resource-groups:us-east-2:123456789012:group/trn2-ultraservers"
ENDS = "2027-03-01T11:30:00Z"


def group(**capacity: Any) -> dict[str, Any]:
    return {
        "name": "trn2u",
        "instanceType": "trn2u.48xlarge",
        "desiredSize": 4,
        "availabilityZone": "us-east-2c",
        "capacity": {"type": "capacity-block", "endsAt": ENDS, **capacity},
    }


def values(**capacity: Any) -> dict[str, Any]:
    return {
        **BASE,
        "aws:region": "us-east-2",
        "llm-training-eks:nodeGroups": [group(**capacity)],
        "llm-training-eks:network": {"availabilityZones": ["us-east-2c", "us-east-2a"]},
        "llm-training-eks:storage": {"availabilityZone": "us-east-2c"},
    }


def test_the_launch_template_target_takes_a_reservation_or_a_group() -> None:
    ec2 = botocore.session.get_session().get_service_model("ec2")
    assert set(ec2.shape_for("CapacityReservationTarget").members) == {
        "CapacityReservationId",
        "CapacityReservationResourceGroupArn",
    }


def test_a_capacity_block_group_launches_into_the_resource_group() -> None:
    plan = run_plan(values(reservationGroupArn=GROUP_ARN))
    (lt,) = [r for r in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate") if "-trn2u-" in r["urn"]]
    target = lt["inputs"]["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationResourceGroupArn": GROUP_ARN}
    assert lt["inputs"]["instanceMarketOptions"] == {"marketType": "capacity-block"}
    (ng,) = [
        r for r in resources(plan, "aws:eks/nodeGroup:NodeGroup") if r["inputs"]["nodeGroupNamePrefix"] == "trn2u-"
    ]
    assert ng["inputs"]["capacityType"] == "CAPACITY_BLOCK"


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        ({}, "nodeGroups[0].capacity.reservationId: required when type is capacity-block"),
        (
            {"reservationId": "cr-0123456789abcdef0", "reservationGroupArn": GROUP_ARN},
            "capacity.reservationGroupArn: give reservationId or reservationGroupArn, not both",
        ),
        ({"reservationGroupArn": "arn:aws:resource-group:us-east-2:1:group/x"}, "does not match AWS's pattern"),
    ],
)
def test_exactly_one_valid_target(capacity: dict[str, Any], message: str, tmp_path: Path) -> None:
    code, err = plan_exit(values(**capacity), tmp_path)
    assert code == 2 and message in err, err


def test_on_demand_takes_no_group(tmp_path: Path) -> None:
    g = {**group(), "capacity": {"type": "on-demand", "reservationGroupArn": GROUP_ARN}}
    code, err = plan_exit({**BASE, "llm-training-eks:nodeGroups": [g]}, tmp_path)
    assert code == 2 and "capacity.reservationGroupArn: only for reservation and capacity-block" in err, err


def test_preflight_says_the_group_is_not_checked_and_how_to() -> None:
    """No EC2 call is made for the group (a Resource Groups lookup would list its reservations):
    the finding passes with a warning naming the commands."""
    cfg = config.parse(
        {
            "region": "us-east-2",
            "cluster": API_PATH,
            "nodeGroups": [group(reservationGroupArn=GROUP_ARN)],
            "network": {"availabilityZones": ["us-east-2c", "us-east-2a"]},
            "storage": {"availabilityZone": "us-east-2c"},
        }
    )
    ec2 = boto3.client("ec2", region_name="us-east-2", aws_access_key_id="x", aws_secret_access_key="x")
    now = dt.datetime(2027, 2, 1, tzinfo=dt.UTC)
    (finding,) = preflight.check_reservations(Boto3Account(lambda _: ec2), cfg, now, 24)
    assert finding.ok and finding.warning
    assert f"aws resource-groups list-group-resources --group {GROUP_ARN}" in finding.message


@pytest.mark.parametrize("kind", ["on-demand", "spot", "reservation"])
def test_trn2u_is_refused_outside_an_ultraserver_capacity_block(kind: str, tmp_path: Path) -> None:
    """EC2 sells trn2u.48xlarge only inside UltraServer Capacity Blocks (EC2 user guide,
    ec2-capacity-blocks and cb-group, read 2026-12-05): a group of it on any other capacity waits
    for nodes that never come (the acceptance run times out), so config refuses it (exit 2)."""
    capacity = {"type": kind, **({"reservationId": "cr-0123456789abcdef0"} if kind == "reservation" else {})}
    g = {**group(), "capacity": capacity}
    code, err = plan_exit({**values(), "llm-training-eks:nodeGroups": [g]}, tmp_path)
    assert code == 2, err
    assert "nodeGroups[0].capacity.type: trn2u.48xlarge is sold only as u-trn2x64 UltraServer Capacity Blocks" in err


def test_the_examples_target_their_blocks_by_reservation_id() -> None:
    """The EKS user guide's Capacity Block node group (capacity-blocks-mng, awsdocs/amazon-eks-user-guide
    at 0a7189e9) needs `CapacityReservationTarget` with `CapacityReservationId`; the resource-group target
    (EC2 user guide, cb-group) is not what it lists, and preflight can check a reservation id (type, AZ,
    dates, free instances) but not a group's members. Every example block, the UltraServer one too,
    names its reservation."""
    for stack in EXAMPLE_STACKS:
        for ng in config.parse_stack_values(stack_values(stack)).node_groups:
            if ng.capacity.type == "capacity-block":
                assert ng.capacity.reservation_id and not ng.capacity.reservation_group_arn, stack
