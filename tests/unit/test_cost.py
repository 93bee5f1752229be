"""Cost: hand-computed figures for an example stack, training runs, the Price List API."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

import config
from config import costs
from estimates import cost
from facts import prices
from tests.conftest import stack_plan, stack_values
from tools import cost as tools_cost
from tools.plan import bill_from_plan


def test_trn1_llama2_cost_matches_hand_computed_figures():
    # 4 x trn1.32xlarge ($21.50) + 2 x m6i.2xlarge system nodes ($0.384) + EKS ($0.10) + 1 NAT ($0.045)
    # + FSx PERSISTENT_2 1200 GB at 500 MB/s/TiB ($0.340 per GB-month / 730 h; the stack sizes
    # throughput so checkpoint writes stay under 2% of training time)
    c = stack_plan("trn1-llama2")["cost"]
    by_name = {i["name"]: i for i in c["items"]}
    assert by_name["node-group/trn1"]["hourly"] == 86.0
    assert by_name["node-group/system"]["hourly"] == 0.768
    assert by_name["eks-control-plane"]["hourly"] == 0.1
    assert by_name["nat-gateways"]["hourly"] == 0.045
    fsx = 1200 * 0.340 / 730
    assert by_name["fsx/storage-lustre"]["hourly"] == pytest.approx(fsx, abs=1e-4)
    assert c["totalHourly"] == pytest.approx(86.913 + fsx, abs=1e-4)
    assert c["totalMonthly"] == pytest.approx((86.913 + fsx) * 730, abs=0.01)
    # The Llama2-7B run: 10000 steps; no measured step time, so the Neuron sample's 49.75 seq/s
    # on 16 nodes, scaled to 4 nodes, sets it: 256 / (49.75 / 16 * 4) = 20.583 s a step.
    (run,) = c["trainingRuns"]
    step = 256 / (49.75 / 16 * 4)
    assert run["stepSeconds"] == pytest.approx(step, abs=1e-3)
    assert run["hours"] == pytest.approx(10000 * step / 3600, abs=0.01)
    assert run["total"] == pytest.approx(4 * 21.50 * 10000 * step / 3600, abs=1)


def test_measured_step_time_wins_and_unknown_is_said():
    values = stack_values("p4de-nemo")
    (nemo,) = stack_plan("p4de-nemo")["cost"]["trainingRuns"]
    assert nemo["total"] is None and "stepSeconds" in nemo["stepTimeBasis"]
    values = json.loads(json.dumps(values))
    # 60 s steps: its two 83 GB writes every 500 steps (a top-k checkpoint and NeMo's `last` copy)
    # stay under 2% of training time (30 s would not).
    values["llm-training-eks:workloads"]["nemo"]["stepSeconds"] = 60.0
    cfg = config.parse(config.from_stack_values(values))
    (run,) = costs.runs_from_config(cfg, cost.Prices())
    steps = cfg.workloads["nemo"].training.max_steps
    # and its one validation pass at the end, one forward iteration: a third of a step (estimates.run_length)
    assert (
        run["hours"] == pytest.approx((steps + 1 / 3) * 60.0 / 3600, abs=1e-4) and run["stepTimeBasis"] == "configured"
    )


def test_every_catalog_type_has_a_price():
    from facts import instances as catalog

    assert set(catalog.CATALOG) <= set(prices.EC2_ON_DEMAND_HOURLY)


def test_fsx_is_priced_by_storage_and_throughput_tier():
    fs = {
        "type": "aws:fsx/lustreFileSystem:LustreFileSystem",
        "name": "shared",
        "inputs": {"storageCapacity": 2400, "perUnitStorageThroughput": 250},
    }
    (item,) = cost.items(bill_from_plan([fs], "us-west-2"), cost.Prices())
    assert item.hourly * 730 == pytest.approx(2400 * 0.210)


def test_training_run_cost_is_nodes_times_hours():
    run = cost.training_run_cost(
        name="llama2-7b",
        instance_type="trn1.32xlarge",
        nodes=4,
        steps=10_000,
        step_seconds=7.2,
        region="us-west-2",
        prices=cost.Prices(),
    )
    assert run["hours"] == 20.0  # 10,000 x 7.2 s / 3600
    assert run["total"] == 4 * 21.50 * 20  # $1,720
    with pytest.raises(ValueError):
        cost.training_run_cost(
            name="x", instance_type="trn1.32xlarge", nodes=0, steps=1, step_seconds=1, region="us-west-2",
            prices=cost.Prices(),
        )  # fmt: skip


def test_price_list_api_is_parsed_and_falls_back_to_the_table():
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    product = {
        "product": {"attributes": {"instanceType": "trn1.32xlarge", "location": "US West (Oregon)"}},
        "terms": {
            "OnDemand": {
                "ABC.JRTCKXETXF": {
                    "priceDimensions": {
                        "ABC.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": "21.5000000000"}}
                    }
                }
            }
        },
    }
    with Stubber(client) as stub:
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [json.dumps(product)]},
            {
                "ServiceCode": "AmazonEC2",
                "Filters": [
                    {"Type": "TERM_MATCH", "Field": k, "Value": v}
                    for k, v in {
                        "instanceType": "trn1.32xlarge",
                        "location": "US West (Oregon)",
                        "operatingSystem": "Linux",
                        "tenancy": "Shared",
                        "preInstalledSw": "NA",
                        "capacitystatus": "Used",
                    }.items()
                ],
                "FormatVersion": "aws_v1",
                "MaxResults": 100,
            },
        )
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []})
        p = tools_cost.PriceListPrices(client, "us-west-2")
        assert p.instance_hourly("trn1.32xlarge", "us-west-2") == 21.5
        assert p.instance_hourly("trn1.32xlarge", "us-west-2") == 21.5  # cached: no second call
        assert p.instance_hourly("p5.48xlarge", "us-east-2") == prices.EC2_ON_DEMAND_HOURLY["p5.48xlarge"]
        assert p.fallbacks == [
            (
                ("ec2", "p5.48xlarge"),
                "EC2 p5.48xlarge Linux on-demand in us-east-2",
                "the Price List API has no product for EC2 p5.48xlarge Linux on-demand in us-east-2",
            )
        ]


def test_a_proxy_price_is_the_price_of_the_type_it_stands_in_for():
    """trn2u.48xlarge has no published price (UltraServers are sold as Capacity Blocks): it is
    priced as trn2.48xlarge, exactly, and marked unverified, never invented."""
    for name, proxy in prices.PROXIES.items():
        assert prices.EC2_ON_DEMAND_HOURLY[name] == prices.EC2_ON_DEMAND_HOURLY[proxy]
        assert name in prices.UNVERIFIED
    assert set(prices.UNVERIFIED) <= set(prices.EC2_ON_DEMAND_HOURLY)
