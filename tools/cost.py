"""What a stack costs, from the command line, with live AWS prices where credentials allow.

    python -m tools.cost (--stack NAME | --config-file PATH) [--live]

The estimate itself is `infra.cost`; this adds the AWS Price List API (`--live`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import boto3
import botocore.exceptions

from infra.cost import Prices, items_from_config, runs_from_config, summary
from tools.cli import add_stack_arguments, load_stack_config

# Price List API location names of the regions we price.
LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
}


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


def live_prices() -> Prices:
    """Price List API prices when credentials allow, else the table."""
    try:
        session = boto3.Session()
        if session.get_credentials() is None:
            return Prices()
        return PriceListPrices(session.client("pricing", region_name="us-east-1"))
    except botocore.exceptions.BotoCoreError:
        return Prices()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.cost", description="Hourly and monthly cost of a stack.")
    add_stack_arguments(parser)
    parser.add_argument("--live", action="store_true", help="ask the AWS Price List API (needs credentials)")
    args = parser.parse_args(argv)
    cfg = load_stack_config(args, sys.stderr)
    if cfg is None:
        return 2
    prices = live_prices() if args.live else Prices()
    print(
        json.dumps(
            summary(items_from_config(cfg, prices), prices, runs_from_config(cfg, prices)), indent=2, sort_keys=True
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
