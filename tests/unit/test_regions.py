"""Regions, AZs and the partition: held to botocore's endpoint data and EC2's AZ offerings as moto
5.2.5 records them; what the program does not support is refused naming aws:region."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import botocore.session
import moto
import pytest

import config
from config import aws
from facts import regions
from tests.conftest import BASE, MINIMAL, ROOT

OFFERINGS = Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings" / "availability-zone"


def _moto_azs(region: str) -> tuple[str, ...]:
    with gzip.open(OFFERINGS / f"{region}.json.gz") as f:
        return tuple(sorted({o["Location"] for o in json.load(f)}))


@pytest.mark.parametrize("region", sorted(regions.AZ_LETTERS))
def test_az_table_is_ec2s_offerings(region: str) -> None:
    assert regions.availability_zones(region) == _moto_azs(region)


def test_every_region_moto_knows_is_in_the_table() -> None:
    known = {p.name.removesuffix(".json.gz") for p in OFFERINGS.glob("*.json.gz")}
    assert known == set(regions.AZ_LETTERS)


def test_regions_are_botocores_eks_regions_of_the_aws_partition() -> None:
    session = botocore.session.get_session()
    for region in session.get_available_regions("eks", "aws"):
        assert aws.region_problems(region) is None, region
    assert set(regions.AZ_LETTERS) <= set(session.get_available_regions("eks", "aws"))


@pytest.mark.parametrize(
    ("region", "says"),
    [
        ("us-gov-west-1", "aws-us-gov partition"),
        ("cn-north-1", "aws-cn partition"),
        ("us-west-9", "did you mean 'us-west-2'"),
        ("us-west-2\n", "not an AWS region"),
        ("us-west-\u0662", "not an AWS region"),  # Arabic-Indic 2
        ("US-WEST-2", "not an AWS region"),
    ],
)
def test_unsupported_regions_exit_2_naming_aws_region(region: str, says: str) -> None:
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values({**MINIMAL, "aws:region": region})
    line = next(p for p in e.value.problems if p.startswith("aws:region:"))
    assert says in line


@pytest.mark.parametrize(
    ("az", "says"),
    [
        ("us-west-2e", "us-west-2 has no AZ us-west-2e"),
        ("us-east-2a", "not in region us-west-2"),
        ("us-west-2d\n", "not an AZ name"),
        ("us-west-\u0662d", "not an AZ name"),
    ],
)
def test_azs_that_do_not_exist_are_refused(az: str, says: str) -> None:
    ng = {**MINIMAL["llm-training-eks:nodeGroups"][0], "availabilityZone": az}
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values({**MINIMAL, "llm-training-eks:nodeGroups": [ng]})
    assert any(p.startswith("nodeGroups[0].availabilityZone:") and says in p for p in e.value.problems), e.value


def test_default_azs_are_the_regions_real_ones() -> None:
    """ap-northeast-1 has no `b`: padding with letters would make up a subnet in an AZ that does not exist."""
    cfg = config.parse_stack_values({**BASE, "aws:region": "ap-northeast-1"})
    assert cfg.availability_zones == ["ap-northeast-1a", "ap-northeast-1c"]
    vpc = {"availabilityZones": ["ap-northeast-1a", "ap-northeast-1b"]}
    with pytest.raises(config.ConfigError, match=r"network.availabilityZones\[1\]: ap-northeast-1 has no AZ"):
        config.parse_stack_values({**BASE, "aws:region": "ap-northeast-1", "llm-training-eks:network": vpc})


def test_arns_the_config_takes_are_of_the_supported_partition() -> None:
    cluster = {**BASE["llm-training-eks:cluster"], "adminPrincipalArns": ["arn:aws-us-gov:iam::123456789012:role/a"]}
    with pytest.raises(config.ConfigError, match=r"cluster.adminPrincipalArns: .*aws partition"):
        config.parse_stack_values({**BASE, "llm-training-eks:cluster": cluster})
    runner = {
        "enabled": True,
        "repository": "o/r",
        "secretsKeyArn": "arn:aws-cn:kms:cn-north-1:123456789012:key/" + "0" * 36,
    }
    with pytest.raises(config.ConfigError, match=r"ciRunner.secretsKeyArn:"):
        config.parse_stack_values({**BASE, "llm-training-eks:layer": "aws", "llm-training-eks:ciRunner": runner})


def test_commercial_arns_in_the_code_are_only_reachable_in_the_aws_partition() -> None:
    """Every `arn:aws:` the program writes is right because no region of another partition gets
    past config (above); the partition is spelled once, in facts.regions."""
    assert regions.PARTITION == "aws"
    hard_coded = [
        f"{p.relative_to(ROOT)}:{i}"
        for folder in ("infra", "workloads", "stack.py")
        for p in ([ROOT / folder] if folder.endswith(".py") else sorted((ROOT / folder).rglob("*.py")))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"arn:aws-", line)
    ]
    assert not hard_coded, "ARNs of another partition in the code: " + ", ".join(hard_coded)
