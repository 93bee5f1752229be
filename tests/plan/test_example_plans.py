"""Every example stack's plan, as a whole: its cost from config equals its cost from the planned
resources and its outputs, and the policy pack's rules all pass on it. (Moved from tests/unit:
each plans every example stack, which `make test-fast` leaves to `make test`.)"""

from __future__ import annotations

import pytest

import config
from config import costs
from estimates import cost
from tests.conftest import EXAMPLE_STACKS, stack_plan, stack_values


def test_config_cost_and_plan_cost_agree(example_stack):
    """The stack outputs (from config) and the plan's cost (from the planned resources)."""
    cfg = config.parse(config.from_stack_values(stack_values(example_stack)))
    outputs = costs.stack_outputs(cfg)
    assert outputs["hourlyCost"] == pytest.approx(stack_plan(example_stack)["cost"]["totalHourly"], abs=1e-3)


def test_stack_outputs_agree_with_the_plan(example_stack):
    plan = stack_plan(example_stack)
    assert plan["outputs"]["hourlyCost"] == plan["cost"]["totalHourly"]
    assert plan["outputs"]["monthlyCost"] == plan["cost"]["totalMonthly"]


def test_items_from_config_match_items_from_plan():
    for stack in EXAMPLE_STACKS:
        cfg = config.parse(config.from_stack_values(stack_values(stack)))
        from_cfg = cost.summary(costs.items_from_config(cfg, cost.Prices()), cost.Prices())
        assert from_cfg["totalHourly"] == stack_plan(stack)["cost"]["totalHourly"]


def test_every_example_stack_passes_every_rule(example_stack):
    assert stack_plan(example_stack)["policy"] == []
