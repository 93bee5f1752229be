"""The contracts between layers, both ways: what a layer exports is exactly what the layer
above reads, and a renamed, removed or mistyped output is an error naming it.

The outputs come from the offline plans of the layered example stacks (trn1-llama2-aws and
trn1-llama2-cluster), that is from the same code that exports them for real.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from config.stackfile import SECRET
from infra import layers
from infra.platform import Platform
from tests.conftest import stack_plan

AWS = "trn1-llama2-aws"
CLUSTER = "trn1-llama2-cluster"


def outputs_of(stack: str) -> dict[str, Any]:
    return copy.deepcopy(stack_plan(stack)["outputs"])


def is_leaf(value: Any) -> bool:
    """Scalars, lists, empty maps and maps of strings (labels, registry URLs, queues: data,
    not contract keys) are read as one value."""
    return not isinstance(value, Mapping) or not value or all(isinstance(v, str) for v in value.values())


def leaf_paths(value: Any, prefix: str = "") -> Iterator[str]:
    """Every leaf of a nested output, as a dot path."""
    if not is_leaf(value):
        for k, v in value.items():
            yield from leaf_paths(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix


class Tracking(dict):  # type: ignore[type-arg]
    """A dict that records every key path read through it."""

    def __init__(self, value: Mapping[str, Any], path: str, seen: set[str]):
        super().__init__({k: Tracking.wrap(v, f"{path}.{k}" if path else k, seen) for k, v in value.items()})
        self._path = path
        self._seen = seen

    @staticmethod
    def wrap(value: Any, path: str, seen: set[str]) -> Any:
        return value if is_leaf(value) else Tracking(value, path, seen)

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        path = f"{self._path}.{key}" if self._path else key
        if not isinstance(value, Tracking):
            self._seen.add(path)
        return value

    def items(self) -> Any:
        return [(k, self[k]) for k in self.keys()]


def without(outputs: dict[str, Any], output: str, path: str) -> dict[str, Any]:
    """The outputs with one key of one output removed."""
    node = outputs[output]
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    del node[last]
    return outputs


def skip_a_whole_node_group(path: str) -> None:
    if path.startswith("nodeGroups.") and path.count(".") == 1:
        pytest.skip("a node group without any key is one node group fewer, not a broken contract")


# --------------------------------------------------------------------------- aws -> cluster


def test_the_cluster_layer_reads_every_output_the_aws_layer_exports_for_it() -> None:
    outputs = outputs_of(AWS)
    contract = {layers.AWS_LAYER_OUTPUT: outputs[layers.AWS_LAYER_OUTPUT], layers.KUBECONFIG_OUTPUT: SECRET}
    seen: set[str] = set()
    layers.parse_aws_layer(Tracking(contract, "", seen), SECRET, AWS)
    exported = set(leaf_paths(contract))
    assert seen == exported, f"exported but not read: {exported - seen}; read but not exported: {seen - exported}"


def test_the_aws_layer_contract_round_trips() -> None:
    value = outputs_of(AWS)
    inputs = layers.parse_aws_layer(value, "kubeconfig", AWS)
    again = layers.aws_layer_output(inputs)
    assert again == value[layers.AWS_LAYER_OUTPUT]
    assert inputs.node_groups["trn1"].instance.name == "trn1.32xlarge"
    assert inputs.node_groups["trn1"].nodes == 4 and isinstance(inputs.node_groups["trn1"].nodes, int)


@pytest.mark.parametrize("path", sorted(leaf_paths(stack_plan(AWS)["outputs"][layers.AWS_LAYER_OUTPUT])))
def test_a_removed_aws_output_is_an_error_naming_it(path: str) -> None:
    skip_a_whole_node_group(path)
    outputs = without(outputs_of(AWS), layers.AWS_LAYER_OUTPUT, path)
    with pytest.raises(layers.ContractError) as e:
        layers.parse_aws_layer(outputs, SECRET, AWS)
    assert any(f"awsLayer.{path}: missing" in p for p in e.value.problems), e.value.problems


@pytest.mark.parametrize("output", [layers.AWS_LAYER_OUTPUT, layers.KUBECONFIG_OUTPUT])
def test_a_renamed_aws_output_is_an_error_naming_it(output: str) -> None:
    outputs = outputs_of(AWS)
    outputs[f"{output}V2"] = outputs.pop(output)
    with pytest.raises(layers.ContractError) as e:
        layers.parse_aws_layer(outputs, SECRET, AWS)
    (line,) = e.value.problems
    assert f"has no output {output!r}" in line and AWS in line


def test_engine_numbers_and_wrong_types() -> None:
    outputs = outputs_of(AWS)
    fs = outputs[layers.AWS_LAYER_OUTPUT]["fileSystem"]
    fs["capacityGib"] = 1200.0  # every number crosses the engine as a double
    assert layers.parse_aws_layer(outputs, SECRET, AWS).storage.storage_capacity_gib == 1200
    fs["capacityGib"] = "1200"
    outputs[layers.AWS_LAYER_OUTPUT]["nodeGroups"]["trn1"]["instanceType"] = "trn9.huge"
    with pytest.raises(layers.ContractError) as e:
        layers.parse_aws_layer(outputs, SECRET, AWS)
    assert any("fileSystem.capacityGib: expected int, got '1200'" in p for p in e.value.problems)
    assert any("nodeGroups.trn1.instanceType: 'trn9.huge' is not in" in p for p in e.value.problems)


# --------------------------------------------------------------------------- cluster -> runs


def test_the_runs_layer_reads_every_output_the_cluster_layer_exports() -> None:
    outputs = outputs_of(CLUSTER)
    assert set(outputs) == {layers.PLATFORM_OUTPUT, layers.KUBECONFIG_OUTPUT}
    assert outputs[layers.KUBECONFIG_OUTPUT] == SECRET
    seen: set[str] = set()
    layers.parse_platform(Tracking(outputs, "", seen), None, CLUSTER)
    exported = set(leaf_paths(outputs))
    # Empty maps (no teams) are leaves that are read as a whole.
    assert seen == exported, f"exported but not read: {exported - seen}; read but not exported: {seen - exported}"


def test_the_platform_round_trips_exactly() -> None:
    value = outputs_of(CLUSTER)
    platform = layers.parse_platform(value, None, CLUSTER)
    assert isinstance(platform, Platform)
    assert layers.platform_output(platform) == value[layers.PLATFORM_OUTPUT]
    assert platform.queue_for(None) == "default"
    assert platform.node_groups["trn1"].worker_requests()["aws.amazon.com/neuron"] == "16"


def test_the_platform_with_teams_round_trips() -> None:
    value = outputs_of(CLUSTER)
    p = value[layers.PLATFORM_OUTPUT]
    p["teams"] = {"research": {"nodeGroup": "trn1", "nodes": 2, "borrowingLimitNodes": None, "priority": 10}}
    p["queues"] = {"research": "research"}
    p["priorityClasses"] = {"research": "team-research"}
    p["namespaces"] = {"research": "team-research"}
    p["sharedSubPaths"] = {"research": "teams/research"}
    platform = layers.parse_platform(value, None, CLUSTER)
    assert platform.teams["research"].borrowing_limit_nodes is None
    assert platform.namespace_for("research") == "team-research"
    assert platform.sub_path_for("research") == "teams/research"
    assert layers.platform_output(platform) == p


def test_a_queue_without_a_namespace_is_an_error_naming_it() -> None:
    value = outputs_of(CLUSTER)
    value[layers.PLATFORM_OUTPUT]["queues"] = {"research": "research"}
    with pytest.raises(layers.ContractError) as e:
        layers.parse_platform(value, None, CLUSTER)
    (line,) = e.value.problems
    assert "platform.namespaces.research: missing" in line


@pytest.mark.parametrize("path", sorted(leaf_paths(stack_plan(CLUSTER)["outputs"][layers.PLATFORM_OUTPUT])))
def test_a_removed_platform_output_is_an_error_naming_it(path: str) -> None:
    skip_a_whole_node_group(path)
    outputs = without(outputs_of(CLUSTER), layers.PLATFORM_OUTPUT, path)
    with pytest.raises(layers.ContractError) as e:
        layers.parse_platform(outputs, None, CLUSTER)
    assert any(f"platform.{path}: missing" in p for p in e.value.problems), e.value.problems


def test_a_bad_team_in_the_platform_names_it() -> None:
    outputs = outputs_of(CLUSTER)
    outputs[layers.PLATFORM_OUTPUT]["teams"] = {"research": {"nodeGroup": "trn1", "nodes": -1}}
    with pytest.raises(layers.ContractError) as e:
        layers.parse_platform(outputs, None, CLUSTER)
    assert any("platform.teams.research:" in p for p in e.value.problems)
