"""Where the program can run: the AWS partition it supports and the Availability Zones of its regions.

The program builds ARNs, service principals and image registry addresses of the commercial
partition (`aws`), so it supports the regions of that partition only; which regions those are
comes from botocore's endpoint data at run time (`config.aws.region_problems`).

AZ names per region, as letters after the region name: EC2's `DescribeInstanceTypeOfferings`
by availability zone, as recorded in moto 5.2.5's `ec2/resources/instance_type_offerings/
availability-zone/<region>.json.gz` (tests/unit/test_regions.py holds this table to that
data). Not every region has every letter (ap-northeast-1 has no `b`, ca-central-1 no `c`),
so an AZ is never made up from a letter. A region missing here (newer than the data) takes
any AZ name of the form `<region><letter>`.
"""

from __future__ import annotations

PARTITION = "aws"
"""The only partition whose ARNs the program writes (`arn:aws:...`)."""

AZ_LETTERS: dict[str, str] = {
    "af-south-1": "abc",
    "ap-east-1": "abc",
    "ap-northeast-1": "acd",
    "ap-northeast-2": "abcd",
    "ap-northeast-3": "abc",
    "ap-south-1": "abc",
    "ap-south-2": "abc",
    "ap-southeast-1": "abc",
    "ap-southeast-2": "abc",
    "ap-southeast-3": "abc",
    "ap-southeast-4": "abc",
    "ap-southeast-5": "abc",
    "ca-central-1": "abd",
    "ca-west-1": "abc",
    "eu-central-1": "abc",
    "eu-central-2": "abc",
    "eu-north-1": "abc",
    "eu-south-1": "abc",
    "eu-south-2": "abc",
    "eu-west-1": "abc",
    "eu-west-2": "abcd",
    "eu-west-3": "abc",
    "il-central-1": "abc",
    "me-central-1": "abc",
    "me-south-1": "abc",
    "sa-east-1": "abc",
    "us-east-1": "abcdef",
    "us-east-2": "abc",
    "us-west-1": "ab",
    "us-west-2": "abcd",
}


def availability_zones(region: str) -> tuple[str, ...] | None:
    """The AZ names of a region, or None when the table does not know the region."""
    letters = AZ_LETTERS.get(region)
    return None if letters is None else tuple(region + letter for letter in letters)
