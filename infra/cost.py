"""What a stack costs per hour and per month, and what a training run costs.

    python -m infra.cost (--stack NAME | --config-file PATH) [--live]

Items: node groups (nodes x on-demand price; an ODCR bills at the on-demand rate whether
used or not; Capacity Blocks and spot are shown at the on-demand rate as an upper bound),
the EKS control plane, NAT gateways and FSx for Lustre (storage x throughput tier).
Prices come from `Prices`: the AWS Price List API through boto3 (`--live`, needs
credentials) or the dated table in `infra.prices` (the offline plan always uses the
table, so the plan stays deterministic).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra import prices as table
from infra.config import StackConfig

# Price List API location names of the regions we price.
LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
}


class Prices:
    """Hourly prices from the dated table (`infra.prices`)."""

    source = f"price table of {table.PRICES_AS_OF} (infra/prices.py)"

    def instance_hourly(self, instance_type: str, region: str) -> float:
        try:
            return table.EC2_ON_DEMAND_HOURLY[instance_type]
        except KeyError:
            raise KeyError(f"no price for {instance_type} in infra/prices.py") from None

    def eks_hourly(self) -> float:
        return table.EKS_CONTROL_PLANE_HOURLY

    def nat_hourly(self) -> float:
        return table.NAT_GATEWAY_HOURLY

    def fsx_gb_month(self, throughput_mbps_per_tib: int) -> float:
        return table.FSX_PERSISTENT_2_GB_MONTH[throughput_mbps_per_tib]


class PriceListPrices(Prices):
    """EC2 prices from the AWS Price List API (`pricing` client, served from us-east-1);
    anything it cannot answer falls back to the table."""

    source = "AWS Price List API"

    def __init__(self, pricing_client: Any):
        self.client = pricing_client
        self._cache: dict[tuple[str, str], float] = {}

    def instance_hourly(self, instance_type: str, region: str) -> float:
        key = (instance_type, region)
        if key not in self._cache:
            found = self._lookup(instance_type, region)
            self._cache[key] = found if found is not None else super().instance_hourly(instance_type, region)
        return self._cache[key]

    def _lookup(self, instance_type: str, region: str) -> float | None:
        filters = {
            "instanceType": instance_type,
            "location": LOCATIONS.get(region, region),
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
        }
        resp = self.client.get_products(
            ServiceCode="AmazonEC2",
            Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()],
            MaxResults=10,
        )
        for item in resp.get("PriceList", []):
            product = json.loads(item) if isinstance(item, str) else item
            for term in product.get("terms", {}).get("OnDemand", {}).values():
                for dim in term.get("priceDimensions", {}).values():
                    usd = float(dim.get("pricePerUnit", {}).get("USD", 0))
                    if usd > 0:
                        return usd
        return None


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


def summary(items: Sequence[CostItem], prices: Prices, runs: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The `cost` object of the plan JSON."""
    hourly = sum(i.hourly for i in items)
    return {
        "currency": "USD",
        "priceSource": prices.source,
        "hoursPerMonth": table.HOURS_PER_MONTH,
        "items": [i.as_dict() for i in items],
        "totalHourly": round(hourly, 4),
        "totalMonthly": round(hourly * table.HOURS_PER_MONTH, 2),
        "trainingRuns": list(runs),
    }


def items_from_config(cfg: StackConfig, prices: Prices) -> list[CostItem]:
    """Cost items of a stack from its config (what the program will declare)."""
    s = cfg.system_node_group
    items = [CostItem("eks-control-plane", "eks", 1, "cluster", prices.eks_hourly())]
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


# Neuron performance sample (aws-neuron-sdk trn1_trn1n_nlp_data.csv, Neuron 2.13.1): Llama2-7B,
# TP=8, global batch 256, 16 trn1.32xlarge nodes: 49.75 sequences/s. Scaled linearly per node,
# it estimates a 7B step where no measured `stepSeconds` is configured.
LLAMA2_7B_SEQ_PER_SECOND_PER_TRN1_NODE = 49.75 / 16


