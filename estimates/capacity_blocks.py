"""When a Capacity Block group must stop: a margin before the block's end that leaves the run's
last checkpoint time to be written before EC2 shuts the instances down."""

from __future__ import annotations

import math

from facts.capacity_blocks import EC2_SHUTDOWN_MINUTES_BEFORE_END, EKS_SCALE_DOWN_MINUTES_BEFORE_END


def scale_down_minutes(checkpoint_write_seconds: float | None) -> int:
    """Minutes before the block's end at which the group must be drained: EC2's shutdown (30 min
    before the end) plus the time one checkpoint of the group's runs takes to write, so a checkpoint
    started as the drain begins still lands; never later than EKS's own action (40 min), which
    drains the group anyway. Unknown write time: EKS's action."""
    write = math.ceil((checkpoint_write_seconds or 0) / 60)
    return max(EKS_SCALE_DOWN_MINUTES_BEFORE_END, EC2_SHUTDOWN_MINUTES_BEFORE_END + write)


def own_scale_down(minutes: int) -> bool:
    """Whether the project needs a scale-down action of its own: only one earlier than EKS's
    (at 40 minutes or later, EKS's own action drains the group first; a second one is a duplicate)."""
    return minutes > EKS_SCALE_DOWN_MINUTES_BEFORE_END
