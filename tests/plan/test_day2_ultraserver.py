"""Day 2 on the UltraServer group of the trn2 example (4 x trn2u.48xlarge, one u-trn2x64 block).

EC2 sells trn2u.48xlarge only as UltraServer Capacity Blocks (EC2 user guide, ec2-capacity-blocks
and cb-group, read 2026-12-05): an edit of the group to on-demand, Spot or an ODCR would replace the
group with one whose nodes never come, so it is refused (exit 2 naming the key) by the plan and by
`make diff`, and nothing of it is planned. The next UltraServer block is what the EKS user guide does
for any block (capacity-blocks-mng, awsdocs/amazon-eks-user-guide at 0a7189e9): the launch template
targets the new reservation (a new version, so EKS replaces the group's nodes, none left by then:
the last block's end took the group to 0) and a scheduled action raises the group at its start.
"""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import config
from tests.conftest import plan_exit, run_plan, stack_plan, stack_values
from tests.plan import day2, day2_nodes
from tests.unit.preflight_sources import TOKENS, reservation, reservation_answer

STACK = "trn2"
NS = "llm-training-eks:"
KEY = "nodeGroups[0].capacity.type: trn2u.48xlarge is sold only as u-trn2x64 UltraServer Capacity Blocks"
NEXT = {"reservationId": "cr-0f1e2d3c4b5a6979a", "startsAt": "2027-04-05T11:30:00Z", "endsAt": "2027-04-12T11:30:00Z"}


def with_capacity(capacity: dict[str, Any]) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values[NS + "nodeGroups"][0]["capacity"] = capacity
    return values


@pytest.mark.parametrize(
    "capacity",
    [{"type": "on-demand"}, {"type": "spot"}, {"type": "reservation", "reservationId": "cr-0123456789abcdef0"}],
    ids=["on-demand", "spot", "odcr"],
)
def test_the_block_group_edited_off_blocks_is_refused(capacity: dict[str, Any], tmp_path: Path) -> None:
    values = with_capacity(capacity)
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and KEY in err, err
    code, out, err = day2.make_diff(tmp_path, STACK, stack_values(STACK), values)
    assert (code, out) == (2, ""), out  # nothing of the edit planned
    assert KEY in err, err


def test_the_next_ultraserver_block_moves_the_group_to_it(tmp_path: Path) -> None:
    before = stack_plan(STACK)
    group = stack_values(STACK)[NS + "nodeGroups"][0]
    after = run_plan(with_capacity({**group["capacity"], **NEXT}), STACK, deployed=before)
    update = day2.diff(before, after)
    assert update.blocked == [] and not update.of("replace") and not update.of("delete")
    assert update.named("ng-trn2u-lt").op == "update"
    (roll,) = day2_nodes.rolls(update).values()
    assert roll.changed == ("launchTemplate.version",)
    assert day2_nodes.runs_on(after, "trn2u") == sorted(stack_values(STACK)[NS + "workloads"])
    # trn2 gave no startsAt: the first block's action is created (the block starts after the clock).
    assert update.named("ng-trn2u-capacity-block-start").op == "create"
    (action,) = [r for r in after["resources"] if r["name"] == "ng-trn2u-capacity-block-start"]
    assert (action["inputs"]["startTime"], action["inputs"]["desiredCapacity"]) == (NEXT["startsAt"], 4)
    # make diff names the roll, the run on the nodes and the way through for a block group with nodes.
    code, out, _ = day2.make_diff(tmp_path, STACK, stack_values(STACK), with_capacity({**group["capacity"], **NEXT}))
    assert code == 3
    (line,) = [x for x in out.splitlines() if "! node group trn2u:" in x]
    assert "its 4 node(s) roll (launchTemplate.version); on them: titan (training)" in line
    assert "make this edit after the block ends, or deploy desiredSize: 0 and minSize: 0 first" in line
    assert "+ Schedule ng-trn2u-capacity-block-start create" in out
    assert f"- node group trn2u: raised to 4 node(s) at {NEXT['startsAt']}, the block's start" in out


def test_preflight_in_up_passes_the_next_block_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bought ahead, the next block is `scheduled` with 0 free instances (EC2 API reference,
    CapacityReservation): preflight holds startsAt and endsAt to its StartDate and EndDate and passes
    the group, which its start action raises then (with the deployed group at 0, the last block's end)."""
    values = with_capacity({**stack_values(STACK)[NS + "nodeGroups"][0]["capacity"], **NEXT})
    cfg = config.parse_stack_values(values)
    block = reservation(
        CapacityReservationId=NEXT["reservationId"],
        InstanceType="trn2u.48xlarge",
        AvailabilityZone="us-east-2c",
        ReservationType="capacity-block",
        State="scheduled",
        TotalInstanceCount=4,
        AvailableInstanceCount=0,
        StartDate=dt.datetime.fromisoformat(NEXT["startsAt"].replace("Z", "+00:00")),
        EndDate=dt.datetime.fromisoformat(NEXT["endsAt"].replace("Z", "+00:00")),
    )
    gate = day2.preflight_in_up(cfg, {TOKENS["reservation"]: reservation_answer(block)}, {}, monkeypatch)
    assert not gate.refused and gate.errors == [], gate
    # The same block named with another start: refused, naming the date EC2 reports.
    other = with_capacity(
        {**stack_values(STACK)[NS + "nodeGroups"][0]["capacity"], **NEXT, "startsAt": "2027-04-06T11:30:00Z"}
    )
    gate = day2.preflight_in_up(
        config.parse_stack_values(other), {TOKENS["reservation"]: reservation_answer(block)}, {}, monkeypatch
    )
    assert gate.refused
    said = f"FAIL reservation nodeGroups[trn2u] {NEXT['reservationId']}: starts at 2027-04-05 11:30 UTC, config says"
    assert any(e.startswith(said) and "set capacity.startsAt to its start" in e for e in gate.errors), gate
