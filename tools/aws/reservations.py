"""Preflight's reservation check: can a node group's reservation or Capacity Block hold it?

Day 2 is the common case: a group of 4 on a reservation of 4 has used every slot itself, so
EC2 reports 0 free. The group's own instances (found by the tags its launch template puts on
them) count as available to it. A reservation's state decides what the group may ask for
(EC2 API CapacityReservationState, in botocore's ec2 model; EC2 user guide, capacity-blocks-view
and capacity-reservations-view):

- `active`: the group's desired size must fit in the free instances plus its own.
- Not usable now (`scheduled`, `pending`, `assessing`, `payment-pending`, `delayed`, and
  `unavailable`, which the state's documentation leaves out; DescribeCapacityBlocks lists it and
  CapacityBlockStatus counts capacity unusable after a failed system status check): fine at
  desired size 0 (a Capacity Block bought ahead, the group waiting for it); refused above 0,
  saying when it starts.
- Gone (`expired`, `cancelled`, `failed`, `payment-failed`, `unsupported`, `cancelling`): fine at
  desired size 0 (a group kept after its block ended), refused above 0.
- Any state EC2 adds later is refused until this module knows what it means.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from facts.names import CLUSTER_TAG
from tools.aws.account import Account, Reservation

USABLE = frozenset({"active"})
NOT_NOW = {
    "scheduled": "is scheduled and starts at {start}",
    "pending": "is still being provisioned (EC2 shows a new reservation active within about 5 minutes)",
    "assessing": "is being assessed by EC2 (a future-dated reservation, from {start})",
    "payment-pending": "waits for its upfront payment to be processed (starts at {start})",
    "delayed": "is delayed: EC2 cannot deliver it by its start date ({start})",
    "unavailable": "is unavailable: EC2 reports its capacity cannot be used now (e.g. a failed status check)",
}
GONE = frozenset({"expired", "cancelled", "failed", "payment-failed", "unsupported", "cancelling"})


@dataclass(frozen=True)
class Finding:
    """The outcome of one check; a failing one says what to do. A warning passes (`ok`) but says
    what will fail later and how to prevent it."""

    check: str
    subject: str
    ok: bool
    message: str
    warning: bool = False

    def line(self) -> str:
        """`ok`, `WARN` or `FAIL`, the check, its subject and the message, on one line."""
        status = "FAIL" if not self.ok else "WARN" if self.warning else "ok"
        return f"{status} {self.check} {self.subject}: {self.message}"


def iso(v: Any) -> str:
    return v.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if isinstance(v, dt.datetime) else str(v)


def own_instance_tags(cfg: StackConfig, ng: NodeGroupConfig) -> dict[str, str]:
    """Tags every instance of the node group carries: its launch template tags instances with the
    stack's owned tags and Name `<cluster>-<group>` (infra/cluster.node_launch_template_args;
    tests/unit/test_preflight_day2.py holds the two together on a planned stack)."""
    return {CLUSTER_TAG: cfg.cluster.name, "Name": f"{cfg.cluster.name}-{ng.name}"}


def group_not_checked(ng: NodeGroupConfig) -> Finding:
    """A group launching into a Capacity Reservation resource group: which reservations it holds
    is a Resource Groups lookup, not made here; the check passes with a warning saying what to run."""
    arn = str(ng.capacity.reservation_group_arn)
    return Finding(
        "reservation",
        f"nodeGroups[{ng.name}] {arn}",
        True,
        "a resource group of reservations is not checked here; list what it holds with `aws resource-groups"
        f" list-group-resources --group {arn}` and check each with `aws ec2 describe-capacity-reservations`",
        warning=True,
    )


def check_reservations(
    account: Account, cfg: StackConfig, now: dt.datetime, margin_hours: float | None = None
) -> list[Finding]:
    """Each reservation or Capacity Block exists, is for the node group's type and AZ, was made in
    the placement group the config names, can hold the groups that target it in its current state
    (together: two groups of 4 on a reservation of 4 each fit alone, but EC2 starts 4), does not end
    within the margin (the group's `capacity.endMarginHours`, by default per capacity type, unless
    `margin_hours` overrides it for every group), and (Capacity Blocks) ends at `endsAt`, with the
    scale-down after the block's start (config itself refuses one already past)."""
    out = []
    by_id: dict[str, list[NodeGroupConfig]] = {}
    for ng in cfg.node_groups:
        if ng.capacity.reservation_group_arn is not None:
            out.append(group_not_checked(ng))
        elif ng.capacity.targets_reservation:
            by_id.setdefault(str(ng.capacity.reservation_id), []).append(ng)
    for rid, groups in by_id.items():
        subject = f"nodeGroups[{'+'.join(g.name for g in groups)}] {rid}"
        cr = account.reservation(rid)
        if cr is None:
            message = f"not found in {cfg.region}: check the id and the region"
            out.append(Finding("reservation", subject, False, message))
            continue
        problems = []
        for ng in groups:
            margin = ng.capacity.end_margin if margin_hours is None else dt.timedelta(hours=margin_hours)
            mine = match_problems(cr, ng, cfg.node_group_az(ng)) + end_problems(cr, ng, now, margin)
            mine += placement_problems(cr, ng) + block_end_problems(cr, ng)
            problems += [p if len(groups) == 1 else f"{ng.name}: {p}" for p in mine]
        note, capacity = capacity_problems(account, cr, groups, [own_instance_tags(cfg, ng) for ng in groups])
        problems += capacity
        out += [Finding("reservation", subject, False, p) for p in problems]
        if not problems:
            where = ", ".join(sorted({f"{ng.instance_type} in {cfg.node_group_az(ng)}" for ng in groups}))
            out.append(Finding("reservation", subject, True, f"{note}, {where}"))
    return out


