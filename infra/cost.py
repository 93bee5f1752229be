"""What a stack costs per hour and per month, and what a training run costs (pure estimate).

Items: node groups (nodes x on-demand price; an ODCR bills at the on-demand rate whether
used or not; Capacity Blocks and spot are shown at the on-demand rate as an upper bound),
the EKS control plane, NAT gateways (none in an existing VPC) and FSx for Lustre (storage x
throughput tier).
What the estimate leaves out is listed with it (`NOT_COUNTED`, the cost's `notCounted`).
Prices come from `Prices`: the AWS Price List API through boto3 (`--live`, needs
credentials; `tools.cost`) or the dated table in `facts.prices` (the offline plan always
uses the table, so the plan stays deterministic).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from config.checkpoints import shown_seconds, write_mb_per_second
from config.stack import StackConfig
from facts import instances
from facts import prices as table
from facts.names import NODE_GROUP_LABEL, SYSTEM_NODE_GROUP


class Prices:
    """Hourly prices from the dated table (`infra.prices`)."""

    source = f"price table of {table.PRICES_AS_OF} (facts/prices.py)"

    def instance_hourly(self, instance_type: str, region: str) -> float:
        try:
            return table.EC2_ON_DEMAND_HOURLY[instance_type]
        except KeyError:
            raise KeyError(f"no price for {instance_type} in facts/prices.py") from None

    def eks_hourly(self) -> float:
        return table.EKS_CONTROL_PLANE_HOURLY

    def nat_hourly(self) -> float:
        return table.NAT_GATEWAY_HOURLY

    def nlb_hourly(self) -> float:
        return table.NETWORK_LOAD_BALANCER_HOURLY

    def fsx_gb_month(self, throughput_mbps_per_tib: int) -> float:
        return table.FSX_PERSISTENT_2_GB_MONTH[throughput_mbps_per_tib]


@dataclass(frozen=True)
class CostItem:
    """One line of the bill."""

    name: str
    kind: str
    quantity: float
    unit: str
    unit_price: float
    """USD per unit-hour."""

    @property
    def hourly(self) -> float:
        return self.quantity * self.unit_price

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "quantity": self.quantity,
            "unit": self.unit,
            "unitPriceHourly": round(self.unit_price, 6),
            "hourly": round(self.hourly, 4),
            "monthly": round(self.hourly * table.HOURS_PER_MONTH, 2),
        }


NOT_COUNTED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("EBS: each node's encrypted gp3 root volume", ("aws:ec2/launchTemplate:LaunchTemplate",)),
    ("KMS: the stack's customer-managed keys (a monthly charge per key) and their requests", ("aws:kms/key:Key",)),
    (
        "public IPv4: the NAT gateways' Elastic IPs (AWS bills every public IPv4 address by the hour)",
        ("aws:ec2/eip:Eip",),
    ),
    (
        "CloudWatch: the log groups (control plane, flow logs, FSx, builds) and Container Insights",
        ("aws:cloudwatch/logGroup:LogGroup",),
    ),
    ("backups: FSx for Lustre automatic and final backups", ("aws:fsx/lustreFileSystem:LustreFileSystem",)),
    ("S3: the buckets' storage, object versions and requests", ("aws:s3/bucket:Bucket",)),
    (
        "CodeBuild and ECR: build minutes (image builds, the CI runner) and image storage",
        ("aws:codebuild/project:Project", "aws:ecr/repository:Repository"),
    ),
    (
        "data transfer: NAT gateway processing per GB, traffic between AZs, internet egress",
        ("aws:ec2/natGateway:NatGateway", "aws:eks/nodeGroup:NodeGroup"),
    ),
)
"""What is billed besides the estimate (by use or size, or small beside the nodes), each with the
resource types that bring it: the plan lists those its resources have."""


def not_counted(types: Collection[str] | None = None) -> list[str]:
    """What the estimate leaves out, of a stack declaring resources of `types` (None: all of it)."""
    return [what for what, brought_by in NOT_COUNTED if types is None or set(brought_by) & set(types)]


def summary(
    items: Sequence[CostItem],
    prices: Prices,
    runs: Sequence[dict[str, Any]] = (),
    types: Collection[str] | None = None,
) -> dict[str, Any]:
    """The `cost` object of the plan JSON; `types`: the resource types of the stack (for what
    the estimate leaves out; None: list all of it)."""
    hourly = sum(i.hourly for i in items)
    return {
        "currency": "USD",
        "priceSource": prices.source,
        "hoursPerMonth": table.HOURS_PER_MONTH,
        "items": [i.as_dict() for i in items],
        "totalHourly": round(hourly, 4),
        "totalMonthly": round(hourly * table.HOURS_PER_MONTH, 2),
        "notCounted": not_counted(types),
        "trainingRuns": list(runs),
    }


def items_from_config(cfg: StackConfig, prices: Prices) -> list[CostItem]:
    """Cost items of a stack from its config (what the program will declare). The cluster and
    runs layers declare nothing billed by the hour (their runs are priced by `runs_from_config`)."""
    if cfg.layer in ("cluster", "runs"):
        return []
    s = cfg.system_node_group
    items = [CostItem("eks-control-plane", "eks", 1, "cluster", prices.eks_hourly())]
    if not cfg.network.existing:  # an existing VPC's NAT gateways are billed to its owner
        nat = 1 if cfg.network.nat_gateways == "single" else len(cfg.availability_zones)
        items.append(CostItem("nat-gateways", "nat", nat, "gateway", prices.nat_hourly()))
    items.append(
        CostItem(
            "node-group/system",
            "nodes",
            s.desired_size,
            s.instance_type,
            prices.instance_hourly(s.instance_type, cfg.region),
        )
    )
    for ng in cfg.node_groups:
        items.append(
            CostItem(
                f"node-group/{ng.name}",
                "nodes",
                ng.desired_size,
                ng.instance_type,
                prices.instance_hourly(ng.instance_type, cfg.region),
            )
        )
    st = cfg.storage
    tier = st.throughput_per_tib if st.deployment_type == "PERSISTENT_2" else 125
    items.append(
        CostItem(
            "fsx/storage-lustre",
            "fsx",
            st.storage_capacity_gib,
            f"GB at {tier} MB/s/TiB",
            prices.fsx_gb_month(tier) / table.HOURS_PER_MONTH,
        )
    )
    return items


def estimated_step_seconds(cfg: StackConfig, name: str, instance_type: str | None = None) -> tuple[float | None, str]:
    """Seconds per step of a run: configured, estimated from its recipe's published
    measurement (the recipe's STEP_TIME), or unknown.

    `instance_type` is that of the run's node group (default: from the stack's own groups)."""
    run = cfg.workloads[name]
    if run.step_seconds is not None:
        return run.step_seconds, "configured"
    if instance_type is None:
        instance_type = own_node_types(cfg).get(run.node_group)
    estimate = run.estimated_step_time(instance_type) if instance_type is not None else None
    if estimate is not None:
        return estimate
    return None, f"no published step time applies: set workloads.{name}.stepSeconds from a measured step"


def own_node_types(cfg: StackConfig) -> dict[str, str]:
    """Node group -> instance type of the groups a stack declares (the system group included)."""
    return {
        **{g.name: g.instance_type for g in cfg.node_groups},
        SYSTEM_NODE_GROUP: cfg.system_node_group.instance_type,
    }


def runs_from_config(
    cfg: StackConfig, prices: Prices, node_types: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Cost of each configured training run (nodes x hours x price). A run on the system node
    group (a CPU run) costs nothing more: those nodes run, and are billed, with the stack.

    `node_types` maps node group -> instance type (default: the stack's own groups; a
    runs-layer stack passes the cluster layer's)."""
    types = dict(node_types) if node_types is not None else own_node_types(cfg)
    runs = []
    for name, run in sorted(cfg.workloads.items()):
        instance_type = types[run.node_group]
        steps = run.optimizer_steps
        step_seconds, basis = estimated_step_seconds(cfg, name, instance_type)
        if run.node_group == SYSTEM_NODE_GROUP:
            entry = {
                "name": name,
                "instanceType": instance_type,
                "nodes": run.nodes,
                "steps": steps,
                "stepSeconds": step_seconds,
                "hours": None,
                "hourly": 0.0,
                "total": 0.0,
                "onSystemNodes": True,
            }
            basis = "runs on the system nodes, billed with the stack"
        elif steps is not None and step_seconds is not None:
            entry = training_run_cost(
                name=name,
                instance_type=instance_type,
                nodes=run.nodes,
                steps=steps,
                step_seconds=shown_seconds(step_seconds),
                region=cfg.region,
                prices=prices,
            )
        elif (modeled := run.modeled_seconds(instances.get(instance_type))) is not None:
            entry, basis = modeled_run_cost(name, instance_type, run.nodes, modeled, cfg.region, prices)
        else:
            instance = instances.get(instance_type)
            balancers = run.load_balancers * prices.nlb_hourly()
            hourly = run.node_share(instance) * prices.instance_hourly(instance_type, cfg.region) + balancers
            basis = run.hourly_basis(instance, write_mb_per_second(cfg.storage), cfg.workloads) or basis
            if balancers:
                basis += f"; its internal NLB ${balancers:g}/h included, its capacity units (NLCU) not"
            entry = {
                "name": name,
                "instanceType": instance_type,
                "nodes": run.nodes,
                "steps": steps,
                "stepSeconds": None,
                "hours": None,
                "hourly": round(hourly, 4),
                "total": None,
            }
        entry["stepTimeBasis"] = basis
        runs.append(entry)
    return runs


