"""What the harness runs: every workload of every example stack, planned by the offline plan
(tools.plan.run, the same program as `pulumi up`) at 2 and 3 nodes, with training made short.
Each workload is planned alone (its team dropped: Kueue does not reach the launch chain) so
that its node count can change; a layered stack is planned on its lower stacks' outputs.

The steps of a workload are its Jobs and MPIJobs in the order `pulumi up` creates them
(dependencies first); the rest (Secrets, TensorBoard, the shell pod) does not launch anything.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache
from typing import Any

import config
from config.stackfile import read_stack_file
from config.workloads import RECIPES, VllmServeWorkload
from facts import instances
from facts.names import NODE_GROUP_LABEL
from tests import upstream
from tests.conftest import EXAMPLE_FILES, EXAMPLES, example_file
from tools import plan as plan_mod

MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
JOB = "kubernetes:batch/v1:Job"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NAME_LABEL = "app.kubernetes.io/name"
SERVICE = "kubernetes:core/v1:Service"
LEADER_WORKER_SET = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
AMI_RELEASES = upstream.facts("amazon-eks-ami-v20260714")["releases"]
"""Per AMI release and Kubernetes minor, newest first: the drivers its accelerated AMIs carry."""
PREFIX = "llm-training-eks:"
# Short training, the same shape of schedule: 12 steps, a checkpoint every 4 (Megatron recipes:
# checkpointEverySteps; BERT: one checkpoint per dataset shard, a shard being 4 steps here). A
# checkpoint every 4 real steps would cost far more than 2% of training time, which the plan
# refuses where it knows the step: those runs say their steps are long (stepSeconds only sets
# the cost and that share).
SHORT = {
    "llama2-neuron": {
        "training": {"maxSteps": 12, "checkpointEverySteps": 4, "warmupSteps": 1},
        "precompileSteps": 2,
        "stepSeconds": 4000.0,  # as llama3-nxd's below: its published step time is known
    },
    "nemo-gpu": {"training": {"maxSteps": 12, "checkpointEverySteps": 4, "warmupSteps": 1}},
    "bert-neuron": {"training": {"maxSteps": 12, "warmupSteps": 1, "precompileSteps": 2, "shardsPerCheckpoint": 1}},
    # The real script: a step takes about 5 ms (2 ranks here), so a kill after the first
    # checkpoint needs a run of some hundreds of steps to land before its end (about a second).
    "ddp-cpu": {"steps": 240, "checkpointEverySteps": 60},
    "megatron-bridge": {"training": {"trainIters": 12}, "checkpoints": {"saveInterval": 4}, "stepSeconds": 3600.0},
    # Recipes with a published step time: one long enough that a checkpoint every 4 steps stays
    # under 2% of training time (the config refuses more); the short run is not a real schedule.
    "llama3-nxd": {"training": {"maxSteps": 12, "checkpointEverySteps": 4, "warmupSteps": 1}, "stepSeconds": 4000.0},
    "torchtitan-neuron": {"training": {"maxSteps": 12, "checkpointEverySteps": 4}},
    # The acceptance runs train nothing: they run as the stack has them.
    "fabric-gpu": {},
    "fabric-neuron": {},
    "fsx-read": {},
}
# A run that stops itself once (ddp-cpu's interruptOnceAtStep) stops halfway, as dev's does.
INTERRUPT_AT = 120
# A global batch every data-parallel size here divides: Megatron recipes (TP 8 or 4) on 64 or
# 96 NeuronCores / 16 or 24 GPUs (Megatron Bridge: TP 1 or 2 on 16 or 24 GPUs); BERT on 2, 3 or
# 4 nodes of 32 NeuronCores x batch 16.
GLOBAL_BATCH = {
    "llama2-neuron": ("model", 192),
    "nemo-gpu": ("model", 192),
    "bert-neuron": ("training", 49152),
    "megatron-bridge": ("training", 192),
    "llama3-nxd": ("model", 192),  # DP = nodes (TP 32)
    "torchtitan-neuron": ("model", 192),  # DP = 16 x nodes (TP 4 of 64 ranks a node): 2, 3 or 4 (trn2u)
}
BERT_STEPS_PER_SHARD = 4
SERVING_RECIPES = {VllmServeWorkload.RECIPE}
"""Recipes with a server and no training MPIJob: not in the training scenarios."""
# What a stack says its user puts on /shared before a run (the harness writes it there first).
BRIDGE_SFT_DATA = {
    "data/sft/training.jsonl": '{"input": "Q: 2+2?", "output": "4"}\n',
    "data/sft/validation.jsonl": '{"input": "Q: 3+3?", "output": "6"}\n',
}
SEEDED: dict[tuple[str, str], dict[str, str]] = {
    ("p5en-megatron-bridge", "sft"): BRIDGE_SFT_DATA,
    ("p5en-megatron-bridge", "qwen3-sft"): BRIDGE_SFT_DATA,
}


def workloads(serving: bool = False) -> list[tuple[str, str, str]]:
    """(stack, workload, recipe) of every training workload of every example stack the harness
    plays (with `serving`: the serving workloads instead, which the harness does not play yet). A
    runs layer whose all-in-one twin is an example stack (`<env>-runs` beside `<env>`) is left
    out: tests/plan/test_layers.py holds the layers to exactly the twin's resources, and its teams
    live in its cluster layer, which the harness does not drop as it drops an all-in-one's."""
    found = []
    for stack, path in EXAMPLE_FILES.items():
        values = read_stack_file(path)
        if values.get(f"{PREFIX}layer") == "runs" and stack.removesuffix("-runs") in EXAMPLE_FILES:
            continue
        for name, wl in (values.get(f"{PREFIX}workloads") or {}).items():
            if (wl["recipe"] in SERVING_RECIPES) == serving:
                found.append((stack, name, wl["recipe"]))
    return found


