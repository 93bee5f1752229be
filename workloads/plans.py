"""Each run's plans, the inputs of its Workload component that the offline plan's table shows:
its checkpoints (size, write time, share of training time), its throughput (step time and its
basis, tokens/s, MFU, support status, what it reads at start) and its way to the first step
(image pulls, compile). The figures are estimates/'s; this hands each its run's inputs."""

from __future__ import annotations

from collections.abc import Mapping

from config import costs
from config.stack import StackConfig
from config.storage import StorageConfig
from config.workloads import Run, TrainingRun
from estimates import checkpoints, startup, throughput
from facts.names import SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup


def run_plans(
    workloads: Mapping[str, Run], storage: StorageConfig, cfg: StackConfig, node_types: Mapping[str, str]
) -> dict[str, dict[str, dict[str, object]]]:
    """Each run's plans for the Workload's inputs: its checkpoints (size, write time, share of
    training time) and its throughput (step time and its basis, tokens/s, MFU, support status, time
    to the first step); `node_types` is the instance type of each node group."""
    plans: dict[str, dict[str, dict[str, object]]] = {}
    fs = storage.file_system
    for name, run in workloads.items():
        if run.KIND == "serving":  # a server trains no steps: its cost line has its start and its hourly cost
            continue
        instance_type = node_types.get(run.node_group)
        seconds, basis = costs.estimated_step_seconds(cfg, name, instance_type)
        out = plans.setdefault(name, {})
        if isinstance(run, TrainingRun) and (plan := checkpoints.plan(run.checkpoint_input, fs, seconds)) is not None:
            out["checkpoints"] = plan.as_dict()
        out["throughput"] = throughput.plan(run.work(instance_type or ""), instance_type or "", seconds, basis, fs)
    return plans


def with_startup(
    plans: dict[str, dict[str, dict[str, object]]], workloads: Mapping[str, Run], groups: Mapping[str, NodeGroup]
) -> dict[str, dict[str, dict[str, object]]]:
    """`plans` with each run's way to its first step (image pulls, compile: estimates.startup)."""
    system = groups[SYSTEM_NODE_GROUP].instance
    for name, run in workloads.items():
        if run.KIND == "serving":  # a server's start (weights, engine, compile) is its cost line's
            continue
        node = getattr(groups.get(run.node_group), "instance", None)
        plans.setdefault(name, {})["startup"] = startup.plan(run.COMPILE, system, node).as_dict()
    return plans
