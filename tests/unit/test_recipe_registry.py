"""Every recipe of the registry carries what a recipe is, stated by itself: its builder, its
step-time source, its docs row, its example stacks, the upstream facts its script arguments are
held against (or why not) and, a training run, its checkpoint model. A recipe that lacks one is
named with it. Each recipe is of one kind and has only that kind's interface."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import ClassVar, Literal

import pytest
from pydantic import Field

from config.workloads import RECIPE_FACTS, RECIPES, BertNeuronWorkload, RunConfig, TrainingRun
from config.workloads.recipe import (
    Conversion,
    HeldAgainst,
    NoConversion,
    NoExampleStack,
    NotHeld,
    RecipeDocs,
    RunExport,
)
from estimates.checkpoints import CheckpointSize, NotSized
from estimates.startup import CompileTime
from estimates.step_time import PublishedStepTime, UnknownStepTime
from facts import images
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, ROOT, stack_values
from tests.repo.test_structure import FILES
from tests.unit.test_recipes import built
from tests.upstream.arguments import CHECKS
from workloads import manifests

KINDS = {
    "CHECKPOINTS": (CheckpointSize, NotSized),
    "STEP_TIME": (PublishedStepTime, UnknownStepTime),
    "COMPILE": (CompileTime,),
    "DOCS": (RecipeDocs,),
    "EXAMPLE_STACKS": (tuple, NoExampleStack),
    "ARGUMENTS": (HeldAgainst, NotHeld),
    "STEPS": (tuple,),
    "CONVERSION": (Conversion, RunExport, NoConversion),
}


def recipes_of(stack: str) -> set[str]:
    """The recipes an example stack runs."""
    return {run["recipe"] for run in (stack_values(stack).get("llm-training-eks:workloads") or {}).values()}


def _own_facts(model: type[RunConfig]) -> list[str]:
    """Each fact is stated by the recipe, or by a shared base (MegatronRun), never by another recipe."""
    problems = []
    for fact in (*RECIPE_FACTS, *model.KIND_FACTS):
        owner = next((c for c in model.__mro__ if fact in vars(c)), None)
        if owner is None:
            problems.append(f"{fact} missing")
        elif owner is not model and "RECIPE" in vars(owner):
            problems.append(f"{fact} inherited from recipe {owner.RECIPE}: state its own")
        elif not isinstance(getattr(model, fact), KINDS[fact]):
            problems.append(f"{fact} is not one of {', '.join(k.__name__ for k in KINDS[fact])}")
    return problems


def _docs(model: type[RunConfig]) -> list[str]:
    docs: RecipeDocs = model.DOCS
    problems = []
    if list(docs.steps) != list(model.STEPS):
        problems.append(f"DOCS.steps {list(docs.steps)} are not its STEPS {list(model.STEPS)} in order")
    built = images.IMAGES.get(model.REPOSITORY or "")
    if model.REPOSITORY and built is None:
        problems.append(f"REPOSITORY {model.REPOSITORY}: no image folder listed in facts/images.py")
    if built and built.neuron_sdk and f"Neuron SDK {built.neuron_sdk}" not in docs.image:
        problems.append(f"DOCS.image does not name the image's Neuron SDK {built.neuron_sdk}")
    return problems


def _examples(model: type[RunConfig]) -> list[str]:
    stacks = model.EXAMPLE_STACKS
    if isinstance(stacks, NoExampleStack):
        return [] if stacks.why else ["EXAMPLE_STACKS: NoExampleStack says no why"]
    if not stacks:
        return ["EXAMPLE_STACKS is empty: name the example stacks that run it, or NoExampleStack(why)"]
    return [
        f"EXAMPLE_STACKS: {s} is not an example stack running it"
        for s in stacks
        if s not in EXAMPLE_STACKS or model.RECIPE not in recipes_of(s)
    ]


def _arguments(model: type[RunConfig]) -> list[str]:
    held = model.ARGUMENTS
    if isinstance(held, NotHeld):
        return [] if held.why else ["ARGUMENTS: NotHeld says no why"]
    problems = [
        f"ARGUMENTS: tests/upstream/{name}.yaml does not exist" for name in held.facts if name not in upstream.names()
    ]
    problems += [
        f"ARGUMENTS: no check of tests/upstream/{name}.yaml in tests/upstream/arguments.py (CHECKS)"
        for name in held.facts
        if name not in CHECKS
    ]
    if not held.facts:
        problems.append("ARGUMENTS: HeldAgainst names no facts file; NotHeld(why) if none applies")
    refs = [str(upstream.load(n)["source"].get("ref", "")).lstrip("vr") for n in held.facts if n in upstream.names()]
    shown = model.DOCS.follows + model.DOCS.image
    if refs and not any(ref and ref in shown for ref in refs):
        problems.append(f"DOCS: follows and image name none of the versions its facts are read at ({refs})")
    return problems


def _conversion(model: type[RunConfig]) -> list[str]:
    """A recipe that says its runs convert has a converter in its builder and its upstream facts
    record that converter; one that says not has none and says why."""
    conv, has = model.CONVERSION, model.RECIPE in manifests.CONVERTERS
    if isinstance(conv, NoConversion):
        return [] if conv.why and not has else ["CONVERSION: NoConversion says no why, or its builder has a convert"]
    if not has:
        return ["CONVERSION: no `convert` in its builder (workloads.manifests.CONVERTERS)"]
    if isinstance(conv, RunExport):
        # the export is a step of the run: its options are held with the run's (ARGUMENTS)
        held = model.ARGUMENTS.facts if isinstance(model.ARGUMENTS, HeldAgainst) else ()
        if conv.facts not in held:
            return [f"CONVERSION: RunExport's facts {conv.facts} are not among the run's ARGUMENTS ({held})"]
        if conv.key not in model.model_json_schema(by_alias=True)["properties"]:
            return [f"CONVERSION: RunExport's key {conv.key} is not a key of the run"]
        return []
    if conv.facts not in upstream.names() or "hf_converter" not in upstream.facts(conv.facts):
        return [f"CONVERSION: tests/upstream/{conv.facts}.yaml records no hf_converter"]
    return []


def lacks(model: type[RunConfig]) -> list[str]:
    """What a recipe model lacks of what a recipe carries, one line each naming the recipe."""
    problems = _own_facts(model)
    if model.RECIPE not in manifests.BUILDERS:
        problems.append("no builder in workloads/manifests/ (a module with MODEL and steps, listed in BUILDERS)")
    if not problems:  # the rest reads the facts
        problems += _docs(model) + _examples(model) + _arguments(model) + _conversion(model)
        if isinstance(model.STEP_TIME, UnknownStepTime) and not model.STEP_TIME.why:
            problems.append("STEP_TIME: UnknownStepTime says no why")
    return [f"recipe {model.RECIPE}: {p}" for p in problems]


def test_every_recipe_carries_what_a_recipe_is() -> None:
    problems = [p for model in RECIPES.values() for p in lacks(model)]
    assert not problems, "\n".join(problems)


def test_every_example_stack_run_is_listed_by_its_recipe() -> None:
    unlisted = [
        f"{stack} runs {recipe}, which does not list it in EXAMPLE_STACKS"
        for stack in EXAMPLE_STACKS
        for recipe in sorted(recipes_of(stack))
        if stack not in (RECIPES[recipe].EXAMPLE_STACKS if isinstance(RECIPES[recipe].EXAMPLE_STACKS, tuple) else ())
    ]
    assert not unlisted, "\n".join(unlisted)


CHECKPOINT_INTERFACE = ["CHECKPOINTS", *sorted(n for n in vars(TrainingRun) if n.startswith("checkpoint"))]
"""What a training run says of its checkpoints (TrainingRun's own), and no other kind does."""


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_a_recipe_has_the_interface_of_its_kind_only(recipe: str) -> None:
    model = RECIPES[recipe]
    kinds = [base.KIND for base in model.__mro__ if "KIND" in vars(base)]
    assert len(kinds) == 1, f"recipe {recipe}: one kind, stated by the base of its kind, not {kinds}"
    has = [n for n in CHECKPOINT_INTERFACE if hasattr(model, n)]
    assert has == (CHECKPOINT_INTERFACE if kinds[0] == "training" else []), f"{recipe} ({kinds[0]}): {has}"


class BertCopy(BertNeuronWorkload):
    """What a reviewer wrote: BERT with one more argument."""

    RECIPE: ClassVar[str] = "bert-copy"
    recipe: Literal["bert-copy"] = Field(description="bert-copy")  # type: ignore[assignment]
    warmup_proportion: float = Field(0.01, description="One more argument.")


def test_a_copy_of_a_recipe_is_told_each_fact_it_lacks() -> None:
    problems = lacks(BertCopy)
    for fact in ("CHECKPOINTS", "STEP_TIME", "COMPILE", "DOCS", "EXAMPLE_STACKS", "ARGUMENTS", "STEPS", "CONVERSION"):
        assert f"recipe bert-copy: {fact} inherited from recipe bert-neuron: state its own" in problems
    assert any("no builder" in p for p in problems)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_the_docs_list_beside_the_chain_exactly_the_steps_nothing_waits_for(recipe: str) -> None:
    steps = built(recipe)
    waited = {name for s in steps for name in s.after}
    alone = {s.role for s in steps if not s.after and s.name not in waited}
    joined = {s.role for s in steps if s.after or s.name in waited}
    assert set(RECIPES[recipe].DOCS.beside) == alone - joined


def _constants(path: Path) -> list[ast.Constant]:
    """String constants of a module, but keys read from a mapping (`r["custom"]`, `r.get("custom")`:
    the plan's flag of a custom resource)."""
    tree = ast.parse(path.read_text())
    read = {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)} | {
        id(n.args[0])
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args
    }
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in read]


PLAN_JSON_KEYS = {("tools.plan", "custom")}
"""The plan JSON's `custom` flag (a custom resource, in Pulumi's sense), not the recipe."""


def test_no_module_outside_the_registry_switches_on_a_recipe_name() -> None:
    """A recipe's facts are its own: no string equal to a recipe name in the code outside
    config/workloads/ (the recipe modules and the registry)."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for module, path in FILES.items()
        if not module.startswith("config.workloads")
        for node in _constants(path)
        if node.value in RECIPES and (module, node.value) not in PLAN_JSON_KEYS
    ]
    assert not found, "\n".join(found)