def launch_nodes(stack: str, workload: str) -> tuple[int, ...]:
    """The node counts the harness plays a workload at: 2 and 3, or on UltraServer members the
    whole UltraServer (its config refuses a part of one)."""
    values = read_stack_file(example_file(stack))
    wl = values[f"{PREFIX}workloads"][workload]
    group = next((g for g in values.get(f"{PREFIX}nodeGroups") or [] if g["name"] == wl.get("nodeGroup")), None)
    us = instances.get(group["instanceType"]).ultraserver if group else None
    return (us.instances,) if us else (2, 3)


def is_acceptance_run(stack: str, workload: str) -> bool:
    """An acceptance run, fabric or fsx-read (it trains nothing: no checkpoint to resume from)."""
    return RECIPES[recipe(stack, workload)].KIND == "acceptance"


def gates_nodes(stack: str, workload: str) -> bool:
    """Whether the run checks every node before its work (the health gate: device counts, the
    fabric); a storage acceptance run (fsx-read) measures the file system and checks no device."""
    return "health_check" not in RECIPES[recipe(stack, workload)].UNUSED_KEYS


def recipe(stack: str, workload: str) -> str:
    return str(read_stack_file(example_file(stack))[f"{PREFIX}workloads"][workload]["recipe"])


def harness_values(stack: str, workload: str, nodes: int, faults: bool = False) -> dict[str, Any]:
    """The example stack with only `workload`, on `nodes` nodes, training short; with `faults`
    (a scenario injects its own), without a stop the run asks for itself."""
    values = copy.deepcopy(read_stack_file(example_file(stack)))
    wl = values[f"{PREFIX}workloads"][workload]
    values[f"{PREFIX}workloads"] = {workload: wl}
    values.pop(f"{PREFIX}teams", None)
    queueing = values.get(f"{PREFIX}queueing", {})
    queueing.pop("defaultQueue", None)  # a stack without teams has only the default queue
    wl.pop("team", None)
    wl["nodes"] = nodes
    for group in values.get(f"{PREFIX}nodeGroups", []):  # a runs layer has its groups below
        if group["name"] == wl["nodeGroup"]:
            group["desiredSize"] = max(int(group["desiredSize"]), nodes)
            group["maxSize"] = max(int(group.get("maxSize", 0)), group["desiredSize"])
    short = SHORT[wl["recipe"]]
    wl.update({k: v for k, v in short.items() if k != "training"})
    if "training" in short:
        wl["training"] = {**wl.get("training", {}), **short["training"]}
    if wl["recipe"] in GLOBAL_BATCH:
        section, batch = GLOBAL_BATCH[wl["recipe"]]
        wl[section] = {**wl.get(section, {}), "globalBatchSize": batch}
    if "interruptOnceAtStep" in wl:
        wl["interruptOnceAtStep"] = INTERRUPT_AT
        if faults:
            del wl["interruptOnceAtStep"]
    return values


