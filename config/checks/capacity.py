"""Rules of where node groups get their instances: reservations, Capacity Blocks, placement groups.

What config alone can tell is here; what needs the account (does the reservation exist, how
many of its instances are free, when does it really end) is preflight's (tools/aws/reservations.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

from config.checks.groups import size_key
from config.nodegroups import NodeGroupConfig
from config.problems import problem
from config.stack import StackConfig
from facts.limits import CAPACITY_BLOCK_MAX_INSTANCES, CAPACITY_BLOCK_TYPES


def utc_now() -> dt.datetime:
    """The time config is judged at (tests pin it: the example stacks carry dated Capacity Blocks)."""
    return dt.datetime.now(dt.UTC)


EXAMPLE_CLOCK = dt.datetime(2026, 7, 1, 12, 0, tzinfo=dt.UTC)
"""The time the example stacks are planned at, whatever the date (tools.plan, for files in examples/).
Their Capacity Blocks carry dates of their own (illustrative, like their reservation ids): judged by
the real clock they would all be refused once those dates passed, and the examples are documentation
that must plan on any date. A stack of your own is always judged by the real clock."""
_example_clock: list[bool] = [False]


def judged_at() -> dt.datetime:
    """`EXAMPLE_CLOCK` while an example stack is planned (`example_clock`), else `utc_now()`."""
    return EXAMPLE_CLOCK if _example_clock[0] else utc_now()


@contextmanager
def example_clock() -> Iterator[None]:
    """Judge config at `EXAMPLE_CLOCK` inside the block (tools.plan of an example stack file)."""
    _example_clock[0] = True
    try:
        yield
    finally:
        _example_clock[0] = False


def shared_reservations(cfg: StackConfig) -> list[str]:
    """Groups may share a reservation (preflight adds their sizes up against its free instances),
    but a reservation is for one instance type in one AZ, of one kind, made in one placement group
    (or none), and a Capacity Block has one end (EC2 API reference, CapacityReservation)."""
    first: dict[str, tuple[int, NodeGroupConfig]] = {}
    problems: list[str] = []
    for i, ng in enumerate(cfg.node_groups):
        rid = ng.capacity.reservation_id
        if rid is None:
            continue
        if rid not in first:
            first[rid] = (i, ng)
            continue
        j, other = first[rid]
        facts = {
            "instanceType": (ng.instance_type, other.instance_type),
            "availabilityZone": (cfg.node_group_az(ng), cfg.node_group_az(other)),
            "capacity.type": (ng.capacity.type, other.capacity.type),
            "capacity.placementGroupName": (ng.capacity.placement_group_name, other.capacity.placement_group_name),
            "capacity.endsAt": (ng.capacity.ends_at, other.capacity.ends_at),
        }
        problems += [
            problem(
                f"nodeGroups[{i}].{key}",
                "conflict",
                f"{mine} differs from nodeGroups[{j}] ({other.name}: {theirs}), which targets the"
                f" same reservation {rid}; a reservation is of one instance type, in one AZ, of one kind, in one"
                " placement group, with one end: make them agree or use another reservation",
                value=str(mine),
                allowed=str(theirs),
                hint="make them agree or use another reservation",
            )
            for key, (mine, theirs) in facts.items()
            if mine != theirs
        ][:1]
    return problems


def placement_group_azs(cfg: StackConfig) -> list[str]:
    """Groups that launch into one existing placement group are in one AZ: a cluster placement
    group cannot span Availability Zones (EC2 user guide, placement-strategies)."""
    first: dict[str, tuple[int, str]] = {}
    problems: list[str] = []
    for i, ng in enumerate(cfg.node_groups):
        name = ng.capacity.placement_group_name
        if name is None:
            continue
        az = cfg.node_group_az(ng)
        j, their_az = first.setdefault(name, (i, az))
        if their_az != az:
            problems.append(
                problem(
                    f"nodeGroups[{i}].capacity.placementGroupName",
                    "conflict",
                    f"{name!r} is also nodeGroups[{j}]'s, in {their_az}, and this group is in {az}; a cluster"
                    f" placement group lives in one AZ: put both groups in {their_az} or name another placement group",
                    value=repr(name),
                    hint=f"put both groups in {their_az} or name another placement group",
                )
            )
    return problems


def capacity_blocks_sold(cfg: StackConfig) -> list[str]:
    """Capacity Blocks exist for some instance types only, and hold at most 64 instances each
    (EC2 user guide, ec2-capacity-blocks)."""
    problems: list[str] = []
    for i, ng in enumerate(cfg.node_groups):
        if ng.capacity.type != "capacity-block":
            continue
        if ng.instance_type not in CAPACITY_BLOCK_TYPES:
            sold = ", ".join(sorted(CAPACITY_BLOCK_TYPES))
            problems.append(
                problem(
                    f"nodeGroups[{i}].capacity.type",
                    "conflict",
                    f"EC2 sells no Capacity Blocks of {ng.instance_type}; they exist for {sold}: use type reservation"
                    " (an On-Demand Capacity Reservation) or on-demand",
                    value="'capacity-block'",
                    allowed=f"capacity-block for {sold}; else reservation or on-demand",
                )
            )
        elif ng.max > CAPACITY_BLOCK_MAX_INSTANCES:
            problems.append(
                problem(
                    size_key(i, ng),
                    "invalid",
                    f"{ng.max} instances, but a Capacity Block holds at most {CAPACITY_BLOCK_MAX_INSTANCES}: use at"
                    f" most {CAPACITY_BLOCK_MAX_INSTANCES}, or one node group per block",
                    value=str(ng.max),
                    allowed=f"at most {CAPACITY_BLOCK_MAX_INSTANCES}",
                )
            )
    return problems


def ultraservers_as_blocks(cfg: StackConfig) -> list[str]:
    """An UltraServer member (trn2u) is sold only inside UltraServer Capacity Blocks: EC2 offers it
    neither On-Demand, nor as Spot, nor for an On-Demand Capacity Reservation (EC2 user guide,
    ec2-capacity-blocks and cb-group; facts/instances.py UltraServer), so a group of it of any other
    capacity type would wait for nodes that never come."""
    problems: list[str] = []
    for i, ng in enumerate(cfg.node_groups):
        ultra = ng.instance.ultraserver
        if ultra is None or ng.capacity.type == "capacity-block":
            continue
        problems.append(
            problem(
                f"nodeGroups[{i}].capacity.type",
                "conflict",
                f"{ng.instance_type} is sold only as {ultra.ultraserver_type} UltraServer Capacity Blocks (EC2"
                f" offers it neither on-demand, nor spot, nor as a reservation): use type capacity-block with the"
                f" block's reservationId, or an instance type sold {ng.capacity.type}",
                value=repr(ng.capacity.type),
                allowed="capacity-block",
                hint="buy an UltraServer Capacity Block and use type capacity-block",
            )
        )
    return problems


def capacity_blocks_ahead(cfg: StackConfig) -> list[str]:
    """A Capacity Block group's scheduled scale-down must still lie ahead: EC2 Auto Scaling
    refuses a scheduled action that starts in the past (PutScheduledUpdateGroupAction), so the
    plan and the deploy agree that a block that has ended (or is about to) needs a new one."""
    now = judged_at()
    problems: list[str] = []
    for i, ng in enumerate(cfg.node_groups):
        when = ng.capacity.scale_down_at
        if ng.capacity.type == "capacity-block" and when is not None and when <= now:
            problems.append(
                problem(
                    f"nodeGroups[{i}].capacity.endsAt",
                    "invalid",
                    f"the block ends {ng.capacity.ends_at:%Y-%m-%d %H:%M} UTC, so the scale-down at"
                    f" {when:%Y-%m-%d %H:%M} UTC is already past (Auto Scaling refuses a scheduled action in the past):"
                    " set a new block's reservationId and endsAt, or remove the node group",
                    value=f"{ng.capacity.ends_at:%Y-%m-%d %H:%M} UTC",
                    allowed=f"a time after {now:%Y-%m-%d %H:%M} UTC",
                    hint="set a new block's reservationId and endsAt, or remove the node group",
                )
            )
    return problems


def capacity_problems(cfg: StackConfig) -> list[str]:
    """Every rule of this module."""
    return [
        *shared_reservations(cfg),
        *placement_group_azs(cfg),
        *capacity_blocks_sold(cfg),
        *ultraservers_as_blocks(cfg),
        *capacity_blocks_ahead(cfg),
    ]
