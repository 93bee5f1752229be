"""The stack-file JSON Schema (schema/stack-config.schema.json) is generated from the config models
and current; every example stack file validates against it and names it for editors, by a path
that resolves from the file's own folder as the YAML language server resolves it
(redhat-developer/yaml-language-server 1.23.0; tests/upstream/yaml-language-server-1.23.0.yaml)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests import upstream
from tests.conftest import EXAMPLE_STACKS, EXAMPLES, example_file
from tools import cli, newstack, schema

SERVER = upstream.facts("yaml-language-server-1.23.0")
EXAMPLE_MODELINE = "# yaml-language-server: $schema=../schema/stack-config.schema.json"
"""The first line of an example stack file (examples/)."""
ROOT_MODELINE = "# yaml-language-server: $schema=./schema/stack-config.schema.json"
"""The first line of a stack file at the root: the project's dev, and a team's started from an example."""


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
    return yaml.load(example_file(name).read_text(), Loader=_NoTimestamps)


def _schema_an_editor_loads(text: str, folder: Path) -> Path | None:
    """The schema file the YAML language server loads for a stack file in `folder`, from its modeline."""
    line = next((x for x in text.splitlines() if re.match(SERVER["modeline_pattern"], x)), None)
    found = re.search(SERVER["schema_pattern"], line or "")
    if found is None:
        return None
    assert SERVER["relative_to"] == "the directory of the YAML file"
    return (folder / found.group(1)).resolve()


def test_the_committed_schema_is_the_generated_one() -> None:
    assert schema.SCHEMA_FILE.read_text() == schema.render(), "run `make schema` and commit schema/"


@pytest.mark.parametrize("name", EXAMPLE_STACKS)
def test_every_example_stack_validates_and_names_the_schema(name: str) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(_stack(name))]
    assert not errors, errors
    path = example_file(name)
    assert path.read_text().splitlines()[0] == (EXAMPLE_MODELINE if path.parent == EXAMPLES else ROOT_MODELINE)
    assert _schema_an_editor_loads(path.read_text(), path.parent) == schema.SCHEMA_FILE


@pytest.mark.parametrize("name", EXAMPLE_STACKS)
def test_a_stack_started_from_an_example_names_the_schema_from_the_root(name: str) -> None:
    """`make new-stack` writes a team's file at the root (cli.TEAM_DIR), one folder up from the
    examples: its schema line still reaches the schema, and the rest is the example's."""
    example = example_file(name).read_text()
    lower = "prod-below" if "llm-training-eks:lowerStack:" in example else None
    text = newstack.from_example(example, lower)
    assert _schema_an_editor_loads(text, cli.ROOT) == schema.SCHEMA_FILE
    assert text.splitlines()[0] == ROOT_MODELINE


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


def test_pulumi_yaml_declares_what_the_model_says() -> None:
    """Pulumi.yaml's `config:` section repeats defaults Pulumi needs (a declared key without one is
    required on every stack): generated from StackConfig, never edited by hand."""
    text = schema.PULUMI_YAML.read_text()
    assert text == schema.pulumi_yaml(text), "run `make schema` and commit Pulumi.yaml"
    declared = yaml.safe_load(text)["config"]
    assert declared["protectStatefulResources"]["default"] is True and declared["layer"]["default"] == "all"
    assert "huggingFaceToken" not in declared