@cache
def _lower_outputs(stack: str) -> dict[str, Any]:
    """A layered stack's lower outputs, planned once (they do not depend on the workload)."""
    cfg = config.parse_stack_values(read_stack_file(example_file(stack)))
    return plan_mod.lower_outputs(cfg, EXAMPLES)


@cache
def _plan(stack: str, workload: str, nodes: int, faults: bool) -> dict[str, Any]:
    values = harness_values(stack, workload, nodes, faults)
    layered = config.parse_stack_values(values).lower_stack
    return plan_mod.run(values, f"launch-{stack}", EXAMPLES, _lower_outputs(stack) if layered else None)


def _asks_to_stop(stack: str, workload: str) -> bool:
    """Whether the workload stops itself once: only then does a faults plan differ (and is planned)."""
    return "interruptOnceAtStep" in read_stack_file(example_file(stack))[f"{PREFIX}workloads"][workload]


def network_policies(stack: str, workload: str, nodes: int, faults: bool = False) -> list[dict[str, Any]]:
    """Every NetworkPolicy the plan creates (the namespaces' and the jobs')."""
    plan = _plan(stack, workload, nodes, faults and _asks_to_stop(stack, workload))
    return copy.deepcopy([r["inputs"] for r in plan["resources"] if r["type"] == NETWORK_POLICY])


@cache
def _steps(stack: str, workload: str, nodes: int, faults: bool) -> tuple[dict[str, Any], ...]:
    return _ordered(_plan(stack, workload, nodes, faults)["resources"], (MPIJOB, JOB))


