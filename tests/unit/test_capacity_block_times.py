"""A Capacity Block group's two scheduled moments, as the EKS user guide (capacity-blocks-mng,
awsdocs/amazon-eks-user-guide latest/ug/ml/capacity-blocks-mng.adoc at 0a7189e9) describes them:
a scale-up "that aligns to the Capacity Block reservation start time", and the drain before the end,
where EC2 starts shutting instances down 30 minutes before it and EKS schedules its own scale-down
at 40. The project adds a scale-down only when the runs' last checkpoint needs longer than EKS's
margin leaves (one action, never two), and preflight holds `startsAt` to the block's StartDate."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import config
from config.capacity import CapacityConfig
from estimates import capacity_blocks
from facts import capacity_blocks as facts
from tests import upstream
from tests.unit.preflight_sources import CR_ID, NOW, boto_account, reservation
from tests.unit.test_preflight_margins import block_group, cfg_of
from tools.aws import reservations

END = dt.datetime(2027, 3, 1, 11, 30, tzinfo=dt.UTC)


def block(**over: Any) -> CapacityConfig:
    return CapacityConfig.model_validate(
        {"type": "capacity-block", "reservationId": CR_ID, "endsAt": END.isoformat(), **over}
    )


def test_the_margins_are_the_eks_guide_s() -> None:
    recorded = upstream.facts("aws-eks-capacity-blocks-2026-11")
    assert recorded["eks_scale_down_minutes_before_end"] == facts.EKS_SCALE_DOWN_MINUTES_BEFORE_END
    assert recorded["ec2_shutdown_minutes_before_end"] == facts.EC2_SHUTDOWN_MINUTES_BEFORE_END
    assert recorded["eks_scale_down_action"] == facts.EKS_SCALE_DOWN_ACTION


@pytest.mark.parametrize(
    ("write_seconds", "given", "minutes", "own"),
    [
        (None, None, 40, False),  # nothing known: EKS's action is the one
        (300, None, 40, False),  # 5 min to write: EKS's 40 leaves 10 before EC2's shutdown
        (1200, None, 50, True),  # 20 min to write: drain at 50, ten minutes before EKS's
        (1200, 90, 90, True),  # scaleDownMinutesBeforeEnd wins when given
        (None, 35, 35, False),  # later than EKS's: EKS's own comes first, no duplicate
    ],
)
def test_one_scale_down_with_room_for_the_last_checkpoint(
    write_seconds: float | None, given: int | None, minutes: int, own: bool
) -> None:
    c = block(**({"scaleDownMinutesBeforeEnd": given} if given else {}))
    assert c.scale_down_minutes(write_seconds) == minutes
    expected = END - dt.timedelta(minutes=minutes) if own else None
    assert c.own_scale_down_at(write_seconds) == expected
    assert capacity_blocks.own_scale_down(minutes) is own


def test_starts_at_is_for_blocks_and_before_the_end() -> None:
    with pytest.raises(ValueError, match="startsAt"):
        block(startsAt=END.isoformat())
    with pytest.raises(ValueError, match="startsAt"):
        CapacityConfig.model_validate({"type": "on-demand", "startsAt": END.isoformat()})


def _lines(cr: dict[str, Any], cfg: config.StackConfig) -> list[str]:
    account, _ = boto_account(ec2=[("describe_capacity_reservations", {"CapacityReservations": [cr]})])
    return [f.line() for f in reservations.check_reservations(account, cfg, NOW) if not f.ok]


def test_preflight_holds_starts_at_to_the_block_s_start_date() -> None:
    start, end = NOW + dt.timedelta(days=2), NOW + dt.timedelta(days=9)
    cr = reservation(ReservationType="capacity-block", State="scheduled", StartDate=start, EndDate=end,
                     AvailableInstanceCount=0)  # fmt: skip
    wrong = cfg_of(block_group(end, startsAt=(start + dt.timedelta(days=1)).isoformat()))
    (line,) = [x for x in _lines(cr, wrong) if "startsAt" in x]
    assert "set capacity.startsAt to its start" in line


def test_a_scheduled_block_with_its_scale_up_passes_at_desired_size() -> None:
    """Before its start a block has 0 free; a group that scales up at the block's start may keep its
    desired size (EKS honours it once the block is active): preflight passes it and says when."""
    start, end = NOW + dt.timedelta(days=2), NOW + dt.timedelta(days=9)
    cr = reservation(ReservationType="capacity-block", State="scheduled", StartDate=start, EndDate=end,
                     AvailableInstanceCount=0)  # fmt: skip
    assert _lines(cr, cfg_of(block_group(end, startsAt=start.isoformat()))) == []
    (line,) = _lines(cr, cfg_of(block_group(end)))  # no scale-up action: keep 0 until it is active
    assert "keep desiredSize: 0" in line
