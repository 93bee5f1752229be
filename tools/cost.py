"""What a stack costs, from the command line, with live AWS prices where credentials allow.

    python -m tools.cost (--stack NAME | --config-file PATH) [--live [--profile P]]

The estimate itself is `estimates.cost` (its inputs from config.costs); this adds the AWS Price List API (`--live`): EC2
instances, the EKS control plane, NAT gateways and FSx for Lustre storage are asked from it.
Whatever it cannot answer (no credentials, no network, a denied call, no single matching
product) is priced from the dated table in facts/prices.py, and the output says so: the JSON's
`priceSource` and `priceFallbacks` (which items, what was asked, why), and one line each on
stderr. What the lookups rely on (service codes, attribute names and values, filter types) is in
tests/upstream/aws-price-list.yaml with its sources.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.exceptions

from config.costs import items_from_config, runs_from_config
from estimates.cost import Prices, summary
from facts import prices as table
from tools.aws.account import DENIED, EXPIRED, REJECTED, explain_api_error, explain_botocore
from tools.cli import add_stack_arguments, load_stack_config

PRICE_LIST_REGION = "us-east-1"
"""The Price List Query API is served from us-east-1 (among few others); prices cover every region."""

# Price List API location names of the regions facts/prices.py prices.
LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
}
HOURLY_UNITS = frozenset({"Hrs", "Hours"})
MONTHLY_GB_UNITS = frozenset({"GB-Mo"})
MAX_ITEMS = 500
"""Products read per lookup at most (five pages of 100): a filter that matches more is ambiguous."""
TABLE = f"the price table of {table.PRICES_AS_OF} (facts/prices.py)"
DENIED_HINT = "allow it (docs/guardrails.md, Cost) for live prices"


@dataclass(frozen=True)
class Lookup:
    """One price asked of the Price List API: a GetProducts query plus the client-side match
    that must leave exactly one price."""

    key: tuple[str, ...]
    what: str
    service: str
    filters: Mapping[str, str]
    """TERM_MATCH field -> value."""
    contains: Mapping[str, str]
    """CONTAINS field -> substring."""
    accept: Callable[[Mapping[str, str]], bool]
    units: frozenset[str]


class PriceMiss(Exception):
    """The Price List API answered, but not with exactly one price for the lookup."""


def ec2_lookup(instance_type: str, region: str) -> Lookup:
    return Lookup(
        key=("ec2", instance_type),
        what=f"EC2 {instance_type} Linux on-demand in {region}",
        service="AmazonEC2",
        filters={
            "instanceType": instance_type,
            "location": LOCATIONS.get(region, region),
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
        },
        contains={},
        accept=lambda a: a.get("instanceType") == instance_type,
        units=HOURLY_UNITS,
    )


def eks_lookup(region: str) -> Lookup:
    return Lookup(
        key=("eks",),
        what=f"the EKS control plane (standard support) in {region}",
        service="AmazonEKS",
        filters={"location": LOCATIONS.get(region, region)},
        contains={"usagetype": "AmazonEKS-Hours:perCluster"},
        accept=lambda a: a.get("usagetype", "").endswith("AmazonEKS-Hours:perCluster"),
        units=HOURLY_UNITS,
    )


def nat_lookup(region: str) -> Lookup:
    def hourly(a: Mapping[str, str]) -> bool:
        usage = a.get("usagetype", "")
        return usage == "NatGateway-Hours" or usage.endswith("-NatGateway-Hours")

    return Lookup(
        key=("nat",),
        what=f"a NAT gateway hour in {region}",
        service="AmazonEC2",
        filters={"productFamily": "NAT Gateway", "location": LOCATIONS.get(region, region)},
        contains={"usagetype": "NatGateway-Hours"},
        accept=hourly,
        units=HOURLY_UNITS,
    )


def fsx_lookup(tier: int, region: str) -> Lookup:
    """PERSISTENT_2's SSD tiers (125, 250, 500, 1000 MB/s/TiB) are its own: PERSISTENT_1 SSD has
    50/100/200 and HDD 12/40 (botocore fsx, PerUnitStorageThroughput), so the tier's number as an
    attribute value names the deployment type; the attribute's name is matched by value."""

    def storage_at_tier(a: Mapping[str, str]) -> bool:
        backup = "Backup" in a.get("usagetype", "")
        return a.get("storageType", "SSD") == "SSD" and str(tier) in a.values() and not backup

    return Lookup(
        key=("fsx", str(tier)),
        what=f"FSx for Lustre PERSISTENT_2 SSD storage at {tier} MB/s/TiB in {region}",
        service="AmazonFSx",
        filters={"location": LOCATIONS.get(region, region), "productFamily": "Storage", "fileSystemType": "Lustre"},
        contains={},
        accept=storage_at_tier,
        units=MONTHLY_GB_UNITS,
    )


