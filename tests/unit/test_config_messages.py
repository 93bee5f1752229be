"""Config messages say what the stack file should hold, in its own words: no Python class name
(a model's, a union member's) reaches a user, the region is `aws:region` only, and an unknown key
that has a home elsewhere says where.

The walker gives every key of every config model (each recipe's too) a value of every wrong kind
and reads every line the user would see.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any, get_args, get_origin

import botocore.session
import pytest
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

import config
from config import intents, messages, stackfile
from config.base import Model
from config.cluster import ClusterConfig, SystemNodeGroupConfig
from config.network import NetworkConfig
from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from config.storage import StorageConfig
from config.workloads import RECIPES
from tests import upstream
from tests.conftest import MINIMAL, ROOT

NS = "llm-training-eks:"
WRONG: list[Any] = ["x", 3, 2.5, True, None, [], ["x"], {}, {"zz": 1}]
"""A value of every kind YAML gives: text, numbers, a boolean, null, lists and maps."""
Path = tuple[Any, ...]


def _models(ann: Any) -> Iterator[type[BaseModel]]:
    stack = [ann]
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            yield a
            stack.extend(info.annotation for info in a.model_fields.values())
        else:
            stack.extend(get_args(a))


MODELS = set(_models(StackConfig))
LEAKS = re.compile(
    r"\b(" + "|".join(sorted({m.__name__ for m in MODELS} | {"SecretStr", "BaseModel", "NoneType"})) + r")\b"
    r"|instance of|object to extract|valid dictionary|typing\.|Literal\[|Union\[|list\[|dict\["
)


def paths(ann: Any, prefix: Path = ()) -> Iterator[tuple[Path, Path, Any]]:
    """(key path, discriminator path, its value) of every key under `ann`: list items at index 0,
    map entries under key `k`, each member of a discriminated union with its tag set."""
    bare = messages._bare(ann)
    key, tags = messages._union_tags(ann)
    if key:
        for member, tag in zip(messages._members(messages._bare_annotated(ann)) or [], tags, strict=True):
            for path, seed, value in paths(member, prefix):
                yield path, seed or (*prefix, key), value if seed else tag
        return
    if isinstance(bare, type) and issubclass(bare, BaseModel):
        for k in messages.keys_of(bare):
            yield (*prefix, k), (), None
            yield from paths(messages.field_annotation(bare, k), (*prefix, k))
    elif get_origin(bare) is list:
        yield from paths(get_args(bare)[0], (*prefix, 0))
    elif get_origin(bare) is dict:
        yield from paths(get_args(bare)[1], (*prefix, "k"))


def _set(doc: dict[str, Any], path: Path, value: Any) -> None:
    node: Any = doc
    key: Any = NS + path[0]
    for part in path[1:]:
        if isinstance(node, list):
            while len(node) <= key:
                node.append({})
        if not isinstance(node[key] if isinstance(node, list) else node.get(key), (dict, list)):
            node[key] = [] if isinstance(part, int) else {}
        node = node[key]
        key = part
    if isinstance(node, list):
        while len(node) <= key:
            node.append({})
    node[key] = value


def _problems(doc: dict[str, Any]) -> list[str]:
    try:
        config.parse_stack_values(doc)
    except config.ConfigError as e:
        return e.problems
    return []


ALL_PATHS = list(paths(StackConfig))


def test_the_walker_reaches_every_model_and_recipe() -> None:
    reached = {path[:3] for path, _, _ in ALL_PATHS if path[0] == "workloads"}
    assert {("workloads", "k", key) for key in ("recipe", "nodes", "training", "tokenizer", "command")} <= reached
    assert len(ALL_PATHS) > 200


def test_no_class_name_reaches_a_user_whatever_the_value() -> None:
    leaked: list[str] = []
    for path, seed, tag in ALL_PATHS:
        for wrong in WRONG:
            doc = copy.deepcopy(MINIMAL)
            if seed:
                _set(doc, seed, tag)
            _set(doc, path, wrong)
            leaked.extend(line for line in _problems(doc) if LEAKS.search(line))
    assert leaked == [], f"{len(leaked)} lines name a class, e.g. {leaked[:5]}"


def _validate(value: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        StackConfig.model_validate({"region": "us-west-2", **value})
    return e.value


GROUP = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 1}
SHAPES = [
    ("model", {"network": "x"}, "model_type", "network: expected a map with any of cidr, availabilityZones"),
    (
        "list of models",
        {"nodeGroups": {"a": 1}},
        "list_type",
        "nodeGroups: expected a list, each item a map with name, instanceType, desiredSize and optionally minSize",
    ),
    ("list item", {"nodeGroups": ["a"]}, "model_type", "nodeGroups[0]: expected a map with name, instanceType"),
    ("map", {"tags": ["a"]}, "dict_type", "tags: expected a map of name: value entries, each value text"),
    (
        "optional list",
        {"nodeGroups": [{**GROUP, "nodeRepair": {"overrides": "x"}}]},
        "list_type",
        "nodeGroups[0].nodeRepair.overrides: expected a list, each item a map with condition, reason, action",
    ),
    (
        "discriminated union",
        {"workloads": {"x": "a"}},
        "model_attributes_type",
        f"workloads.x: expected a map with recipe (one of: {', '.join(RECIPES)})",
    ),
    (
        "missing discriminator",
        {"workloads": {"x": {"nodes": 1}}},
        "union_tag_not_found",
        "workloads.x.recipe: required key is missing; valid: llama2-neuron, nemo-gpu, bert-neuron, custom, ddp-cpu, megatron-bridge",
    ),
    (
        "unknown discriminator",
        {"workloads": {"x": {"recipe": "llama3"}}},
        "union_tag_invalid",
        "workloads.x.recipe: 'llama3' is not a recipe; valid: llama2-neuron",
    ),
    (
        "a union member's model",
        {"workloads": {"x": {"recipe": "bert-neuron", "training": "x"}}},
        "model_type",
        "workloads.x.training: expected a map with any of",
    ),
    (
        "a map of models",
        {"teams": {"a": "b"}},
        "model_type",
        "teams.a: expected a map with nodeGroup, nodes and optionally borrowingLimitNodes, priority (got 'b')",
    ),
]


@pytest.mark.parametrize(("what", "value", "kind", "line"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_error_kind_says_the_shape_expected(what: str, value: dict[str, Any], kind: str, line: str) -> None:
    err = _validate(value)
    assert kind in {e["type"] for e in err.errors()}
    lines = messages.error_lines(err, StackConfig)
    assert any(x.startswith(line) for x in lines), lines
    assert not any(LEAKS.search(x) for x in lines), lines
    assert all(len(x) < config.MAX_LINE for x in lines), "a shape longer than a line is cut short"


class MemberOne(Model):
    """A member of a smart (not discriminated) union: pydantic puts its class name in the location."""

    size: int


class MemberTwo(Model):
    name: str


class WithUnion(Model):
    thing: MemberOne | MemberTwo


def test_a_smart_union_s_member_names_never_show_as_keys() -> None:
    with pytest.raises(ValidationError) as e:
        WithUnion.model_validate({"thing": {"size": "big"}})
    assert {"MemberOne", "MemberTwo"} <= {p for x in e.value.errors() for p in x["loc"]}
    lines = messages.error_lines(e.value, WithUnion)
    assert "thing.size: Input should be a valid integer (got 'big'); write it without quotes" in lines
    assert not any("Member" in line for line in lines), lines
    with pytest.raises(ValidationError) as e:
        WithUnion.model_validate({"thing": 3})
    assert messages.error_lines(e.value, WithUnion)[0] == ("thing: expected a map with size or a map with name (got 3)")


# --------------------------------------------------------------------------- the region


def test_a_missing_region_says_it_is_required_and_how_to_set_it() -> None:
    without = {k: v for k, v in MINIMAL.items() if k != "aws:region"}
    for problems in (_problems(without), _parse_problems({})):
        (line,) = [p for p in problems if p.startswith("aws:region")]
        assert line.startswith("aws:region: required")
        assert "`pulumi config set aws:region <region>`" in line and "`aws:region: us-west-2`" in line


def _parse_problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(config.ConfigError) as e:
        config.parse(raw)
    return e.value.problems


def test_our_namespaced_region_is_refused_and_never_validates_the_stack() -> None:
    """`pulumi config set region us-east-1` writes `llm-training-eks:region`; the provider reads
    only `aws:region`, so the two must not both seem to say where the stack goes."""
    problems = _problems({**MINIMAL, NS + "region": "us-east-1"})
    assert problems == [
        "llm-training-eks:region: 'region' is an AWS provider setting, read only as aws:region, never from this"
        " namespace: remove it (`pulumi config rm llm-training-eks:region`) and set aws:region instead"
        " (`pulumi config set aws:region <value>`)"
    ]  # and not "us-west-2d is not in region us-east-1": the region is aws:region's


@pytest.mark.parametrize("key", stackfile.AWS_CONFIG_KEYS)
def test_every_key_named_like_an_aws_provider_setting_is_refused(key: str) -> None:
    for full_key in (NS + key, key):
        (line,) = [p for p in _problems({**MINIMAL, full_key: "x"}) if p.startswith(f"{full_key}:")]
        assert f"read only as aws:{key}" in line and f"pulumi config set aws:{key} <value>" in line


def test_the_models_shadow_no_aws_key_but_the_region() -> None:
    """A top-level key of ours named like a pulumi-aws setting could never be set (it is refused
    above); the only overlap is the model's own name for aws:region."""
    assert set(messages.keys_of(StackConfig)) & set(stackfile.AWS_CONFIG_KEYS) == {"region"}