LINUX = "Linux/UNIX"
"""botocore ec2 model, CapacityReservationInstancePlatform: the platform of AL2023 nodes."""


def match_problems(cr: Reservation, ng: NodeGroupConfig, az: str) -> list[str]:
    """The reservation is for the node group's instance type, AZ, platform, tenancy and capacity type."""
    out = []
    if cr.instance_type != ng.instance_type:
        out.append(f"is for {cr.instance_type}, not {ng.instance_type}: fix instanceType or the id")
    if cr.availability_zone != az:
        out.append(f"is in {cr.availability_zone}, the node group in {az}: set availabilityZone to it")
    # An ODCR holds only instances that match its platform and tenancy too (EC2 user guide,
    # capacity-reservations-using: instance type, platform, AZ, tenancy). EKS nodes run AL2023
    # (Linux/UNIX) and the launch template sets no tenancy (default).
    if cr.platform and cr.platform != LINUX:
        out.append(
            f"is for {cr.platform} instances, EKS nodes are {LINUX}: set capacity.reservationId to a {LINUX} one"
        )
    if cr.tenancy and cr.tenancy != "default":
        to = "set capacity.reservationId to a default-tenancy one"
        out.append(f"has {cr.tenancy} tenancy, the nodes launch with default tenancy: {to}")
    kind = "capacity-block" if cr.kind == "capacity-block" else "reservation"
    if kind != ng.capacity.type:
        out.append(f"is a {kind}, config says capacity.type {ng.capacity.type}")
    return out


