"""A serving replica larger than one node (recipe vllm-serve, `nodes` above 1) on the example stack
p5-serve-405b: a LeaderWorkerSet valid against LWS v0.9.0's CRD, admitted by Kueue as one group,
each pod on a whole node with its EFA devices, vLLM 0.24.0's multi-node launch on the leader and
the headless workers, the leader-only Service, the NetworkPolicy between a group's pods and the
budget over the set; the installed controller and Kueue integration; and every combination that
cannot work refused at config time, naming its key (exit 2)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import config
from config.workloads import VllmServeWorkload
from facts import instances, serving
from facts import leaderworkerset as lws
from facts.names import EFA_RESOURCE, QUEUE_LABEL
from tests.conftest import ROOT, plan_exit, resources, stack_plan, stack_values
from tests.pods import group_labels, pods

STACK = "p5-serve-405b"
NS = "llm-training-eks:"
SET = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
SCHEMA = json.loads((ROOT / "tests" / "schemas" / "leaderworkerset-v1.schema.json").read_text())


def _set() -> dict[str, Any]:
    (obj,) = [r["inputs"] for r in resources(stack_plan(STACK), SET)]
    return obj


def _run() -> tuple[str, VllmServeWorkload, config.StackConfig]:
    cfg = config.parse_stack_values(stack_values(STACK))
    ((name, run),) = [(n, r) for n, r in cfg.workloads.items() if isinstance(r, VllmServeWorkload)]
    return name, run, cfg


def _by_name(kind: str) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["metadata"]["name"]: r["inputs"] for r in resources(stack_plan(STACK), kind)}


def test_the_group_is_a_valid_leaderworkerset_of_whole_nodes() -> None:
    obj = _set()
    jsonschema.validate(obj, SCHEMA)
    _, run, cfg = _run()
    (ng,) = [g for g in cfg.node_groups if g.name == run.node_group]
    it = instances.get(ng.instance_type)
    template = obj["spec"]["leaderWorkerTemplate"]
    assert obj["spec"]["replicas"] == run.replicas and template["size"] == run.nodes == 2
    # A rank that restarts alone cannot rejoin; the leader is ready only once the workers joined.
    assert template["restartPolicy"] == lws.RECREATE_GROUP and obj["spec"]["startupPolicy"] == lws.LEADER_CREATED
    for key in ("leaderTemplate", "workerTemplate"):
        (c,) = template[key]["spec"]["containers"]
        limits = c["resources"]["limits"]
        assert c["resources"]["requests"] == limits
        assert limits[it.device_resource] == str(it.accelerator_count)
        assert limits[EFA_RESOURCE] == str(it.efa_interfaces) and it.efa_interfaces == 32, "every EFA device of a p5"


def test_kueue_admits_the_group_through_the_runs_queue() -> None:
    obj = _set()
    queues = set(_by_name("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"))
    assert obj["metadata"]["labels"][QUEUE_LABEL] in queues
    # Kueue's leaderworkerset integration, and the controller, are installed with the stack.
    releases = {r["inputs"]["name"]: r["inputs"] for r in resources(stack_plan(STACK), "kubernetes:helm.sh/v3:Release")}
    assert releases["lws"]["chart"] == lws.CHART and releases["lws"]["namespace"] == lws.NAMESPACE
    assert (
        "- leaderworkerset.x-k8s.io/leaderworkerset"
        in releases["kueue"]["values"]["managerConfig"]["controllerManagerConfigYaml"]
    )


def test_a_stack_that_serves_within_one_node_installs_no_controller() -> None:
    for stack in ("p5-train-serve", "trn2-serve"):
        names = {r["inputs"]["name"] for r in resources(stack_plan(stack), "kubernetes:helm.sh/v3:Release")}
        assert "lws" not in names, stack


def _words(c: dict[str, Any]) -> dict[str, str]:
    words = c["command"][3:]
    return {
        w: words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
        for i, w in enumerate(words)
        if w.startswith("--")
    }


def test_the_leader_serves_and_the_workers_join_it_as_vllm_documents() -> None:
    """tensorParallel within a node, pipelineParallel across: world = nodes x GPUs per node; the
    leader is rank 0 and serves HTTP, each worker takes the index LWS injects and runs headless,
    both rendezvous on the leader's address LWS injects."""
    _, run, _ = _run()
    template = _set()["spec"]["leaderWorkerTemplate"]
    (leader,) = template["leaderTemplate"]["spec"]["containers"]
    (worker,) = template["workerTemplate"]["spec"]["containers"]
    lead, work = _words(leader), _words(worker)
    assert int(lead["--tensor-parallel-size"]) * int(lead["--pipeline-parallel-size"]) == run.nodes * 8
    assert lead["--node-rank"] == "0" and "--headless" not in lead
    assert work["--node-rank"] == f"$({lws.WORKER_INDEX_ENV})" and "--headless" in work
    assert lead["--master-addr"] == work["--master-addr"] == f"$({lws.LEADER_ADDRESS_ENV})"
    assert lead["--nnodes"] == str(run.nodes) and lead["--distributed-executor-backend"] == "mp"
    assert leader["startupProbe"]["httpGet"]["path"] == serving.HEALTH_PATH
    assert "ports" not in worker and "readinessProbe" not in worker and "livenessProbe" not in worker


