"""README.md and docs/ stay true: the configuration reference (docs/configuration.md) matches the
config models, the README's architecture diagram matches the offline plan of the dev stack, and
the deploy walkthroughs keep their order."""

from __future__ import annotations

import copy
import re
import types
import typing
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

import config
import config.base
from config import layers as config_layers
from facts import names
from tests.conftest import ROOT, stack_plan
from tools import diagram, reference
from tools.offline import plan_table

README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIG_PAGE = DOCS / "configuration.md"


# --------------------------------------------------------------------------- keys of the models


def _models_in(annotation: Any) -> tuple[str, list[type[BaseModel]]]:
    """How a field nests models: ("model" | "list" | "dict" | "", the models it may hold).

    Optional, unions and discriminated unions contribute every model they name.
    """
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "model", [annotation]
    if origin in (list, tuple, set, frozenset):
        _, inner = _models_in(typing.get_args(annotation)[0]) if typing.get_args(annotation) else ("", [])
        return ("list", inner) if inner else ("", [])
    if origin is dict:
        args = typing.get_args(annotation)
        _, inner = _models_in(args[1]) if len(args) == 2 else ("", [])
        return ("dict", inner) if inner else ("", [])
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        kinds, models = set(), []
        for arg in typing.get_args(annotation):
            kind, found = _models_in(arg)
            if found:
                kinds.add(kind)
                models.extend(m for m in found if m not in models)
        return (kinds.pop() if len(kinds) == 1 else "model", models) if models else ("", [])
    return "", []


def model_keys(model: type[BaseModel] = config.StackConfig, prefix: str = "") -> tuple[set[str], set[str]]:
    """(leaf keys, container keys) of a model, spelled as in the stack file.

    Leaves are the keys that hold values (`network.cidr`, `nodeGroups[].capacity.reservationId`);
    containers hold other keys (`network`, `nodeGroups[]`) and may be documented or not.
    """
    leaves: set[str] = set()
    containers: set[str] = set()
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = "aws:region" if (not prefix and key == "region") else prefix + key
        kind, models = _models_in(info.annotation)
        if not models:
            leaves.add(path)
            continue
        container = {"model": path, "list": f"{path}[]", "dict": f"{path}.<name>"}[kind]
        containers.add(container)
        for m in models:
            sub_leaves, sub_containers = model_keys(m, container + ".")
            leaves |= sub_leaves
            containers |= sub_containers
    return leaves, containers


# --------------------------------------------------------------------------- keys of the README