def _ordered(resources: list[dict[str, Any]], types: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    """The inputs of the resources of `types`, dependencies first (as `pulumi up` creates them)."""
    found = {r["urn"]: r for r in resources if r["type"] in types}
    ordered: list[str] = []

    def visit(urn: str) -> None:
        for dep in found[urn]["dependencies"]:
            if dep in found and dep not in ordered:
                visit(dep)
        if urn not in ordered:
            ordered.append(urn)

    for urn in sorted(found):
        visit(urn)
    return tuple(found[u]["inputs"] for u in ordered)


def _declaring(stack: str, workload: str) -> tuple[str, dict[str, Any]]:
    """The stack file that declares the workload's node group (a runs layer's is its aws layer's)
    and that group's entry."""
    group = read_stack_file(example_file(stack))[f"{PREFIX}workloads"][workload]["nodeGroup"]
    name: str | None = stack
    while name:
        values = read_stack_file(example_file(name))
        for g in values.get(f"{PREFIX}nodeGroups", []):
            if g["name"] == group:
                return name, g
        name = str(values.get(f"{PREFIX}lowerStack", "")).rpartition("/")[2] or None
    raise KeyError(f"{stack}: no node group {group}")


def instance_type(stack: str, workload: str) -> str:
    """The instance type of the workload's node group, from the stack file or the files of its
    lower stacks (a runs layer's node groups are its aws layer's)."""
    return str(_declaring(stack, workload)[1]["instanceType"])


def node_group(stack: str, workload: str) -> str:
    """The name of the workload's node group (`system` for a CPU run)."""
    return str(read_stack_file(example_file(stack))[f"{PREFIX}workloads"][workload]["nodeGroup"])


@cache
def node_drivers(stack: str, workload: str) -> dict[str, str]:
    """The kernel drivers of the workload's nodes: those of the AMI release its node group's
    managed node group pins (`releaseVersion` in the plan of the stack that declares it), or
    without a pin the newest release for its Kubernetes version, which EKS gives a new group
    (tests/upstream/amazon-eks-ami-v20260714.yaml). Module name -> its version."""
    declaring, group = _declaring(stack, workload)
    plan = plan_mod.run(read_stack_file(example_file(declaring)), f"launch-{declaring}", EXAMPLES)
    (ng,) = [
        r["inputs"]
        for r in plan["resources"]
        if r["type"] == NODE_GROUP and (r["inputs"].get("labels") or {}).get(NODE_GROUP_LABEL) == group["name"]
    ]
    pinned, minor = ng.get("releaseVersion"), str(ng["version"])
    row = next(r for r in AMI_RELEASES if (r["releaseVersion"] == pinned if pinned else r["kubernetes"] == minor))
    return {"neuron": row["neuron"].removesuffix("-dkms"), "nvidia": row["nvidia"].split("-")[0]}


def steps(stack: str, workload: str, nodes: int, faults: bool = False) -> list[dict[str, Any]]:
    """The workload's Jobs and MPIJobs in the order `pulumi up` creates them."""
    return copy.deepcopy(list(_steps(stack, workload, nodes, faults and _asks_to_stop(stack, workload))))


MAIN_COMPONENTS = ("train", "accept")
"""A run's main MPIJob: training, or a fabric acceptance run's checks (workloads/manifests/fabric.py)."""


def training_job(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's main MPIJob (training, or the fabric acceptance)."""
    return next(j for j in jobs if j["kind"] == "MPIJob" and component(j) in MAIN_COMPONENTS)


def is_acceptance(job: dict[str, Any]) -> bool:
    """A fabric acceptance run's MPIJob: it trains nothing."""
    return component(job) == "accept"


def component(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["labels"].get("app.kubernetes.io/component", ""))


def pod_spec(obj: dict[str, Any], role: str = "Worker") -> dict[str, Any]:
    """The pod template's spec of a Job or Deployment, of an MPIJob's `role`, or of a
    LeaderWorkerSet's leader (role "GroupWorker": its workers'): the leader is the one that serves."""
    if obj["kind"] == "LeaderWorkerSet":
        group = obj["spec"]["leaderWorkerTemplate"]
        return dict(group["workerTemplate" if role == "GroupWorker" else "leaderTemplate"]["spec"])
    spec = obj["spec"]["mpiReplicaSpecs"][role] if obj["kind"] == "MPIJob" else obj["spec"]
    return dict(spec["template"]["spec"])


def containers(obj: dict[str, Any], role: str = "Worker") -> dict[str, Any]:
    """The (first) container of a Job, or of an MPIJob's `role`."""
    return dict(pod_spec(obj, role)["containers"][0])


def script(obj: dict[str, Any], role: str = "Launcher") -> str:
    container = containers(obj, role)
    return "\n".join([*container.get("command", []), *container.get("args", [])])


RUNTIME_DRIVER_RULES = upstream.facts("aws-neuron-sdk-runtime-driver")["rules"]


def at_least(text: str, floor: str) -> bool:
    """A version at or past `floor`, compared on as many parts as `floor` has."""
    f = tuple(int(p) for p in floor.split("."))
    return tuple(int(p) for p in text.split("-")[0].split("."))[: len(f)] >= f


def refusals(driver: str, runtime: str, family: str) -> list[str]:
    """The known issues of the Neuron runtime release notes by which a runtime library refuses
    a driver on an instance family (tests/upstream/aws-neuron-sdk-runtime-driver.yaml)."""
    return [
        r["text"]
        for r in RUNTIME_DRIVER_RULES
        if (not r.get("families") or family in r["families"])
        and (
            (
                ("driver_at_least" in r and at_least(driver, r["driver_at_least"]))
                and not at_least(runtime, r["needs_runtime_at_least"])
            )
            or (
                ("runtime_at_least" in r and at_least(runtime, r["runtime_at_least"]))
                and not at_least(driver, r["needs_driver_at_least"])
            )
        )
    ]


def fitting_driver(stack: str, workload: str, runtime: str | None, family: str) -> str:
    """The newest Neuron driver an AMI release for the group's Kubernetes version carries that a
    runtime library works with: for a scenario that sets the driver need aside."""
    declaring = _declaring(stack, workload)[0]
    minor = read_stack_file(example_file(declaring)).get(f"{PREFIX}cluster", {}).get("kubernetesVersion")
    for row in AMI_RELEASES:
        driver = row["neuron"].removesuffix("-dkms")
        if runtime and (not minor or row["kubernetes"] == minor) and not refusals(driver, runtime, family):
            return driver
    raise LookupError(f"{stack}: no AMI release's Neuron driver fits runtime {runtime}")


def serving_values(stack: str, workload: str, nodes: int = 2) -> dict[str, Any]:
    """The example stack with the serving workload only, or with the training run it serves
    (shortened, on `nodes` nodes, as harness_values makes it); teams dropped as there."""
    values = copy.deepcopy(read_stack_file(example_file(stack)))
    serve = values[f"{PREFIX}workloads"][workload]
    source = (serve.get("model") or {}).get("workload")
    if source:
        values = harness_values(stack, source, nodes)
    else:
        values.pop(f"{PREFIX}teams", None)
        values.get(f"{PREFIX}queueing", {}).pop("defaultQueue", None)
        values[f"{PREFIX}workloads"] = {}
    serve.pop("team", None)
    values[f"{PREFIX}workloads"][workload] = serve
    return values


def _plan_serving(stack: str, values: dict[str, Any]) -> dict[str, Any]:
    layered = config.parse_stack_values(values).lower_stack
    return plan_mod.run(values, f"launch-{stack}", EXAMPLES, _lower_outputs(stack) if layered else None)


@cache
def _serving_plan(stack: str, workload: str) -> dict[str, Any]:
    return _plan_serving(stack, serving_values(stack, workload))


def serving(stack: str, workload: str, edit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """What the harness plays of a serving workload, from its plan: `source` (the Jobs and
    MPIJobs of the training run it serves, in order; none for a Hub model), `steps` (its own
    Jobs and its Deployment or LeaderWorkerSet, in order), `services` and `policies` (every NetworkPolicy).
    With `edit`: the plan of the values `serving_values` gives after `edit` changed them (a
    day-2 after-stack: the next run, a new maxModelLen)."""
    if edit is None:
        resources = _serving_plan(stack, workload)["resources"]
    else:
        values = serving_values(stack, workload)
        edit(values)
        resources = _plan_serving(stack, values)["resources"]

    def of(name: str, types: tuple[str, ...]) -> list[dict[str, Any]]:
        mine = [
            r for r in resources if r["type"] in types and r["inputs"]["metadata"]["labels"].get(NAME_LABEL) == name
        ]
        return [copy.deepcopy(o) for o in _ordered(mine, types)]

    source = [w for w in read_stack_file(example_file(stack))[f"{PREFIX}workloads"] if w != workload]
    steps = [
        o for o in of(workload, (JOB, DEPLOYMENT, LEADER_WORKER_SET)) if o["kind"] == "Job" or component(o) == "serve"
    ]
    return {
        "source": [o for name in source for o in of(name, (MPIJOB, JOB))],
        "steps": steps,
        "services": of(workload, (SERVICE,)),
        "policies": copy.deepcopy([r["inputs"] for r in resources if r["type"] == NETWORK_POLICY]),
    }
