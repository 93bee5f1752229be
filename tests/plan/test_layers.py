"""The layered stacks under mocks: each layer plans offline on the outputs of the layer below,
the three layers together declare exactly what the all-in-one stack does, and day-2 changes
touch only the layer they belong to.

trn1-llama2 (all-in-one) and trn1-llama2-aws / -cluster / -runs (layered) describe the same
environment; the layered aws stack adds the in-VPC CI runner, which is also its path to the API
(the all-in-one stack opens the public endpoint to one address instead). trn1-shared and its
three layers are an environment with teams: the runs layer reads the teams through the cluster
layer's `platform` output.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from config import parse_stack_values
from config.checks import layered_serving
from config.stackfile import SECRET
from facts.names import PROJECT, component_type
from infra import layers
from tests.conftest import example_file, run_plan, stack_plan, stack_values, stack_yaml
from tools import plan as plan_mod

ALL = "trn1-llama2"
LAYERED = {"aws": "trn1-llama2-aws", "cluster": "trn1-llama2-cluster", "runs": "trn1-llama2-runs"}
ENVIRONMENTS = {env: {layer: f"{env}-{layer}" for layer in LAYERED} for env in (ALL, "trn1-shared")}
"""Each all-in-one example stack that has a layered twin, with its three layers."""
READS = "pulumi:pulumi:StackReference"
WORKLOAD = component_type("workloads", "Workload")


def key(r: dict[str, Any]) -> tuple[str, str]:
    return r["type"], r["name"]


def normalized(value: Any, stack: str) -> Any:
    """Inputs with the stack's name taken out of URNs (a resource reference names its stack)."""
    if isinstance(value, str):
        return value.replace(f"urn:pulumi:{stack}::", "urn:pulumi:<stack>::")
    if isinstance(value, dict):
        return {k: normalized(v, stack) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v, stack) for v in value]
    return value


# How the deployer reaches the API: the one thing the two shapes set differently.
API_PATH_INPUTS = ("endpointPublicAccess", "publicAccessCidrs")


def without_api_path(inputs: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in inputs.items() if k not in API_PATH_INPUTS}
    if isinstance(out.get("vpcConfig"), dict):
        out["vpcConfig"] = {k: v for k, v in out["vpcConfig"].items() if k not in API_PATH_INPUTS}
    return out


