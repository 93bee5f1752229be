"""The timeline's inputs from a stack's config: each node group's capacity window and price, each
run's phases with the lengths the plan's own estimates give (workloads.plans: the same figures
the plan table and the Workload components show), the runs each waits for. The layout is
estimates.timeline's."""

from __future__ import annotations

import datetime as dt
from typing import Any

from config import costs
from config.checks import capacity as capacity_checks
from config.stack import StackConfig
from config.workloads import Run, TrainingRun
from estimates import cost, startup
from estimates.timeline import Capacity, Checkpointing, Phase, RunInput
from facts import instances
from facts.names import SYSTEM_NODE_GROUP
from workloads.plans import between, run_plans, with_startup


def capacities(cfg: StackConfig, prices: cost.Prices) -> list[Capacity]:
    """Each node group's window (the system group's too: CPU runs and launchers): on-demand and
    spot from the start, open-ended; a Capacity Block from its start (`startsAt`, else the
    timeline's) to its scale-down, prepaid to its end; an ODCR open-ended (its end is not in the
    stack file). Each priced per hour as the plan's cost prices it (estimates.cost: a block at
    its own rate, an ODCR at the instances it holds)."""
    hourly = {i.name.removeprefix("node-group/"): i.hourly for i in costs.items_from_config(cfg, prices)}
    s = cfg.system_node_group
    out = [
        Capacity(
            SYSTEM_NODE_GROUP,
            "on-demand",
            s.desired_size,
            hourly.get(SYSTEM_NODE_GROUP, 0.0),
            end_key="systemNodeGroup",
        )
    ]
    for ng in cfg.node_groups:
        c = ng.capacity
        block = c.type == "capacity-block"
        out.append(
            Capacity(
                group=ng.name,
                kind=c.type,
                nodes=ng.desired_size,
                hourly=hourly.get(ng.name, 0.0),
                opens=c.starts_at,
                closes=c.scale_down_at if block else None,
                ends=c.ends_at,
                end_key=f"nodeGroups.{ng.name}.capacity.endsAt" if block else f"nodeGroups.{ng.name}",
                prepaid=block,
            )
        )
    return out


def fixed_hourly(cfg: StackConfig, prices: cost.Prices) -> float:
    """What the stack costs an hour besides its node groups (control plane, NAT, file system)."""
    groups = {f"node-group/{ng.name}" for ng in cfg.node_groups} | {f"node-group/{SYSTEM_NODE_GROUP}"}
    return sum(i.hourly for i in costs.items_from_config(cfg, prices) if i.name not in groups)


def runs(cfg: StackConfig) -> list[RunInput]:
    """Each run of the stack with its phases, in the stack file's order."""
    platform = {ng.name: ng.node_group(ng.availability_zone or "") for ng in cfg.node_groups}
    platform[cfg.system_node_group.node_group([]).name] = cfg.system_node_group.node_group([])
    types = {name: g.instance.name for name, g in platform.items()}
    plans = with_startup(run_plans(cfg.workloads, cfg.storage, cfg, types), cfg.workloads, platform)
    gates = {name: r.node_group for name, r in cfg.workloads.items() if r.KIND == "acceptance"}
    out = []
    for name, run in cfg.workloads.items():
        group = platform.get(run.node_group)
        if group is None:
            continue
        after = tuple(g for g, ng in gates.items() if ng == run.node_group and g != name)
        out.append(_run(cfg, name, run, group.instance, plans.get(name, {}), after))
    return out