# --------------------------------------------------------------------------- intent hints

WHERE: dict[type[BaseModel], Path] = {
    StackConfig: (),
    ClusterConfig: ("cluster",),
    NetworkConfig: ("network",),
    NodeGroupConfig: ("nodeGroups", 0),
    SystemNodeGroupConfig: ("systemNodeGroup",),
    StorageConfig: ("storage",),
}
HINTS = [(model, key, hint) for model, table in intents.INTENTS.items() for key, hint in table.items()]


@pytest.mark.parametrize(("model", "key", "hint"), HINTS, ids=[f"{m.__name__}.{k}" for m, k, _ in HINTS])
def test_an_unknown_key_with_an_intent_says_where_it_lives(model: type[BaseModel], key: str, hint: Any) -> None:
    assert key not in messages.keys_of(model), "a hint for a key the model has would never show"
    path = (*WHERE[model], key)
    doc = copy.deepcopy(MINIMAL)
    _set(doc, path, "x")
    line = f"{messages.format_path(path)}: unknown key: {hint.says}"
    assert line in _problems(doc) and len(line) < config.MAX_LINE  # whole, not cut short
    for use in hint.use:
        assert _resolves(use), f"{use} is not a key of the stack file"


def _resolves(use: str) -> bool:
    if use == "aws:region":
        return True
    ann: Any = StackConfig
    for part in re.findall(r"[^.\[\]]+|\[\]", use):
        bare = messages._bare(ann)
        if part == "[]":
            if get_origin(bare) is not list:
                return False
            ann = get_args(bare)[0]
            continue
        if not (isinstance(bare, type) and issubclass(bare, BaseModel)) or part not in messages.keys_of(bare):
            return False
        ann = messages.field_annotation(bare, part)
    return True


