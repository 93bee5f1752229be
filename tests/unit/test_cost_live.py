"""`tools.cost --live`: every item asked of the AWS Price List API, and each price that came from
the table instead said, with its items and why. Answers are GetProducts responses of the real
shape (the AWS CLI's example; botocore's Stubber checks them against the pricing model), and
errors are the ones botocore raises (tests/upstream/aws-price-list.yaml, aws-error-shapes.yaml)."""

from __future__ import annotations

import io
import json
import re
import socket
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.stub import ANY, Stubber

import config
from facts import prices as table
from tests import upstream
from tests.conftest import BASE, MINIMAL
from tools import cost as tools_cost

REGION = "us-west-2"
LOCATION = "US West (Oregon)"


def product(service: str, family: str, usd: str, unit: str = "Hrs", **attributes: str) -> str:
    """One PriceList entry as GetProducts returns it: a JSON string (aws-cli's get-products example)."""
    sku = "3MKHN58N7RDDVGKJ"
    return json.dumps(
        {
            "product": {
                "productFamily": family,
                "attributes": {
                    "servicecode": service,
                    "location": LOCATION,
                    "locationType": "AWS Region",
                    **attributes,
                },
                "sku": sku,
            },
            "serviceCode": service,
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": unit,
                                "endRange": "Inf",
                                "description": "price",
                                "appliesTo": [],
                                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "offerTermCode": "JRTCKXETXF",
                        "termAttributes": {},
                    }
                }
            },
            "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
        }
    )


def ec2(instance_type: str, usd: str) -> str:
    return product(
        "AmazonEC2",
        "Compute Instance",
        usd,
        instanceType=instance_type,
        operatingSystem="Linux",
        tenancy="Shared",
        preInstalledSw="NA",
        capacitystatus="Used",
        usagetype=f"USW2-BoxUsage:{instance_type}",
    )


EKS = product("AmazonEKS", "Compute", "0.1000000000", usagetype="USW2-AmazonEKS-Hours:perCluster")
EKS_EXTENDED = product("AmazonEKS", "Compute", "0.6000000000", usagetype="USW2-AmazonEKS-Hours:extendedSupport")
NAT = product("AmazonEC2", "NAT Gateway", "0.0450000000", usagetype="USW2-NatGateway-Hours")
# A product whose usage type contains "NatGateway-Hours" without being one: the suffix rule skips it.
NAT_OTHER = product("AmazonEC2", "NAT Gateway", "0.0900000000", usagetype="USW2-RegionalNatGateway-Hours")


def lustre(tier: int, usd: str, storage: str = "SSD", **more: str) -> str:
    attributes = {"fileSystemType": "Lustre", "storageType": storage, "throughputCapacity": str(tier), **more}
    return product("AmazonFSx", "Storage", usd, "GB-Mo", usagetype=f"USW2-Storage.{storage}.{tier}", **attributes)


LUSTRE = [lustre(125, "0.1450000000"), lustre(250, "0.2100000000"), lustre(500, "0.3400000000"), lustre(1000, "0.6")]


def cfg_and_file(tmp_path: Path) -> tuple[config.StackConfig, Path]:
    values = {**BASE, **MINIMAL}
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(json.dumps({"config": values}))
    return config.parse(config.from_stack_values(values)), path


