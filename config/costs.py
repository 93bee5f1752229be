"""The stack config's inputs to the cost estimate (estimates/cost.py): what the stack runs that is
billed by the hour (a StackBill) and each run's length or hourly share (a RunBill). The estimate
itself, and the prices, are estimates.cost's; nothing here computes a figure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from config.workloads import Run, TrainingRun
from estimates import cost
from estimates.step_time import step_time
from facts import instances
from facts.names import SYSTEM_NODE_GROUP


def stack_bill(cfg: StackConfig) -> cost.StackBill:
    """What the program will declare that is billed by the hour. The cluster and runs layers
    declare nothing billed by the hour (their runs are priced by `run_bills`)."""
    if cfg.layer in ("cluster", "runs"):
        return cost.StackBill(cfg.region)
    nat = 0
    if not cfg.network.existing:  # an existing VPC's NAT gateways are billed to its owner
        nat = 1 if cfg.network.nat_gateways == "single" else len(cfg.availability_zones)
    s, st = cfg.system_node_group, cfg.storage
    groups = [cost.NodeCount("system", s.instance_type, s.desired_size)]
    groups += [node_count(ng) for ng in cfg.node_groups]
    tier = st.throughput_per_tib if st.deployment_type == "PERSISTENT_2" else 125
    fsx = cost.FileSystemBill("storage-lustre", st.storage_capacity_gib, tier)
    return cost.StackBill(cfg.region, 1, nat, tuple(groups), (fsx,))


def node_count(ng: NodeGroupConfig) -> cost.NodeCount:
    """A node group as AWS bills it: a reservation or Capacity Block holds its instances (maxSize)
    whatever desiredSize says; a block's length from its startsAt and endsAt, where both are given."""
    c = ng.capacity
    hours = (c.ends_at - c.starts_at).total_seconds() / 3600 if c.starts_at and c.ends_at else None
    count = ng.max if c.targets_reservation else ng.desired_size
    return cost.NodeCount(ng.name, ng.instance_type, count, c.type, hours)


def block_hours(cfg: StackConfig) -> dict[str, float]:
    """Node group name -> its Capacity Block's length in hours, where startsAt and endsAt say it."""
    return {ng.name: h for ng in cfg.node_groups if (h := node_count(ng).block_hours) is not None}


def estimated_step_seconds(cfg: StackConfig, name: str, instance_type: str | None = None) -> tuple[float | None, str]:
    """Seconds per step of a run and its basis: configured, estimated from its recipe's published
    measurement (the recipe's STEP_TIME), or unknown.

    `instance_type` is that of the run's node group (default: from the stack's own groups)."""
    run = cfg.workloads[name]
    if instance_type is None:
        instance_type = own_node_types(cfg).get(run.node_group)
    published = run.step_estimate(instance_type) if instance_type is not None else None
    return step_time(run.step_seconds, published, f"workloads.{name}.stepSeconds")


def own_node_types(cfg: StackConfig) -> dict[str, str]:
    """Node group -> instance type of the groups a stack declares (the system group included)."""
    return {
        **{g.name: g.instance_type for g in cfg.node_groups},
        SYSTEM_NODE_GROUP: cfg.system_node_group.instance_type,
    }


def run_bill(cfg: StackConfig, name: str, run: Run, instance_type: str) -> cost.RunBill:
    """What the cost of one run reads: its steps and step time, or (where those are unknown) its
    modeled length or its share of the group per hour."""
    steps, on_system = run.optimizer_steps, run.node_group == SYSTEM_NODE_GROUP
    seconds, basis = estimated_step_seconds(cfg, name, instance_type)
    length = run.run_length if isinstance(run, TrainingRun) else None
    bill = cost.RunBill(
        name, instance_type, run.nodes, steps, seconds, basis, on_system_nodes=on_system,
        length=length, mb_per_second=cfg.storage.file_system.mb_per_second,
    )  # fmt: skip
    if on_system or (steps is not None and seconds is not None):
        return bill
    instance = instances.get(instance_type)
    if (modeled := run.modeled_seconds(instance)) is not None:
        return cost.RunBill(name, instance_type, run.nodes, steps, seconds, basis, modeled=modeled)
    hourly_basis = run.hourly_basis(instance, cfg.storage.file_system.mb_per_second, cfg.workloads)
    return cost.RunBill(
        name,
        instance_type,
        run.nodes,
        steps,
        seconds,
        basis,
        node_share=run.node_share(instance),
        load_balancers=run.load_balancers,
        hourly_basis=hourly_basis,
    )


def run_bills(cfg: StackConfig, node_types: Mapping[str, str] | None = None) -> list[cost.RunBill]:
    """Each configured run's bill, by name. `node_types` maps node group -> instance type (default:
    the stack's own groups; a runs-layer stack passes the cluster layer's)."""
    types = dict(node_types) if node_types is not None else own_node_types(cfg)
    return [run_bill(cfg, name, run, types[run.node_group]) for name, run in sorted(cfg.workloads.items())]


def runs_from_config(
    cfg: StackConfig, prices: cost.Prices, node_types: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Cost of each configured run (estimates.cost.run_cost of its bill)."""
    return [cost.run_cost(bill, cfg.region, prices) for bill in run_bills(cfg, node_types)]


def items_from_config(cfg: StackConfig, prices: cost.Prices) -> list[cost.CostItem]:
    """Cost items of a stack from its config (what the program will declare)."""
    return cost.items(stack_bill(cfg), prices)


def stack_outputs(cfg: StackConfig, prices: cost.Prices | None = None) -> dict[str, Any]:
    """`hourlyCost`, `monthlyCost` and, with runs, `runCosts` stack outputs (estimates.cost)."""
    return cost.stack_outputs(stack_bill(cfg), run_bills(cfg), prices)
