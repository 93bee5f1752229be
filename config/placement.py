"""Where things are placed stays put when lists are edited.

A subnet's CIDR follows its AZ's place in the VPC's AZ list, and the file system lives in one
subnet for good (a new AZ is a new file system, which `protect` blocks mid-update). Derived from
`nodeGroups`, both would move when a node group is added at the top or removed: both private
subnets replaced, the system node group with them, the file system's subnet changed. So once a
node group names its AZ, the stack says them itself: `network.availabilityZones` (a created VPC)
and `storage.availabilityZone`. Each message gives the value this config derives today, which is
what a stack deployed by an earlier version has (as long as its config has not been edited since).
The raw rules read the stack values defensively (they run even when another key is invalid).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.base import AZ_RE, matches
from config.names import az_problem
from config.network import derived_azs
from config.network import vpc_azs as network_azs
from config.problems import problem

AZ_COUNT_DEFAULT = 2
"""`network.azCount` when not given (config.network.NetworkConfig)."""


def _named_azs(raw: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(position, AZ) of each node group that names its AZ."""
    groups = raw.get("nodeGroups")
    return [
        (i, ng["availabilityZone"])
        for i, ng in enumerate(groups if isinstance(groups, list) else [])
        if isinstance(ng, dict) and isinstance(ng.get("availabilityZone"), str)
    ]


def _vpc_azs_today(raw: Mapping[str, Any], named: list[tuple[int, str]]) -> list[str]:
    """The VPC's AZs as this config derives them (before this rule required them)."""
    found = raw.get("network")
    network: Mapping[str, Any] = found if isinstance(found, dict) else {}
    _, given = network_azs(network)
    if given is not None:
        return [str(az) for az in given]
    count = network.get("azCount", AZ_COUNT_DEFAULT)
    return derived_azs(str(raw.get("region", "")), [az for _, az in named], count if isinstance(count, int) else 2)


def vpc_azs_pinned(raw: Mapping[str, Any]) -> list[str]:
    """A created VPC lists its AZs once a node group names its AZ."""
    named = _named_azs(raw)
    network = raw.get("network")
    network = network if isinstance(network, dict) else {}
    if not named or network.get("vpcId") is not None or network.get("availabilityZones") is not None:
        return []
    if not isinstance(raw.get("region"), str):
        return []
    today = _vpc_azs_today(raw, named)
    i, az = named[0]
    return [
        problem(
            "network.availabilityZones",
            "required",
            f"required once a node group names its AZ (nodeGroups[{i}].availabilityZone: {az}): each AZ's subnets"
            " take the CIDRs of its place in this list, so it must not follow edits of nodeGroups; set it to"
            f" [{', '.join(today)}] (what this stack has today), and add AZs at the end only",
            allowed=f"[{', '.join(today)}]",
            hint="add AZs at the end only",
        )
    ]


def file_system_az_pinned(raw: Mapping[str, Any]) -> list[str]:
    """The file system's AZ is given once a node group names its AZ."""
    named = _named_azs(raw)
    storage = raw.get("storage")
    if not named or (isinstance(storage, dict) and storage.get("availabilityZone") is not None):
        return []
    groups = raw["nodeGroups"]
    first = groups[0].get("availabilityZone") if isinstance(groups[0], dict) else None
    today = first if isinstance(first, str) else (_vpc_azs_today(raw, named) or ["?"])[0]
    return [
        problem(
            "storage.availabilityZone",
            "required",
            "required once a node group names its AZ: the file system cannot move (a new AZ"
            " is a new file system), so it must not follow edits of nodeGroups; set it to"
            f" {today} (where this stack has it today: the first node group's AZ, `pulumi stack output"
            " fileSystemAvailabilityZone`)",
            allowed=today,
        )
    ]


def file_system_az_in_vpc(raw: Mapping[str, Any]) -> list[str]:
    """`storage.availabilityZone` is in aws:region and among the VPC's AZs (it needs a private subnet there)."""
    storage = raw.get("storage")
    az = storage.get("availabilityZone") if isinstance(storage, dict) else None
    region = raw.get("region")
    if not isinstance(az, str) or not matches(AZ_RE, az) or not isinstance(region, str):
        return []
    if why := az_problem(az, region):
        return [problem("storage.availabilityZone", "not-supported", why, value=az)]
    key, azs = network_azs(raw.get("network"))
    if azs is not None and az not in azs:
        listed = ", ".join(map(str, azs))
        return [
            problem(
                "storage.availabilityZone", "conflict", f"{az} is not one of {key} ({listed})", value=az, allowed=listed
            )
        ]
    return []


RULES = (vpc_azs_pinned, file_system_az_pinned, file_system_az_in_vpc)