def run(path: Path, prices: tools_cost.PriceListPrices) -> tuple[dict[str, Any], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    assert tools_cost.main(["--config-file", str(path), "--live"], stdout=out, stderr=err, prices=prices) == 0
    return json.loads(out.getvalue()), err.getvalue().splitlines()


def stubbed(*answers: tuple[str, list[str]] | str) -> tuple[Any, Stubber]:
    """A pricing client answering GetProducts in order: (service code, price list) or an error code."""
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    for answer in answers:
        if isinstance(answer, str):
            stub.add_client_error("get_products", answer, "User is not authorized to perform pricing:GetProducts")
            continue
        service, listed = answer
        params = {"ServiceCode": service, "Filters": ANY, "FormatVersion": "aws_v1", "MaxResults": 100}
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": listed}, params)
    stub.activate()
    return client, stub


def test_every_item_is_priced_live_when_the_api_answers(tmp_path: Path):
    cfg, path = cfg_and_file(tmp_path)
    system = cfg.system_node_group.instance_type
    client, stub = stubbed(
        ("AmazonEKS", [EKS, EKS_EXTENDED]),
        ("AmazonEC2", [NAT, NAT_OTHER]),
        ("AmazonEC2", [ec2(system, "0.4000000000")]),
        ("AmazonEC2", [ec2("trn1.32xlarge", "21.9000000000")]),
        ("AmazonFSx", [*LUSTRE, lustre(12, "0.025", storage="HDD")]),
    )
    result, lines = run(path, tools_cost.PriceListPrices(client, REGION))
    stub.assert_no_pending_responses()
    assert (result["priceSource"], result["priceFallbacks"], lines) == ("AWS Price List API", [], [])
    by_name = {i["name"]: i for i in result["items"]}
    assert by_name["eks-control-plane"]["unitPriceHourly"] == 0.1
    assert by_name["nat-gateways"]["unitPriceHourly"] == 0.045
    assert by_name["node-group/trn1"]["unitPriceHourly"] == 21.9  # live, not the table's 21.50
    storage = cfg.storage
    assert by_name["fsx/storage-lustre"]["unit"] == f"GB at {storage.throughput_per_tib} MB/s/TiB"
    tier_price = {125: 0.145, 250: 0.21, 500: 0.34, 1000: 0.6}[storage.throughput_per_tib]
    assert by_name["fsx/storage-lustre"]["unitPriceHourly"] == pytest.approx(
        tier_price / table.HOURS_PER_MONTH, abs=1e-6
    )


def test_each_fallback_is_said_with_its_items_and_why(tmp_path: Path):
    """No standard-support EKS product; a denied call stops the lookups (every later price is from
    the table, none asked again)."""
    cfg, path = cfg_and_file(tmp_path)
    client, stub = stubbed(("AmazonEKS", [EKS_EXTENDED]), ("AmazonEC2", [NAT]), "AccessDeniedException")
    result, lines = run(path, tools_cost.PriceListPrices(client, REGION))
    stub.assert_no_pending_responses()
    system = cfg.system_node_group.instance_type
    denied = "the AWS identity may not call pricing:GetProducts (AccessDeniedException): allow it (docs/guardrails.md, Cost) for live prices"
    assert [(f["items"], f["priced"]) for f in result["priceFallbacks"]] == [
        (["eks-control-plane"], "the EKS control plane (standard support) in us-west-2"),
        (["node-group/system"], f"EC2 {system} Linux on-demand in us-west-2"),
        (["node-group/trn1"], "EC2 trn1.32xlarge Linux on-demand in us-west-2"),
        (
            ["fsx/storage-lustre"],
            f"FSx for Lustre PERSISTENT_2 SSD storage at {cfg.storage.throughput_per_tib} MB/s/TiB in us-west-2",
        ),
    ]
    reasons = [f["reason"] for f in result["priceFallbacks"]]
    assert reasons[0] == "the Price List API has no product for the EKS control plane (standard support) in us-west-2"
    assert reasons[1:] == [denied] * 3
    assert len(lines) == 4 and lines[0].startswith("cost: eks-control-plane: the price table of")
    assert (
        result["priceSource"].startswith("AWS Price List API; the price table of")
        and "4 price(s)" in result["priceSource"]
    )
    assert {i["name"]: i["unitPriceHourly"] for i in result["items"]}["nat-gateways"] == 0.045


def test_ambiguous_answers_fall_back_and_list_the_prices():
    lookup = tools_cost.nat_lookup(REGION)
    other = product("AmazonEC2", "NAT Gateway", "0.0480000000", usagetype="NatGateway-Hours")
    with pytest.raises(
        tools_cost.PriceMiss, match=r"has 2 prices for a NAT gateway hour in us-west-2 \(0.045, 0.048\)"
    ):
        tools_cost.one_price([json.loads(NAT), json.loads(other)], lookup)


def test_no_credentials_says_every_item_came_from_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    for var in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.setenv(var, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _, path = cfg_and_file(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert tools_cost.main(["--config-file", str(path), "--live"], stdout=out, stderr=err) == 0
    result = json.loads(out.getvalue())
    assert len(result["priceFallbacks"]) == 5 and all(
        f["reason"].startswith("no AWS credentials") for f in result["priceFallbacks"]
    )
    assert sorted(n for f in result["priceFallbacks"] for n in f["items"]) == sorted(i["name"] for i in result["items"])
    assert len(err.getvalue().splitlines()) == 5


def test_no_network_stops_after_the_first_lookup(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = boto3.client(
        "pricing",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"max_attempts": 1}, connect_timeout=2),
    )
    _, path = cfg_and_file(tmp_path)
    result, lines = run(path, tools_cost.PriceListPrices(client, REGION))
    reasons = {f["reason"] for f in result["priceFallbacks"]}
    assert len(result["priceFallbacks"]) == 5 and len(reasons) == 1 and len(lines) == 5
    assert reasons.pop().startswith(
        "could not reach AWS for pricing:GetProducts (Could not connect to the endpoint URL"
    )


def test_a_region_without_a_known_location_falls_back():
    prices = tools_cost.PriceListPrices(None, "us-west-1")
    assert prices.eks_hourly() == table.EKS_CONTROL_PLANE_HOURLY
    assert prices.fallbacks[0][2] == "no Price List location name known for us-west-1"


def test_the_lookups_use_what_the_upstream_facts_say():
    f = upstream.facts("aws-price-list")
    filter_types = botocore.session.get_session().get_service_model("pricing").shape_for("FilterType").enum
    assert set(filter_types) == set(f["api"]["filter_types"]) >= {"TERM_MATCH", "CONTAINS"}
    eks, nat, fsx = tools_cost.eks_lookup(REGION), tools_cost.nat_lookup(REGION), tools_cost.fsx_lookup(500, REGION)
    assert (eks.service, eks.contains["usagetype"]) == (
        f["eks_control_plane"]["service_code"],
        f["eks_control_plane"]["usagetype_contains"],
    )
    assert (nat.service, nat.filters["productFamily"], nat.contains["usagetype"]) == (
        f["nat_gateway"]["service_code"],
        f["nat_gateway"]["product_family"],
        f["nat_gateway"]["usagetype_contains"],
    )
    assert (fsx.service, fsx.filters["productFamily"]) == (f["fsx"]["service_code"], f["fsx"]["product_family_storage"])
    assert "fileSystemType" in f["fsx"]["attributes"] and "fileSystemType" in fsx.filters
    fsx_doc = botocore.session.get_session().get_service_model("fsx").shape_for("LustreFileSystemConfiguration")
    doc = re.sub("<[^>]+>", "", fsx_doc.members["PerUnitStorageThroughput"].documentation)
    assert "For PERSISTENT_2 SSD storage: 125, 250, 500, 1000" in doc
    assert f["fsx_persistent_2_ssd_tiers"] == [125, 250, 500, 1000]
    assert set(tools_cost.LOCATIONS) == set(table.REGIONS)
