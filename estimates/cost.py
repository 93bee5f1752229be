"""What a stack costs per hour and per month, and what a run costs (pure estimate).

Items: node groups, each capacity kind as AWS bills it: on-demand nodes x the on-demand rate; an
ODCR at the on-demand rate for the instances it holds (maxSize), used or not; a Capacity Block at
the block rate for its instances (maxSize), prepaid for its whole length whatever desiredSize says,
with that total where the block's dates are known; spot at the on-demand rate as an upper bound,
the EKS control plane, NAT gateways (none in an existing VPC) and FSx for Lustre (storage x
throughput tier); a run: nodes x its hours x price, or per hour while it stands (a server, with
its load balancer).
What the estimate leaves out is listed with it (`NOT_COUNTED`, the cost's `notCounted`).
Prices come from `Prices`: the AWS Price List API through boto3 (`--live`, needs
credentials; `tools.cost`) or the dated table in `facts.prices` (the offline plan always
uses the table, so the plan stays deterministic).

Inputs are typed: a `StackBill` (what the stack runs: config/costs.py builds it from the config,
tools/plan.py from the planned resources) and a `RunBill` per run (config/costs.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from estimates.checkpoints import shown_seconds
from estimates.run_length import RunLength
from facts import prices as table


class Prices:
    """Hourly prices from the dated table (`infra.prices`)."""

    source = (
        f"price table of {table.PRICES_AS_OF}, Capacity Block rates of {table.CAPACITY_BLOCK_PRICES_AS_OF}"
        " (facts/prices.py)"
    )

    def instance_hourly(self, instance_type: str, region: str) -> float:
        try:
            return table.EC2_ON_DEMAND_HOURLY[instance_type]
        except KeyError:
            raise KeyError(f"no price for {instance_type} in facts/prices.py") from None

    def capacity_block_hourly(self, instance_type: str) -> float:
        """The Capacity Block rate per instance-hour (a type with no rate of its own: its proxy's)."""
        name = instance_type if instance_type in table.CAPACITY_BLOCK_HOURLY else table.PROXIES.get(instance_type, "")
        try:
            return table.CAPACITY_BLOCK_HOURLY[name]
        except KeyError:
            raise KeyError(f"no Capacity Block price for {instance_type} in facts/prices.py") from None

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
    prepaid_hours: float | None = None
    """A Capacity Block: the hours it is paid for up front (its length), where known."""

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
            **(
                {"prepaidHours": self.prepaid_hours, "prepaidTotal": round(self.hourly * self.prepaid_hours, 2)}
                if self.prepaid_hours is not None
                else {}
            ),
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


def training_run_cost(
    *,
    name: str,
    instance_type: str,
    nodes: int,
    steps: int,
    step_seconds: float,
    region: str,
    prices: Prices,
    besides_seconds: float = 0,
) -> dict[str, Any]:
    """Cost of one training run: nodes x hours x price, hours = (steps x step seconds + what else runs
    on its nodes: `besides_seconds`, its validation and export, estimates.run_length) / 3600.

    `step_seconds` is the configured or measured time of one optimizer step on `nodes` nodes.
    """
    if nodes < 1 or steps < 0 or step_seconds <= 0 or besides_seconds < 0:
        raise ValueError("nodes >= 1, steps >= 0, step_seconds > 0 and besides_seconds >= 0 are required")
    hours = (steps * step_seconds + besides_seconds) / 3600
    price = prices.instance_hourly(instance_type, region)
    return {
        "name": name,
        "instanceType": instance_type,
        "nodes": nodes,
        "steps": steps,
        "stepSeconds": step_seconds,
        **({"besidesSeconds": round(besides_seconds)} if besides_seconds else {}),
        "hours": round(hours, 4),
        "hourly": round(nodes * price, 4),
        "total": round(nodes * price * hours, 2),
    }


def run_costs(runs: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Run name -> its total USD (None: its length is unknown), for the `runCosts` output."""
    return {str(r["name"]): r["total"] for r in runs}


@dataclass(frozen=True)
class NodeCount:
    """Nodes of one node group the stack keeps running, and their instance type."""

    name: str | None
    instance_type: str
    count: int
    capacity: str = "on-demand"
    """on-demand | reservation | capacity-block | spot: how AWS bills the nodes."""
    block_hours: float | None = None
    """A Capacity Block's length in hours (startsAt to endsAt), where known."""


@dataclass(frozen=True)
class FileSystemBill:
    """An FSx for Lustre file system: its storage (GiB) and throughput tier (MB/s per TiB)."""

    name: str | None
    gib: float
    tier: int


@dataclass(frozen=True)
class StackBill:
    """What a stack has that is billed by the hour, in the order the cost lists it."""

    region: str
    clusters: int = 0
    """EKS control planes (one per cluster)."""
    nat_gateways: int = 0
    node_groups: tuple[NodeCount, ...] = ()
    file_systems: tuple[FileSystemBill, ...] = ()


def node_group_item(g: NodeCount, region: str, prices: Prices) -> CostItem:
    """One node group as AWS bills it: a Capacity Block at its rate, prepaid for its length; an
    ODCR at the on-demand rate whether used or not; on-demand (and spot, as an upper bound) at the
    on-demand rate (the callers count a reserved group at the instances it holds, maxSize)."""
    name = f"node-group/{g.name}"
    if g.capacity == "capacity-block":
        price = prices.capacity_block_hourly(g.instance_type)
        return CostItem(name, "nodes", g.count, f"{g.instance_type} (Capacity Block)", price, g.block_hours)
    unit = f"{g.instance_type} (ODCR, billed used or not)" if g.capacity == "reservation" else g.instance_type
    return CostItem(name, "nodes", g.count, unit, prices.instance_hourly(g.instance_type, region))


def items(bill: StackBill, prices: Prices) -> list[CostItem]:
    """Cost items of a stack: its control plane, NAT gateways, node groups and file systems."""
    out = [CostItem("eks-control-plane", "eks", 1, "cluster", prices.eks_hourly())] if bill.clusters else []
    if bill.nat_gateways:
        out.append(CostItem("nat-gateways", "nat", bill.nat_gateways, "gateway", prices.nat_hourly()))
    for g in bill.node_groups:
        out.append(node_group_item(g, bill.region, prices))
    for fs in bill.file_systems:
        per_hour = prices.fsx_gb_month(fs.tier) / table.HOURS_PER_MONTH
        out.append(CostItem(f"fsx/{fs.name}", "fsx", fs.gib, f"GB at {fs.tier} MB/s/TiB", per_hour))
    return out


@dataclass(frozen=True)
class RunBill:
    """What the cost of one run reads (config/costs.py builds it from the run's config)."""

    name: str
    instance_type: str
    nodes: int
    steps: int | None
    """Optimizer steps of the whole run (None: not counted in steps)."""
    step_seconds: float | None
    basis: str
    """Where the step time comes from (configured, a published measurement, or why unknown)."""
    on_system_nodes: bool = False
    """A CPU run on the system node group: those nodes are billed with the stack."""
    modeled: tuple[float, str] | None = None
    """Seconds a run without optimizer steps lasts, and the model's basis (an acceptance run)."""
    node_share: float = 0
    """Nodes' worth of the group the run holds while it stands (a run priced by the hour)."""
    load_balancers: int = 0
    hourly_basis: str | None = None
    """How the cost line names a cost that is per hour by nature (a server)."""
    length: RunLength | None = None
    """What else the run does on its nodes besides its steps (validation, import, export)."""
    mb_per_second: float | None = None
    """The shared file system's throughput (the export's time)."""


def run_cost(run: RunBill, region: str, prices: Prices) -> dict[str, Any]:
    """Cost of one run: nodes x hours x price where its length is known (steps x step time, or a
    modeled length); per hour while it stands otherwise; nothing more on the system nodes."""
    basis, base = run.basis, {"name": run.name, "instanceType": run.instance_type, "nodes": run.nodes}
    if run.on_system_nodes:
        entry = {**base, "steps": run.steps, "stepSeconds": run.step_seconds, "hours": None, "hourly": 0.0}
        entry.update(total=0.0, onSystemNodes=True)
        basis = "runs on the system nodes, billed with the stack"
    elif run.steps is not None and run.step_seconds is not None:
        entry = training_run_cost(
            name=run.name,
            instance_type=run.instance_type,
            nodes=run.nodes,
            steps=run.steps,
            step_seconds=shown_seconds(run.step_seconds),
            region=region,
            prices=prices,
            besides_seconds=_besides(run),
        )
    elif run.modeled is not None:
        entry, basis = modeled_run_cost(run.name, run.instance_type, run.nodes, run.modeled, region, prices)
    else:
        balancers = run.load_balancers * prices.nlb_hourly()
        hourly = run.node_share * prices.instance_hourly(run.instance_type, region) + balancers
        basis = run.hourly_basis or basis
        if balancers:
            basis += f"; its internal NLB ${balancers:g}/h included, its capacity units (NLCU) not"
        entry = {**base, "steps": run.steps, "stepSeconds": None, "hours": None, "hourly": round(hourly, 4)}
        entry["total"] = None
    entry["stepTimeBasis"] = basis
    return entry


def _besides(run: RunBill) -> float:
    """Seconds of validation, import and export on the run's nodes, at the run's shown step time."""
    if run.length is None or run.step_seconds is None:
        return 0.0
    step = shown_seconds(run.step_seconds)
    return run.length.seconds(step, run.mb_per_second) - run.length.steps * step


def stack_outputs(bill: StackBill, runs: Sequence[RunBill], prices: Prices | None = None) -> dict[str, Any]:
    """`hourlyCost` and `monthlyCost` stack outputs (USD, from the price table), and with runs,
    `runCosts`: each run's own cost (null where its length is unknown; 0 on the system nodes)."""
    prices = prices or Prices()
    s = summary(items(bill, prices), prices)
    outputs: dict[str, Any] = {"hourlyCost": s["totalHourly"], "monthlyCost": s["totalMonthly"]}
    if runs:
        outputs["runCosts"] = run_costs([run_cost(r, bill.region, prices) for r in runs])
    return outputs