def capacity_problems(
    account: Account, cr: Reservation, groups: Sequence[NodeGroupConfig], tags: Sequence[dict[str, str]]
) -> tuple[str, list[str]]:
    """(what the reservation offers, problems) for the desired size of the groups that target it,
    together, in the reservation's state. Their own instances are counted only when the free ones
    fall short."""
    need = sum(ng.desired_size for ng in groups)
    whose = "this node group's" if len(groups) == 1 else "these node groups'"
    needs = "the node group needs" if len(groups) == 1 else f"the {len(groups)} node groups on it need together"
    start = iso(cr.start)
    if cr.state in USABLE:
        if need <= cr.available:
            return f"active, {cr.available} free", []
        own = sum(account.instances_in(cr.id, t) for t in tags)
        if need <= cr.available + own:
            return f"active, {cr.available} free + {own} used by {whose} own instances", []
        return "active", [
            f"has {cr.available} free instances and {own} used by {whose} own instances,"
            f" {needs} {need}: lower desiredSize or use a larger reservation"
        ]
    if cr.state in NOT_NOW:
        said = NOT_NOW[cr.state].format(start=start)
        if need == 0:
            return f"{said}; the group stays at 0 until then", []
        if cr.start is not None and all(ng.capacity.starts_at == cr.start for ng in groups):
            # The group's scheduled action raises it at the block's start (infra.nodegroups); EKS
            # honours a non-zero desired size made before the block is active and launches once it
            # is (EKS user guide, capacity-blocks-mng).
            return f"{said}; the group scales up to {need} then (its startsAt action)", []
        problems = [f"{said}: keep desiredSize: 0 (and minSize: 0) until it is active, then raise it"]
        will_have = cr.upcoming if cr.upcoming is not None else cr.total
        if will_have < need:
            problems.append(f"will have {will_have} instances, {needs} {need}")
        return said, problems
    if cr.state in GONE:
        if need == 0:
            return f"is {cr.state}; the group stays at 0 (set a live reservationId before raising desiredSize)", []
        return cr.state, [f"is {cr.state}: its capacity is gone; set desiredSize: 0 or use another reservation"]
    return cr.state, [f"is in state {cr.state!r}, which preflight does not know: check it in the EC2 console"]


def end_problems(cr: Reservation, ng: NodeGroupConfig, now: dt.datetime, margin: dt.timedelta) -> list[str]:
    """A group that runs nodes needs its reservation beyond the margin (a group at 0 runs none).
    A Capacity Block's default margin is 0: its scale-down (`block_end_problems`) drains it."""
    if ng.desired_size == 0 or cr.state in GONE or cr.end is None:
        return []
    hours = f"{margin.total_seconds() / 3600:g} h"
    if margin and cr.end - now < margin:
        return [
            f"ends at {iso(cr.end)}, within {hours} (capacity.endMarginHours): extend it or scale the node group"
            " to 0 before then"
        ]
    if cr.end <= now:
        return [f"ended at {iso(cr.end)}: scale the node group to 0 or use another reservation"]
    return []


def placement_problems(cr: Reservation, ng: NodeGroupConfig) -> list[str]:
    """Capacity made in a cluster placement group is usable only in that group, and capacity made
    without one only outside any (EC2 API reference, CreateCapacityReservation.PlacementGroupArn)."""
    arn = cr.placement_group_arn
    actual = str(arn).rsplit("placement-group/", 1)[-1] if arn else None
    wanted = ng.capacity.placement_group_name
    if actual == wanted:
        return []
    if actual is None:
        return [f"was made without a placement group: remove capacity.placementGroupName ({wanted})"]
    return [f"was made in placement group {actual}: set capacity.placementGroupName: {actual} (config: {wanted})"]


def block_end_problems(cr: Reservation, ng: NodeGroupConfig) -> list[str]:
    """A Capacity Block group scales up at the block's start and to 0 before its end: `startsAt` and
    `endsAt` must be its StartDate and EndDate, and the scale-down must come after the block starts.
    (That it still lies ahead, config checks itself, config.checks.capacity.capacity_blocks_ahead, so
    the offline plan refuses it too: EC2 Auto Scaling refuses a scheduled action in the past.)"""
    c = ng.capacity
    when = c.scale_down_at
    if c.type != "capacity-block" or c.ends_at is None or when is None:
        return []
    out = []
    if cr.end is not None and cr.end != c.ends_at:
        out.append(f"ends at {iso(cr.end)}, config says endsAt {iso(c.ends_at)}: set capacity.endsAt to its end")
    if c.starts_at is not None and cr.start is not None and cr.start != c.starts_at:
        out.append(
            f"starts at {iso(cr.start)}, config says startsAt {iso(c.starts_at)}: set capacity.startsAt to its start"
            " (the group scales up then)"
        )
    if cr.start is not None and when <= cr.start:
        out.append(
            f"the scale-down at {iso(when)} comes before the block starts ({iso(cr.start)}): the group would never"
            " run nodes; lower capacity.scaleDownMinutesBeforeEnd"
        )
    return out
