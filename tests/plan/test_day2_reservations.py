"""Day 2 on what a group's nodes run on, judged by the plan and by preflight inside `pulumi up`.

- Another ODCR: the launch template's capacity reservation target changes, EC2 makes a new template
  version and EKS replaces every node of the group (test_day2_node_rolls.py holds the model), and
  preflight, which `pulumi up` runs before declaring anything (__main__.py), reads the new ODCR
  through the provider (getCapacityBlockReservation: DescribeCapacityReservations by id, pulumi-aws
  7.51.1, tests/upstream/pulumi-aws-invokes-7.51.1.yaml). An instance uses a reservation only when its
  type, platform, AZ and tenancy match (EC2 user guide, capacity-reservations-using): a Windows or a
  dedicated ODCR would leave the new nodes without capacity, so the gate stops the update.
- On-demand to Spot: EKS's capacityType cannot change in place (a new node group), and a new account's
  Spot quota is 0 vCPUs for Trn (EC2 user guide, using-spot-limits; L-6B0D517C, recorded in
  tests/upstream/aws-ec2-spot-quotas-2026-12.yaml): the gate stops the update with the request to make.
"""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import config
from facts.quotas import NEW_ACCOUNT
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2, day2_nodes
from tests.unit.preflight_sources import TOKENS, reservation, reservation_answer

STACK = "trn1-llama2"
NS = "llm-training-eks:"
NEXT_ODCR = "cr-0fedcba9876543210"
SPOT_TRN = "L-6B0D517C"


def edited(**group: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values[NS + "nodeGroups"][0].update(group)
    return values


def next_odcr(**over: Any) -> dict[str, Any]:
    """The ODCR the edit names, as DescribeCapacityReservations returns it today: 4 trn1 in us-west-2d."""
    now = dt.datetime.now(dt.UTC)  # preflight judges reservations at the real clock
    start, end = now - dt.timedelta(days=1), now + dt.timedelta(days=60)
    return reservation(CapacityReservationId=NEXT_ODCR, StartDate=start, EndDate=end, **over)


def test_another_odcr_rolls_the_group_and_preflight_reads_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    values = edited(capacity={"type": "reservation", "reservationId": NEXT_ODCR})
    before = stack_plan(STACK)
    update = day2.diff(before, run_plan(values, STACK, deployed=before))
    assert update.blocked == [] and not update.of("replace") and not update.of("delete")
    (roll,) = day2_nodes.rolls(update).values()
    assert roll.changed == ("launchTemplate.version",)
    assert update.named("ng-trn1-lt").op == "update"
    gate = day2.preflight_in_up(
        config.parse_stack_values(values), {TOKENS["reservation"]: reservation_answer(next_odcr())}, {}, monkeypatch
    )
    assert not gate.refused and gate.errors == [], gate
    code, out, _ = day2.make_diff(tmp_path, STACK, stack_values(STACK), values)
    assert code == 3, out
    assert "! node group trn1: its 4 node(s) roll (launchTemplate.version); on them: llama2 (training)" in out


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"InstancePlatform": "Windows"}, "is for Windows instances, EKS nodes are Linux/UNIX"),
        ({"Tenancy": "dedicated"}, "has dedicated tenancy, the nodes launch with default tenancy"),
    ],
    ids=["windows", "dedicated"],
)
def test_an_odcr_the_nodes_cannot_use_stops_the_update(
    over: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate raises before any resource is declared: nothing of the edit is planned by the engine."""
    values = edited(capacity={"type": "reservation", "reservationId": NEXT_ODCR})
    answer = {TOKENS["reservation"]: reservation_answer(next_odcr(**over))}
    gate = day2.preflight_in_up(config.parse_stack_values(values), answer, {}, monkeypatch)
    assert gate.refused
    (line,) = gate.errors
    assert line.startswith(f"FAIL reservation nodeGroups[trn1] {NEXT_ODCR}: ") and says in line, line
    assert "set capacity.reservationId to a" in line, line  # the key to change


def test_on_demand_to_spot_on_a_new_account_is_refused_with_the_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    values = edited(capacity={"type": "spot"})
    before = stack_plan(STACK)
    update = day2.diff(before, run_plan(values, STACK, deployed=before))
    # EKS cannot change a group's capacity type: the provider replaces the node group (create first).
    (group,) = [s for s in update.of("replace").values() if s.type == day2_nodes.NODE_GROUP]
    assert "capacityType" in group.changed
    spot = {code: float(NEW_ACCOUNT[code]) for code in ("L-34B43A08", "L-7212CCBC", SPOT_TRN)}
    gate = day2.preflight_in_up(config.parse_stack_values(values), {}, spot, monkeypatch)
    assert gate.refused
    (line,) = gate.errors
    # 4 x trn1.32xlarge = 512 vCPUs at desired size; the request asks for maxSize's.
    assert line.startswith(f"FAIL quota {SPOT_TRN} (All Trn Spot Instance Requests): 0 vCPUs < 512"), line
    assert f"--quota-code {SPOT_TRN} --desired-value " in line
    code, out, _ = day2.make_diff(tmp_path, STACK, stack_values(STACK), values)
    assert code == 3, out
    assert "! node group trn1: its 4 node(s) roll (capacityType); on them: llama2 (training)" in out
    assert "+- NodeGroup ng-trn1-ng replace (create first): capacityType" in out
