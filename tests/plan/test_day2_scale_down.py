"""Day 2 on a Capacity Block group's scale-down: EC2 starts shutting a block's instances down 30
minutes before its end and EKS scales the group to 0 at 40 (EKS user guide capacity-blocks-mng,
awsdocs/amazon-eks-user-guide at 0a7189e9; tests/upstream/aws-eks-capacity-blocks-2026-11.yaml). The
stack adds a scale-down of its own only when 30 minutes plus the longest checkpoint write of the
group's runs exceeds those 40 (estimates/capacity_blocks.py). An edit that slows the checkpoint
(here the file system's throughput halved: trn2-torchtitan's Qwen3-8B checkpoint takes 335 s at
250 MB/s/TiB, 671 s at 125) creates that one scheduled action and rolls no node (an Auto Scaling
scheduled action is no input of the node group or its launch template); the reverse edit deletes it
and touches no node either.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
from pathlib import Path
from typing import Any

import config
from config.checks.runs import checkpoint_write_seconds
from facts.capacity_blocks import EC2_SHUTDOWN_MINUTES_BEFORE_END, EKS_SCALE_DOWN_MINUTES_BEFORE_END
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2, day2_nodes

STACK = "trn2-torchtitan"
ACTION = "ng-trn2-capacity-block-end"
SCHEDULE = "aws:autoscaling/schedule:Schedule"


def slower_storage() -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values["llm-training-eks:storage"]["throughputPerTib"] = 125
    return values


def cloud(update: day2.Update) -> dict[str, str]:
    return {
        u.rsplit("::", 1)[1]: s.op for u, s in update.touched().items() if not s.type.startswith("llm-training-eks:")
    }


def test_a_slower_checkpoint_adds_the_scale_down_action_only(tmp_path: Path) -> None:
    before = stack_plan(STACK)
    values = slower_storage()
    cfg = config.parse_stack_values(values)
    (group,) = [g for g in cfg.node_groups if g.capacity.type == "capacity-block"]
    write = checkpoint_write_seconds(cfg.workloads, group.name, cfg.storage)
    assert (
        write is not None
        and EC2_SHUTDOWN_MINUTES_BEFORE_END + math.ceil(write / 60) > EKS_SCALE_DOWN_MINUTES_BEFORE_END
    )
    after = run_plan(values, STACK, deployed=before)
    update = day2.diff(before, after)
    # The action and the file system's throughput (an update in place of the FSx file system).
    assert cloud(update) == {ACTION: "create", "storage-lustre": "update"}, cloud(update)
    assert day2_nodes.rolls(update) == {} and update.blocked == []
    (action,) = [r["inputs"] for r in after["resources"] if r["type"] == SCHEDULE and r["name"] == ACTION]
    ends = dt.datetime.fromisoformat(str(group.capacity.ends_at))
    at = ends - dt.timedelta(minutes=EC2_SHUTDOWN_MINUTES_BEFORE_END + math.ceil(write / 60))
    assert (action["startTime"], action["desiredCapacity"], action["minSize"]) == (
        at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        0,
        0,
    )
    # make diff says when the group stops and why, and that nothing running is disrupted.
    code, out, _ = day2.make_diff(tmp_path, STACK, stack_values(STACK), values)
    assert code == 0, out
    assert f"- node group trn2: scaled to 0 at {action['startTime']}, ahead of EKS's own scale-down (40 min" in out


def test_the_reverse_edit_deletes_the_action_only(tmp_path: Path) -> None:
    slow = run_plan(slower_storage(), STACK)
    back = run_plan(copy.deepcopy(stack_values(STACK)), STACK, deployed=slow)
    update = day2.diff(slow, back)
    assert cloud(update) == {ACTION: "delete", "storage-lustre": "update"}, cloud(update)
    assert day2_nodes.rolls(update) == {} and update.blocked == []
    code, out, _ = day2.make_diff(tmp_path, STACK, slower_storage(), copy.deepcopy(stack_values(STACK)))
    assert code == 0, out
    assert "- node group trn2: its own scale-down goes; EKS's own scale-down (40 min before the block ends)" in out