def modeled_run_cost(
    name: str, instance_type: str, nodes: int, modeled: tuple[float, str], region: str, prices: Prices
) -> tuple[dict[str, Any], str]:
    """Cost of a run with a modeled length and no optimizer steps (an acceptance run): nodes x
    its modeled hours x price; and the model's basis."""
    seconds, basis = modeled
    entry = training_run_cost(
        name=name, instance_type=instance_type, nodes=nodes, steps=1, step_seconds=seconds, region=region, prices=prices
    )
    return {**entry, "steps": None, "stepSeconds": None, "modeledSeconds": seconds}, basis


def items_from_plan(resources: Sequence[Mapping[str, Any]], region: str, prices: Prices) -> list[CostItem]:
    """Cost items of the planned resources (node groups, clusters, NAT gateways, FSx)."""
    items: list[CostItem] = []
    for r in resources:
        t, i = r.get("type"), r.get("inputs") or {}
        if t in ("eks:index:Cluster", "aws:eks/cluster:Cluster") and not any(x.kind == "eks" for x in items):
            items.append(CostItem("eks-control-plane", "eks", 1, "cluster", prices.eks_hourly()))
        elif t == "aws:eks/nodeGroup:NodeGroup":
            itype = (i.get("instanceTypes") or ["?"])[0]
            n = (i.get("scalingConfig") or {}).get("desiredSize", 0)
            items.append(
                CostItem(
                    # The group's name is its label: its EKS name gets a unique suffix at create.
                    f"node-group/{(i.get('labels') or {}).get(NODE_GROUP_LABEL)}",
                    "nodes",
                    n,
                    itype,
                    prices.instance_hourly(itype, region),
                )
            )
        elif t == "aws:fsx/lustreFileSystem:LustreFileSystem":
            gib = float(i.get("storageCapacity") or 0)
            tier = int(i.get("perUnitStorageThroughput") or 125)
            per_hour = prices.fsx_gb_month(tier) / table.HOURS_PER_MONTH
            items.append(CostItem(f"fsx/{r.get('name')}", "fsx", gib, f"GB at {tier} MB/s/TiB", per_hour))
    nats = sum(1 for r in resources if r.get("type") == "aws:ec2/natGateway:NatGateway")
    if nats:
        items.append(CostItem("nat-gateways", "nat", nats, "gateway", prices.nat_hourly()))
    order = {"eks": 0, "nat": 1, "nodes": 2, "fsx": 3}
    return sorted(items, key=lambda x: (order.get(x.kind, 9), x.name))


