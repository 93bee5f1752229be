"""Training workloads: rendered objects, schemas, ordering, golden YAML and config errors."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from config import stackfile
from config import training as workloads_config
from facts import instances as catalog
from facts import names
from tests.conftest import BASE, GOLDEN, ROOT, placed_values, stack_plan, stack_values, stack_yaml
from tools import plan as plan_mod
from tools import snapshot

WORKLOAD_STACKS = [
    "p4de-nemo",
    "p5en-megatron-bridge",
    "trn1-bert",
    "trn1-llama2",
    "trn1-llama3",
    "trn1-shared",
    "trn2-torchtitan",
    "p4d",
    "p5en",
    "p6-b200",
    "p6-b300",
    "trn2",
]
GOLDEN_STACKS = [*WORKLOAD_STACKS, "p5-train-serve", "trn2-serve", "p5-serve-405b"]
"""The training stacks, and the serving ones (tests/plan/test_serving.py and test_serving_lws.py hold their objects)."""
MPIJOB_SCHEMA = json.loads((ROOT / "tests" / "schemas" / "mpijob-v2beta1.schema.json").read_text())
MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"


def k8s_resources(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"].startswith("kubernetes:") and "kind" in r["inputs"]]


def named(plan: dict[str, Any], name: str) -> dict[str, Any]:
    (r,) = [r for r in plan["resources"] if r["name"] == name]
    return r


def ancestors(plan: dict[str, Any], urn: str) -> set[str]:
    """Every resource a resource (transitively) depends on, by name."""
    by = {r["urn"]: r for r in plan["resources"]}
    seen: set[str] = set()
    todo = list(by[urn]["dependencies"])
    while todo:
        u = todo.pop()
        if u in seen or u not in by:
            continue
        seen.add(u)
        todo.extend(by[u]["dependencies"])
    return {by[u]["name"] for u in seen}


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_every_mpijob_validates_against_the_mpijob_schema(stack: str) -> None:
    jobs = [r["inputs"] for r in k8s_resources(stack_plan(stack)) if r["type"] == MPIJOB]
    assert jobs
    for job in jobs:
        jsonschema.validate(job, MPIJOB_SCHEMA)
        assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"


@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_every_core_object_validates_with_kubernetes_validate(stack: str) -> None:
    # Kueue objects have no schema in kubernetes_validate; tests/plan/test_queues.py checks them.
    objs = [
        r["inputs"]
        for r in k8s_resources(stack_plan(stack))
        if r["type"] != MPIJOB and not r["inputs"]["apiVersion"].startswith("kueue.x-k8s.io/")
    ]
    assert objs
    for obj in objs:
        if obj["kind"] == "Secret":
            obj = {**obj, "stringData": {"HF_TOKEN": "x"}}  # the plan hides the secret value
        kubernetes_validate.validate(obj, "1.35.0", strict=True)


@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_every_container_has_cpu_and_memory_requests_and_limits(stack: str) -> None:
    """Every container has CPU and memory requests and limits: TensorBoard, the data Jobs and
    the shell pod too."""
    for r in k8s_resources(stack_plan(stack)):
        obj = r["inputs"]
        spec = obj.get("spec", {})
        if obj["kind"] == "MPIJob":
            pods = [s["template"]["spec"] for s in spec["mpiReplicaSpecs"].values()]
        elif obj["kind"] == "Pod":
            pods = [spec]
        elif obj["kind"] in ("Job", "Deployment"):
            pods = [spec["template"]["spec"]]
        else:
            continue
        for pod in pods:
            for c in pod["containers"]:
                for kind in ("requests", "limits"):
                    assert {"cpu", "memory"} <= set(c["resources"][kind]), (obj["metadata"]["name"], kind)


# --------------------------------------------------------------------------- devices and ordering


@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_workers_take_every_device_of_their_node(stack: str) -> None:
    values = stack_values(stack)
    groups = {g["name"]: catalog.ACCELERATED[g["instanceType"]] for g in values["llm-training-eks:nodeGroups"]}
    for name, w in values["llm-training-eks:workloads"].items():
        it = groups[w["nodeGroup"]]
        for r in k8s_resources(stack_plan(stack)):
            if r["type"] != MPIJOB or r["inputs"]["metadata"]["labels"]["app.kubernetes.io/name"] != name:
                continue
            worker = r["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]
            assert worker["replicas"] == w["nodes"]
            (c,) = worker["template"]["spec"]["containers"]
            for kind in ("requests", "limits"):
                res = c["resources"][kind]
                assert res[it.device_resource] == str(it.accelerator_count)
                assert res[names.EFA_RESOURCE] == str(it.efa_interfaces)
                assert res["memory"] == f"{it.allocatable_memory_gib}Gi"
            vols = {v["name"]: v for v in worker["template"]["spec"]["volumes"]}
            assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
            assert worker["template"]["spec"]["nodeSelector"] == {names.NODE_GROUP_LABEL: w["nodeGroup"]}
            assert worker["template"]["spec"]["tolerations"][0]["key"] == it.device_resource


def test_llama2_steps_are_chained_and_training_is_not_awaited() -> None:
    plan = stack_plan("trn1-llama2")
    train = named(plan, "llama2-run-001-train")
    before = ancestors(plan, train["urn"])
    assert "llama2-hf-token" in before
    assert any(n.startswith("llama2-image-") for n in before)
    (tokenize,) = [n for n in before if n.startswith("llama2-tokenize-")]
    assert named(plan, tokenize)["urn"] in train["dependencies"]
    # Its pods may reach each other before they start (the job's NetworkPolicy comes first).
    assert named(plan, "llama2-run-001-train-peers")["urn"] in train["dependencies"]
    assert train["inputs"]["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    # One MPIJob per run: the health gate and the precompile run in its launcher.
    assert [r["name"] for r in k8s_resources(plan) if r["type"] == MPIJOB] == ["llama2-run-001-train"]


@pytest.mark.parametrize(("stack", "workload"), [("p4de-nemo", "nemo"), ("trn1-bert", "bert")])
def test_the_image_is_checked_before_training(stack: str, workload: str) -> None:
    plan = stack_plan(stack)
    train = named(plan, f"{workload}-run-001-train")
    (image,) = [n for n in ancestors(plan, train["urn"]) if n.startswith(f"{workload}-image-")]
    job = named(plan, image)["inputs"]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    (t,) = train["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert c["image"] == t["image"]


def test_hugging_face_token_is_a_secret() -> None:
    plan = stack_plan("trn1-llama2")
    secret = named(plan, "llama2-hf-token")
    assert secret["inputs"]["stringData"] == {"HF_TOKEN": stackfile.SECRET}
    assert "PLACEHOLDER" not in json.dumps(plan)


def test_llama2_stack_reproduces_the_seed_run() -> None:
    train = named(stack_plan("trn1-llama2"), "llama2-run-001-train")["inputs"]
    script = train["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
    for arg in (
        "trainer.num_nodes=4",
        "trainer.devices=32",
        "model.tensor_model_parallel_size=8",
        "model.pipeline_model_parallel_size=1",
        "model.global_batch_size=256",
        "model.micro_batch_size=1",
        "model.encoder_seq_length=4096",
        "model.hidden_size=4096",
        "model.ffn_hidden_size=11008",
        "model.num_layers=32",
        "model.num_attention_heads=32",
        "model.optim.lr=0.0003",
        "model.optim.sched.min_lr=3e-05",
        "model.sequence_parallel=True",
        "exp_manager.explicit_log_dir=/shared/runs/llama2/run-001",
        "--config-name=megatron_llama_config",
    ):
        assert arg in script
    assert "model.num_query_groups" not in script and "model.num_kv_heads" not in script
    env = {
        e["name"]: e["value"]
        for e in train["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["NEURON_COMPILE_CACHE_URL"] == "/shared/llama2/neuron-cache"
    assert train["spec"]["slotsPerWorker"] == 32


def test_a_new_run_id_renames_run_steps_and_reuses_data_steps() -> None:
    values = stack_values("trn1-llama2")
    values["llm-training-eks:workloads"] = json.loads(json.dumps(values["llm-training-eks:workloads"]))
    values["llm-training-eks:workloads"]["llama2"]["runId"] = "run-002"
    names_new = {r["name"] for r in k8s_resources(plan_mod.run(values, "t"))}
    names_old = {r["name"] for r in k8s_resources(stack_plan("trn1-llama2"))}
    assert "llama2-run-002-train" in names_new and "llama2-run-001-train" not in names_new
    assert {n for n in names_old if "run-001" not in n} == {n for n in names_new if "run-002" not in n}


def test_rendering_is_deterministic() -> None:
    a = snapshot.object_files(plan_mod.run(stack_values("trn1-llama2"), "trn1-llama2"))
    assert a == snapshot.object_files(stack_plan("trn1-llama2"))


# --------------------------------------------------------------------------- golden YAML


@pytest.mark.parametrize("stack", GOLDEN_STACKS)
def test_golden_yaml(stack: str) -> None:
    """Regenerate with: UPDATE_GOLDEN=1 python -m pytest -q tests/plan/test_workloads.py -k golden"""
    files = snapshot.object_files(stack_plan(stack))
    d = GOLDEN / stack
    if os.environ.get("UPDATE_GOLDEN"):
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.yaml"):
            old.unlink()
        for name, text in files.items():
            (d / name).write_text(text)
    existing = {p.name: p.read_text() for p in sorted(d.glob("*.yaml"))}
    assert sorted(existing) == sorted(files), "objects added or removed; regenerate with UPDATE_GOLDEN=1"
    for name, text in files.items():
        assert existing[name] == text, f"{stack}/{name} differs; regenerate with UPDATE_GOLDEN=1 and review the diff"


# --------------------------------------------------------------------------- bad configs

TRN1 = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4, "availabilityZone": "us-west-2d"}
P4DE = {"name": "p4de", "instanceType": "p4de.24xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}
LLAMA = {"recipe": "llama2-neuron", "nodeGroup": "trn1", "nodes": 4, "runId": "run-001", "imageTag": "1.0"}
NEMO = {"recipe": "nemo-gpu", "nodeGroup": "p4de", "nodes": 2, "runId": "run-001", "imageTag": "24.07"}
CUSTOM = {
    "recipe": "custom",
    "nodeGroup": "trn1",
    "nodes": 2,
    "runId": "r1",
    "image": "repo/img:1",
    "neuronSdk": "2.22.0",
    "command": ["x"],
}
BERT = {"recipe": "bert-neuron", "nodeGroup": "trn1", "nodes": 2, "runId": "r1"}
DLC = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training-neuronx"


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


BAD: list[tuple[str, dict[str, Any], str]] = [
    (
        "unknown node group",
        {"llama2": _with(LLAMA, nodeGroup="trn2")},
        "workloads.llama2.nodeGroup: unknown node group",
    ),
    (
        "neuron recipe on gpu",
        {"llama2": _with(LLAMA, nodeGroup="p4de", nodes=2)},
        "workloads.llama2.nodeGroup: recipe llama2-neuron needs a Neuron",
    ),
    (
        "gpu recipe on neuron",
        {"nemo": _with(NEMO, nodeGroup="trn1")},
        "workloads.nemo.nodeGroup: recipe nemo-gpu needs an NVIDIA",
    ),
    (
        "too many nodes",
        {"llama2": _with(LLAMA, nodes=8)},
        "workloads.llama2.nodes: 8 nodes, but node group 'trn1' can have at most 4",
    ),
    (
        "tp x pp does not divide ranks",
        {"nemo": _with(NEMO, model={"tensorParallel": 8, "pipelineParallel": 32, "numLayers": 32})},
        "workloads.nemo.model.tensorParallel: TP 8 x PP 32",
    ),
    (
        "global batch not divisible",
        {"llama2": _with(LLAMA, model={"globalBatchSize": 100})},
        "workloads.llama2.model.globalBatchSize: 100 is not divisible by data-parallel size 16",
    ),
    (
        "heads not divisible by tp",
        {"llama2": _with(LLAMA, model={"tensorParallel": 3})},
        "workloads.llama2.model.tensorParallel: 3 does not divide numAttentionHeads 32",
    ),
    (
        "layers not divisible by pp",
        {"llama2": _with(LLAMA, model={"pipelineParallel": 3})},
        "workloads.llama2.model.pipelineParallel: 3 does not divide numLayers 32",
    ),
    ("unknown recipe", {"x": _with(LLAMA, recipe="llama3")}, "workloads.x.recipe: 'llama3' is not a recipe"),
    (
        "missing recipe",
        {"x": {k: v for k, v in LLAMA.items() if k != "recipe"}},
        "workloads.x.recipe: required key is missing",
    ),
    ("latest image", {"nemo": _with(NEMO, imageTag=None, image="nvcr.io/nvidia/nemo:latest")}, "workloads.nemo.image:"),
    ("latest tag", {"nemo": _with(NEMO, imageTag="latest")}, "workloads.nemo.imageTag: 'latest' is not an immutable"),
    (
        "image and imageTag",
        {"nemo": _with(NEMO, image="nvcr.io/nvidia/nemo:24.07")},
        "workloads.nemo.imageTag: give image or imageTag, not both",
    ),
    (
        "custom without image",
        {"c": _with(CUSTOM, image=None, imageTag="1")},
        "workloads.c.image: required for recipe custom",
    ),
    (
        "custom without command",
        {"c": {k: v for k, v in CUSTOM.items() if k != "command"}},
        "workloads.c.command: required key is missing",
    ),
    ("bad run id", {"llama2": _with(LLAMA, runId="Run_1")}, "workloads.llama2.runId:"),
    ("unknown model key", {"llama2": _with(LLAMA, model={"layers": 4})}, "workloads.llama2.model.layers: unknown key"),
    (
        "unknown preset",
        {"llama2": _with(LLAMA, model={"preset": "65b"})},
        "workloads.llama2.model.preset: '65b' is not allowed",
    ),
    (
        "min lr above lr",
        {"llama2": _with(LLAMA, training={"minLearningRate": 0.01})},
        "workloads.llama2.training.minLearningRate:",
    ),
    ("warmup too long", {"llama2": _with(LLAMA, training={"maxSteps": 100})}, "workloads.llama2.training.warmupSteps:"),
    (
        "bad health check size",
        {"nemo": _with(NEMO, healthCheck={"messageSize": "two gigs"})},
        "workloads.nemo.healthCheck.messageSize:",
    ),
    (
        "negative threshold",
        {"nemo": _with(NEMO, healthCheck={"minBusBandwidthGbps": -1})},
        "workloads.nemo.healthCheck.minBusBandwidthGbps:",
    ),
    (
        "too many processes",
        {"c": _with(CUSTOM, processesPerNode=64)},
        "workloads.c.processesPerNode: 64 is more than the 32",
    ),
    ("bad workload name", {"Llama_2": LLAMA}, "workloads.Llama_2: the workload name"),
    ("nemo data outside /shared", {"nemo": _with(NEMO, dataPrefix="/data/x")}, "workloads.nemo.dataPrefix:"),
    # Versions that fit the hardware (facts/versions.py, tests/upstream/neuron-sdk-support.yaml).
    (
        "dlc without sshd",
        {"b": _with(BERT, image=f"{DLC}:2.1.2-neuronx-py310-sdk2.20.0-ubuntu20.04")},
        "workloads.b.image: the pytorch-training-neuronx DLC of SDK 2.20.0 has no sshd for the MPI operator",
    ),
    (
        "sdk without xla training",
        {"c": _with(CUSTOM, neuronSdk="2.30.0")},
        "workloads.c.neuronSdk: Neuron SDK 2.30.0 has no PyTorch/XLA training (it ended in 2.30.0); trn1 training",
    ),
    (
        "nemo megatron after its end of support",
        {"llama2": _with(LLAMA, neuronSdk="2.23.0")},
        "workloads.llama2.neuronSdk: neuronx-nemo-megatron is not supported from Neuron SDK 2.23 on",
    ),
    (
        "image without a known sdk",
        {"c": {k: v for k, v in CUSTOM.items() if k != "neuronSdk"}},
        "workloads.c.neuronSdk: required: the image repo/img:1 does not name its Neuron SDK",
    ),
    (
        "bad sdk",
        {"c": _with(CUSTOM, neuronSdk="latest")},
        "workloads.c.neuronSdk: 'latest' is not a Neuron SDK version",
    ),
    # Checkpoints the storage can hold (estimates/checkpoints.py).
    (
        "70b checkpoints do not fit 1200 GiB",
        {"llama2": _with(LLAMA, model={"preset": "70b"})},
        "storage.storageCapacityGib: the checkpoints the runs keep (llama2: 2 x 828 GB) need 1.66 TB",
    ),
    # The BERT recipe keeps the tutorial's global batch whatever the node count.
    (
        "bert batch does not divide",
        {"b": _with(BERT, training={"globalBatchSize": 1000})},
        "workloads.b.training.globalBatchSize: 1000 is not divisible by 64 NeuronCores x batchSize 16",
    ),
    (
        "sentencepiece without model",
        {"nemo": _with(NEMO, tokenizer={"library": "sentencepiece"})},
        "workloads.nemo.tokenizer.model: required with library sentencepiece",
    ),
]


def _bad_stack(workloads: dict[str, Any], token: bool = True) -> str:
    cfg: dict[str, Any] = {
        **BASE,
        "llm-training-eks:nodeGroups": [TRN1, P4DE],
        **placed_values("us-west-2d"),
        "llm-training-eks:workloads": {k: {a: b for a, b in v.items() if b is not None} for k, v in workloads.items()},
    }
    if token:
        cfg["llm-training-eks:huggingFaceToken"] = {"secure": "AAAB"}
    return stack_yaml({"config": cfg})


@pytest.mark.parametrize(("case", "workloads", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_workload_config_exits_2_naming_the_key(
    tmp_path: Path, case: str, workloads: dict[str, Any], expected: str
) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(_bad_stack(workloads))
    err = io.StringIO()
    assert plan_mod.main(["--config-file", str(path)], stdout=io.StringIO(), stderr=err) == 2
    assert expected in err.getvalue(), err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_llama2_without_hugging_face_token_plans_offline_with_a_warning(tmp_path: Path) -> None:
    """The offline plan needs no Pulumi CLI, so no token: it plans (exit 0) and says on stderr the
    command that sets it; the engine path refusing it is tests/unit/test_config.py's."""
    path = tmp_path / "Pulumi.notoken.yaml"
    values = {k: v for k, v in stack_values("trn1-llama2").items() if k != "llm-training-eks:huggingFaceToken"}
    path.write_text(stack_yaml({"config": values}))
    out, err = io.StringIO(), io.StringIO()
    assert plan_mod.main(["--config-file", str(path)], stdout=out, stderr=err) == 0, err.getvalue()
    assert out.getvalue().startswith("Offline plan of stack 'notoken'")
    (line,) = err.getvalue().splitlines()
    assert line.startswith("before pulumi up: huggingFaceToken: required by workloads.llama2"), line
    assert "`pulumi config set --secret huggingFaceToken hf_...`" in line


def test_presets_fit_their_documented_parallelism() -> None:
    for preset, values in workloads_config.LLAMA2_PRESETS.items():
        m = workloads_config.ModelConfig.model_validate({"preset": preset})
        assert m.hidden_size == values["hiddenSize"]
        assert m.num_attention_heads % m.tensor_parallel == 0
        assert m.num_layers % m.pipeline_parallel == 0


def test_each_workload_is_one_component_holding_its_steps() -> None:
    plan = stack_plan("trn1-llama2")
    (run,) = [r for r in plan["resources"] if r["type"] == "llm-training-eks:workloads:Workload"]
    assert {k: run["inputs"][k] for k in ("recipe", "runId")} == {"recipe": "llama2-neuron", "runId": "run-001"}
    assert run["inputs"]["checkpoints"]["kept"] == 2
    kids = [r for r in plan["resources"] if r["parent"] == run["urn"]]
    assert {r["inputs"]["kind"] for r in kids} >= {"Job", "MPIJob", "Secret", "Deployment", "Service"}
    assert all(r["type"].startswith("kubernetes:") for r in kids)
