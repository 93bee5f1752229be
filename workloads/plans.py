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
        if isinstance(run, TrainingRun) and (plan := checkpoints.plan(run.checkpoint_input, fs, between(run, seconds))):
            out["checkpoints"] = plan.as_dict()
        out["throughput"] = throughput.plan(run.work(instance_type or ""), instance_type or "", seconds, basis, fs)
        if isinstance(run, TrainingRun):
            out.update(schedule_and_length(run, seconds, fs.mb_per_second))
    return plans


def between(run: TrainingRun, step_seconds: float | None) -> float | None:
    """Wall seconds per step between checkpoints: the step and its share of the validation passes
    (estimates.run_length), so a checkpoint's share is of the time the run really takes."""
    length = run.run_length
    if step_seconds is None or length is None:
        return step_seconds
    return step_seconds * (1 + length.validation_share)


def schedule_and_length(
    run: TrainingRun, step_seconds: float | None, mb_per_second: float
) -> dict[str, dict[str, object]]:
    """A training run's learning-rate schedule over its steps and its length with validation and
    export (estimates.schedule, estimates.run_length), where its recipe models them."""
    out: dict[str, dict[str, object]] = {}
    if (schedule := run.lr_schedule) is not None:
        out["schedule"] = schedule.as_dict()
    if (length := run.run_length) is not None:
        out["length"] = length.as_dict(step_seconds, mb_per_second)
    return out


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
