"""The stack-file JSON Schema (schema/stack-config.schema.json) is generated from the config models
and current; every example stack file validates against it and names it for editors."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import EXAMPLE_STACKS, ROOT
from tools import schema

MODELINE = "# yaml-language-server: $schema=./schema/stack-config.schema.json"


class _NoTimestamps(yaml.SafeLoader):
    """YAML as editors read a stack file (YAML 1.2: `2027-03-01T11:30:00Z` is a string)."""


_NoTimestamps.yaml_implicit_resolvers = {
    k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _validator() -> jsonschema.Draft202012Validator:
    doc = json.loads(schema.SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return jsonschema.Draft202012Validator(doc)


def _stack(name: str) -> Any:
    return yaml.load((ROOT / f"Pulumi.{name}.yaml").read_text(), Loader=_NoTimestamps)


def test_the_committed_schema_is_the_generated_one() -> None:
    assert schema.SCHEMA_FILE.read_text() == schema.render(), "run `make schema` and commit schema/"


@pytest.mark.parametrize("name", EXAMPLE_STACKS)
def test_every_example_stack_validates_and_names_the_schema(name: str) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(_stack(name))]
    assert not errors, errors
    assert (ROOT / f"Pulumi.{name}.yaml").read_text().splitlines()[0] == MODELINE


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda c: c["llm-training-eks:network"].update(cidrr="10.0.0.0/16"), ["config", "llm-training-eks:network"]),
        (lambda c: c.update({"llm-training-eks:netwrok": {}}), ["config"]),
        (lambda c: c["llm-training-eks:workloads"]["first-run"].update(recipe="ddp-gpu"), ["config"]),
        (lambda c: c["llm-training-eks:nodeGroups"][0].update(desiredSize="two"), ["config"]),
        (lambda c: c.update({"llm-training-eks:huggingFaceToken": "hf_plain"}), ["config"]),
    ],
)
def test_the_schema_flags_what_an_editor_should(edit: Any, where: list[str]) -> None:
    doc = _stack("dev")
    doc["config"].setdefault("llm-training-eks:network", {})
    edit(doc["config"])
    errors = list(_validator().iter_errors(doc))
    assert errors and all(list(e.absolute_path)[: len(where)] == where for e in errors)


def test_other_namespaces_are_left_alone() -> None:
    doc = _stack("dev")
    doc["config"]["kubernetes:enableServerSideApply"] = "true"
    assert not list(_validator().iter_errors(doc))