def _upstream_keys(source: str) -> set[str]:
    files = {
        intents.EKSCTL: "eksctl-v0.230.0-config-keys",
        intents.TF_EKS: "terraform-aws-eks-v21.19.0-inputs",
        intents.TF_VPC: "terraform-aws-vpc-v6.6.0-inputs",
        intents.DOEKS: "data-on-eks-trainium-inferentia-variables",
    }
    if source == intents.FSX:
        model = botocore.session.get_session().get_service_model("fsx")
        shapes = ("CreateFileSystemRequest", "CreateFileSystemLustreConfiguration")
        return {m[0].lower() + m[1:] for s in shapes for m in model.shape_for(s).members}
    keys = {k for group in upstream.facts(files[source]).values() for k in group}
    return keys if source == intents.EKSCTL else {to_camel(k) for k in keys}


@pytest.mark.parametrize(("model", "key", "hint"), HINTS, ids=[f"{m.__name__}.{k}" for m, k, _ in HINTS])
def test_each_hinted_key_is_one_people_bring(model: type[BaseModel], key: str, hint: Any) -> None:
    """Each key is in the recorded key set of every tool it names (eksctl's ClusterConfig, the
    terraform modules' inputs camelCased, the Data on EKS blueprint's variables, the FSx API)."""
    assert hint.sources
    for source in hint.sources:
        if source != intents.OWN:
            assert key in _upstream_keys(source), f"{key} is not a {source} key"


def test_terraform_spellings_find_the_same_hint() -> None:
    doc = copy.deepcopy(MINIMAL)
    _set(doc, ("nodeGroups", 0, "instance_types"), ["trn1.32xlarge"])
    (line,) = [p for p in _problems(doc) if p.startswith("nodeGroups[0].instance_types")]
    assert line.endswith(intents.INTENTS[NodeGroupConfig]["instanceTypes"].says)


def test_the_storage_bucket_hint_names_the_prefix_the_file_system_imports() -> None:
    """infra/storage.py links the bucket to /shared and imports s3://<bucket>/datasets (SCRATCH_2)."""
    hint = intents.INTENTS[StorageConfig]["bucketName"].says
    assert "s3://<dataBucket>/datasets/" in hint and "/shared/datasets/" in hint
    assert 'f"s3://{b}/datasets"' in (ROOT / "infra" / "storage.py").read_text()
