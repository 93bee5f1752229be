"""The pack inside pulumi-policy's own machinery, as the engine drives it.

Requests are the analyzer protobufs the engine sends (tests/upstream/pulumi-engine-analyzer-3.259.yaml):
`AnalyzeRequest` per resource with its inputs, `AnalyzeStackRequest` with every resource's
outputs and dependencies, unknown values as the engine's typed sentinels. They go to
pulumi-policy's analyzer servicer (the object `PolicyPack` serves over gRPC), which wraps
properties in its unknown-checking proxies exactly as in a real preview. One test boots the
pack the way the engine does (`python -u -m pulumi.policy ... policy`) and talks gRPC to it.

Every example stack runs twice under mocks: as a first preview (every id, ARN and computed
output unknown) and with known values. Neither may skip a policy ("can't run policy") nor
report a mandatory violation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import boto3
import grpc
import pulumi
import pytest
from botocore.stub import Stubber
from google.protobuf import empty_pb2, struct_pb2
from pulumi.output import Unknown
from pulumi.runtime import config as runtime_config
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import proto, rpc, settings
from pulumi.runtime.proto import analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel
from pulumi_policy import policy as policy_sdk
from pulumi_policy import proxy as policy_proxy
from pulumi_policy import version as policy_version

import config
import stack as program
from config.stackfile import engine_value, secret_keys
from facts.names import LOWER_LAYER, PROJECT
from policy import crossguard, rules
from policy.rules import props
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, EXAMPLES, ROOT, stack_plan, stack_values
from tools import plan
from tools.offline import mocks as plan_mocks

SDK = upstream.facts("pulumi-policy-1.21.0")
EKS = upstream.facts("pulumi-eks-control-plane-4.3.0")
UNKNOWN_STRING = SDK["unknown_sentinels"]["string"]
UNKNOWN_OBJECT = SDK["unknown_sentinels"]["object"]
MANDATORY = proto.MANDATORY

# --------------------------------------------------------------------------- the SDK, against the facts


def test_the_installed_sdk_is_the_one_the_facts_were_read_from():
    assert SDK["version"] == policy_version.VERSION
    assert {k: getattr(policy_proxy, f"UNKNOWN_{k.upper()}_VALUE") for k in SDK["unknown_sentinels"]} == SDK[
        "unknown_sentinels"
    ]
    assert set(SDK["unknown_sentinels"].values()) == crossguard.SENTINELS


def test_sdk_props_are_proxies_not_dicts_and_raise_on_unknowns():
    wrapped = policy_proxy.unknown_checking_proxy({"list": [1], "map": {"k": UNKNOWN_STRING}})
    assert isinstance(wrapped, Mapping) and not isinstance(wrapped, dict)
    assert isinstance(wrapped["list"], Sequence) and not isinstance(wrapped["list"], list)
    with pytest.raises(policy_proxy.UnknownValueError):
        wrapped["map"].get("k")
    with pytest.raises(policy_proxy.UnknownValueError):
        dict(wrapped["map"])  # what the adapter used to do with every resource's props
    assert crossguard.plain(wrapped) == {"list": [1], "map": {"k": props.UNKNOWN}}


# --------------------------------------------------------------------------- the servicer


def servicer(config: dict[str, Any] | None = None, lookup: crossguard.Lookup = lambda ids, region, profile: {}) -> Any:
    """pulumi-policy's analyzer servicer with the pack's policies (what `PolicyPack` serves)."""
    s = policy_sdk._PolicyAnalyzerServicer(
        crossguard.PACK_NAME, "0.0.1", crossguard.policies(lookup), EnforcementLevel.ADVISORY
    )
    if config:
        request = proto.ConfigureAnalyzerRequest()
        for name, properties in config.items():
            request.policyConfig[name].CopyFrom(proto.PolicyConfig(enforcementLevel=MANDATORY))
            request.policyConfig[name].properties.update(properties)
        s.Configure(request, None)
    return s


def struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(engine_properties(values))
    return s


def engine_properties(v: Any) -> Any:
    """Values as the engine marshals them: unknowns as sentinels, numbers as doubles,
    resource references as the id (else the URN)."""
    if isinstance(v, Mapping) and v.get(rpc._special_sig_key) == rpc._special_resource_sig:
        return v.get("id") or v.get("urn")
    if isinstance(v, Mapping):
        return {k: engine_properties(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [engine_properties(x) for x in v]
    if v is None:
        return None
    if isinstance(v, Unknown) or (isinstance(v, str) and v in (props.UNKNOWN, rpc.UNKNOWN)):
        return UNKNOWN_STRING
    if isinstance(v, pulumi.Archive | pulumi.Asset):
        # The engine sends an asset or archive as an object with its signature (rpc.serialize_property).
        sig = rpc._special_archive_sig if isinstance(v, pulumi.Archive) else rpc._special_asset_sig
        return {rpc._special_sig_key: sig, "path": str(getattr(v, "path", ""))}
    return v


def unknowns(v: Any) -> int:
    if isinstance(v, Mapping):
        return sum(unknowns(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return sum(unknowns(x) for x in v)
    return int(engine_properties(v) == UNKNOWN_STRING)


def analyze(s: Any, r: Mapping[str, Any]) -> Any:
    request = proto.AnalyzeRequest(
        type=r["type"], urn=r["urn"], name=r["name"], properties=struct(r["inputs"]),
        options=proto.AnalyzerResourceOptions(protect=bool(r.get("protect")), parent=r.get("parent") or ""),
    )  # fmt: skip
    return s.Analyze(request, None)


def analyze_stack(s: Any, resources: Sequence[Mapping[str, Any]], region: str = "us-west-2") -> Any:
    provider = proto.AnalyzerProviderResource(
        type="pulumi:providers:aws", urn="urn:pulumi:t::p::pulumi:providers:aws::default", name="default",
        properties=struct({"region": region}),
    )  # fmt: skip
    request = proto.AnalyzeStackRequest()
    for r in resources:
        item = request.resources.add(
            type=r["type"], urn=r["urn"], name=r["name"], properties=struct(r["outputs"]),
            options=proto.AnalyzerResourceOptions(protect=bool(r.get("protect"))),
            parent=r.get("parent") or "", dependencies=r.get("dependencies", []),
        )  # fmt: skip
        if r["type"].startswith("aws:"):
            item.provider.CopyFrom(provider)
        for key, urns in r.get("propertyDependencies", {}).items():
            item.propertyDependencies[key].urns.extend(urns)
    return s.AnalyzeStack(request, None)


def diagnostics(response: Any) -> list[tuple[str, int, str, str]]:
    return [(d.policyName, d.enforcementLevel, d.urn, d.message) for d in response.diagnostics]


def skipped(diags: list[tuple[str, int, str, str]]) -> list[str]:
    return [m for _, _, _, m in diags if m.startswith(SDK["on_unknown_value_error"]["message_prefix"])]


# --------------------------------------------------------------------------- one resource, one stack


BAD_EKS = {
    "vpcConfig": {
        "endpointPublicAccess": True,
        "publicAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"],
        "subnetIds": [props.UNKNOWN],
    },
    "encryptionConfig": props.UNKNOWN,
    "enabledClusterLogTypes": list(props.EKS_LOG_TYPES),
}


def eks_child(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"type": props.T_EKS_CLUSTER, "urn": "urn:pulumi:t::p::eks:index:Cluster$aws:eks/cluster:Cluster::c-eksCluster",
            "name": "c-eksCluster", "inputs": inputs}  # fmt: skip


def test_a_resource_policy_fires_through_the_sdk_with_unknowns_beside_the_violation():
    diags = diagnostics(analyze(servicer(), eks_child(BAD_EKS)))
    assert skipped(diags) == []
    mandatory = [(p, m) for p, level, _, m in diags if level == MANDATORY]
    assert [p for p, _ in mandatory] == ["eks-control-plane", "eks-control-plane"]
    assert "whole internet (0.0.0.0/1, 128.0.0.0/1)" in mandatory[0][1] + mandatory[1][1]
    assert "private API endpoint is off" in mandatory[0][1] + mandatory[1][1]


def test_an_unknown_object_where_a_map_is_read_is_no_violation():
    good = {**BAD_EKS, "vpcConfig": UNKNOWN_OBJECT, "encryptionConfig": UNKNOWN_OBJECT}
    assert diagnostics(analyze(servicer(), eks_child(good))) == []


def test_a_resource_policy_is_not_applicable_to_other_types():
    response = analyze(servicer(), {"type": "aws:iam/role:Role", "urn": "urn:x", "name": "r", "inputs": {}})
    assert response.diagnostics == [] and "eks-control-plane" in {n.policy_name for n in response.not_applicable}


def efa_stack(*, self_egress: bool) -> list[dict[str, Any]]:
    """An EFA launch template and its group on a first preview: every id unknown, references
    known only through property dependencies."""
    u = props.UNKNOWN
    sg_urn, lt_urn = "urn:t::sg::efa", "urn:t::lt::efa"
    rule = {
        "securityGroupId": u,
        "referencedSecurityGroupId": u,
        "ipProtocol": "-1",
        "description": "EFA",
        "arn": u,
        "id": u,
    }
    deps = {"securityGroupId": [sg_urn], "referencedSecurityGroupId": [sg_urn]}
    out = [
        {"type": props.T_SG, "urn": sg_urn, "name": "efa", "outputs": {"id": u, "arn": u, "ingress": u, "egress": u}},
        {"type": props.T_LAUNCH_TEMPLATE, "urn": lt_urn, "name": "efa", "dependencies": [sg_urn],
         "propertyDependencies": {"networkInterfaces": [sg_urn]},
         "outputs": {"id": u, "networkInterfaces": [{"interfaceType": "efa-only", "securityGroups": [u]}]}},
        {"type": props.T_INGRESS, "urn": "urn:t::in", "name": "in", "dependencies": [sg_urn], "propertyDependencies": deps, "outputs": rule},
    ]  # fmt: skip
    if self_egress:
        out.append(
            {
                "type": props.T_EGRESS,
                "urn": "urn:t::out",
                "name": "out",
                "dependencies": [sg_urn],
                "propertyDependencies": deps,
                "outputs": rule,
            }
        )
    return out


def test_a_stack_policy_runs_on_a_first_preview_and_fires_on_the_resource():
    diags = diagnostics(analyze_stack(servicer(), efa_stack(self_egress=False)))
    assert skipped(diags) == []
    assert [(p, level, u) for p, level, u, _ in diags] == [("efa-security-groups", MANDATORY, "urn:t::lt::efa")]
    assert diagnostics(analyze_stack(servicer(), efa_stack(self_egress=True))) == []


def test_reservation_azs_come_from_ec2_with_the_providers_region_or_from_config():
    ng = {
        "type": props.T_NODE_GROUP,
        "urn": "urn:t::ng",
        "name": "ng",
        "propertyDependencies": {"subnetIds": ["urn:t::s"], "launchTemplate": ["urn:t::lt"]},
        "outputs": {
            "subnetIds": [props.UNKNOWN],
            "instanceTypes": ["trn1.32xlarge"],
            "launchTemplate": {"id": props.UNKNOWN},
        },
    }
    lt = {
        "type": props.T_LAUNCH_TEMPLATE,
        "urn": "urn:t::lt",
        "name": "lt",
        "outputs": {
            "networkInterfaces": [{"interfaceType": "efa-only"}] * 8,
            "capacityReservationSpecification": {
                "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
            },
        },
    }
    subnet = {"type": props.T_SUBNET, "urn": "urn:t::s", "name": "s", "outputs": {"availabilityZone": "us-west-2d", "id": props.UNKNOWN}}  # fmt: skip
    asked: list[tuple[Any, ...]] = []

    def lookup(ids: Sequence[str], region: str | None, profile: str | None) -> dict[str, str]:
        asked.append((tuple(ids), region, profile))
        return {"cr-0123456789abcdef0": "us-west-2a"}

    diags = diagnostics(analyze_stack(servicer(lookup=lookup), [ng, lt, subnet]))
    assert asked == [(("cr-0123456789abcdef0",), "us-west-2", None)]
    assert [m.splitlines()[-1] for p, _, _, m in diags if p == "efa-node-groups"] == [
        "capacity reservation cr-0123456789abcdef0 is in us-west-2a but the node group's subnet is in us-west-2d"
    ]
    configured = servicer({"efa-node-groups": {"reservationAzs": {"cr-0123456789abcdef0": "us-west-2d"}}}, lookup)
    assert diagnostics(analyze_stack(configured, [ng, lt, subnet])) == [] and len(asked) == 1


def test_pack_config_turns_protection_rules_off_for_a_throwaway_stack():
    bucket = {"type": "aws:s3/bucket:Bucket", "urn": "urn:t::b", "name": "b", "inputs": {}}
    assert [p for p, *_ in diagnostics(analyze(servicer(), bucket))] == ["stateful-protected"]
    off = servicer({"stateful-protected": {"protectStatefulResources": False}})
    assert diagnostics(analyze(off, bucket)) == []


def test_the_ec2_lookup_asks_describe_capacity_reservations_and_survives_errors(monkeypatch):
    client = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)  # validates the request and the response against botocore's EC2 model
    stub.add_response("describe_capacity_reservations",
                      {"CapacityReservations": [{"CapacityReservationId": "cr-0123456789abcdef0", "AvailabilityZone": "us-west-2b"}]},
                      {"CapacityReservationIds": ["cr-0123456789abcdef0"]})  # fmt: skip
    stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound")
    stub.activate()
    monkeypatch.setattr(
        crossguard.boto3, "Session", lambda **kw: type("S", (), {"client": lambda self, name: client})()
    )
    assert crossguard.ec2_reservation_azs(["cr-0123456789abcdef0"], "us-west-2", None) == {
        "cr-0123456789abcdef0": "us-west-2b"
    }
    assert crossguard.ec2_reservation_azs(["cr-0123456789abcdef0"], "us-west-2", None) == {}


# --------------------------------------------------------------------------- every example stack, first preview and known


class FirstPreviewMocks(plan_mocks.PlanMocks):
    """A first preview: no id, and every output the provider computes unknown."""

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        rid, state = super().new_resource(args)
        if args.typ == plan_mocks.STACK_REFERENCE:  # a lower layer that exists already: read, known
            return rid, state
        if not args.custom:
            return "", state
        return "", {k: (v if args.inputs.get(k) is not None else rpc.UNKNOWN) for k, v in state.items()}


class GraphMonitor(plan_mocks.RecordingMonitor):
    """Also records the property dependencies of each registration, as the engine keeps them."""

    def __init__(self, mocks: plan_mocks.PlanMocks):
        super().__init__(mocks)
        self.property_dependencies: dict[str, dict[str, list[str]]] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        self.property_dependencies[response.urn] = {k: list(v.urns) for k, v in request.propertyDependencies.items()}
        return response


def run_program(name: str, *, first_preview: bool) -> list[dict[str, Any]]:
    """The program of an example stack under mocks; its resources with inputs and outputs as
    the engine would hand them to Analyze and AnalyzeStack."""
    values = stack_values(name)
    cfg = config.parse_stack_values(values)
    settings.ROOT.set(None)
    # A layered stack reads its lower layer (already deployed) through a stack reference.
    referenced = {cfg.lower_stack: plan.lower_outputs(cfg, EXAMPLES, (name,))} if cfg.layer in LOWER_LAYER else {}
    mocks = (FirstPreviewMocks if first_preview else plan_mocks.PlanMocks)(cfg.region, referenced)
    monitor = GraphMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=name, preview=first_preview, monitor=monitor)
    runtime_config.set_all_config({k: engine_value(v) for k, v in values.items()}, secret_keys(values))
    pulumi.runtime.test(lambda: pulumi.Output.from_input(sorted(program.build_layer(config.load()))))()
    out = []
    for reg in monitor.registrations.values():
        state = monitor.resources[reg.urn].state if reg.urn in monitor.resources else {}
        if reg.custom:
            outputs = {**state, "id": monitor.resources[reg.urn].id or props.UNKNOWN}
        elif reg.type == props.T_EKS_COMPONENT:  # a remote component: its registered outputs only
            outputs = {k: state.get(k, props.UNKNOWN) for k in EKS["component_outputs"]}
        else:
            outputs = {}
        out.append({"type": reg.type, "urn": reg.urn, "name": reg.name, "protect": reg.protect,
                    "parent": reg.parent, "dependencies": reg.dependencies, "inputs": reg.inputs,
                    "outputs": outputs, "propertyDependencies": monitor.property_dependencies.get(reg.urn, {})})  # fmt: skip
    return out


def filled(value: Any) -> Any:
    """`value` with every unknown replaced by a known string."""
    if value == props.UNKNOWN:
        return "known"
    if isinstance(value, dict):
        return {k: filled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v) for v in value]
    return value


def known_resources(name: str) -> list[dict[str, Any]]:
    """The offline plan's resources (known values): outputs are the inputs and the id, as a
    provider echoes them; the remote component shows its output keys only."""
    out = []
    for r in stack_plan(name)["resources"]:
        if "eks:index:Cluster" in str(r["parent"]):
            # What pulumi-eks computes inside its component (the OIDC thumbprint, its provider's
            # kubeconfig) stays unknown in the offline plan; on `pulumi up` it is known.
            r = {**r, "inputs": filled(r["inputs"])}
        outputs = {**r["inputs"], "id": r["id"]} if r["custom"] else {}
        if r["type"] == props.T_EKS_COMPONENT:
            outputs = dict.fromkeys(EKS["component_outputs"], "known")
        out.append({**r, "outputs": outputs})
    return out


def assert_every_policy_runs_and_passes(resources: list[dict[str, Any]], region: str) -> None:
    s = servicer()
    diags = [d for r in resources for d in diagnostics(analyze(s, r))]
    diags += diagnostics(analyze_stack(s, resources, region=region))
    assert skipped(diags) == []
    assert diags == []


@pytest.mark.parametrize("name", EXAMPLE_STACKS)
def test_every_policy_runs_and_passes_on_a_first_preview_of_every_example_stack(name: str):
    resources = run_program(name, first_preview=True)
    if config.parse_stack_values(stack_values(name)).layer in LOWER_LAYER:
        # An upper layer's inputs come from its lower layer, which exists already: only the
        # ids of the layer's own resources are unknown.
        ids = [
            r["outputs"]["id"] for r in resources if "id" in r["outputs"] and r["type"] != plan_mocks.STACK_REFERENCE
        ]
        assert ids and all(i == props.UNKNOWN for i in ids)
    else:
        assert sum(unknowns(r["inputs"]) for r in resources) > 20  # the first preview really is one
    assert_every_policy_runs_and_passes(resources, str(stack_values(name)["aws:region"]))


@pytest.mark.parametrize("name", EXAMPLE_STACKS)
def test_every_policy_runs_and_passes_on_every_example_stack_with_known_values(name: str):
    resources = known_resources(name)
    assert sum(unknowns(r["inputs"]) for r in resources) == 0
    assert_every_policy_runs_and_passes(resources, str(stack_values(name)["aws:region"]))


def test_the_first_preview_still_finds_violations():
    """Break the subjects of a resource rule and a stack rule in a first preview: both report."""
    resources = run_program("trn1-llama2", first_preview=True)
    for r in resources:
        if r["type"] == props.T_FSX:
            r["inputs"]["skipFinalBackup"] = True
        if r["type"] == props.T_LAUNCH_TEMPLATE:
            r["inputs"]["metadataOptions"]["httpPutResponseHopLimit"] = 2
        if r["type"] == props.T_EGRESS and r["outputs"].get("referencedSecurityGroupId") is not None:
            r["outputs"]["referencedSecurityGroupId"] = "sg-elsewhere"
    s = servicer()
    found = {p for r in resources for p, level, _, _ in diagnostics(analyze(s, r)) if level == MANDATORY}
    found |= {p for p, level, _, _ in diagnostics(analyze_stack(s, resources)) if level == MANDATORY}
    assert {"fsx-durability", "launch-template-hardening", "efa-security-groups"} <= found


# --------------------------------------------------------------------------- the pack as the engine starts it


def test_the_pack_boots_as_the_engine_starts_it_and_answers_over_grpc():
    command = [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(ROOT / "policy")]
    env = {**os.environ, "PYTHONPATH": ""}
    with subprocess.Popen(
        command, cwd=ROOT / "policy", stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as pack:
        try:
            assert pack.stdout is not None
            port = int(pack.stdout.readline().decode().strip())
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = analyzer_pb2_grpc.AnalyzerStub(channel)
                info = stub.GetAnalyzerInfo(empty_pb2.Empty())
                assert info.name == crossguard.PACK_NAME
                kinds = {p.name: p.policy_type for p in info.policies}
                assert kinds == {r.id: (proto.PolicyType.POLICY_TYPE_RESOURCE if isinstance(r, rules.ResourceRule)
                                        else proto.PolicyType.POLICY_TYPE_STACK) for r in rules.RULES}  # fmt: skip
                response = stub.Analyze(
                    proto.AnalyzeRequest(type=props.T_EKS_CLUSTER, urn="urn:x", name="c", properties=struct(BAD_EKS))
                )
                assert {d.policyName for d in response.diagnostics} == {"eks-control-plane"}
        finally:
            pack.kill()