def training_run_cost(
    *, name: str, instance_type: str, nodes: int, steps: int, step_seconds: float, region: str, prices: Prices
) -> dict[str, Any]:
    """Cost of one training run: nodes x hours x price, hours = steps x step seconds / 3600.

    `step_seconds` is the configured or measured time of one optimizer step on `nodes` nodes.
    """
    if nodes < 1 or steps < 0 or step_seconds <= 0:
        raise ValueError("nodes >= 1, steps >= 0 and step_seconds > 0 are required")
    hours = steps * step_seconds / 3600
    price = prices.instance_hourly(instance_type, region)
    return {
        "name": name,
        "instanceType": instance_type,
        "nodes": nodes,
        "steps": steps,
        "stepSeconds": step_seconds,
        "hours": round(hours, 4),
        "hourly": round(nodes * price, 4),
        "total": round(nodes * price * hours, 2),
    }


def stack_outputs(cfg: StackConfig, prices: Prices | None = None) -> dict[str, Any]:
    """`hourlyCost` and `monthlyCost` stack outputs (USD, from the price table), and with runs,
    `runCosts`: each run's own cost (null where its length is unknown; 0 on the system nodes)."""
    prices = prices or Prices()
    s = summary(items_from_config(cfg, prices), prices)
    outputs: dict[str, Any] = {"hourlyCost": s["totalHourly"], "monthlyCost": s["totalMonthly"]}
    if cfg.workloads:
        outputs["runCosts"] = run_costs(runs_from_config(cfg, prices))
    return outputs


def run_costs(runs: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Run name -> its total USD (None: its length is unknown), for the `runCosts` output."""
    return {str(r["name"]): r["total"] for r in runs}
