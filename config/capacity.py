"""Where a node group's instances come from (`nodeGroups[].capacity`): On-Demand, a reservation or
Capacity Block (by id, or a resource group of them), Spot; a Capacity Block's end and scale-down."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config.aws import named_shape, problems
from config.base import KeyProblem, Model, Refusal, matches
from estimates.capacity_blocks import own_scale_down, scale_down_minutes
from facts.limits import CAPACITY_BLOCK_MAX_DAYS

# ODCR and Capacity Block ids: `cr-` and 17 hex digits (older ids have 8).
_RESERVATION_RE = re.compile(r"cr-(?:[0-9a-f]{8}|[0-9a-f]{17})", re.ASCII)
# Placement group names: up to 255 ASCII characters (EC2 API reference, CreatePlacementGroup).
_PLACEMENT_GROUP_RE = re.compile(r"[\x20-\x7e]{1,255}", re.ASCII)
# EKS and EC2 Auto Scaling guides on Capacity Blocks: scale to zero more than 30 minutes before
# the block ends, so the nodes drain before EC2 reclaims the instances.
MIN_SCALE_DOWN_MINUTES = 30
# How long before a reservation ends preflight stops a group that runs nodes, per capacity kind
# (`capacity.endMarginHours` overrides it). The instances of an ODCR that expires keep running on
# On-Demand capacity, at its rates (EC2 user guide, cr-groups-lifecycle): a day's notice to extend
# it or scale down.
# A Capacity Block ends its instances itself, and the group's scheduled scale-down (checked
# separately: it must still lie ahead) drains them first; EC2 sells blocks in 1-day increments
# ending 11:30 UTC (EC2 user guide, capacity-blocks-purchase), so a margin of a day or more would
# refuse a 1-day block all its life and every block's last day.
DEFAULT_END_MARGIN_HOURS = {"reservation": 24, "capacity-block": 0}
CAPACITY_BLOCK_DAY_HOURS = 24
# A scale-down earlier than the longest block's length before its end would come before it starts.
MAX_SCALE_DOWN_MINUTES = CAPACITY_BLOCK_MAX_DAYS * 24 * 60


class CapacityConfig(Model):
    """Where a node group's instances come from."""

    type: Literal["on-demand", "reservation", "capacity-block", "spot"] = Field(
        "on-demand", description="on-demand | reservation (ODCR) | capacity-block (Capacity Block for ML) | spot."
    )
    reservation_id: str | None = Field(
        None,
        description="cr-... id; reservation and capacity-block take it or reservationGroupArn, the other types"
        " neither.",
    )
    reservation_group_arn: str | None = Field(
        None,
        description="ARN of a Capacity Reservation resource group to launch into instead of one reservation:"
        " UltraServer Capacity Blocks (trn2u) are targeted through one (EC2 user guide, cb-group).",
    )
    placement_group_name: str | None = Field(
        None,
        description="An existing cluster placement group to launch into, instead of a new one. Reservations and"
        " Capacity Blocks: the group they were made in (their PlacementGroupArn; capacity made in a placement group"
        " is usable only there), or leave out for those made without one.",
    )
    starts_at: dt.datetime | None = Field(
        None,
        description="Start of the Capacity Block (its StartDate, ISO 8601 with a time zone): the group scales up to"
        " desiredSize then, through a scheduled action (EKS user guide, capacity-blocks-mng), so the next block gets"
        " its nodes at its start even though desiredSize did not change.",
        strict=False,
        json_schema_extra={
            "x-default": "none (no scale-up action: set it for every block after the first)",
            "x-type": "string",
        },
    )
    ends_at: dt.datetime | None = Field(
        None,
        description="End of the Capacity Block (its EndDate, ISO 8601 with a time zone, e.g."
        " 2027-03-01T11:30:00Z): the group scales to 0 before it.",
        strict=False,
        json_schema_extra={
            "x-default": "(required for capacity-block)",
            "x-type": "string",
        },  # ISO 8601 text, as a stack file and the engine both hand it over
    )
    scale_down_minutes_before_end: int | None = Field(
        None,
        ge=MIN_SCALE_DOWN_MINUTES,
        description="Capacity Blocks: minutes before endsAt at which the group scales to 0 (at least 30; at most"
        " 262080, the longest block, 182 days). Default: EC2's shutdown (30) plus the write time of the longest"
        " checkpoint of the runs on the group, at least 40; at 40 or less EKS's own scale-down (40 minutes before"
        " the end) is the only action.",
        json_schema_extra={"x-default": "30 + the last checkpoint's write time, at least 40"},
    )
    end_margin_hours: int | None = Field(
        None,
        ge=0,
        le=8760,
        description="Preflight refuses running nodes on a reservation that ends within this many hours; default"
        " per type: reservation 24, capacity-block 0 (the block's own scale-down, which must lie ahead, drains it).",
        json_schema_extra={"x-default": "`24` for reservation, `0` for capacity-block"},
    )

    @field_validator("scale_down_minutes_before_end")
    @classmethod
    def _lead(cls, v: int | None) -> int | None:
        if v is not None and v > MAX_SCALE_DOWN_MINUTES:
            raise Refusal(
                f"{v} minutes is longer than the longest Capacity Block ({CAPACITY_BLOCK_MAX_DAYS} days, EC2 user"
                f" guide); the scale-down would come before the block starts: use at most {MAX_SCALE_DOWN_MINUTES}",
                "invalid",
            )
        return v

    @field_validator("reservation_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not matches(_RESERVATION_RE, v):
            raise Refusal(
                f"{v!r} is not a capacity reservation id (cr- and 17 hex digits, e.g. cr-0123456789abcdef0)", "invalid"
            )
        return v

    @field_validator("reservation_group_arn")
    @classmethod
    def _group(cls, v: str | None) -> str | None:
        bad = problems(v, named_shape("resource-groups", "GroupArn")) if v is not None else []
        if bad:
            raise Refusal(
                f"{'; '.join(bad)} (a resource group ARN: arn:aws:resource-groups:<region>:<account>:group/<name>)",
                "invalid",
            )
        return v

    @field_validator("placement_group_name")
    @classmethod
    def _pg(cls, v: str | None) -> str | None:
        if v is not None and not matches(_PLACEMENT_GROUP_RE, v):
            raise Refusal(f"{v!r} is not a placement group name (1-255 ASCII characters)", "invalid")
        return v

    @field_validator("ends_at", "starts_at")
    @classmethod
    def _ends_at(cls, v: dt.datetime | None) -> dt.datetime | None:
        if v is not None and v.tzinfo is None:
            raise Refusal(f"{v.isoformat()} has no time zone; give it in UTC, e.g. 2027-03-01T11:30:00Z", "invalid")
        return v.astimezone(dt.UTC) if v is not None else None

    @model_validator(mode="after")
    def _needs_id(self) -> CapacityConfig:
        given = (("reservationId", self.reservation_id), ("reservationGroupArn", self.reservation_group_arn))
        targets = [k for k, v in given if v]
        if self.type in ("reservation", "capacity-block") and not targets:
            raise KeyProblem(
                "reservationId",
                f"required when type is {self.type} (the cr-... id of the reservation), or reservationGroupArn for a"
                " resource group of them (UltraServer Capacity Blocks)",
                "required",
            )
        if len(targets) > 1:
            raise KeyProblem("reservationGroupArn", "give reservationId or reservationGroupArn, not both", "conflict")
        if self.type in ("on-demand", "spot") and targets:
            raise KeyProblem(targets[0], f"only for reservation and capacity-block, not {self.type}", "conflict")
        if self.type == "capacity-block" and self.ends_at is None:
            raise KeyProblem("endsAt", "required for capacity-block: the block's end time (EndDate), so the group"
                             " scales to 0 before EC2 reclaims the instances", "required")  # fmt: skip
        if self.type != "capacity-block" and self.ends_at is not None:
            raise KeyProblem("endsAt", f"only for capacity-block, not {self.type}", "conflict")
        if self.type != "capacity-block" and self.starts_at is not None:
            raise KeyProblem("startsAt", f"only for capacity-block, not {self.type}", "conflict")
        if self.starts_at is not None and self.ends_at is not None and self.starts_at >= self.ends_at:
            raise KeyProblem("startsAt", f"{self.starts_at.isoformat()} is not before endsAt; give the block's"
                             " StartDate", "invalid")  # fmt: skip
        if self.end_margin_hours is not None and not self.targets_reservation:
            raise KeyProblem("endMarginHours", f"only for reservation and capacity-block, not {self.type}", "conflict")
        if self.type == "capacity-block" and (self.end_margin_hours or 0) >= CAPACITY_BLOCK_DAY_HOURS:
            raise KeyProblem(
                "endMarginHours",
                f"{self.end_margin_hours} h would refuse every block's last day and a 1-day block all its life (EC2"
                f" sells Capacity Blocks in 1-day increments); give less than {CAPACITY_BLOCK_DAY_HOURS}, or leave it"
                " out: the scale-down scaleDownMinutesBeforeEnd before endsAt drains the block",
                "invalid",
            )
        earliest = dt.datetime.min.replace(tzinfo=dt.UTC) + dt.timedelta(minutes=self.scale_down_minutes())
        if self.ends_at is not None and self.ends_at < earliest:
            raise KeyProblem("endsAt", f"{self.ends_at.isoformat()} is long past; give the block's EndDate", "invalid")
        return self

    @property
    def end_margin(self) -> dt.timedelta:
        """How long before the reservation ends preflight stops a group that runs nodes."""
        hours = self.end_margin_hours
        return dt.timedelta(hours=DEFAULT_END_MARGIN_HOURS.get(self.type, 0) if hours is None else hours)

    def scale_down_minutes(self, checkpoint_write_seconds: float | None = None) -> int:
        """Minutes before endsAt at which the group is drained: scaleDownMinutesBeforeEnd, or the
        margin the runs' last checkpoint needs (estimates.capacity_blocks)."""
        given = self.scale_down_minutes_before_end
        return given if given is not None else scale_down_minutes(checkpoint_write_seconds)

    @property
    def scale_down_at(self) -> dt.datetime | None:
        """When a Capacity Block group scales to 0 at the latest (unknown checkpoints: EKS's own action)."""
        if self.ends_at is None:
            return None
        return self.ends_at - dt.timedelta(minutes=self.scale_down_minutes())

    def own_scale_down_at(self, checkpoint_write_seconds: float | None = None) -> dt.datetime | None:
        """When the project's own scale-down action runs: None when EKS's own (40 minutes before the
        end) comes first, so the group has one action, never two."""
        minutes = self.scale_down_minutes(checkpoint_write_seconds)
        if self.ends_at is None or not own_scale_down(minutes):
            return None
        return self.ends_at - dt.timedelta(minutes=minutes)

    @property
    def targets_reservation(self) -> bool:
        return self.type in ("reservation", "capacity-block")