def test_clients_reach_the_leaders_only_and_a_groups_pods_reach_each_other() -> None:
    name, _, _ = _run()
    set_name = f"{name}-serve"
    svc = _by_name("kubernetes:core/v1:Service")[name]
    by_role = {p.role: p for p in pods(stack_plan(STACK))}
    leader, worker = by_role["vLLM server"], by_role["vLLM group worker"]

    def selected(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    assert selected(svc["spec"]["selector"], leader.labels) and not selected(svc["spec"]["selector"], worker.labels)
    # The second group's leader is also behind the Service; its workers are not.
    assert selected(svc["spec"]["selector"], {**leader.labels, **group_labels(set_name, 1, 0)})
    policies = _by_name("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    peers = policies[f"{set_name}-peers"]["spec"]
    for pod in (leader, worker):
        assert selected(peers["podSelector"]["matchLabels"], pod.labels)
        assert selected(peers["ingress"][0]["from"][0]["podSelector"]["matchLabels"], pod.labels)
        assert "ports" not in peers["ingress"][0], "the executor's message queues bind ports picked at run time"
    other = {**worker.labels, lws.NAME_LABEL: "another-serve"}
    assert not selected(peers["ingress"][0]["from"][0]["podSelector"]["matchLabels"], other)
    assert not selected(policies[f"{name}-clients"]["spec"]["podSelector"]["matchLabels"], worker.labels)
    pdb = _by_name("kubernetes:policy/v1:PodDisruptionBudget")[set_name]["spec"]
    assert pdb["maxUnavailable"] == 1
    assert selected(pdb["selector"]["matchLabels"], leader.labels) and selected(
        pdb["selector"]["matchLabels"], worker.labels
    )


def _with(edit: Any, stack: str = STACK) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    edit(values)
    return values


def _serve(v: dict[str, Any], name: str = "llama405") -> dict[str, Any]:
    return v[NS + "workloads"][name]


REFUSED = [
    # A replica larger than one node without a group of nodes.
    (STACK, lambda v: _serve(v).update(nodes=1), "workloads.llama405.nodes", "set nodes: 2"),
    # Ranks that do not fill the group's GPUs.
    (STACK, lambda v: _serve(v).update(pipelineParallel=3), "workloads.llama405.pipelineParallel", "must be 16"),
    # Tensor parallelism across nodes.
    (
        STACK,
        lambda v: _serve(v).update(tensorParallel=16, pipelineParallel=1),
        "workloads.llama405.tensorParallel",
        "8",
    ),
    # The controller turned off while a run needs it.
    (STACK, lambda v: v.update({NS + "addons": {"leaderWorkerSet": False}}), "addons.leaderWorkerSet", "llama405"),
    # Weights larger than the group's GPUs.
    (
        STACK,
        lambda v: _serve(v)["model"].update(parametersBillions=900),
        "workloads.llama405.nodes",
        "do not fit 16 x 80",
    ),
    # More groups than the node group holds.
    (STACK, lambda v: _serve(v).update(replicas=2), "workloads.llama405.replicas", "4 nodes"),
    # Neuron: one process per replica, no groups and no pipeline stages.
    ("trn2-serve", lambda v: _serve(v, "qwen").update(nodes=2), "workloads.qwen.nodes", "uni"),
    ("trn2-serve", lambda v: _serve(v, "qwen").update(pipelineParallel=2), "workloads.qwen.pipelineParallel", "uni"),
]


@pytest.mark.parametrize(("stack", "edit", "key", "word"), REFUSED, ids=[f"{r[0]}:{r[2]}:{r[3]}" for r in REFUSED])
def test_a_group_that_cannot_work_is_refused_naming_its_key(
    stack: str, edit: Any, key: str, word: str, tmp_path: Path
) -> None:
    code, err = plan_exit(_with(edit, stack), tmp_path)
    assert code == 2, err
    lines = [line for line in err.splitlines() if key in line]
    assert lines and any(word.lower() in line.lower() for line in lines), err
    assert "Traceback" not in err and len(err.splitlines()) <= 40
