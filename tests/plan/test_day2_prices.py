"""Day 2 on what a group's nodes cost: the p5-capacity-block group (2 x p5.48xlarge) taken from
on-demand to its Capacity Block and on to an ODCR. Each capacity kind is priced as AWS bills it
(facts/prices.py: the on-demand table of 2026-07-01; Capacity Block rates of 2026-02-01,
tests/upstream/aws-ec2-capacity-block-prices-2026-02.yaml): on-demand nodes at the on-demand rate for
the nodes running; a Capacity Block at its own rate for every instance it holds, prepaid for its
whole length whatever desiredSize says; an ODCR at the on-demand rate for every instance it holds,
used or not (EC2 user guide, capacity-reservations-pricing-billing). EKS cannot change a group's
capacityType in place: each step replaces the node group. `make diff` says what each step costs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from facts import prices
from tests.conftest import run_plan, stack_values
from tests.plan import day2, day2_nodes
from tools import diff as diff_cli

STACK = "p5-capacity-block"
NS = "llm-training-eks:"
TYPE = "p5.48xlarge"
BLOCK = stack_values(STACK)[NS + "nodeGroups"][0]["capacity"]
KINDS: dict[str, dict[str, Any]] = {
    "on-demand": {"desiredSize": 1, "maxSize": 2, "capacity": {"type": "on-demand"}},
    "capacity-block": {"desiredSize": 1, "maxSize": 2, "capacity": BLOCK},
    "odcr": {
        "desiredSize": 1,
        "maxSize": 2,
        "capacity": {"type": "reservation", "reservationId": "cr-0123456789abcdef0"},
    },
}
BLOCK_HOURS = 168  # the example's block: startsAt 2027-02-22T11:30Z to endsAt 2027-03-01T11:30Z
# What AWS bills per kind, from the price table: (instances billed, rate, prepaid total or None).
BILLED = {
    "on-demand": (1, prices.EC2_ON_DEMAND_HOURLY[TYPE], None),
    "capacity-block": (2, prices.CAPACITY_BLOCK_HOURLY[TYPE], 2 * prices.CAPACITY_BLOCK_HOURLY[TYPE] * BLOCK_HOURS),
    "odcr": (2, prices.EC2_ON_DEMAND_HOURLY[TYPE], None),
}


def values(kind: str) -> dict[str, Any]:
    v = copy.deepcopy(stack_values(STACK))
    v[NS + "nodeGroups"][0].update(copy.deepcopy(KINDS[kind]))
    return v


def node_item(plan: dict[str, Any]) -> dict[str, Any]:
    (item,) = [i for i in plan["cost"]["items"] if i["name"] == "node-group/p5"]
    return item


@pytest.mark.parametrize(("was", "now"), [("on-demand", "capacity-block"), ("capacity-block", "odcr")])
def test_each_capacity_kind_is_priced_as_aws_bills_it(was: str, now: str, tmp_path: Path) -> None:
    before = run_plan(values(was), STACK)
    after = run_plan(values(now), STACK, deployed=before)
    update = day2.diff(before, after)
    (group,) = [s for s in update.of("replace").values() if s.type == day2_nodes.NODE_GROUP]
    assert "capacityType" in group.changed and update.blocked == []
    for kind, plan in ((was, before), (now, after)):
        count, rate, prepaid = BILLED[kind]
        item = node_item(plan)
        assert (item["quantity"], item["unitPriceHourly"]) == (count, rate), (kind, item)
        assert item["hourly"] == pytest.approx(count * rate)
        assert item.get("prepaidTotal") == (None if prepaid is None else pytest.approx(prepaid, abs=0.01)), item
    # make diff says the bill before and after.
    code, out, err = day2.make_diff(tmp_path, STACK, values(was), values(now))
    assert code in (0, 3), err
    (line,) = [x for x in out.splitlines() if x.strip().startswith("$ node group p5:")]
    assert line.strip() == "$ node group p5: " + " -> ".join(diff_cli._priced(node_item(p)) for p in (before, after))
    if "capacity-block" in (was, now):
        assert "prepaid $10,571.90 for 168 h" in line
