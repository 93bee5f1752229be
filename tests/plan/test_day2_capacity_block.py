"""Day 2 around a Capacity Block's last day: on the last day an update of
the stack passes preflight and touches nothing of the group (EKS's own scale-down, 40 minutes before
the end, drains it: EKS user guide, capacity-blocks-mng, awsdocs/amazon-eks-user-guide at 0a7189e9);
after the block, scaling the group to 0 as the docs say is an update in place; the next block is an
update of the launch template and of the scale-up's time, never a new group, and the group gets its
nodes at the new block's start through that scheduled action, though desiredSize did not change (the
provider sends EKS no scaling update for an unchanged desiredSize, while the last block's end left
the Auto Scaling group at 0). Preflight's margin per capacity kind is tools/aws/reservations.py's;
this holds the whole sequence."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

import config
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2
from tests.unit.preflight_sources import boto_account, reservation
from tools.aws import reservations

STACK = "p5-capacity-block"
NODE_GROUP, SCHEDULE = "aws:eks/nodeGroup:NodeGroup", "aws:autoscaling/schedule:Schedule"
END = dt.datetime(2027, 3, 1, 11, 30, tzinfo=dt.UTC)
START = END - dt.timedelta(days=7)  # the example's startsAt: a 7-day block


def with_group(**over: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    (group,) = values["llm-training-eks:nodeGroups"]
    capacity = {**group["capacity"], **over.pop("capacity", {})}
    values["llm-training-eks:nodeGroups"] = [{**group, **over, "capacity": capacity}]
    return values


def cloud(update: day2.Update) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {
        u.rsplit("::", 1)[1]: (s.op, s.changed)
        for u, s in update.touched().items()
        if not s.type.startswith("llm-training-eks:")
    }


def test_on_the_last_day_preflight_passes_and_the_group_is_left_to_its_scale_down() -> None:
    values = with_group()
    cfg = config.parse_stack_values(values)
    now = END - dt.timedelta(hours=6)  # the block's last day, EKS's scale-down (40 minutes before the end) ahead
    block = reservation(
        CapacityReservationId=cfg.node_groups[0].capacity.reservation_id,
        InstanceType="p5.48xlarge",
        AvailabilityZone="us-east-2b",
        ReservationType="capacity-block",
        TotalInstanceCount=2,
        AvailableInstanceCount=0,
        StartDate=START,
        EndDate=END,
    )
    account, _ = boto_account(
        ec2=[
            ("describe_capacity_reservations", {"CapacityReservations": [block]}),
            ("describe_instances", {"Reservations": [{"Instances": [{"InstanceId": f"i-{n:017x}"} for n in (1, 2)]}]}),
        ]
    )
    found = reservations.check_reservations(account, cfg, now)
    assert [f.line() for f in found if not f.ok] == []
    # An update that day (nothing edited) touches nothing: EKS's scale-down is already scheduled.
    assert cloud(day2.diff(stack_plan(STACK), run_plan(values, STACK))) == {}


def test_after_the_block_scaling_to_zero_is_an_update_in_place() -> None:
    update = day2.diff(stack_plan(STACK), run_plan(with_group(desiredSize=0, minSize=0), STACK))
    touched = cloud(update)
    # The group's sizes, and Kueue's quota down to the nodes present (infra.queues.present_quotas).
    ops = {name: op for name, (op, _) in touched.items()}
    # The scale-up action, still ahead at the pinned clock, follows desiredSize (0 nodes at the start).
    expected = {"ng-p5-ng": "update", "queues-clusterqueue-default": "update", "ng-p5-capacity-block-start": "update"}
    assert ops == expected, touched
    assert touched["ng-p5-capacity-block-start"][1] == ("desiredCapacity",)
    assert {p.split(".")[0] for p in touched["ng-p5-ng"][1]} == {"scalingConfig"}


def schedules(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r["inputs"] for r in plan["resources"] if r["type"] == SCHEDULE}


@pytest.mark.parametrize(
    "blocks",
    [
        [("cr-0a1b2c3d4e5f60719", "2027-03-08T11:30:00Z", "2027-03-15T11:30:00Z")],
        [
            ("cr-0a1b2c3d4e5f60719", "2027-03-08T11:30:00Z", "2027-03-15T11:30:00Z"),
            ("cr-0a1b2c3d4e5f6071a", "2027-03-20T11:30:00Z", "2027-03-21T11:30:00Z"),
        ],
    ],
    ids=["second-block", "third-block"],
)
def test_each_next_block_gets_its_nodes_at_its_start(blocks: list[tuple[str, str, str]]) -> None:
    """desiredSize stays 2 from block to block: the scale-up action moves to each new block's start
    (an update of its startTime), with the group's desired size, so EC2 Auto Scaling raises the group
    from the 0 the last block's end left it at; the group is never replaced."""
    deployed = stack_plan(STACK)
    assert schedules(deployed)["ng-p5-capacity-block-start"]["startTime"] == "2027-02-22T11:30:00Z"
    for rid, start, end in blocks:
        after = run_plan(with_group(capacity={"reservationId": rid, "startsAt": start, "endsAt": end}), STACK)
        update = day2.diff(deployed, after)
        touched = cloud(update)
        assert not update.of("replace") and not update.of("delete") and update.blocked == []
        assert touched["ng-p5-capacity-block-start"] == ("update", ("startTime",))
        assert touched["ng-p5-lt"][0] == "update"
        assert "ng-p5-ng" not in touched or touched["ng-p5-ng"][0] == "update"
        action = schedules(after)["ng-p5-capacity-block-start"]
        assert (action["startTime"], action["desiredCapacity"], action["minSize"]) == (start, 2, 0)
        deployed = after


def test_one_scale_down_action_eks_s_own() -> None:
    """EKS schedules its own scale-down 40 minutes before the end (EC2 starts shutting instances down
    at 30): a second action of the project's at the same place is a duplicate. With no run whose
    checkpoint needs longer than those 10 minutes, the plan holds no scale-down action of its own."""
    assert [n for n, i in schedules(stack_plan(STACK)).items() if i["desiredCapacity"] == 0] == []


def test_a_block_that_has_started_gets_no_scale_up_action() -> None:
    """Auto Scaling refuses a scheduled action in the past (PutScheduledUpdateGroupAction): once the
    block has started (the clock past startsAt), the plan holds no scale-up action."""
    started = with_group(capacity={"startsAt": "2026-06-30T11:30:00Z"})
    assert "ng-p5-capacity-block-start" not in schedules(run_plan(started, STACK))
