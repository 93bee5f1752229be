"""Each run's plans, the inputs of its Workload component that the offline plan's table shows:
its checkpoints (size, write time, share of training time), its throughput (step time and its
basis, tokens/s, MFU, support status, what it reads at start) and its way to the first step
(image pulls, compile: config.startup)."""

from __future__ import annotations

from collections.abc import Mapping

from config import startup
from config.stack import StackConfig
from config.storage import StorageConfig
from config.workloads import Run, TrainingRun
from facts.names import SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup
from infra import cost


def run_plans(
    workloads: Mapping[str, Run], storage: StorageConfig, cfg: StackConfig, node_types: Mapping[str, str]
) -> dict[str, dict[str, dict[str, object]]]:
    """Each run's plans for the Workload's inputs: its checkpoints (size, write time, share of
    training time) and its throughput (step time and its basis, tokens/s, MFU, support status, time
    to the first step); `node_types` is the instance type of each node group."""
    plans: dict[str, dict[str, dict[str, object]]] = {}
    for name, run in workloads.items():
        if run.KIND == "serving":  # a server trains no steps: its cost line has its start and its hourly cost
            continue
        instance_type = node_types.get(run.node_group)
        seconds, basis = cost.estimated_step_seconds(cfg, name, instance_type)
        out = plans.setdefault(name, {})
        if isinstance(run, TrainingRun) and (plan := run.checkpoint_plan(storage, seconds)) is not None:
            out["checkpoints"] = plan.as_dict()
        out["throughput"] = run.throughput_plan(instance_type or "", seconds, basis, storage)
    return plans


def with_startup(
    plans: dict[str, dict[str, dict[str, object]]], workloads: Mapping[str, Run], groups: Mapping[str, NodeGroup]
) -> dict[str, dict[str, dict[str, object]]]:
    """`plans` with each run's way to its first step (image pulls, compile: config.startup)."""
    system = groups[SYSTEM_NODE_GROUP].instance
    for name, run in workloads.items():
        if run.KIND == "serving":  # a server's start (weights, engine, compile) is its cost line's
            continue
        node = getattr(groups.get(run.node_group), "instance", None)
        plans.setdefault(name, {})["startup"] = startup.plan(run.COMPILE, system, node).as_dict()
    return plans
