"""Teams share a cluster but not each other's data by accident: each team's runs live in its own
namespace, with its own claim of the shared file system seen through its own sub-path, its own
LocalQueue, and the Hugging Face token only where the run that needs it is. A stack without
teams keeps its one `training` namespace and its one claim of the whole file system."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from facts.names import DEFAULT_QUEUE, MPI_JOB_NAME_LABEL, WORKLOADS_NAMESPACE
from tests import upstream
from tests.conftest import ALL_IN_ONE_STACKS, run_plan, stack_plan, stack_values
from tests.pods import pods
from tools import plan as plan_mod

SHARED = "trn1-shared"
TEAMS = ("product", "research")


def objects(plan: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [o for o in plan_mod.kubernetes_objects(plan) if o["kind"] == kind]


def file_system_id(plan: dict[str, Any]) -> str:
    (fs,) = [r for r in plan["resources"] if r["type"] == "aws:fsx/lustreFileSystem:LustreFileSystem"]
    return str(fs["id"])


def test_each_team_has_its_namespace_and_the_stack_no_other() -> None:
    namespaces = {o["metadata"]["name"] for o in objects(stack_plan(SHARED), "Namespace")}
    assert namespaces == {"team-product", "team-research", "neuron-healthcheck-system"}


def test_each_team_has_its_own_claim_of_the_same_file_system_under_its_own_sub_path() -> None:
    """A claim is namespaced and binds one volume: one volume per team, each with its own handle
    (the driver keys only its in-flight calls by it: tests/upstream/aws-fsx-csi-driver-v1.9.0-node.yaml),
    the same file system's DNS name and mount name, so every team mounts the same Lustre."""
    plan = stack_plan(SHARED)
    volumes = {o["metadata"]["name"]: o for o in objects(plan, "PersistentVolume")}
    claims = {o["metadata"]["namespace"]: o for o in objects(plan, "PersistentVolumeClaim")}
    assert set(volumes) == {f"shared-fsx-{t}" for t in TEAMS}
    assert set(claims) == {f"team-{t}" for t in TEAMS}
    handles = {v["spec"]["csi"]["volumeHandle"] for v in volumes.values()}
    assert handles == {f"{file_system_id(plan)}::{t}" for t in TEAMS}
    assert len({str(v["spec"]["csi"]["volumeAttributes"]) for v in volumes.values()}) == 1
    for team in TEAMS:
        claim = claims[f"team-{team}"]
        assert claim["metadata"]["name"] == "shared-fsx"
        assert claim["spec"]["volumeName"] == f"shared-fsx-{team}"


@pytest.mark.parametrize("stack", [SHARED, "trn1-llama2"])
def test_every_pod_sees_its_teams_directory_as_shared(stack: str) -> None:
    """With teams, every /shared mount is the team's `teams/<team>` (the kubelet makes it when it is
    missing: tests/upstream/kubernetes-kubelet-subpath.yaml); without teams, the whole file system."""
    kubelet = upstream.facts("kubernetes-kubelet-subpath")
    assert "created by the kubelet" in kubelet["missing_sub_path"]
    for pod in pods(stack_plan(stack)):
        team = pod.namespace.removeprefix("team-") if pod.namespace != WORKLOADS_NAMESPACE else None
        shared = [m for c in pod.spec["containers"] for m in c["volumeMounts"] if m["name"] == "shared"]
        for mount in shared:
            assert mount.get("subPath") == (f"teams/{team}" if team else None), (pod.name, mount)
            assert mount["mountPath"] == "/shared"
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod.spec["volumes"] if "persistentVolumeClaim" in v}
        assert claims <= {"shared-fsx"}


def test_runs_queues_and_secrets_live_in_the_namespace_of_their_team() -> None:
    plan = stack_plan(SHARED)
    for obj in plan_mod.kubernetes_objects(plan):
        name = obj["metadata"]["name"]
        owner = next((t for t in TEAMS if name.startswith(f"bert-{t}")), None)
        if owner:
            assert obj["metadata"]["namespace"] == f"team-{owner}", name
    for lq in objects(plan, "LocalQueue"):
        assert lq["metadata"]["namespace"] == f"team-{lq['metadata']['name']}"


def _llama2_of_team(values: dict[str, Any]) -> dict[str, Any]:
    values = copy.deepcopy(values)
    values["llm-training-eks:teams"] = {"research": {"nodeGroup": "trn1", "nodes": 4, "priority": 10}}
    values["llm-training-eks:queueing"] = {"defaultQueue": False}
    values["llm-training-eks:workloads"]["llama2"]["team"] = "research"
    return values


