"""A layered stack says only what its layer reads, and names its lower stack exactly when it has one."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import config
from config.layers import EVERY_LAYER, OWNER
from facts.names import PROJECT
from tests.conftest import stack_values


def _problems(stack: str, **changes: Any) -> list[str]:
    values = copy.deepcopy(stack_values(stack))
    for key, value in changes.items():
        full = "aws:region" if key == "region" else f"{PROJECT}:{key}"
        if value is None:
            values.pop(full, None)
        else:
            values[full] = value
    try:
        config.parse_stack_values(values)
    except config.ConfigError as e:
        return e.problems
    return []


def test_every_stack_key_has_its_layer() -> None:
    keys = {info.alias or name for name, info in config.StackConfig.model_fields.items()}
    assert keys == set(OWNER) | set(EVERY_LAYER)


@pytest.mark.parametrize(
    ("stack", "key", "value", "owner"),
    [
        ("trn1-llama2-aws", "workloads", {"x": {"recipe": "custom"}}, "runs"),
        ("trn1-llama2-aws", "teams", {"a": {"nodeGroup": "trn1", "nodes": 1}}, "cluster"),
        ("trn1-llama2-cluster", "nodeGroups", [], "aws"),
        ("trn1-llama2-cluster", "huggingFaceToken", "[secret]", "runs"),
        ("trn1-llama2-runs", "teams", {}, "cluster"),
        ("trn1-llama2-runs", "ciRunner", {"enabled": False}, "aws"),
    ],
)
def test_a_key_of_another_layer_is_refused_naming_its_layer(stack: str, key: str, value: Any, owner: str) -> None:
    problems = _problems(stack, **{key: value})
    assert any(p.startswith(f"{key}: read by the {owner} layer") for p in problems), problems


def test_eks_addon_versions_belong_to_the_aws_layer_and_charts_to_the_cluster_layer() -> None:
    versions = {"eksAddonVersions": {"coredns": "v1.11.4-eksbuild.2"}}
    assert _problems("trn1-llama2-aws", addons=versions) == []
    assert _problems("trn1-llama2-cluster", addons={"kueueChart": "0.19.7"}) == []
    (line,) = _problems("trn1-llama2-cluster", addons=versions)
    assert line.startswith("addons.eksAddonVersions: read by the aws layer")
    (line,) = _problems("trn1-llama2-aws", addons={"kueueChart": "0.19.7"})
    assert line.startswith("addons.kueueChart: read by the cluster layer")


def test_lower_stack_exactly_where_a_lower_layer_exists() -> None:
    (line,) = _problems("trn1-llama2-runs", lowerStack=None)
    assert line.startswith("lowerStack: required for the runs layer: the stack of its cluster layer")
    (line,) = _problems("trn1-llama2-aws", lowerStack="organization/llm-training-eks/x")
    assert line.startswith("lowerStack: only the cluster and runs layers read a lower stack")
    (line,) = _problems("trn1-llama2", lowerStack="x")
    assert line.startswith("lowerStack: only the cluster and runs layers")


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("organization/other-project/x-aws", "this project"),
        ("a/b/c/d", "not a stack name"),
        ("bad name", "not a stack name"),
    ],
)
def test_a_bad_lower_stack_is_refused(value: str, word: str) -> None:
    problems = _problems("trn1-llama2-cluster", lowerStack=value)
    assert any(p.startswith("lowerStack:") and word in p for p in problems), problems


def test_an_unknown_layer_is_refused() -> None:
    problems = _problems("trn1-llama2-cluster", layer="network")
    assert any(p.startswith("layer: 'network' is not a layer; valid: all, aws, cluster, runs") for p in problems)


def test_a_layered_stack_defers_node_group_checks_to_the_lower_layer() -> None:
    # The runs stack has no nodeGroups of its own: its runs are checked against the platform
    # it reads (tests/plan/test_layers.py), not refused here.
    assert _problems("trn1-llama2-runs") == []
