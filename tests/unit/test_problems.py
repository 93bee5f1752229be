"""Refusals as typed values (config/problems.py): each is its line, with path, kind, value,
allowed and hint; pydantic's errors and the typed rules give the kind; a plain line still reads."""

from __future__ import annotations

import copy
import pickle
import re
from typing import Any, get_args

import pytest

import config
from config.problems import KINDS, Kind, Problem, as_problem, problem
from tests.conftest import API_PATH, ROOT


def _problems(raw: dict[str, Any], **kw: Any) -> list[Problem]:
    with pytest.raises(config.ConfigError) as e:
        config.parse({"region": "us-west-2", "cluster": API_PATH, **raw}, **kw)
    return e.value.problems


def _at(problems: list[Problem], path: str) -> Problem:
    found = [p for p in problems if p.path == path]
    assert len(found) == 1, (path, problems)
    return found[0]


def test_a_problem_is_its_line_and_keeps_its_parts() -> None:
    p = problem("nodeGroups[0].maxSize", "conflict", "3 is below desiredSize 4", value="3", allowed="4 or more")
    assert p == "nodeGroups[0].maxSize: 3 is below desiredSize 4" and p.detail == "3 is below desiredSize 4"
    assert p.as_dict() == {
        "path": "nodeGroups[0].maxSize",
        "kind": "conflict",
        "value": "3",
        "allowed": "4 or more",
        "hint": None,
        "message": "nodeGroups[0].maxSize: 3 is below desiredSize 4",
    }
    for again in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert again.as_dict() == p.as_dict()
    with pytest.raises(AttributeError):
        p.kind = "invalid"  # type: ignore[misc]


def test_kinds_are_a_closed_set_documented_for_ci() -> None:
    with pytest.raises(ValueError, match="not one of"):
        Problem("a", "wrong", "x")  # type: ignore[arg-type]
    assert set(KINDS) == set(get_args(Kind))
    page = (ROOT / "docs" / "configuration.md").read_text()
    table = page.split("| kind | meaning |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE))
    assert documented == set(KINDS), "docs/configuration.md's table of problem kinds disagrees with config/problems.py"


@pytest.mark.parametrize(
    ("line", "path", "detail"),
    [
        ("aws:region: required: x", "aws:region", "required: x"),
        ("nodeGroups[0].capacity.reservationId: bad: no", "nodeGroups[0].capacity.reservationId", "bad: no"),
        ("workloads.my-run.secretEnv.HF_TOKEN: must", "workloads.my-run.secretEnv.HF_TOKEN", "must"),
        ("... and 3 more problem(s); fix these first", "", "... and 3 more problem(s); fix these first"),
        ("no key here", "", "no key here"),
    ],
)
def test_a_plain_line_is_read_as_an_invalid_problem_at_its_prefix(line: str, path: str, detail: str) -> None:
    p = as_problem(line)
    assert (p, p.path, p.detail, p.kind) == (line, path, detail, "invalid")
    assert as_problem(p) is p


def test_config_error_takes_plain_lines_and_problems_alike_bounded() -> None:
    typed = problem("layer", "not-supported", "'x' is not a layer")
    e = config.ConfigError(["tags.a: bad", typed, "tags.a: bad", "x" * (3 * config.MAX_LINE)])
    assert e.problems == ["tags.a: bad", "layer: 'x' is not a layer", "x" * (config.MAX_LINE - 3) + "..."]
    assert [p.kind for p in e.problems] == ["invalid", "not-supported", "invalid"]
    many = config.ConfigError([f"k{i}: bad" for i in range(config.MAX_PROBLEMS + 2)])
    assert len(many.problems) == config.MAX_PROBLEMS + 1 and many.problems[-1].kind == "too-many"


def test_pydantic_errors_get_their_kind() -> None:
    found = _problems({"nodeGroup": [], "layer": "everything", "protectStatefulResources": "yes"})
    unknown = _at(found, "nodeGroup")
    assert (unknown.kind, unknown.hint, unknown.value) == ("not-supported", "did you mean 'nodeGroups'?", None)
    assert _at(found, "layer").kind == "not-supported" and _at(found, "layer").allowed == "all, aws, cluster, runs"
    wrong_type = _at(found, "protectStatefulResources")
    assert (wrong_type.kind, wrong_type.value, wrong_type.hint) == ("invalid", "'yes'", "write it without quotes")
    missing = _at(
        _problems({"nodeGroups": [{"instanceType": "trn1.32xlarge", "desiredSize": 1}]}), "nodeGroups[0].name"
    )
    assert missing.kind == "required" and missing.value is None
    region = _at(_problems({"region": None}), "aws:region")
    assert region.kind == "required" and region.hint == "pulumi config set aws:region <region>"


def test_a_key_problem_keeps_its_kind() -> None:
    ng = {"name": "a", "instanceType": "trn1.32xlarge", "desiredSize": 4, "maxSize": 2}
    p = _at(_problems({"nodeGroups": [ng]}), "nodeGroups[0].desiredSize")
    assert p.kind == "conflict" and p.allowed == "2 to 2"


def test_a_plain_text_secret_is_forbidden_and_never_quoted() -> None:
    p = _at(_problems({"huggingFaceToken": "hf_abcdefabcdefabcdef"}, secret_keys=[]), "huggingFaceToken")
    assert p.kind == "forbidden" and p.value is None and "hf_" not in str(p.as_dict())


def test_cross_section_rules_give_their_kind() -> None:
    ng = {"name": "a", "instanceType": "trn1.32xlarge", "desiredSize": 1}
    found = _problems({"nodeGroups": [ng, dict(ng)], "layer": "cluster"})
    assert _at(found, "nodeGroups[1].name").kind == "duplicate"
    assert _at(found, "lowerStack").kind == "required"
    misplaced = _at(_problems({"nodeGroups": [ng], "layer": "cluster", "lowerStack": "org/p/dev-aws"}), "nodeGroups")
    assert misplaced.kind == "not-supported" and misplaced.hint == "move it to the aws stack"


def test_stack_file_namespaces_and_plain_secret_env_are_typed() -> None:
    values = {
        "aws:region": "us-west-2",
        "llm-training-eks:cluster": API_PATH,
        "llm-trainig-eks:tags": {"a": "b"},
        "aws:regoin": "us-west-2",
        "llm-training-eks:workloads": {
            "t": {"recipe": "ddp-cpu", "nodeGroup": "system", "nodes": 1, "secretEnv": {"API_TOKEN": "s3cr3t-v4lue"}}
        },
    }
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    found = e.value.problems
    typo = _at(found, "llm-trainig-eks:tags")
    assert typo.kind == "not-supported" and typo.hint == "did you mean 'llm-training-eks:tags'?"
    assert _at(found, "aws:regoin").hint == "did you mean 'region'?"
    secret = _at(found, "workloads.t.secretEnv.API_TOKEN")
    assert secret.kind == "forbidden" and secret.value is None and "s3cr3t" not in str(secret.as_dict())


def test_a_model_rule_names_its_kind() -> None:
    ng = {"name": "a", "instanceType": "trn1.32xlarge", "desiredSize": 1, "capacity": {"type": "reservation"}}
    assert _at(_problems({"nodeGroups": [ng]}), "nodeGroups[0].capacity.reservationId").kind == "required"
    ng["capacity"] = {"type": "on-demand", "reservationId": "cr-0123456789abcdef0"}
    assert _at(_problems({"nodeGroups": [ng]}), "nodeGroups[0].capacity.reservationId").kind == "conflict"