def by_key(stack: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {key(r): r for r in stack_plan(stack)["resources"]}


def layer_of() -> dict[tuple[str, str], str]:
    """(type, name) -> the layer that declares it, from the layered example stacks."""
    out: dict[tuple[str, str], str] = {}
    for layer, stack in LAYERED.items():
        for k in by_key(stack):
            out.setdefault(k, layer)
    return out


# --------------------------------------------------------------------------- the split


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_the_three_layers_declare_exactly_the_all_in_one_stack(env: str) -> None:
    whole, layered = by_key(env), ENVIRONMENTS[env]
    split: dict[tuple[str, str], dict[str, Any]] = {}
    for stack in layered.values():
        split.update({k: r for k, r in by_key(stack).items() if r["type"] != READS})
    runner = {k for k, r in split.items() if "ci-runner" in r["urn"]}
    assert runner, "the layered aws stack declares the in-VPC CI runner"
    # The aws layer does not know the runs: it builds the image of every registry repository
    # with a Dockerfile, the all-in-one stack only those its runs use.
    images = {k for k, r in split.items() if component_type("infra", "ImageBuilds") in r["urn"] and k not in whole}
    assert set(split) - runner - images == set(whole), (
        sorted(set(split) - runner - images - set(whole)),
        sorted(set(whole) - set(split)),
    )
    differ = [
        k
        for k in whole
        if component_type("infra", "ImageBuilds") not in whole[k]["urn"]  # they name the repositories built
        if without_api_path(normalized(whole[k]["inputs"], env))
        != without_api_path(normalized(split[k]["inputs"], next(s for s in layered.values() if k in by_key(s))))
    ]
    assert not differ, f"inputs differ between the all-in-one and the layered stacks: {differ}"


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_each_layer_reads_its_lower_stack_and_only_that(env: str) -> None:
    layered = ENVIRONMENTS[env]
    reads = {layer: [r for r in stack_plan(s)["resources"] if r["type"] == READS] for layer, s in layered.items()}
    assert reads["aws"] == []
    for layer, lower in (("cluster", "aws"), ("runs", "cluster")):
        (ref,) = reads[layer]
        assert ref["inputs"]["name"] == f"organization/{PROJECT}/{layered[lower]}"


def test_the_aws_layer_never_needs_the_kubernetes_api() -> None:
    resources = stack_plan(LAYERED["aws"])["resources"]
    assert not [r["type"] for r in resources if r["type"].startswith("kubernetes:")]
    # pulumi-eks makes a Kubernetes provider for its cluster whatever the arguments; nothing uses it here.
    providers = [r for r in resources if r["type"] == "pulumi:providers:kubernetes"]
    assert all("eks:index:Cluster" in r["parent"] for r in providers)
    assert not [r for r in resources if any(p["urn"] in (r.get("provider") or "") for p in providers)]


def test_the_cluster_and_runs_layers_need_only_the_kubernetes_api() -> None:
    for layer in ("cluster", "runs"):
        types = {r["type"] for r in stack_plan(LAYERED[layer])["resources"]}
        assert not {t for t in types if t.startswith(("aws:", "eks:"))}, layer


def test_the_cluster_layer_builds_on_the_aws_layers_values() -> None:
    aws = stack_plan(LAYERED["aws"])["outputs"][layers.AWS_LAYER_OUTPUT]
    cluster = stack_plan(LAYERED["cluster"])
    (pv,) = [r for r in cluster["resources"] if r["type"] == "kubernetes:core/v1:PersistentVolume"]
    assert pv["inputs"]["spec"]["csi"]["volumeHandle"] == aws["fileSystem"]["id"]
    assert pv["inputs"]["spec"]["csi"]["volumeAttributes"] == {
        "dnsname": aws["fileSystem"]["dnsName"],
        "mountname": aws["fileSystem"]["mountName"],
    }
    (fsx,) = [r for r in cluster["resources"] if r["name"] == "addons-aws-fsx-csi-driver"]
    assert aws["serviceAccountRoleArns"]["fsx-csi"] in str(fsx["inputs"]["values"])
    assert cluster["outputs"][layers.PLATFORM_OUTPUT]["registryUrls"] == aws["registryUrls"]


def test_a_run_failure_can_only_fail_the_runs_layer() -> None:
    """Awaited objects (Jobs, MPIJobs with pulumi.com/waitFor) fail the update they are in when a
    run fails; every one of them is in the runs layer, none below it."""
    for layer, stack in LAYERED.items():
        awaited = [
            r["name"]
            for r in stack_plan(stack)["resources"]
            if r["type"] in ("kubernetes:batch/v1:Job", "kubernetes:kubeflow.org/v2beta1:MPIJob")
        ]
        assert bool(awaited) == (layer == "runs"), (layer, awaited)


# --------------------------------------------------------------------------- day 2


def _all_in_one(mutate: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(ALL))
    mutate(values)
    return run_plan(values, ALL)


def _changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """URNs added, removed or with other inputs."""
    a = {r["urn"]: r["inputs"] for r in before["resources"]}
    b = {r["urn"]: r["inputs"] for r in after["resources"]}
    return {u for u in a.keys() | b.keys() if a.get(u) != b.get(u)}


def _layer_of_urn(urn: str, plan: dict[str, Any], layers_by_key: dict[tuple[str, str], str]) -> str:
    """The layer of a resource: as the layered stacks declare it; a new one (a new run's or a new
    team's objects have new names) by the nearest component that the layered stacks declare."""
    if WORKLOAD in urn:
        return "runs"
    resources = {r["urn"]: r for r in plan["resources"]}
    r = resources[urn]
    if key(r) not in layers_by_key and r["type"].startswith("kubernetes:"):
        # A new Kubernetes object (a new team's namespace, whose component the layered stacks
        # declare with other tenants): the aws layer never talks to the Kubernetes API (tested above).
        return "cluster"
    while key(r) not in layers_by_key:
        r = resources[r["parent"]]
    return layers_by_key[key(r)]


def _set_run(**changes: Any) -> Any:
    def mutate(v: dict[str, Any]) -> None:
        v[f"{PROJECT}:workloads"]["llama2"].update(changes)

    return mutate


def _with_team(v: dict[str, Any]) -> None:
    v[f"{PROJECT}:teams"] = {"research": {"nodeGroup": "trn1", "nodes": 4, "priority": 10}}
    v[f"{PROJECT}:queueing"] = {"defaultQueue": False}
    v[f"{PROJECT}:workloads"]["llama2"]["team"] = "research"


DAY2 = {
    "new runId": (_set_run(runId="run-002"), {"runs"}),
    "a run's config": (_set_run(training={"maxSteps": 20000}), {"runs"}),
    # The aws layer's part of a new team is its run outputs' expiry rule on the data bucket (a
    # lifecycle update only: tests/plan/test_team_run_expiry.py).
    "a team": (_with_team, {"aws", "cluster", "runs"}),
}


@pytest.mark.parametrize("change", sorted(DAY2))
def test_a_day2_change_touches_only_its_layers(change: str) -> None:
    mutate, allowed = DAY2[change]
    after = _all_in_one(mutate)
    before = stack_plan(ALL)
    changed = _changed(before, after)
    assert changed
    by = layer_of()
    touched = {
        _layer_of_urn(u, after if any(r["urn"] == u for r in after["resources"]) else before, by) for u in changed
    }
    assert touched <= allowed, f"{change} touches the {sorted(touched - allowed)} layer(s)"


def _layered_files(tmp_path: Path, edit: dict[str, Any], layered: dict[str, str] = LAYERED) -> Path:
    """Copies of the three layered stack files in tmp_path, with `edit` applied per layer."""
    for layer, stack in layered.items():
        doc = yaml.safe_load(example_file(stack).read_text())
        if layer in edit:
            edit[layer](doc["config"])
        (tmp_path / f"Pulumi.{stack}.yaml").write_text(stack_yaml(doc))
    return tmp_path


def _plan_file(path: Path, *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    out, err = io.StringIO(), io.StringIO()
    code = plan_mod.main(["--config-file", str(path), "--format", "json", *extra], stdout=out, stderr=err)
    return code, (yaml.safe_load(out.getvalue()) if code == 0 else None), err.getvalue()


def test_a_new_run_id_is_a_runs_layer_update_only(tmp_path: Path) -> None:
    d = _layered_files(tmp_path, {"runs": lambda c: c[f"{PROJECT}:workloads"]["llama2"].update(runId="run-002")})
    for layer, stack in LAYERED.items():
        code, plan, err = _plan_file(d / f"Pulumi.{stack}.yaml")
        assert code == 0, err
        assert plan is not None
        same = _changed(stack_plan(stack), plan) == set()
        assert same == (layer != "runs"), layer


def test_scaling_to_zero_while_runs_exist(tmp_path: Path) -> None:
    """The aws layer scales trn1 to 0; the cluster layer's quotas follow (queued runs wait); the
    runs stay declared and plan."""

    def to_zero(c: dict[str, Any]) -> None:
        c[f"{PROJECT}:nodeGroups"][0].update(desiredSize=0, minSize=0, maxSize=4)

    d = _layered_files(tmp_path, {"aws": to_zero})
    plans = {}
    for layer, stack in LAYERED.items():
        code, plans[layer], err = _plan_file(d / f"Pulumi.{stack}.yaml")
        assert code == 0, f"{layer}: {err}"
    (ng,) = [r for r in plans["aws"]["resources"] if r["name"] == "ng-trn1-ng"]
    assert ng["inputs"]["scalingConfig"] == {"desiredSize": 0, "minSize": 0, "maxSize": 4}
    (cq,) = [r for r in plans["cluster"]["resources"] if r["inputs"].get("kind") == "ClusterQueue"]
    trn1 = next(f for f in cq["inputs"]["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "trn1")
    assert all(res["nominalQuota"] in ("0", "0Gi") for res in trn1["resources"]), trn1
    assert any(r["inputs"].get("kind") == "MPIJob" for r in plans["runs"]["resources"])


def test_the_lower_outputs_can_come_from_a_recorded_file(tmp_path: Path) -> None:
    recorded = tmp_path / "cluster-outputs.json"
    recorded.write_text(json.dumps(stack_plan(LAYERED["cluster"])["outputs"]))
    code, plan, err = _plan_file(example_file(LAYERED["runs"]), "--lower-outputs", str(recorded))
    assert code == 0, err
    assert plan is not None and _changed(stack_plan(LAYERED["runs"]), plan) == set()
    outputs = stack_plan(LAYERED["cluster"])["outputs"]
    assert outputs[layers.KUBECONFIG_OUTPUT] == SECRET, "recorded like `pulumi stack output --json` prints secrets"


def test_the_runs_layer_reads_its_cluster_layers_teams(tmp_path: Path) -> None:
    """Numbers cross a stack reference as doubles (the engine's protobuf Value: a team's `nodes:
    2` arrives as 2.0); the runs layer reads them as the contract declares them, from the
    offline plan of the cluster stack and from a recorded `pulumi stack output --json` alike."""
    cluster, runs = ENVIRONMENTS["trn1-shared"]["cluster"], ENVIRONMENTS["trn1-shared"]["runs"]
    teams = stack_plan(cluster)["outputs"][layers.PLATFORM_OUTPUT]["teams"]
    assert teams["research"] == {"nodeGroup": "trn1", "nodes": 2, "borrowingLimitNodes": 2, "priority": 10}
    recorded = tmp_path / "cluster-outputs.json"
    recorded.write_text(json.dumps(stack_plan(cluster)["outputs"]))
    for extra in ((), ("--lower-outputs", str(recorded))):
        code, plan, err = _plan_file(example_file(runs), *extra)
        assert code == 0, err
        assert plan is not None and _changed(stack_plan(runs), plan) == set()
    # A fraction is no whole number of nodes: still refused, naming the key.
    broken = copy.deepcopy(stack_plan(cluster)["outputs"])
    broken[layers.PLATFORM_OUTPUT]["teams"]["research"]["nodes"] = 2.5
    recorded.write_text(json.dumps(broken))
    code, _, err = _plan_file(example_file(runs), "--lower-outputs", str(recorded))
    assert code == 2 and "platform.teams.research: Input should be a valid integer" in err, err


def test_a_broken_seam_stops_the_upper_layer_with_exit_2(tmp_path: Path) -> None:
    outputs = copy.deepcopy(stack_plan(LAYERED["aws"])["outputs"])
    del outputs[layers.AWS_LAYER_OUTPUT]["fileSystem"]["dnsName"]
    recorded = tmp_path / "aws-outputs.json"
    recorded.write_text(json.dumps(outputs))
    code, _, err = _plan_file(example_file(LAYERED["cluster"]), "--lower-outputs", str(recorded))
    assert code == 2
    assert "awsLayer.fileSystem.dnsName: missing" in err and "Traceback" not in err


def test_a_region_other_than_the_aws_layers_is_refused(tmp_path: Path) -> None:
    d = _layered_files(tmp_path, {"cluster": lambda c: c.update({"aws:region": "us-east-1"})})
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['cluster']}.yaml")
    assert code == 2 and err.startswith("aws:region: us-east-1, but the aws layer"), err


def test_a_run_larger_than_the_node_group_can_grow_is_refused_in_the_runs_layer(tmp_path: Path) -> None:
    d = _layered_files(tmp_path, {"runs": lambda c: c[f"{PROJECT}:workloads"]["llama2"].update(nodes=8)})
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['runs']}.yaml")
    assert code == 2
    assert err.startswith("workloads.llama2.nodes: 8 nodes, but node group 'trn1' can have at most 4"), err


def test_a_lower_stack_of_the_wrong_layer_is_refused(tmp_path: Path) -> None:
    def wrong(c: dict[str, Any]) -> None:
        c[f"{PROJECT}:lowerStack"] = f"organization/{PROJECT}/{LAYERED['runs']}"

    d = _layered_files(tmp_path, {"cluster": wrong})
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['cluster']}.yaml")
    assert code == 2 and "is a stack of layer 'runs'; the cluster layer reads a stack of layer 'aws'" in err, err


def test_a_serving_run_across_nodes_needs_the_cluster_layers_leaderworkerset(tmp_path: Path) -> None:
    """The cluster layer installs the LeaderWorkerSet controller only when asked (it does not see
    the runs): its platform output says whether it did, and the runs layer refuses a serving run
    across nodes without it, naming the run's key and the cluster layer's."""
    assert stack_plan(LAYERED["cluster"])["outputs"][layers.PLATFORM_OUTPUT]["leaderWorkerSet"] is False
    workloads = parse_stack_values(stack_values("p5-serve-405b")).workloads
    (problem,) = layered_serving(workloads, False, "env-cluster")
    assert problem.startswith("workloads.llama405.nodes: 2 nodes a replica make a LeaderWorkerSet")
    assert "(env-cluster)" in problem and "addons.leaderWorkerSet: true" in problem
    assert layered_serving(workloads, True, "env-cluster") == []
    # A cluster stack deployed before the output existed: the contract says so (exit 2).
    outputs = copy.deepcopy(stack_plan(LAYERED["cluster"])["outputs"])
    del outputs[layers.PLATFORM_OUTPUT]["leaderWorkerSet"]
    recorded = tmp_path / "cluster-outputs.json"
    recorded.write_text(json.dumps(outputs))
    code, _, err = _plan_file(example_file(LAYERED["runs"]), "--lower-outputs", str(recorded))
    assert code == 2 and "platform.leaderWorkerSet: missing" in err, err
