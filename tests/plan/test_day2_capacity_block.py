"""Day 2 around a Capacity Block's last day: on the last day an update of
the stack passes preflight and touches nothing of the group (the scheduled scale-down drains it);
after the block, scaling the group to 0 as the docs say is an update in place; the next block is an
update of the launch template and of the scale-down's time, never a new group. Preflight's margin
per capacity kind is tools/aws/reservations.py's; this holds the whole sequence."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import config
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2
from tests.unit.preflight_sources import boto_account, reservation
from tools.aws import reservations

STACK = "p5-capacity-block"
NODE_GROUP, SCHEDULE = "aws:eks/nodeGroup:NodeGroup", "aws:autoscaling/schedule:Schedule"
END = dt.datetime(2027, 3, 1, 11, 30, tzinfo=dt.UTC)


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
    now = END - dt.timedelta(hours=6)  # the block's last day, its scale-down (an hour before the end) ahead
    block = reservation(
        CapacityReservationId=cfg.node_groups[0].capacity.reservation_id,
        InstanceType="p5.48xlarge",
        AvailabilityZone="us-east-2b",
        ReservationType="capacity-block",
        TotalInstanceCount=2,
        AvailableInstanceCount=0,
        StartDate=END - dt.timedelta(days=1),
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
    # An update that day (nothing edited) touches nothing: the scale-down is already scheduled.
    assert cloud(day2.diff(stack_plan(STACK), run_plan(values, STACK))) == {}


def test_after_the_block_scaling_to_zero_is_an_update_in_place() -> None:
    update = day2.diff(stack_plan(STACK), run_plan(with_group(desiredSize=0, minSize=0), STACK))
    touched = cloud(update)
    # The group's sizes, and Kueue's quota down to the nodes present (infra.queues.present_quotas).
    ops = {name: op for name, (op, _) in touched.items()}
    assert ops == {"ng-p5-ng": "update", "queues-clusterqueue-default": "update"}, touched
    assert {p.split(".")[0] for p in touched["ng-p5-ng"][1]} == {"scalingConfig"}


def test_the_next_block_moves_the_scale_down_and_keeps_the_group() -> None:
    nxt = {"reservationId": "cr-0a1b2c3d4e5f60719", "endsAt": "2027-03-08T11:30:00Z"}
    update = day2.diff(stack_plan(STACK), run_plan(with_group(capacity=nxt), STACK))
    touched = cloud(update)
    assert not update.of("replace") and not update.of("delete") and update.blocked == []
    assert touched["ng-p5-capacity-block-end"] == ("update", ("startTime",))
    assert touched["ng-p5-lt"][0] == "update"
    assert "ng-p5-ng" not in touched or touched["ng-p5-ng"][0] == "update"