def documented_keys(text: str) -> set[str]:
    """The keys the reference tables of the page name (first cell, in backticks)."""
    block = reference.committed(text)
    assert block is not None, f"docs/configuration.md lost its reference markers ({reference.START!r})"
    return {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", block, re.M)}


def test_walker_sees_nested_models_lists_and_unions() -> None:
    class Leaf(config.base.Model):
        size: int = 1

    class Other(config.base.Model):
        mode: str = "x"

    class Root(config.base.Model):
        plain: bool = True
        child: Leaf = Leaf()
        items: list[Leaf] = []
        either: Leaf | Other | None = None
        named: dict[str, Other] = {}

    leaves, containers = model_keys(Root)
    assert leaves == {"plain", "child.size", "items[].size", "either.size", "either.mode", "named.<name>.mode"}
    assert containers == {"child", "items[]", "either", "named.<name>"}


def test_the_reference_is_what_the_models_say() -> None:
    """The tables are generated (`make docs`); a changed model without `make docs` fails here."""
    assert reference.committed(CONFIG_PAGE.read_text()) == reference.render(), "run `make docs` and commit the page"


def test_every_config_key_is_documented_and_nothing_else() -> None:
    """The generator's walk, against this test's own walk of the models."""
    leaves, containers = model_keys()
    documented = documented_keys(CONFIG_PAGE.read_text())
    missing = sorted(leaves - documented)
    extra = sorted(documented - leaves - containers)
    assert not missing and not extra, f"reference out of step with config/: missing {missing}, unknown {extra}"


def test_every_key_has_a_meaning_and_its_layer() -> None:
    """A field without a description would leave its row empty; a top-level key the layers do not
    place (config/layers.py) would be refused by every layered stack."""
    for row in reference.rows():
        assert row.meaning and row.default and row.type, f"{row.key}: needs a description, default and type"
        top = row.key.split(".")[0].split("[")[0]
        every = top in ("aws:region", *config_layers.EVERY_LAYER)
        assert (row.layer == "every") == every, f"{row.key}: layer {row.layer!r}; add {top!r} to config/layers.OWNER"


def test_a_stated_default_is_for_a_default_the_program_derives() -> None:
    """`x-default` says a default the model cannot hold (from another key, per instance type...):
    a field that has a plain default of its own must show that one, not a text."""
    for key, info in reference.fields():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if "x-default" not in extra or info.is_required():
            continue
        value = info.get_default(call_default_factory=True)
        assert value in (None, "", [], {}), f"{key}: has its own default {value!r} and an x-default"


def test_a_stated_default_says_more_than_the_default_itself() -> None:
    """The Field default is the source of a default: an `x-default` that the reference would print
    from the default anyway is a second copy of it, free to drift."""
    for key, info in reference.fields():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if "x-default" not in extra:
            continue
        bare = copy.copy(info)
        bare.json_schema_extra = {k: v for k, v in extra.items() if k != "x-default"}
        assert reference.default_text(bare) != extra["x-default"], f"{key}: drop its x-default, the default says it"


def test_readme_diagram_is_the_generated_one() -> None:
    block = diagram.readme_block(README.read_text())
    assert block is not None, "README.md lost its diagram markers"
    expected = diagram.mermaid(stack_plan("dev"))
    assert block == expected, "README diagram is stale: run `make diagram` and commit README.md"


def test_diagram_has_every_component_and_the_expected_edges() -> None:
    chart = diagram.mermaid(stack_plan("dev"))
    assert chart.startswith("flowchart ")
    components = [r for r in stack_plan("dev")["resources"] if r["type"].startswith(f"{names.PROJECT}:infra:")]
    top = [r for r in components if "::pulumi:pulumi:Stack::" in r["parent"]]
    for r in top:
        assert f'<br/>{r["name"]}"]' in chart, r["name"]
    assert "network --> cluster" in chart
    assert "cluster --> ng_trn1" in chart


def test_readme_sample_plan_is_the_table_of_the_dev_stack() -> None:
    """The README's sample of `make plan STACK=dev` shows lines the table prints, in its order
    (`...` stands for the lines left out)."""
    text = README.read_text()
    start = text.index("```text\nOffline plan of stack 'dev'") + len("```text\n")
    sample = [line for line in text[start : text.index("```", start)].splitlines() if line != "..."]
    table = plan_table.render_table(stack_plan("dev")).splitlines()
    at = 0
    for line in sample:
        assert line in table[at:], f"README.md's sample plan: {line!r} is not a line of the dev table (after line {at})"
        at += table[at:].index(line) + 1


@pytest.mark.parametrize("command", ["make plan STACK=dev", "make test", "pulumi stack init", "pulumi up"])
def test_readme_names_the_commands(command: str) -> None:
    assert command in README.read_text()


def test_real_deploy_commands_are_in_order() -> None:
    text = (DOCS / "deploy.md").read_text()
    section = text[text.index("## Quick start: one stack from your machine") :]
    order = [
        "make venv",
        "pulumi login",
        "pulumi stack init",
        "pulumi config set aws:region",
        "pulumi config set --secret huggingFaceToken",
        "pulumi preview",
        "pulumi up",
        "aws eks update-kubeconfig",
        "kubectl get nodes",
    ]
    positions = [section.index(c) for c in order]
    assert positions == sorted(positions), dict(zip(order, positions, strict=True))


def test_the_layered_walkthrough_goes_from_an_empty_account_up_the_layers() -> None:
    text = (DOCS / "layered-and-ci.md").read_text()
    section = text[text.index("## From an empty account to a running training run") :]
    section = section[: section.index("## Day 2")]
    rows = [line for line in section.splitlines() if re.match(r"^\| \d ", line)]
    assert [int(r.split("|")[1]) for r in rows] == list(range(1, len(rows) + 1))
    where = {int(r.split("|")[1]): r.split("|")[3] for r in rows}
    first = {layer: next(n for n, r in enumerate(rows, 1) if f"Pulumi.prod-{layer}.yaml" in r) for layer in LAYER_ORDER}
    assert first["aws"] < first["cluster"] < first["runs"], first
    assert "GitHub-hosted" in where[first["aws"]]
    assert "in-VPC" in where[first["cluster"]] and "in-VPC" in where[first["runs"]]
    assert not any("inside the VPC" in w and "runner" not in w for w in where.values())
    # One pull request per layer, each after the layer below is deployed; images are built by the
    # aws layer (CodeBuild), so no step pushes one by hand.
    prs = [n for n, r in enumerate(rows, 1) if "Pull request" in r]
    assert prs == [first["aws"], first["cluster"], first["runs"]], prs
    assert not any("Push the" in r or "docker push" in r for r in rows)


LAYER_ORDER = ("aws", "cluster", "runs")
