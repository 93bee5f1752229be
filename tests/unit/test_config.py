"""Stack config validation: bad input never reaches AWS, and every message names its key."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import config as runtime_config

import config
import config.cluster
from config import stackfile
from facts import names
from tests.conftest import MINIMAL, stack_values, stack_yaml
from tools import plan
from tools.offline import mocks

NS = "llm-training-eks:"

NG = "llm-training-eks:nodeGroups"


def _with(mutate: Any) -> dict[str, Any]:
    values = copy.deepcopy(MINIMAL)
    mutate(values)
    return values


def _set_ng(**kv: Any) -> Any:
    return lambda v: v[NG][0].update(kv)


def _plan_cli(values: dict[str, Any], tmp_path: Path) -> tuple[int, str]:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(stack_yaml({"config": values}))
    err = io.StringIO()
    code = plan.main(["--config-file", str(path), "--format", "json"], stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


# (id, mutation, key path that the message must start with, a word the message must contain)
BAD_CONFIGS = [
    ("typo-top-level-key", lambda v: v.update({"llm-training-eks:nodeGroup": []}), "nodeGroup:", "nodeGroups"),
    ("typo-node-group-key", _set_ng(desiredSise=2), "nodeGroups[0].desiredSise:", "desiredSize"),
    ("desired-not-int", _set_ng(desiredSize="four"), "nodeGroups[0].desiredSize:", "integer"),
    ("desired-negative", _set_ng(desiredSize=-1), "nodeGroups[0].desiredSize:", "greater than or equal"),
    ("min-above-max", _set_ng(minSize=3, maxSize=2), "nodeGroups[0].minSize:", "maxSize"),
    ("desired-above-max", _set_ng(desiredSize=5, maxSize=4), "nodeGroups[0].desiredSize:", "between"),
    ("unknown-instance-type", _set_ng(instanceType="trn3.32xlarge"), "nodeGroups[0].instanceType:", "trn1.32xlarge"),
    ("system-type-as-accelerated", _set_ng(instanceType="m6i.2xlarge"), "nodeGroups[0].instanceType:", "valid"),
    ("missing-instance-type", lambda v: v[NG][0].pop("instanceType"), "nodeGroups[0].instanceType:", "required"),
    ("missing-name", lambda v: v[NG][0].pop("name"), "nodeGroups[0].name:", "required"),
    ("bad-name", _set_ng(name="Trn_1"), "nodeGroups[0].name:", "lowercase"),
    (
        "reservation-without-id",
        _set_ng(capacity={"type": "reservation"}),
        "nodeGroups[0].capacity.reservationId:",
        "required",
    ),
    (
        "capacity-block-without-id",
        _set_ng(capacity={"type": "capacity-block"}),
        "nodeGroups[0].capacity.reservationId:",
        "required",
    ),
    (
        "malformed-reservation-id",
        _set_ng(capacity={"type": "reservation", "reservationId": "cr-123"}),
        "nodeGroups[0].capacity.reservationId:",
        "cr-",
    ),
    (
        "id-on-on-demand",
        _set_ng(capacity={"type": "on-demand", "reservationId": "cr-0123456789abcdef0"}),
        "nodeGroups[0].capacity.reservationId:",
        "only for",
    ),
    ("unknown-capacity-type", _set_ng(capacity={"type": "reserved"}), "nodeGroups[0].capacity.type:", "capacity-block"),
    ("az-outside-region", _set_ng(availabilityZone="us-east-1a"), "nodeGroups[0].availabilityZone:", "us-west-2"),
    ("az-malformed", _set_ng(availabilityZone="west-2d"), "nodeGroups[0].availabilityZone:", "AZ name"),
    ("duplicate-names", lambda v: v[NG].append(dict(v[NG][0])), "nodeGroups[1].name:", "unique"),
    ("nodegroups-not-a-list", lambda v: v.update({NG: {"name": "trn1"}}), "nodeGroups:", "list"),
    ("root-volume-too-small", _set_ng(rootVolumeSizeGiB=20), "nodeGroups[0].rootVolumeSizeGiB:", "greater than"),
    ("placement-group-not-bool", _set_ng(placementGroup="maybe"), "nodeGroups[0].placementGroup:", "boolean"),
    ("missing-region", lambda v: v.pop("aws:region"), "aws:region:", "required"),
    ("bad-region", lambda v: v.update({"aws:region": "mars-1"}), "aws:region:", "region"),
    (
        "public-endpoint-anywhere",
        lambda v: v.update({"llm-training-eks:cluster": {"publicAccessCidrs": ["0.0.0.0/0"]}}),
        "cluster.publicAccessCidrs:",
        "whole internet",
    ),
    (
        "bad-public-cidr",
        lambda v: v.update({"llm-training-eks:cluster": {"publicAccessCidrs": ["1.2.3.4/40"]}}),
        "cluster.publicAccessCidrs:",
        "CIDR",
    ),
    (
        "unsupported-k8s-version",
        lambda v: v.update({"llm-training-eks:cluster": {"kubernetesVersion": "1.27"}}),
        "cluster.kubernetesVersion:",
        "1.35",
    ),
    (
        "bad-admin-arn",
        lambda v: v.update({"llm-training-eks:cluster": {"adminPrincipalArns": ["admin"]}}),
        "cluster.adminPrincipalArns:",
        "ARN",
    ),
    (
        "vpc-cidr-too-small",
        lambda v: v.update({"llm-training-eks:network": {"cidr": "10.0.0.0/24"}}),
        "network.cidr:",
        "/16",
    ),
    (
        "vpc-cidr-public",
        lambda v: v.update({"llm-training-eks:network": {"cidr": "8.8.0.0/16"}}),
        "network.cidr:",
        "private",
    ),
    (
        "one-az",
        lambda v: v.update({"llm-training-eks:network": {"availabilityZones": ["us-west-2d"]}}),
        "network.availabilityZones:",
        "2 to 4",
    ),
    (
        "nat-choice",
        lambda v: v.update({"llm-training-eks:network": {"natGateways": "two"}}),
        "network.natGateways:",
        "per-az",
    ),
    (
        "ng-az-not-in-vpc",
        lambda v: v.update({"llm-training-eks:network": {"availabilityZones": ["us-west-2a", "us-west-2b"]}}),
        "nodeGroups[0].availabilityZone:",
        "network.availabilityZones",
    ),
    (
        "system-unknown-type",
        lambda v: v.update({"llm-training-eks:systemNodeGroup": {"instanceType": "t2.micro"}}),
        "systemNodeGroup.instanceType:",
        "m6i",
    ),
    (
        "protect-not-bool",
        lambda v: v.update({"llm-training-eks:protectStatefulResources": "sometimes"}),
        "protectStatefulResources:",
        "boolean",
    ),
]

BAD_CONFIGS += [
    (
        "repair-unknown-action",
        _set_ng(
            nodeRepair={
                "overrides": [
                    {"condition": "AcceleratedHardwareReady", "reason": "NeuronDMAError", "action": "Destroy"}
                ]
            }
        ),
        "nodeGroups[0].nodeRepair.overrides[0].action:",
        "Replace",
    ),
    (
        "repair-unknown-condition",
        _set_ng(
            nodeRepair={"overrides": [{"condition": "GpuReady", "reason": "NvidiaXID79Error", "action": "Replace"}]}
        ),
        "nodeGroups[0].nodeRepair.overrides[0].condition:",
        "AcceleratedHardwareReady",
    ),
    (
        "repair-threshold-over-100",
        _set_ng(nodeRepair={"maxUnhealthyNodeThresholdPercentage": 150}),
        "nodeGroups[0].nodeRepair.maxUnhealthyNodeThresholdPercentage:",
        "100",
    ),
]


@pytest.mark.parametrize(("mutate", "key", "word"), [c[1:] for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_exits_2_naming_the_key(mutate: Any, key: str, word: str, tmp_path: Path) -> None:
    code, err = _plan_cli(_with(mutate), tmp_path)
    assert code == 2, err
    lines = err.strip().splitlines()
    matching = [line for line in lines if line.startswith(key)]
    assert matching, f"no line starts with {key!r}:\n{err}"
    assert any(word.lower() in line.lower() for line in matching), err
    assert "Traceback" not in err


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    def many(v: dict[str, Any]) -> None:
        v["llm-training-eks:nodeGroup"] = []  # typo
        v[NG][0]["capacity"] = {"type": "reservation"}  # no id
        v[NG].append(dict(v[NG][0]))  # duplicate name
        v["llm-training-eks:cluster"] = {"kubernetesVersion": "1.20"}

    code, err = _plan_cli(_with(many), tmp_path)
    assert code == 2
    for key in (
        "nodeGroup:",
        "nodeGroups[0].capacity.reservationId:",
        "nodeGroups[1].name:",
        "cluster.kubernetesVersion:",
    ):
        assert any(line.startswith(key) for line in err.splitlines()), (key, err)


def test_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    _, err = _plan_cli(_with(_set_ng(availabiltyZone="us-west-2d")), tmp_path)
    assert "did you mean 'availabilityZone'" in err


def test_region_and_one_node_group_is_enough() -> None:
    cfg = config.parse(config.from_stack_values(MINIMAL))
    assert cfg.cluster.kubernetes_version == config.cluster.DEFAULT_KUBERNETES_VERSION
    assert cfg.cluster.public_access_cidrs == MINIMAL["llm-training-eks:cluster"]["publicAccessCidrs"]
    assert cfg.protect_stateful_resources is True
    ng = cfg.node_groups[0]
    assert (ng.min, ng.desired_size, ng.max) == (2, 2, 2)
    assert ng.capacity.type == "on-demand" and ng.creates_placement_group
    assert cfg.availability_zones == ["us-west-2d", "us-west-2a"]


def test_engine_strings_parse_like_native_values() -> None:
    """The engine hands objects as JSON text and scalars as text; the result is the same."""
    engine = {k: stackfile.engine_value(v) for k, v in MINIMAL.items()}
    engine["llm-training-eks:protectStatefulResources"] = "false"
    native = dict(MINIMAL, **{"llm-training-eks:protectStatefulResources": False})
    assert config.parse(config.from_stack_values(engine)) == config.parse(config.from_stack_values(native))


def test_other_namespaces_are_ignored() -> None:
    values = dict(MINIMAL, **{"aws:profile": "x", "kubernetes:context": "y", "pulumi:tags": {"a": "b"}})
    config.parse(config.from_stack_values(values))


def _load_errors(values: dict[str, Any], monkeypatch: pytest.MonkeyPatch, offline: bool = False) -> list[str]:
    """The errors config.load logs for these stack values (none when it loads them)."""
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "error", lambda msg, *a, **k: logged.append(msg))
    mocks.install("us-west-2", names.PROJECT, "mine")
    runtime_config.set_all_config(
        {k: stackfile.engine_value(v) for k, v in values.items()}, list(stackfile.secret_keys(values))
    )
    try:
        config.load(offline=offline)
    except pulumi.RunError as e:
        assert str(e).startswith("invalid stack config"), e
        assert logged
    return logged


def test_pulumi_up_refuses_a_hub_recipe_without_its_token_and_the_offline_plan_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The token is for `pulumi preview`/`up` (config.load in __main__.py) to refuse; the offline
    plan runs the same load under mocks with offline=True and only warns (tools.plan)."""
    sft = copy.deepcopy(stack_values("p5en-megatron-bridge"))
    del sft[NS + "huggingFaceToken"]
    lines = [x for x in _load_errors(sft, monkeypatch) if x.startswith("huggingFaceToken")]
    assert "workloads.sft " in " ".join(lines), lines  # the Llama 3.1 SFT run, among the others
    assert all(x.startswith("huggingFaceToken: required by workloads.") and "config set --secret" in x for x in lines)
    assert _load_errors(sft, monkeypatch, offline=True) == []


def test_an_empty_stack_says_how_to_start_one_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pulumi stack init mine` without a file, then `pulumi preview`: the engine hands over no
    config at all; one line names aws:region and the command that starts a stack from an example."""
    (line,) = _load_errors({}, monkeypatch)
    assert line.startswith("aws:region: required") and "`make new-stack STACK=<name> FROM=dev`" in line


@pulumi.runtime.test
def test_load_stops_pulumi_up_before_anything_is_created() -> None:
    """Under the engine, invalid config raises RunError (reported without a traceback)."""
    monitor = mocks.install("us-west-2", names.PROJECT, "bad")
    bad = _with(_set_ng(capacity={"type": "reservation"}))
    runtime_config.set_all_config({k: stackfile.engine_value(v) for k, v in bad.items()}, [])
    with pytest.raises(pulumi.RunError, match="invalid stack config"):
        config.load()
    assert monitor.registrations == {}