class PriceListPrices(Prices):
    """Prices from the AWS Price List API (`pricing` client); anything it cannot answer falls back
    to the table, recorded in `fallbacks` and in `source`."""

    def __init__(self, pricing_client: Any, region: str, unreachable: str | None = None):
        self.client = pricing_client
        self.region = region
        self._cache: dict[tuple[str, ...], float] = {}
        self.fallbacks: list[tuple[tuple[str, ...], str, str]] = []
        """(lookup key, what was asked, why the table was used)."""
        self._unreachable = unreachable
        self.source = "AWS Price List API"

    def instance_hourly(self, instance_type: str, region: str) -> float:
        lookup = ec2_lookup(instance_type, region)
        return self._price(lookup, lambda: Prices.instance_hourly(self, instance_type, region))

    def eks_hourly(self) -> float:
        return self._price(eks_lookup(self.region), lambda: Prices.eks_hourly(self))

    def nat_hourly(self) -> float:
        return self._price(nat_lookup(self.region), lambda: Prices.nat_hourly(self))

    def fsx_gb_month(self, throughput_mbps_per_tib: int) -> float:
        tier = throughput_mbps_per_tib
        return self._price(fsx_lookup(tier, self.region), lambda: Prices.fsx_gb_month(self, tier))

    def _price(self, lookup: Lookup, from_table: Callable[[], float]) -> float:
        if lookup.key not in self._cache:
            try:
                self._cache[lookup.key] = self._ask(lookup)
            except PriceMiss as e:
                self._cache[lookup.key] = from_table()
                self.fallbacks.append((lookup.key, lookup.what, str(e)))
                self.source = f"AWS Price List API; {TABLE} for {len(self.fallbacks)} price(s) it could not give"
        return self._cache[lookup.key]

    def _ask(self, lookup: Lookup) -> float:
        if self._unreachable:
            raise PriceMiss(self._unreachable)
        location = lookup.filters.get("location")
        if location is not None and location not in LOCATIONS.values():
            raise PriceMiss(f"no Price List location name known for {location}")
        filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in lookup.filters.items()]
        filters += [{"Type": "CONTAINS", "Field": k, "Value": v} for k, v in lookup.contains.items()]
        try:
            pages = self.client.get_paginator("get_products").paginate(
                ServiceCode=lookup.service,
                Filters=filters,
                FormatVersion="aws_v1",
                PaginationConfig={"MaxItems": MAX_ITEMS, "PageSize": 100},
            )
            products = [json.loads(p) if isinstance(p, str) else p for page in pages for p in page.get("PriceList", [])]
        except botocore.exceptions.ClientError as e:
            error = e.response.get("Error", {})
            code = str(error.get("Code", ""))
            reason = explain_api_error(code, str(error.get("Message", "")), "pricing:GetProducts", DENIED_HINT)
            if code in EXPIRED | DENIED | REJECTED:
                self._unreachable = reason
            raise PriceMiss(reason) from None
        except botocore.exceptions.BotoCoreError as e:
            self._unreachable = explain_botocore(e, "pricing:GetProducts")
            raise PriceMiss(self._unreachable) from None
        return one_price(products, lookup)


def one_price(products: Sequence[Mapping[str, Any]], lookup: Lookup) -> float:
    """The single on-demand price (USD per unit) of the products the lookup accepts."""
    found: set[float] = set()
    for product in products:
        if not lookup.accept(product.get("product", {}).get("attributes", {})):
            continue
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = float(dim.get("pricePerUnit", {}).get("USD", 0) or 0)
                if dim.get("unit") in lookup.units and usd > 0:
                    found.add(usd)
    if len(found) == 1:
        return found.pop()
    if not found:
        raise PriceMiss(f"the Price List API has no product for {lookup.what}")
    listed = ", ".join(f"{p:g}" for p in sorted(found))
    raise PriceMiss(f"the Price List API has {len(found)} prices for {lookup.what} ({listed}); none chosen")


def live_prices(region: str, profile: str | None = None) -> PriceListPrices:
    """Price List API prices through the profile's credentials (default: the environment's)."""
    try:
        session = boto3.Session(profile_name=profile)
        if session.get_credentials() is None:
            missing = explain_botocore(botocore.exceptions.NoCredentialsError(), "pricing:GetProducts")
            return PriceListPrices(None, region, unreachable=missing)
        return PriceListPrices(session.client("pricing", region_name=PRICE_LIST_REGION), region)
    except botocore.exceptions.BotoCoreError as e:
        return PriceListPrices(None, region, unreachable=explain_botocore(e, "pricing:GetProducts"))


def fallback_report(result: Mapping[str, Any], prices: PriceListPrices) -> list[dict[str, Any]]:
    """Which items of the estimate were priced from the table, what was asked, and why."""

    def uses(key: tuple[str, ...]) -> list[str]:
        if key[0] == "ec2":
            items = [i["name"] for i in result["items"] if i["kind"] == "nodes" and i["unit"] == key[1]]
            return items + [f"run/{r['name']}" for r in result["trainingRuns"] if r["instanceType"] == key[1]]
        return [i["name"] for i in result["items"] if i["kind"] == key[0]]

    return [{"items": uses(key), "priced": what, "reason": why} for key, what, why in prices.fallbacks]


def main(
    argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None, prices: Prices | None = None
) -> int:
    """The command line; `prices` replaces the live or table prices in tests."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m tools.cost", description="Hourly and monthly cost of a stack.")
    add_stack_arguments(parser)
    parser.add_argument("--live", action="store_true", help="ask the AWS Price List API (needs credentials)")
    parser.add_argument("--profile", help="AWS profile for --live (default: the environment's)")
    args = parser.parse_args(argv)
    cfg = load_stack_config(args, stderr)
    if cfg is None:
        return 2
    if prices is None:
        prices = live_prices(cfg.region, args.profile) if args.live else Prices()
    result = summary(items_from_config(cfg, prices), prices, runs_from_config(cfg, prices))
    if isinstance(prices, PriceListPrices):
        result["priceFallbacks"] = fallback_report(result, prices)
        for f in result["priceFallbacks"]:
            items = ", ".join(f["items"]) or "nothing"
            print(f"cost: {items}: {TABLE} for {f['priced']}: {f['reason']}", file=stderr)
    print(json.dumps(result, indent=2, sort_keys=True), file=stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