def estimated_step_seconds(cfg: StackConfig, name: str) -> tuple[float | None, str]:
    """Seconds per step of a run: configured, estimated from a published sample, or unknown."""
    w = cfg.workloads[name]
    if w.step_seconds is not None:
        return w.step_seconds, "configured"
    ng = next(g for g in cfg.node_groups if g.name == w.node_group)
    model = getattr(w, "model", None)
    if (
        w.recipe == "llama2-neuron"
        and model is not None
        and model.preset == "7b"
        and ng.instance_type in ("trn1.32xlarge", "trn1n.32xlarge")
    ):
        per_second = LLAMA2_7B_SEQ_PER_SECOND_PER_TRN1_NODE * w.nodes
        return model.global_batch_size / per_second, "estimated from the Neuron 2.13.1 Llama2-7B sample"
    return None, "unknown: set workloads.<name>.stepSeconds"


def runs_from_config(cfg: StackConfig, prices: Prices) -> list[dict[str, Any]]:
    """Cost of each configured training run (nodes x hours x price)."""
    runs = []
    for name, w in sorted(cfg.workloads.items()):
        ng = next(g for g in cfg.node_groups if g.name == w.node_group)
        training = getattr(w, "training", None)
        steps = training.max_steps if training is not None else getattr(w, "steps", None)
        step_seconds, basis = estimated_step_seconds(cfg, name)
        if steps is not None and step_seconds is not None:
            run = training_run_cost(
                name=name,
                instance_type=ng.instance_type,
                nodes=w.nodes,
                steps=steps,
                step_seconds=round(step_seconds, 3),
                region=cfg.region,
                prices=prices,
            )
        else:
            hourly = w.nodes * prices.instance_hourly(ng.instance_type, cfg.region)
            run = {
                "name": name,
                "instanceType": ng.instance_type,
                "nodes": w.nodes,
                "steps": steps,
                "stepSeconds": None,
                "hours": None,
                "hourly": round(hourly, 4),
                "total": None,
            }
        run["stepTimeBasis"] = basis
        runs.append(run)
    return runs


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
                    f"node-group/{i.get('nodeGroupName')}", "nodes", n, itype, prices.instance_hourly(itype, region)
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


def stack_outputs(cfg: StackConfig, prices: Prices | None = None) -> dict[str, float]:
    """`hourlyCost` and `monthlyCost` stack outputs (USD, from the price table)."""
    prices = prices or Prices()
    s = summary(items_from_config(cfg, prices), prices)
    return {"hourlyCost": s["totalHourly"], "monthlyCost": s["totalMonthly"]}


def live_prices() -> Prices:
    """Price List API prices when credentials allow, else the table."""
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session()
        if session.get_credentials() is None:
            return Prices()
        return PriceListPrices(session.client("pricing", region_name="us-east-1"))
    except botocore.exceptions.BotoCoreError:
        return Prices()


def main(argv: Sequence[str] | None = None) -> int:
    from infra import config
    from infra.plan import UsageError, add_stack_arguments, bad_input, parse_values, read_stack_file, stack_file

    parser = argparse.ArgumentParser(prog="python -m infra.cost", description="Hourly and monthly cost of a stack.")
    add_stack_arguments(parser)
    parser.add_argument("--live", action="store_true", help="ask the AWS Price List API (needs credentials)")
    args = parser.parse_args(argv)
    try:
        cfg = parse_values(read_stack_file(stack_file(args)))
    except (UsageError, config.ConfigError) as e:
        return bad_input(e, sys.stderr)
    prices = live_prices() if args.live else Prices()
    print(
        json.dumps(
            summary(items_from_config(cfg, prices), prices, runs_from_config(cfg, prices)), indent=2, sort_keys=True
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
