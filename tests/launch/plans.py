"""The MPIJobs the harness runs: every workload of every example stack, planned by the offline
plan (tools.plan.run, the same program as `pulumi up`) at 2 and 3 nodes, with training made
short. Each workload is planned alone (its team and queues dropped: they do not reach the
launch chain) so that its node count can change."""

from __future__ import annotations

import copy
import re
from typing import Any

from config.stackfile import read_stack_file
from tests.conftest import ROOT
from tools import plan as plan_mod

MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
PREFIX = "llm-training-eks:"
# Scripts of the rendered commands, and the stand-in that takes each one's place.
CODE_STANDINS = {
    "megatron_gpt_pretraining.py": "megatron_gpt_pretraining.py",
    "dp_bert_large_hf_pretrain_hdf5.py": "dp_bert_large_hf_pretrain_hdf5.py",
}
SHORT_TRAINING = {"maxSteps": 12, "checkpointEverySteps": 4, "warmupSteps": 1}
# Recipes the harness does not play yet, and where their launch runs for real meanwhile.
NOT_PLAYED_YET = {
    "ddp-cpu": "tests/plan/test_ddp_cpu.py runs its launcher's gate and torchrun training (public image, no images/ folder)"
}


def workloads() -> list[tuple[str, str, str]]:
    """(stack, workload, recipe) of every workload of every example stack the harness plays."""
    found = []
    for path in sorted(ROOT.glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi.") : -len(".yaml")]
        for name, wl in (read_stack_file(path).get(f"{PREFIX}workloads") or {}).items():
            if wl["recipe"] not in NOT_PLAYED_YET:
                found.append((stack, name, wl["recipe"]))
    return found


def harness_values(stack: str, workload: str, nodes: int) -> dict[str, Any]:
    """The example stack with only `workload`, on `nodes` nodes, training short."""
    values = copy.deepcopy(read_stack_file(ROOT / f"Pulumi.{stack}.yaml"))
    wl = values[f"{PREFIX}workloads"][workload]
    values[f"{PREFIX}workloads"] = {workload: wl}
    values.pop(f"{PREFIX}teams", None)
    wl.pop("team", None)
    wl["nodes"] = nodes
    for group in values[f"{PREFIX}nodeGroups"]:
        if group["name"] == wl["nodeGroup"]:
            group["desiredSize"] = max(int(group["desiredSize"]), nodes)
            group["maxSize"] = max(int(group.get("maxSize", 0)), group["desiredSize"])
    if wl["recipe"] in ("llama2-neuron", "nemo-gpu"):
        wl["training"] = {**wl.get("training", {}), **SHORT_TRAINING}
        # 96 and 24 ranks with TP 8 / TP 4: a global batch every data-parallel size divides.
        wl["model"] = {**wl.get("model", {}), "globalBatchSize": 192}
        if wl["recipe"] == "llama2-neuron":
            wl["precompileSteps"] = 2
    else:
        wl["checkpointEverySteps"] = 4
    return values


_plans: dict[tuple[str, str, int], list[dict[str, Any]]] = {}


def mpijobs(stack: str, workload: str, nodes: int) -> list[dict[str, Any]]:
    """The workload's MPIJobs in the order `pulumi up` creates them (dependencies first)."""
    key = (stack, workload, nodes)
    if key not in _plans:
        plan = plan_mod.run(harness_values(stack, workload, nodes), f"launch-{stack}")
        jobs = {r["urn"]: r for r in plan["resources"] if r["type"] == MPIJOB}
        ordered: list[str] = []

        def visit(urn: str) -> None:
            for dep in jobs[urn]["dependencies"]:
                if dep in jobs and dep not in ordered:
                    visit(dep)
            if urn not in ordered:
                ordered.append(urn)

        for urn in sorted(jobs):
            visit(urn)
        _plans[key] = [copy.deepcopy(jobs[u]["inputs"]) for u in ordered]
    return copy.deepcopy(_plans[key])


def launcher_script(mpijob: dict[str, Any]) -> str:
    container = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    return "\n".join([*container.get("command", []), *container.get("args", [])])


def code_paths(mpijob: dict[str, Any]) -> dict[str, str]:
    """Where the rendered launcher expects each training script (`cd <dir> && ... <script>`),
    and the stand-in for it. A script without a stand-in is an error naming it."""
    script = launcher_script(mpijob)
    dirs = re.findall(r"\bcd\s+(/[\w./-]+)", script)
    names = set(re.findall(r"\btorchrun\b[^|;]*?\s([\w-]+\.py)\b", script))
    unknown = names - set(CODE_STANDINS)
    if unknown:
        raise KeyError(f"no stand-in for {sorted(unknown)} in {mpijob['metadata']['name']}")
    return {f"{d}/{n}": CODE_STANDINS[n] for d in dirs for n in names}


def is_awaited(mpijob: dict[str, Any]) -> bool:
    return mpijob["metadata"].get("annotations", {}).get("pulumi.com/waitFor") == "condition=Succeeded"


def component(mpijob: dict[str, Any]) -> str:
    return str(mpijob["metadata"]["labels"].get("app.kubernetes.io/component", ""))
