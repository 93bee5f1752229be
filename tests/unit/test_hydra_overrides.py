"""Every Hydra override a NeMo-based recipe passes composes against the upstream config it names,
at the version its image carries (tests/upstream/neuronx-nemo-megatron-2.21.yaml,
tests/upstream/nemo-r2.0.0rc1.yaml): a plain `key=value` needs the key, `+key=value` needs it
absent, no `???` may be left, and exp_manager keys must be fields of the upstream schema.

The overrides are read from the rendered launcher scripts (the example stacks, and every preset
and data mode of each recipe), so what is checked is what would run.
"""

from __future__ import annotations

from typing import Any

import pytest
from hydra.errors import ConfigCompositionException

from tests import upstream
from tests.conftest import stack_plan
from tests.unit.test_recipes import built_with
from tests.upstream.hydra import Launch, compose_upstream, launches, schema_problems

# The image repository a recipe runs -> the upstream whose configs that image carries. The
# Dockerfiles pin these versions (tests/unit/test_images.py holds each Dockerfile to its source).
UPSTREAM_OF_IMAGE = {"neuronx-nemo-megatron": "neuronx-nemo-megatron-2.21", "nemo": "nemo-r2.0.0rc1"}
STACKS = ["p4de-nemo", "trn1-llama2"]


def _launcher_script(mpijob: dict[str, Any]) -> tuple[str, str]:
    (c,) = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    repository = c["image"].rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return repository, c["command"][-1]


def _rendered_launches(objs: list[dict[str, Any]]) -> list[tuple[str, Launch]]:
    out = []
    for obj in objs:
        if obj.get("kind") != "MPIJob":
            continue
        repository, script = _launcher_script(obj)
        out.extend((UPSTREAM_OF_IMAGE[repository], launch) for launch in launches(script))
    return out


def _check(facts_name: str, launch: Launch) -> None:
    try:
        cfg = compose_upstream(facts_name, launch.config_name, launch.overrides)
    except ConfigCompositionException as e:
        cause = e.__cause__ or e
        pytest.fail(f"{launch.config_name} ({facts_name}): {e}: {cause}")
    assert schema_problems(facts_name, cfg) == [], launch.config_name


@pytest.mark.parametrize("stack", STACKS)
def test_example_stack_overrides_compose_against_upstream(stack: str) -> None:
    objs = [r["inputs"] for r in stack_plan(stack)["resources"] if r["type"].startswith("kubernetes:")]
    found = _rendered_launches(objs)
    assert found, "no megatron_gpt_pretraining.py launch found"
    for facts_name, launch in found:
        _check(facts_name, launch)


CASES: list[tuple[str, dict[str, Any]]] = [
    ("llama2-neuron", {"model": {"preset": "7b"}}),
    ("llama2-neuron", {"model": {"preset": "13b"}}),
    ("llama2-neuron", {"model": {"preset": "70b"}, "nodes": 4, "training": {"checkpointsToKeep": 1}}),
    ("nemo-gpu", {}),
    ("nemo-gpu", {"dataPrefix": "/shared/data/corpus_text_document"}),
    (
        "nemo-gpu",
        {"tokenizer": {"library": "sentencepiece", "model": "/shared/tokenizers/llama/tokenizer.model"}},
    ),
]


@pytest.mark.parametrize(("recipe", "extra"), CASES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(CASES)])
def test_every_preset_and_data_mode_composes(recipe: str, extra: dict[str, Any]) -> None:
    steps = built_with(recipe, extra)
    found = _rendered_launches([s.obj for s in steps])
    assert found
    for facts_name, launch in found:
        _check(facts_name, launch)


def test_the_checker_catches_each_kind_of_mistake() -> None:
    """The rebuilt config refuses what the real one refuses (the defects of issue 12)."""
    nnm, nemo = "neuronx-nemo-megatron-2.21", "nemo-r2.0.0rc1"
    data = "model.data.data_prefix=[1.0,/x]"
    with pytest.raises(ConfigCompositionException):  # not a key of megatron_llama_config
        compose_upstream(nnm, "megatron_llama_config", ["model.num_query_groups=8", data])
    compose_upstream(nnm, "megatron_llama_70b_config", ["model.num_kv_heads=8", data])
    with pytest.raises(ConfigCompositionException):  # commented out upstream: needs +
        compose_upstream(nemo, "megatron_llama_config", ["model.data.data_prefix=[]"])
    with pytest.raises(ConfigCompositionException):  # no such key (schema default only)
        compose_upstream(nemo, "megatron_llama_config", ["exp_manager.create_tensorboard_logger=True"])
    with pytest.raises(ConfigCompositionException):  # + on an existing key
        compose_upstream(nemo, "megatron_llama_config", ["+model.num_layers=2"])
    cfg = compose_upstream(nemo, "megatron_llama_config", ["+model.data.data_prefix=[]"])
    assert "model.tokenizer.model is ??? (mandatory)" in schema_problems(nemo, cfg)
    cfg = compose_upstream(nnm, "megatron_llama_config", [data, "+exp_manager.no_such_key=1"])
    assert "exp_manager.no_such_key" in schema_problems(nnm, cfg)


@pytest.mark.parametrize(
    ("recipe", "kv_key", "pp"), [("llama2-neuron", "model.num_kv_heads", 16), ("nemo-gpu", "model.num_query_groups", 4)]
)
def test_grouped_query_attention_reaches_the_model(recipe: str, kv_key: str, pp: int) -> None:
    """The 70b shape's 8 KV heads are passed under the framework's own key (a config that merely
    composes would otherwise train 64 KV heads)."""
    extra = {"model": {"preset": "70b", "pipelineParallel": pp}, "nodes": 4, "training": {"checkpointsToKeep": 1}}
    found = _rendered_launches([s.obj for s in built_with(recipe, extra)])
    assert found
    for _, launch in found:
        assert f"{kv_key}=8" in launch.overrides, launch.config_name


def test_grouped_query_attention_key_is_only_in_the_70b_config() -> None:
    configs = upstream.facts("neuronx-nemo-megatron-2.21")["configs"]
    assert "model.num_kv_heads" in configs["megatron_llama_70b_config"]["keys"]
    for name, spec in configs.items():
        assert "model.num_query_groups" not in spec["keys"], name