def test_the_hugging_face_token_is_readable_only_where_it_is_used() -> None:
    """The token's Secret is in the namespace of the run that downloads with it; only that run's
    two download Jobs mount it (as a file), no pod has a service-account token to read it
    through the API, and no other namespace has it."""
    plan = run_plan(_llama2_of_team(stack_values("trn1-llama2")), "trn1-llama2")
    (secret,) = objects(plan, "Secret")
    assert secret["metadata"]["namespace"] == "team-research"
    readers = set()
    for pod in pods(plan):
        assert pod.spec["automountServiceAccountToken"] is False
        for volume in pod.spec["volumes"]:
            if volume.get("secret", {}).get("secretName") == secret["metadata"]["name"]:
                readers.add(pod.name)
        for c in pod.spec["containers"]:
            assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in c.get("env", [])), pod.name
    assert readers == {n for n in (p.name for p in pods(plan)) if "-tokenizer-" in n or "-dataset-" in n}
    assert len(readers) == 2


def test_the_download_jobs_read_the_token_from_the_file_huggingface_hub_reads() -> None:
    hub = upstream.facts("huggingface-hub-0.22.2")
    assert hub["token_file"] == "{HF_HOME}/token"
    plan = stack_plan("trn1-llama2")
    (tokenizer,) = [p for p in pods(plan) if "-tokenizer-" in p.name]
    (c,) = tokenizer.spec["containers"]
    env = {e["name"]: e["value"] for e in c["env"]}
    mount = next(m for m in c["volumeMounts"] if m["name"] == "hf-token")
    volume = next(v for v in tokenizer.spec["volumes"] if v["name"] == "hf-token")
    assert mount["mountPath"] == env["HF_HOME"] and mount["readOnly"] is True
    assert (
        hub["token_file"].format(HF_HOME=env["HF_HOME"])
        == f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"
    )
    # The hub writes its caches, which must not go to the read-only secret volume.
    assert set(hub["cache_env"]) <= set(env) and all(env[k].startswith("/tmp/") for k in hub["cache_env"])
    assert "HF_TOKEN" not in env


def test_the_cluster_queue_of_a_team_admits_only_its_namespace() -> None:
    plan = stack_plan(SHARED)
    for cq in objects(plan, "ClusterQueue"):
        name = cq["metadata"]["name"]
        assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": f"team-{name}"}}


@pytest.mark.parametrize("stack", ALL_IN_ONE_STACKS)
def test_a_stack_without_teams_keeps_one_training_namespace_and_its_claim(stack: str) -> None:
    plan = stack_plan(stack)
    if stack_values(stack).get("llm-training-eks:teams"):
        pytest.skip("a stack with teams")
    assert {o["metadata"]["name"] for o in objects(plan, "Namespace")} - {"neuron-healthcheck-system"} == {
        WORKLOADS_NAMESPACE
    }
    (volume,) = objects(plan, "PersistentVolume")
    assert volume["metadata"]["name"] == "shared-fsx"
    assert volume["spec"]["csi"]["volumeHandle"] == file_system_id(plan)
    (claim,) = objects(plan, "PersistentVolumeClaim")
    assert claim["metadata"] == {"name": "shared-fsx", "namespace": WORKLOADS_NAMESPACE}
    names = {r["name"] for r in plan["resources"]}
    assert {"addons-workloads", "shared-volume-pv", "shared-volume-pvc"} <= names  # URNs kept


def test_each_namespace_gets_its_policies_and_each_mpijob_its_peers() -> None:
    plan = stack_plan(SHARED)
    by_namespace: dict[str, set[str]] = {}
    for policy in objects(plan, "NetworkPolicy"):
        by_namespace.setdefault(policy["metadata"]["namespace"], set()).add(policy["metadata"]["name"])
    for team in TEAMS:
        job = f"bert-{team}-run-001-train"
        assert by_namespace[f"team-{team}"] == {"default-deny", "allow-dns", "allow-internet-egress", f"{job}-peers"}
    for policy in objects(plan, "NetworkPolicy"):
        if policy["metadata"]["name"].endswith("-peers"):
            job = policy["metadata"]["name"].removesuffix("-peers")
            assert policy["spec"]["podSelector"] == {"matchLabels": {MPI_JOB_NAME_LABEL: job}}


def test_platform_namespaces_are_the_tenants() -> None:
    from infra.tenancy import tenants_of

    assert {k: (t.namespace, t.sub_path) for k, t in tenants_of([]).items()} == {DEFAULT_QUEUE: ("training", "")}
    assert {k: (t.namespace, t.sub_path) for k, t in tenants_of(["a-b"]).items()} == {"a-b": ("team-a-b", "teams/a-b")}
