"""Kueue: flavors match node groups, quotas never exceed capacity, every job is queued and
every resource it requests is covered by its ClusterQueue; config errors name the key."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

import pytest
import yaml

import config
from facts import names
from facts.names import QUEUE_LABEL
from infra.platform import LAUNCHER_REQUESTS
from infra.queues import Quota, Team, cluster_queue, kueue_manager_config, teams_of
from tests.conftest import resources, stack_plan, stack_values

RELEASE = "kubernetes:helm.sh/v3:Release"
MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"


def kueue_objects(plan: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {
        r["inputs"]["metadata"]["name"]: r["inputs"]
        for r in plan["resources"]
        if r["type"] == f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}"
    }


def quantity(q: str) -> float:
    """A Kubernetes quantity as a number (Gi/Mi as bytes)."""
    for unit, mult in (("Gi", 2**30), ("Mi", 2**20)):
        if q.endswith(unit):
            return float(q[: -len(unit)]) * mult
    return float(q)


def parsed(stack: str) -> config.StackConfig:
    return config.parse(config.from_stack_values(stack_values(stack)))


# --------------------------------------------------------------------------- the plan of every stack


def test_kueue_is_pinned_with_job_integrations_and_all_or_nothing_admission(example_stack: str) -> None:
    (kueue,) = [r["inputs"] for r in resources(stack_plan(example_stack), RELEASE) if r["inputs"]["name"] == "kueue"]
    assert kueue["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert kueue["version"].startswith("0.19.")
    assert kueue["namespace"] == "kueue-system"
    manager = yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert manager["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    # LeaderWorkerSets too where the stack installs their controller (a serving run across nodes).
    lws = ["leaderworkerset.x-k8s.io/leaderworkerset"] if parsed(example_stack).leader_worker_set else []
    assert manager["integrations"]["frameworks"] == ["batch/job", "kubeflow.org/mpijob", "deployment", "pod", *lws]
    ready = manager["waitForPodsReady"]
    queueing = parsed(example_stack).queueing
    assert (
        ready["timeout"] == f"{queueing.pods_ready_timeout_minutes}m"
        and ready["recoveryTimeout"] == f"{queueing.recovery_timeout_minutes}m"
    )
    assert ready["requeuingStrategy"]["backoffLimitCount"] == 5


def test_flavors_match_the_node_groups(example_stack: str) -> None:
    cfg = parsed(example_stack)
    flavors = kueue_objects(stack_plan(example_stack), "ResourceFlavor")
    assert set(flavors) == {ng.name for ng in cfg.node_groups} | {"system"}
    for ng in cfg.node_groups:
        spec = flavors[ng.name]["spec"]
        assert spec["nodeLabels"] == {names.NODE_GROUP_LABEL: ng.name}
        assert spec["nodeTaints"] == [{"key": t.key, "value": t.value, "effect": t.effect} for t in ng.instance.taints]
    assert flavors["system"]["spec"]["nodeLabels"] == {names.NODE_GROUP_LABEL: "system"}


def test_every_mpijob_is_labelled_with_an_existing_queue_and_priority(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    local = kueue_objects(plan, "LocalQueue")
    cluster = kueue_objects(plan, "ClusterQueue")
    priorities = kueue_objects(plan, "WorkloadPriorityClass")
    assert local and set(local) == set(cluster)
    for name, lq in local.items():
        # Each team's LocalQueue is in the team's namespace; its ClusterQueue admits from there only.
        namespace = "training" if name == "default" else f"team-{name}"
        assert lq["metadata"]["namespace"] == namespace and lq["spec"]["clusterQueue"] == name
        selector = cluster[name]["spec"]["namespaceSelector"]
        assert selector == {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    assert {cq["spec"]["cohortName"] for cq in cluster.values()} == {"llm-training"}
    for r in resources(plan, MPIJOB):
        labels = r["inputs"]["metadata"]["labels"]
        assert labels[QUEUE_LABEL] in local, r["name"]
        assert local[labels[QUEUE_LABEL]]["metadata"]["namespace"] == r["inputs"]["metadata"]["namespace"], r["name"]
        assert labels["kueue.x-k8s.io/priority-class"] in priorities, r["name"]
        assert "suspend" not in r["inputs"]["spec"]["runPolicy"]  # Kueue's webhook owns it


def test_queues_are_created_after_kueue_and_jobs_after_the_queues() -> None:
    plan = stack_plan("trn1-shared")
    by = {r["urn"]: r for r in plan["resources"]}
    kueue = next(r["urn"] for r in resources(plan, RELEASE) if r["inputs"]["name"] == "kueue")
    queue_urns = {r["urn"] for r in plan["resources"] if r["type"].startswith("kubernetes:kueue.x-k8s.io/")}
    for urn in queue_urns:
        assert kueue in by[urn]["dependencies"]
    for r in resources(plan, MPIJOB):
        team = r["inputs"]["metadata"]["labels"][QUEUE_LABEL]
        mine = {u for u in queue_urns if by[u]["inputs"]["metadata"]["name"] in (team, f"team-{team}")}
        flavors = {u for u in queue_urns if by[u]["inputs"]["kind"] == "ResourceFlavor"}
        # A run waits for its own team's queues and the flavors, never another team's queues.
        assert mine | flavors <= set(r["dependencies"]), r["name"]
        assert not (queue_urns - mine - flavors) & set(r["dependencies"]), r["name"]


def _capacity(cfg: config.StackConfig) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for ng in cfg.node_groups:
        facts = ng.node_group(cfg.node_group_az(ng))
        for res, q in facts.worker_requests().items():
            out[(ng.name, res)] = quantity(q) * ng.desired_size
    return out


def test_quotas_never_exceed_node_group_capacity(example_stack: str) -> None:
    cfg = parsed(example_stack)
    capacity = _capacity(cfg)
    nominal: dict[tuple[str, str], float] = defaultdict(float)
    for cq in kueue_objects(stack_plan(example_stack), "ClusterQueue").values():
        for group in cq["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    nominal[(flavor["name"], res["name"])] += quantity(res["nominalQuota"])
                    if flavor["name"] != "system" and "borrowingLimit" in res:
                        assert quantity(res["borrowingLimit"]) <= capacity[(flavor["name"], res["name"])]
    for (flavor, res), total in nominal.items():
        if flavor == "system":
            continue
        assert total <= capacity[(flavor, res)], (flavor, res, total)


def _flavor_of(pod_spec: dict[str, Any]) -> str:
    return str(pod_spec["nodeSelector"][names.NODE_GROUP_LABEL])


def test_every_request_of_every_job_is_covered_by_its_cluster_queue(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    local = kueue_objects(plan, "LocalQueue")
    cluster = kueue_objects(plan, "ClusterQueue")
    jobs = resources(plan, MPIJOB)
    if not jobs:
        pytest.skip("no workloads on this stack")
    for r in jobs:
        cq = cluster[local[r["inputs"]["metadata"]["labels"][QUEUE_LABEL]]["spec"]["clusterQueue"]]
        (group,) = cq["spec"]["resourceGroups"]
        limits = {
            (f["name"], res["name"]): quantity(res["nominalQuota"]) + quantity(res.get("borrowingLimit", "0"))
            for f in group["flavors"]
            for res in f["resources"]
        }
        asked: dict[tuple[str, str], float] = defaultdict(float)
        for spec in r["inputs"]["spec"]["mpiReplicaSpecs"].values():
            pod = spec["template"]["spec"]
            flavor = _flavor_of(pod)
            for c in pod["containers"]:
                for res, q in c["resources"]["requests"].items():
                    assert res in group["coveredResources"], (r["name"], res)
                    asked[(flavor, res)] += quantity(q) * spec["replicas"]
        for key, amount in asked.items():
            assert key in limits, (r["name"], key)
            assert amount <= limits[key], (r["name"], key, amount, limits[key])


def test_two_teams_share_one_reserved_node_group_one_borrowing() -> None:
    cluster = kueue_objects(stack_plan("trn1-shared"), "ClusterQueue")
    assert set(cluster) == {"product", "research"}

    def trn1(name: str) -> dict[str, dict[str, str]]:
        (group,) = cluster[name]["spec"]["resourceGroups"]
        (flavor,) = [f for f in group["flavors"] if f["name"] == "trn1"]
        return {res["name"]: res for res in flavor["resources"]}

    assert trn1("product")[names.NEURON_RESOURCE] == {
        "name": names.NEURON_RESOURCE,
        "nominalQuota": "32",
        "borrowingLimit": "0",
    }
    assert trn1("research")[names.NEURON_RESOURCE]["borrowingLimit"] == "32"
    priorities = kueue_objects(stack_plan("trn1-shared"), "WorkloadPriorityClass")
    assert priorities["team-product"]["value"] > priorities["team-research"]["value"]


def test_without_teams_one_default_queue_owns_every_node_group() -> None:
    cfg = parsed("p5-capacity-block")
    (team,) = teams_of(cfg.teams, {ng.name: ng.node_group(cfg.node_group_az(ng)) for ng in cfg.node_groups})
    assert team.name == "default" and team.quotas == {"p5": Quota(2, None)}


def test_launcher_quota_covers_as_many_runs_as_nodes_can_hold() -> None:
    g = (
        parsed("trn1-shared")
        .node_groups[0]
        .node_group(parsed("trn1-shared").node_group_az(parsed("trn1-shared").node_groups[0]))
    )
    cq = cluster_queue(Team("t", {"trn1": Quota(1, 2)}, "team-t"), {"trn1": g})
    (group,) = cq["spec"]["resourceGroups"]
    (system,) = [f for f in group["flavors"] if f["name"] == "system"]
    cpu = {res["name"]: res["nominalQuota"] for res in system["resources"]}["cpu"]
    assert quantity(cpu) == 3 * quantity(LAUNCHER_REQUESTS["cpu"])


def test_manager_config_follows_queueing_config() -> None:
    values = copy.deepcopy(stack_values("dev"))
    values["llm-training-eks:queueing"] = {"podsReadyTimeoutMinutes": 45, "requeueLimit": 2}
    cfg = config.parse(config.from_stack_values(values))
    manager = yaml.safe_load(kueue_manager_config(cfg.queueing))
    assert manager["waitForPodsReady"]["timeout"] == "45m"
    assert manager["waitForPodsReady"]["requeuingStrategy"]["backoffLimitCount"] == 2


# --------------------------------------------------------------------------- config errors


def _problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(config.ConfigError) as e:
        config.parse(config.from_stack_values(values))
    return e.value.problems


def _shared() -> dict[str, Any]:
    return copy.deepcopy(stack_values("trn1-shared"))


def test_quotas_over_capacity_name_the_key() -> None:
    values = _shared()
    values["llm-training-eks:teams"]["research"]["nodes"] = 3
    values["llm-training-eks:teams"]["research"]["borrowingLimitNodes"] = 1
    (line,) = _problems(values)
    assert line.startswith("teams.research.nodes: the teams on node group 'trn1' ask for 5 nodes")


def test_unknown_node_group_of_a_team_names_the_key() -> None:
    values = _shared()
    values["llm-training-eks:teams"]["product"]["nodeGroup"] = "trn2"
    problems = _problems(values)
    assert any(p.startswith("teams.product.nodeGroup: unknown node group 'trn2'") for p in problems)


def test_unknown_team_of_a_workload_names_the_key() -> None:
    values = _shared()
    values["llm-training-eks:workloads"]["bert-product"]["team"] = "prodcut"
    (line,) = _problems(values)
    assert line.startswith("workloads.bert-product.team: unknown team 'prodcut' (did you mean 'product'?)")


def test_missing_team_when_teams_exist_names_the_key() -> None:
    values = _shared()
    del values["llm-training-eks:workloads"]["bert-product"]["team"]
    (line,) = _problems(values)
    assert line.startswith("workloads.bert-product.team: required when teams are defined")


def test_a_team_without_teams_configured_is_refused() -> None:
    values = copy.deepcopy(stack_values("trn1-bert"))
    values["llm-training-eks:workloads"]["bert"]["team"] = "research"
    (line,) = _problems(values)
    assert line.startswith("workloads.bert.team: 'research' is not a team")


def test_a_run_larger_than_its_team_can_ever_get_is_refused() -> None:
    values = _shared()
    values["llm-training-eks:workloads"]["bert-product"]["nodes"] = 4
    (line,) = _problems(values)
    assert line.startswith("workloads.bert-product.nodes: 4 nodes can never be admitted")


def test_borrowing_beyond_what_the_other_teams_lend_is_refused() -> None:
    values = _shared()
    values["llm-training-eks:teams"]["research"]["borrowingLimitNodes"] = 3
    (line,) = _problems(values)
    assert line.startswith(
        "teams.research.borrowingLimitNodes: 3, but the other teams on node group 'trn1' lend only 2"
    )


def test_a_node_group_named_system_is_refused() -> None:
    values = copy.deepcopy(stack_values("dev"))
    values["llm-training-eks:nodeGroups"][0]["name"] = "system"
    assert any(p.startswith("nodeGroups[0].name: 'system'") for p in _problems(values))
