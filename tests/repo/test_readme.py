"""README.md and docs/ stay true: the configuration reference (docs/configuration.md) matches the
config models, the README's architecture diagram matches the offline plan of the dev stack, and
the deploy walkthroughs keep their order."""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

import config
import config.base
from facts import names
from tests.conftest import ROOT, stack_plan
from tools import diagram

README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIG_PAGE = DOCS / "configuration.md"
REFERENCE = "Configuration reference"


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


def reference_section(text: str) -> str:
    m = re.search(rf"^## {REFERENCE}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"docs/configuration.md has no '## {REFERENCE}' section"
    return m.group(1)


def reference_rows(text: str) -> dict[str, list[str]]:
    """key -> the row's cells, from the tables of the reference section.

    The first cell names the key in backticks; a row may name more keys, and a later key
    without a dot is a sibling of the first (`` `systemNodeGroup.minSize` / `maxSize` ``).
    """
    rows: dict[str, list[str]] = {}
    for line in reference_section(text).splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        keys = re.findall(r"`([^`]+)`", cells[0]) if cells else []
        if not keys:
            continue  # the header and separator rows
        first = keys[0]
        parent = first[: max(first.rfind("."), -1) + 1]
        for key in keys:
            full = key if ("." in key or ":" in key or key == first) else parent + key
            assert full not in rows, f"README documents {full!r} twice"
            rows[full] = cells
    return rows


# --------------------------------------------------------------------------- tests


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


def test_every_config_key_is_documented_and_nothing_else() -> None:
    leaves, containers = model_keys()
    documented = set(reference_rows(CONFIG_PAGE.read_text()))
    missing = sorted(leaves - documented)
    extra = sorted(documented - leaves - containers)
    assert not missing and not extra, (
        f"docs/configuration.md '{REFERENCE}' is out of date with the config models (config/).\n"
        f"  missing (add a row): {missing}\n  not in the models (remove or fix): {extra}"
    )


def test_every_row_has_type_default_and_meaning() -> None:
    for key, cells in reference_rows(CONFIG_PAGE.read_text()).items():
        assert len(cells) == 4 and all(cells[1:]), f"{key}: needs type, default and meaning: {cells}"


def _field(path: str) -> Any:
    """The field a documented key names; `<name>` steps into a map, and a union (workload
    recipes) is searched member by member for the next key."""
    models: list[Any] = [config.StackConfig]
    info = None
    for part in path.replace("[]", "").split("."):
        if part == "<name>":
            continue
        if part == "aws:region":
            part = "region"
        found = [
            f
            for m in models
            for f in ({i.alias or n: i for n, i in m.model_fields.items()}.get(part),)
            if f is not None
        ]
        info = found[0]
        # Recipes may share a section name (`training`) with different models: follow them all.
        models = [m for f in found for m in _models_in(f.annotation)[1]]
    return info


def test_documented_scalar_defaults_and_types_match_the_models() -> None:
    leaves, _ = model_keys()
    for key, cells in reference_rows(CONFIG_PAGE.read_text()).items():
        if key not in leaves or key == "aws:region":
            continue
        info = _field(key)
        ann = info.annotation
        if ann is bool:
            assert cells[1].startswith("bool"), f"{key}: type is bool"
        elif ann is int:
            assert cells[1].startswith("int"), f"{key}: type is int"
        if info.is_required():
            # The Llama2 shape keys are filled from `model.preset` before validation.
            filled_by_preset = key.startswith("workloads.<name>.model.") and "from `preset`" in cells[2]
            assert "required" in cells[2] or filled_by_preset, f"{key}: the model requires it"
            continue
        default = info.get_default(call_default_factory=True)
        if isinstance(default, bool):
            assert f"`{str(default).lower()}`" in cells[2], f"{key}: default is {default}"
        elif isinstance(default, (int, str)) and default != "":
            assert f"`{default}`" in cells[2], f"{key}: default is {default!r}, docs/configuration.md says {cells[2]}"


def test_the_row_parser_reads_two_keys_in_one_row() -> None:
    text = (
        f"## {REFERENCE}\n\n| key | type | default | meaning |\n|---|---|---|---|\n"
        "| `systemNodeGroup.minSize` / `maxSize` | int | x | y |\n| `a \\| b` | t | d | m |\n## Next\n"
    )
    assert set(reference_rows(text)) == {"systemNodeGroup.minSize", "systemNodeGroup.maxSize", "a \\| b"}


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
