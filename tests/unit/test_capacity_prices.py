"""Reserved capacity priced as AWS bills it: a Capacity Block at the block rate (AWS's Capacity Block
pricing page, as tests/upstream/aws-ec2-capacity-block-prices-2026-02.yaml records it), for every
instance of the block (maxSize) whatever desiredSize says, and prepaid for its whole length, which the
plan states; an ODCR at the on-demand rate for the instances it holds, used or not."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import config
from config import costs
from estimates import cost
from facts import prices
from tests import upstream
from tests.conftest import stack_plan, stack_values

RECORDED = upstream.facts("aws-ec2-capacity-block-prices-2026-02")


def test_block_rates_are_the_recorded_ones() -> None:
    assert RECORDED["hourly"] == prices.CAPACITY_BLOCK_HOURLY
    assert set(RECORDED["not_listed"]) <= set(prices.PROXIES)


def item(stack: str, group: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
    cfg = config.parse_stack_values(values or stack_values(stack))
    (found,) = [i.as_dict() for i in costs.items_from_config(cfg, cost.Prices()) if i.name == f"node-group/{group}"]
    return found


def test_a_p6_b300_block_is_priced_at_the_block_rate_not_on_demand() -> None:
    """The issue's figure: 2 x p6-b300 showed $284.83/h (on-demand); the block rate is $93.60 each."""
    got = item("p6-b300", "b300")
    n = config.parse_stack_values(stack_values("p6-b300")).node_groups[0].max
    assert got["hourly"] == pytest.approx(n * RECORDED["hourly"]["p6-b300.48xlarge"])
    assert got["hourly"] < n * prices.EC2_ON_DEMAND_HOURLY["p6-b300.48xlarge"]


def test_a_block_is_paid_for_its_whole_length_whatever_desired_size_says() -> None:
    values = copy.deepcopy(stack_values("p5-capacity-block"))
    values["llm-training-eks:nodeGroups"][0].update(desiredSize=0, maxSize=2)
    got = item("p5-capacity-block", "p5", values)
    hours = 7 * 24  # the example's startsAt to endsAt
    assert got["quantity"] == 2 and got["prepaidHours"] == hours
    assert got["prepaidTotal"] == pytest.approx(2 * RECORDED["hourly"]["p5.48xlarge"] * hours, abs=0.01)


def test_the_plan_says_what_the_block_costs_in_total() -> None:
    (planned,) = [i for i in stack_plan("p5-capacity-block")["cost"]["items"] if i["name"] == "node-group/p5"]
    assert planned["prepaidTotal"] == item("p5-capacity-block", "p5")["prepaidTotal"]


def test_an_odcr_is_billed_for_the_instances_it_holds_used_or_not() -> None:
    values = copy.deepcopy(stack_values("p5en"))
    values["llm-training-eks:nodeGroups"][0].update(desiredSize=0, minSize=0, maxSize=2)
    got = item("p5en", values["llm-training-eks:nodeGroups"][0]["name"], values)
    assert got["quantity"] == 2 and "ODCR" in got["unit"]