def _run(
    cfg: StackConfig,
    name: str,
    run: Run,
    instance: instances.InstanceType,
    plan: dict[str, Any],
    after: tuple[str, ...],
) -> RunInput:
    phases = [_compile(plan.get("startup"))]
    key = f"workloads.{name}"
    if run.KIND == "acceptance":
        modeled = run.modeled_seconds(instance)
        phases.append(Phase("acceptance", modeled[0] if modeled else None, modeled[1] if modeled else "not modeled"))
        return RunInput(name, "acceptance", run.node_group, run.nodes, _known(phases), length_key=key)
    if run.KIND == "serving":
        trained = getattr(getattr(run, "model", None), "workload", None)
        params = getattr(run, "served_parameters", lambda _w: None)(cfg.workloads)
        start = startup.server_start_seconds(instance, cfg.storage.file_system.mb_per_second, params)
        nodes = getattr(run, "nodes_needed", lambda _i: run.nodes)(instance)
        phases = [
            Phase("replica start", start, "weights from /shared, the engine, a Neuron compile"),
            Phase("serving", 0),
        ]
        return RunInput(
            name, "serving", run.node_group, nodes, tuple(phases), after=after + ((trained,) if trained else ())
        )
    raw, basis = costs.estimated_step_seconds(cfg, name, instance.name)
    # a step with its share of the validation passes (estimates.run_length), as the plan counts it
    seconds = between(run, raw) if isinstance(run, TrainingRun) else raw
    steps = run.optimizer_steps
    ck = plan.get("checkpoints") or {}
    cadence = None
    writes = 0
    if seconds and isinstance(run, TrainingRun) and ck.get("everySteps") and ck.get("writeSeconds") is not None:
        cadence = Checkpointing(int(ck["everySteps"]), seconds, float(ck["writeSeconds"]), run.checkpoint_interval_key)
        writes = (steps or 0) // cadence.every_steps
    length = None if not (seconds and steps) else steps * seconds + writes * (cadence.write_seconds if cadence else 0)
    why = (
        basis if length is None else f"{steps:,} steps x {seconds:g} s with validation ({basis}), {writes} checkpoints"
    )
    if imported := (plan.get("length") or {}).get("importSeconds"):
        phases.append(Phase("import", float(imported), "the Hugging Face weights into a Megatron checkpoint"))
    phases.append(Phase("training", length, why))
    export = (plan.get("length") or {}).get("exportSeconds")
    if export:
        phases.append(Phase("export", float(export), "the export after the last step (file system time)"))
    return RunInput(
        name,
        "training",
        run.node_group,
        run.nodes,
        _known(phases),
        steps,
        cadence,
        after,
        length_key=f"{key}.stepSeconds" if seconds is None else f"{key}.steps",
        lr_phases=lr_phases(plan.get("schedule")),
        schedule_key=f"{key}.schedule.decaySteps" if hasattr(run, "schedule") else f"{key}.training",
    )


def lr_phases(schedule: dict[str, Any] | None) -> tuple[tuple[str, int, int], ...]:
    """The learning-rate phases of a schedule the plan shows: warm-up, decay, at the floor."""
    if not schedule:
        return ()
    steps, warm, end = int(schedule["steps"]), int(schedule["warmupSteps"]), int(schedule["decayEnd"])
    out = [
        ("warm-up", 0, min(warm, steps)),
        ("decay" if schedule.get("style") != "constant" else "constant", min(warm, steps), min(end, steps)),
    ]
    if end < steps:
        out.append(("at the floor", end, steps))
    return tuple((label, a, b) for label, a, b in out if b > a)


def _compile(s: dict[str, Any] | None) -> Phase:
    """The compile on a cache miss (the first run of a shape), where the recipe has one."""
    minutes = (s or {}).get("compileMinutesOnMiss")
    return Phase("compile", None if minutes is None else minutes * 60, (s or {}).get("compileBasis", ""))


def _known(phases: list[Phase]) -> tuple[Phase, ...]:
    """Drop zero-length phases (no compile); keep unknown ones (the timeline notes them)."""
    return tuple(p for p in phases if p.seconds is None or p.seconds > 0)


def default_start() -> dt.datetime:
    """Now, to the minute, in UTC, as config is judged (the example clock for an example; tests pin it)."""
    return capacity_checks.judged_at().replace(second=0, microsecond=0)
