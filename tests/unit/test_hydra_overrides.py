"""Every Hydra override a NeMo-based recipe passes composes against the upstream config it names,
at the version its image carries (tests/upstream/neuronx-nemo-megatron-2.21.yaml,
tests/upstream/nemo-r2.0.0rc1.yaml): a plain `key=value` needs the key, `+key=value` needs it
absent, no `???` may be left, and exp_manager keys must be fields of the upstream schema.

The overrides are read from the rendered launcher scripts of every preset and data mode of each
recipe (the example stacks' in tests/plan/test_recipe_arguments.py), so what is checked is what
would run; the check itself is tests/upstream/arguments.py's, the one each recipe names.
"""

from __future__ import annotations

from typing import Any

import pytest
from hydra.errors import ConfigCompositionException

from config.workloads import RECIPES
from config.workloads.recipe import HeldAgainst
from tests import upstream
from tests.unit.test_recipes import built_with
from tests.upstream.arguments import CHECKS, launcher_scripts
from tests.upstream.hydra import compose_upstream, launches, schema_problems

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
    """The checks of the upstream facts the recipe names (its ARGUMENTS), on each shape."""
    held = RECIPES[recipe].ARGUMENTS
    assert isinstance(held, HeldAgainst)
    objs = [s.obj for s in built_with(recipe, extra)]
    assert all(CHECKS[name](objs) for name in held.facts)


def test_the_checker_catches_each_kind_of_mistake() -> None:
    """The rebuilt config refuses what the real one refuses: a key the config lacks, a key
    upstream has only in a comment without `+`, an exp_manager key only its schema defaults,
    `+` on a key that exists, and a `???` left unset."""
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
    # NeMo keeps a `last` copy beside the one checkpoint: two 70B checkpoints need 2400 GiB.
    stack = {"storage": {"storageCapacityGib": 2400}}
    steps = built_with(recipe, extra, stack)
    found = [launch for text in launcher_scripts(s.obj for s in steps) for launch in launches(text)]
    assert found
    for launch in found:
        assert f"{kv_key}=8" in launch.overrides, launch.config_name


def test_grouped_query_attention_key_is_only_in_the_70b_config() -> None:
    configs = upstream.facts("neuronx-nemo-megatron-2.21")["configs"]
    assert "model.num_kv_heads" in configs["megatron_llama_70b_config"]["keys"]
    for name, spec in configs.items():
        assert "model.num_query_groups" not in spec["keys"], name
