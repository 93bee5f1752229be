"""Serving runs (recipe vllm-serve) on the example stacks: the combinations that cannot work
refused at config time naming the key (exit 2), and the objects a served model needs: a
Deployment Kueue admits (requests equal to limits, the accelerator, its taint tolerated,
/dev/shm, probes on vLLM's health endpoint covering the modeled load), a Service, a
PodDisruptionBudget and the NetworkPolicies that admit only the clients the config names."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import config
from config import costs
from config.workloads import VllmServeWorkload
from estimates import cost
from facts import instances, serving
from facts.names import QUEUE_LABEL
from tests.conftest import plan_exit, resources, stack_plan, stack_values

NS = "llm-training-eks:"
SERVE_STACKS = ["p5-train-serve", "trn2-serve"]
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def _with(stack: str, edit: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    edit(values)
    return values


def _run(values: dict[str, Any], name: str) -> dict[str, Any]:
    return values[NS + "workloads"][name]


def _no_converter(v: dict[str, Any]) -> None:
    v[NS + "workloads"]["llama"] = {"recipe": "ddp-cpu", "nodes": 1, "runId": "run-001"}


REFUSED = [
    # A training run whose recipe has no converter to a Hugging Face model.
    ("p5-train-serve", _no_converter, "workloads.chat.model.workload", "no converter"),
    (
        "p5-train-serve",
        lambda v: _run(v, "chat")["model"].update(workload="lama"),
        "workloads.chat.model.workload",
        "llama",
    ),
    # A context longer than the trained model's positions.
    ("p5-train-serve", lambda v: _run(v, "chat").update(maxModelLen=8192), "workloads.chat.maxModelLen", "4096"),
    # The GPU image on Trainium2, and a Neuron image on GPUs.
    ("trn2-serve", lambda v: _run(v, "qwen").update(image=serving.GPU.image), "workloads.qwen.image", "trn2"),
    ("p5-train-serve", lambda v: _run(v, "chat").update(image=serving.TRN2.image), "workloads.chat.image", "p5"),
    # More ranks than one node has, weights larger than the replica's memory, more replicas than nodes.
    ("trn2-serve", lambda v: _run(v, "qwen").update(tensorParallel=128), "workloads.qwen.tensorParallel", "64"),
    (
        "trn2-serve",
        lambda v: _run(v, "qwen").update(
            tensorParallel=4, model={**_run(v, "qwen")["model"], "parametersBillions": 70}
        ),
        "workloads.qwen.tensorParallel",
        "do not fit",
    ),
    ("trn2-serve", lambda v: _run(v, "qwen").update(replicas=17), "workloads.qwen.replicas", "at most 1"),
    # A Neuron replica's first start (the compile) beyond Kueue's readiness timeout.
    (
        "trn2-serve",
        lambda v: v[NS + "queueing"].update(podsReadyTimeoutMinutes=30),
        "queueing.podsReadyTimeoutMinutes",
        "evict",
    ),
    (
        "trn2-serve",
        lambda v: _run(v, "qwen")["model"].pop("parametersBillions"),
        "workloads.qwen.model",
        "parametersBillions",
    ),
]


@pytest.mark.parametrize(("stack", "edit", "key", "word"), REFUSED, ids=[f"{r[0]}:{r[2]}:{r[3]}" for r in REFUSED])
def test_a_serving_config_that_cannot_work_is_refused_naming_its_key(
    stack: str, edit: Any, key: str, word: str, tmp_path: Path
) -> None:
    code, err = plan_exit(_with(stack, edit), tmp_path)
    assert code == 2, err
    lines = [line for line in err.splitlines() if key in line]
    assert lines and any(word.lower() in line.lower() for line in lines), err
    assert "Traceback" not in err and len(err.splitlines()) <= 40


def _deployment(stack: str) -> dict[str, Any]:
    (d,) = [r["inputs"] for r in resources(stack_plan(stack), DEPLOYMENT) if r["name"].endswith("-serve")]
    return d


def _served(stack: str) -> tuple[str, VllmServeWorkload, config.StackConfig]:
    cfg = config.parse_stack_values(stack_values(stack))
    ((name, run),) = [(n, r) for n, r in cfg.workloads.items() if isinstance(r, VllmServeWorkload)]
    return name, run, cfg


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_a_replica_holds_its_accelerators_with_requests_equal_to_limits(stack: str) -> None:
    _name, run, cfg = _served(stack)
    (ng,) = [g for g in cfg.node_groups if g.name == run.node_group]
    it = ng.instance
    spec = _deployment(stack)["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["resources"]["requests"] == c["resources"]["limits"]
    assert c["resources"]["limits"][it.device_resource] == str(serving.devices_for(it, run.tensor_parallel))
    for taint in it.taints:
        assert {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect} in spec[
            "tolerations"
        ]
    shm = {v["name"]: v for v in spec["volumes"]}["dshm"]
    assert shm["emptyDir"]["medium"] == "Memory"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HF_HUB_OFFLINE"] == "1", "the server reads the model from /shared only"
    assert spec["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_the_startup_probe_covers_the_modeled_load_and_kueue_waits_longer(stack: str) -> None:
    """The weights read from /shared at the file system's throughput (and, on Neuron, the first
    compile) fit inside the startup probe; Kueue's waitForPodsReady is longer still."""
    name, run, cfg = _served(stack)
    (ng,) = [g for g in cfg.node_groups if g.name == run.node_group]
    parameters = run.served_parameters(cfg.workloads)
    assert parameters
    read = parameters * serving.BYTES_PER_PARAMETER / (cfg.storage.file_system.mb_per_second * 1e6)
    (c,) = _deployment(stack)["spec"]["template"]["spec"]["containers"]
    probe = c["startupProbe"]
    allowed = probe["failureThreshold"] * probe["periodSeconds"]
    assert probe["httpGet"] == {"path": serving.HEALTH_PATH, "port": "http"}
    assert allowed >= read + serving.ENGINE_START_SECONDS
    if ng.instance.accelerator == "neuron":
        assert allowed >= read + serving.NEURON_COMPILE_SECONDS
    assert allowed < cfg.queueing.pods_ready_timeout_minutes * 60
    for kind in ("readinessProbe", "livenessProbe"):
        assert c[kind]["httpGet"]["path"] == serving.HEALTH_PATH
    # The plan's cost line states the same start and the replicas' share of the node's price.
    (entry,) = [e for e in costs.runs_from_config(cfg, cost.Prices()) if e["name"] == name]
    assert f"a replica starts in up to {allowed // 60} min" in entry["stepTimeBasis"]
    share = run.replicas * serving.devices_for(ng.instance, run.tensor_parallel) / ng.instance.accelerator_count
    balancer = cost.Prices().nlb_hourly() if run.endpoint == "internalLoadBalancer" else 0
    nodes = share * cost.Prices().instance_hourly(ng.instance_type, cfg.region)
    assert entry["hourly"] == pytest.approx(nodes + balancer, 1e-4)


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_kueue_admits_the_deployment_through_the_runs_queue(stack: str) -> None:
    d = _deployment(stack)
    queues = {
        r["inputs"]["metadata"]["name"]
        for r in resources(stack_plan(stack), "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")
    }
    assert d["metadata"]["labels"][QUEUE_LABEL] in queues
    assert d["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0, "a surge needs accelerators the quota may not have"


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_the_service_budget_and_policies_select_the_servers_only(stack: str) -> None:
    name, run, _ = _served(stack)
    plan = stack_plan(stack)
    d = _deployment(stack)
    selector = d["spec"]["selector"]["matchLabels"]
    (svc,) = [
        r["inputs"] for r in resources(plan, "kubernetes:core/v1:Service") if r["inputs"]["metadata"]["name"] == name
    ]
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["selector"] == selector
    assert svc["spec"]["ports"][0]["port"] == serving.PORT
    (pdb,) = [
        r["inputs"]
        for r in resources(plan, "kubernetes:policy/v1:PodDisruptionBudget")
        if r["inputs"]["metadata"]["name"] == f"{name}-serve"
    ]
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    policies = {
        r["inputs"]["metadata"]["name"]: r["inputs"]["spec"]
        for r in resources(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    ingress = policies[f"{name}-clients"]
    assert ingress["podSelector"] == {"matchLabels": selector}
    ((rule,),) = [ingress["ingress"]]
    assert rule["ports"] == [{"protocol": "TCP", "port": serving.PORT}]
    namespaces = [p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for p in rule["from"][1:]]
    assert namespaces == run.clients.namespaces
    own = rule["from"][0]["podSelector"]["matchLabels"]
    assert own == (run.clients.pod_labels or {"llm-training-eks/client-of": name}), "no pod is a client by default"


def test_the_pinned_image_follows_the_node_groups_accelerator() -> None:
    for stack in SERVE_STACKS:
        _, run, cfg = _served(stack)
        (ng,) = [g for g in cfg.node_groups if g.name == run.node_group]
        (c,) = _deployment(stack)["spec"]["template"]["spec"]["containers"]
        pinned = serving.image_for(instances.get(ng.instance_type))
        assert pinned is not None and c["image"] == pinned.image
