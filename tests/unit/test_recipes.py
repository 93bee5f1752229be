"""A recipe is one unit: a config model that states its facts, and one builder that honours them."""

from __future__ import annotations

from typing import Any

import pytest

import config
from config.workloads import RECIPES, RunConfig
from facts.names import SYSTEM_NODE_GROUP
from tests.conftest import placed
from workloads import manifests
from workloads.deploy import context
from workloads.manifests.objects import Step

NODE_GROUPS = {
    "neuron": {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 2},
    "nvidia": {"name": "gpu", "instanceType": "p5.48xlarge", "desiredSize": 2},
}
TRN2 = {"name": "trn2", "instanceType": "trn2.48xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}
GROUP_OF = {"torchtitan-neuron": TRN2}
"""Recipes whose instance family is not their accelerator's default (TorchNeuron: trn2/trn3 only)."""
# Every optional step on, so the builder must emit all of the recipe's STEPS.
FULL: dict[str, dict[str, Any]] = {
    "llama2-neuron": {"tensorboard": True, "shell": True},
    "nemo-gpu": {"tensorboard": True},
    "bert-neuron": {"tensorboard": True},
    "custom": {"image": "repo/x:1-sdk2.22.0", "command": ["true"], "tensorboard": True},
    "ddp-cpu": {"interruptOnceAtStep": 100},
    "vllm-serve": {"nodes": 1, "model": {"hub": "Qwen/Qwen3-8B", "parametersBillions": 8.19}, "tensorParallel": 8},
    "megatron-bridge": {"mode": "sft", "data": {"source": "jsonl", "datasetRoot": "/shared/sft"}, "tensorboard": True},
    "fabric-gpu": {"sweep": True},
    "fabric-neuron": {"sweep": True},
    "fsx-read": {"jobsPerNode": 2, "readSeconds": 30},
    "llama3-nxd": {"tensorboard": True},
    "torchtitan-neuron": {"tensorboard": True},
}


def parsed_run(
    recipe: str, extra: dict[str, Any] | None = None, stack: dict[str, Any] | None = None
) -> tuple[config.StackConfig, RunConfig]:
    model = RECIPES[recipe]
    ng = GROUP_OF.get(recipe) or NODE_GROUPS[model.ACCELERATOR or "neuron"]
    group = SYSTEM_NODE_GROUP if model.RUNS_ON_CPU else ng["name"]
    if recipe not in FULL:
        pytest.fail(f"FULL (tests/unit/test_recipes.py) has no {recipe}: add the run keys that turn its every step on")
    run = {"recipe": recipe, "nodeGroup": group, "nodes": 2, "runId": "r1", **FULL[recipe], **(extra or {})}
    values = {
        "region": "us-west-2",
        "cluster": {"publicAccessCidrs": ["203.0.113.10/32"]},
        "nodeGroups": [{**ng, "desiredSize": max(ng["desiredSize"], run["nodes"])}],
        "huggingFaceToken": "hf_x",
        # Above a Neuron server's first start (its compile): config.serving holds it to Kueue's timeouts.
        "queueing": {"podsReadyTimeoutMinutes": 120, "recoveryTimeoutMinutes": 120},
        "workloads": {"w": run},
        # A server of 4 of a trn1's 16 devices is placed by the Neuron scheduler extension.
        **({"addons": {"neuronScheduler": True}} if recipe == "vllm-serve" else {}),
        **(placed(ng["availabilityZone"]) if "availabilityZone" in ng else {}),
        **(stack or {}),
    }
    cfg = config.parse(values)
    return cfg, cfg.workloads["w"]


def built(recipe: str) -> list[Step]:
    return built_with(recipe, {})


def built_with(recipe: str, extra: dict[str, Any], stack: dict[str, Any] | None = None) -> list[Step]:
    """The steps of a two-node run of `recipe` (with `extra` run keys) on its accelerator (or
    on the system node group's CPUs)."""
    cfg, run = parsed_run(recipe, extra, stack)
    ng = cfg.node_groups[0]

    class _Platform:
        storage_claim, shared_mount, storage = "shared-fsx", "/shared", cfg.storage
        load_balancing, serving_metrics = None, True
        neuron_scheduler = cfg.addons.neuron_scheduler
        node_groups = {
            ng.name: ng.node_group(cfg.node_group_az(ng)),
            SYSTEM_NODE_GROUP: cfg.system_node_group.node_group(cfg.availability_zones),
        }

        def namespace_for(self, team: str | None) -> str:
            return "training"

        def sub_path_for(self, team: str | None) -> str:
            return ""

        def queue_for(self, team: str | None) -> str:
            return "default"

        def priority_class_for(self, team: str | None) -> str:
            return "team-default"

    instance = _Platform.node_groups[run.node_group].instance
    image = run.image_on(instance) or f"registry.invalid/c/{run.REPOSITORY or 'custom'}:1"
    return manifests.steps("w", run, context(_Platform(), run, image))  # type: ignore[arg-type]


def test_every_recipe_has_one_builder() -> None:
    assert set(manifests.BUILDERS) == set(RECIPES)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_the_builder_emits_exactly_the_steps_the_recipe_states(recipe: str) -> None:
    roles = list(dict.fromkeys(step.role for step in built(recipe)))
    assert roles == list(RECIPES[recipe].STEPS)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_recipe_facts_are_consistent(recipe: str) -> None:
    model = RECIPES[recipe]
    assert recipe == model.RECIPE
    cfg, _ = parsed_run(recipe)
    assert cfg.node_groups[0].instance.accelerator == (model.ACCELERATOR or "neuron")
    if model.REPOSITORY is not None:
        assert model.REPOSITORY in cfg.registry.repositories, "the default registry builds the recipe's image"
    steps = built(recipe)
    assert len({s.name for s in steps}) == len(steps)
    for step in steps:
        assert set(step.after) <= {s.name for s in steps[: steps.index(step)]}, "a step follows only earlier steps"
