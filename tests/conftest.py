"""Shared fixtures. Every program run goes through `infra.plan.run`, which installs fresh
Pulumi mocks (the same ones the offline plan uses) for each run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra import plan as plan_mod

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))

MINIMAL = {
    "aws:region": "us-west-2",
    "llm-training-eks:nodeGroups": [
        {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}
    ],
}


def run_plan(values: dict[str, Any], stack: str = "test") -> dict[str, Any]:
    """The plan of a config dict (flat stack-file keys)."""
    return plan_mod.run(values, stack)


def stack_values(stack: str) -> dict[str, Any]:
    return plan_mod.read_stack_file(ROOT / f"Pulumi.{stack}.yaml")


_plans: dict[str, dict[str, Any]] = {}


def stack_plan(stack: str) -> dict[str, Any]:
    """The plan of an example stack (computed once per test session)."""
    if stack not in _plans:
        _plans[stack] = run_plan(stack_values(stack), stack)
    return _plans[stack]


def resources(plan: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == type_]


def by_urn(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in plan["resources"]}


@pytest.fixture(params=EXAMPLE_STACKS)
def example_stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)
