"""What each recipe renders, held to the upstream facts it names (its ARGUMENTS) and to what it
says of its checkpoints and step time, on its example stacks' plans and with every step on.

The checks per facts file are tests/upstream/arguments.py's; a recipe that names a file whose
commands it never runs fails as surely as one that passes an argument upstream lacks.
"""

from __future__ import annotations

from typing import Any

import pytest

from config.workloads import RECIPES
from config.workloads.recipe import HeldAgainst
from estimates.checkpoints import CheckpointSize
from estimates.step_time import PublishedStepTime
from facts.names import component_type
from tests.conftest import stack_plan
from tests.unit.test_recipes import built
from tests.upstream.arguments import CHECKS

WORKLOAD = component_type("workloads", "Workload")


def example_runs(recipe: str) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """(stack, Workload component, its Kubernetes objects) of each run of `recipe` in the
    recipe's example stacks."""
    stacks = RECIPES[recipe].EXAMPLE_STACKS
    found = []
    for stack in stacks if isinstance(stacks, tuple) else ():
        plan = stack_plan(stack)
        for run in plan["resources"]:
            if run["type"] == WORKLOAD and run["inputs"]["recipe"] == recipe:
                objs = [r["inputs"] for r in plan["resources"] if r["parent"] == run["urn"]]
                found.append((stack, run, objs))
    return found


HELD = [
    (recipe, name)
    for recipe, model in sorted(RECIPES.items())
    if isinstance(model.ARGUMENTS, HeldAgainst)
    for name in model.ARGUMENTS.facts
]


@pytest.mark.parametrize(("recipe", "facts"), HELD, ids=[f"{r}-{f}" for r, f in HELD])
def test_the_rendered_commands_hold_against_the_upstream_facts_the_recipe_names(recipe: str, facts: str) -> None:
    check = CHECKS[facts]  # tests/unit/test_recipe_registry.py: every named file has a check
    assert check([s.obj for s in built(recipe)]) > 0, f"{recipe}: nothing of tests/upstream/{facts}.yaml runs"
    for stack, run, objs in example_runs(recipe):
        assert check(objs) > 0, f"{stack} {run['name']}: nothing of tests/upstream/{facts}.yaml runs"


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_the_plan_sizes_checkpoints_where_the_recipe_says_it_does(recipe: str) -> None:
    sized = isinstance(getattr(RECIPES[recipe], "CHECKPOINTS", None), CheckpointSize)
    for stack, run, _ in example_runs(recipe):
        assert ("checkpoints" in run["inputs"]) == sized, (stack, run["name"])


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_a_published_step_time_estimates_an_example_run(recipe: str) -> None:
    """A recipe that names a published measurement estimates the step of at least one of its
    example runs with it; one that names none never claims an estimate."""
    source = RECIPES[recipe].STEP_TIME
    bases = set()
    for stack, run, _ in example_runs(recipe):
        (cost,) = [r for r in stack_plan(stack)["cost"]["trainingRuns"] if r["name"] == run["name"]]
        bases.add(cost["stepTimeBasis"])
    estimated = {b for b in bases if b.startswith("estimated")}
    if isinstance(source, PublishedStepTime):
        assert estimated == {source.basis}, bases
    else:
        assert not estimated, bases
