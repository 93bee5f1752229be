"""The VPC section (`network`): a VPC the stack creates, or an existing one (`vpcId`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from config.aws import problems
from config.base import AZ_RE, KeyProblem, Model, Refusal, ipv4_cidr, matches
from facts.networks import never_a_peer, private_use
from facts.regions import availability_zones

# EC2 resource ids: a prefix, a hyphen and 8 (before 2016) or 17 hex digits (EC2 user guide,
# "Resource IDs"). botocore's EC2 model types VpcId, SubnetId and RouteTableId as plain
# strings; the same format is the pattern of the Directory Service model's VpcId/SubnetId
# (tests/upstream/aws-ec2-resource-ids-2026-11.yaml).
_ID_RE = {kind: re.compile(rf"{kind}-(?:[0-9a-f]{{8}}|[0-9a-f]{{17}})", re.ASCII) for kind in ("vpc", "subnet", "rtb")}
# A created VPC's private subnets are 1/8 of it each (infra.network.subnet_plan: a /19 of a /16).
PRIVATE_SUBNET_EXTRA_BITS = 3
# Where the subnet ids end up besides EC2 and EKS: the FSx for Lustre file system's subnet.
FSX_SUBNET_SHAPE = "fsx:CreateFileSystem:SubnetIds.[]"
# Keys that describe the VPC the stack creates; with `vpcId` it creates none.
CREATED_VPC_KEYS = {
    "cidr": "cidr",
    "availability_zones": "availabilityZones",
    "az_count": "azCount",
    "nat_gateways": "natGateways",
}
EXISTING_VPC_KEYS = {
    "private_subnet_ids": "privateSubnetIds",
    "public_subnet_ids": "publicSubnetIds",
    "s3_endpoint_route_table_ids": "s3EndpointRouteTableIds",
}


def _resource_id(kind: str, value: str) -> str:
    if not matches(_ID_RE[kind], value):
        raise Refusal(
            f"{value!r} is not a {kind} id ({kind}- and 8 or 17 hex digits, e.g. {kind}-0123456789abcdef0)", "invalid"
        )
    return value


def _subnets(v: dict[str, str]) -> dict[str, str]:
    """AZ -> subnet id: AZ names, well-formed ids (FSx's pattern too), no subnet twice."""
    for az, subnet in v.items():
        if not matches(AZ_RE, az):
            raise Refusal(
                f"{az!r} is not an AZ name like us-west-2d (the keys are AZs, the values subnet ids)", "invalid"
            )
        try:
            _resource_id("subnet", subnet)
        except ValueError as e:
            raise KeyProblem(az, str(e), "invalid") from None
        bad = problems(subnet, FSX_SUBNET_SHAPE)
        if bad:
            raise KeyProblem(az, f"{'; '.join(bad)} (AWS fsx API, SubnetIds)", "invalid")
    repeated = sorted({s for s in v.values() if list(v.values()).count(s) > 1})
    if repeated:
        raise Refusal(f"{', '.join(repeated)} is given for more than one AZ; a subnet lives in one AZ", "duplicate")
    return v


class NetworkConfig(Model):
    """The VPC: private subnets for nodes and pods, public subnets for NAT and load balancers.

    Without `vpcId` the stack creates the VPC, its subnets, NAT gateways, internet gateway and
    S3 gateway endpoint. With `vpcId` it uses an existing VPC and creates none of them: nodes,
    pods, the file system and the EKS control plane's interfaces go into `privateSubnetIds`.
    """

    cidr: str = Field("10.0.0.0/16", description="VPC IPv4 CIDR, /16 to /20 (a created VPC).")
    availability_zones: list[str] | None = Field(
        None,
        description="2 to 4 AZs that exist in the region (`facts/regions.py`), for a VPC the stack creates, in a"
        " fixed order: each AZ's subnets take the CIDRs of its place in the list, so add AZs at the end only.",
        json_schema_extra={"x-default": "the region's first `azCount` AZs; required once a node group names its AZ"},
    )
    az_count: int = Field(
        2, ge=2, le=4, description="AZs when `availabilityZones` is not given (a VPC the stack creates)."
    )
    nat_gateways: Literal["single", "per-az"] = Field(
        "single",
        description="NAT gateways of a VPC the stack creates: one (cheaper) or one per AZ (survives an AZ outage).",
    )
    flow_logs: bool = Field(
        True, description="VPC flow logs of rejected traffic to CloudWatch Logs (on an existing VPC too)."
    )
    vpc_id: str | None = Field(
        None,
        description=(
            "An existing VPC (`vpc-...`): the stack creates no VPC, subnets, NAT or internet gateway; give its "
            "private subnets in `privateSubnetIds` (docs/deploy.md, Bring your own network)."
        ),
        json_schema_extra={"x-default": "none (the stack creates the VPC)"},
    )
    private_subnet_ids: dict[str, str] = Field(
        default_factory=dict,
        description="Existing VPC: AZ -> private subnet id (subnet-...), at least two AZs (EKS); the node groups'"
        " AZs must be among them. Nodes, pods (one VPC address each), FSx and the EKS interfaces go here.",
    )
    public_subnet_ids: dict[str, str] = Field(
        default_factory=dict,
        description="Existing VPC: AZ -> public subnet id, for internet-facing load balancers you add (this stack"
        " makes none); optional.",
    )
    s3_endpoint_route_table_ids: list[str] = Field(
        default_factory=list,
        description="Existing VPC: create the S3 gateway endpoint on these route tables (rtb-..., those of the"
        " private subnets); leave empty when the VPC has one.",
    )

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        net = ipv4_cidr(v)
        if not 16 <= net.prefixlen <= 20:
            raise Refusal(f"prefix /{net.prefixlen} is outside /16../20 (pods take one VPC IP each)", "invalid")
        # ipaddress's is_private also takes loopback, link-local and reserved space, where EC2
        # refuses a VPC: only RFC 1918 ranges (VPC user guide, vpc-cidr-blocks).
        if not private_use(v):
            kind = never_a_peer(v)
            raise Refusal(
                f"{v} is not in a private (RFC 1918) range{f' (it is {kind} space)' if kind else ''};"
                " use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, e.g. 10.0.0.0/16",
                "invalid",
            )
        return v

    @field_validator("availability_zones")
    @classmethod
    def _azs(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if len(v) < 2 or len(v) > 4:
            raise Refusal(f"give 2 to 4 AZs (EKS needs two), got {len(v)}", "invalid")
        if len(set(v)) != len(v):
            raise Refusal("AZs are repeated", "duplicate")
        for az in v:
            if not matches(AZ_RE, az):
                raise Refusal(f"{az!r} is not an AZ name like us-west-2d", "invalid")
        return v

    @field_validator("vpc_id")
    @classmethod
    def _vpc_id(cls, v: str | None) -> str | None:
        return None if v is None else _resource_id("vpc", v)

    @field_validator("private_subnet_ids", "public_subnet_ids")
    @classmethod
    def _subnet_ids(cls, v: dict[str, str]) -> dict[str, str]:
        return _subnets(v)

    @field_validator("s3_endpoint_route_table_ids")
    @classmethod
    def _route_tables(cls, v: list[str]) -> list[str]:
        for rtb in v:
            _resource_id("rtb", rtb)
        if len(set(v)) != len(v):
            raise Refusal("route tables are repeated", "duplicate")
        return v

    @model_validator(mode="after")
    def _one_kind_of_vpc(self) -> NetworkConfig:
        given = self.model_fields_set
        if self.vpc_id is None:
            for name, key in EXISTING_VPC_KEYS.items():
                if name in given and getattr(self, name):
                    raise KeyProblem(
                        key, "only with vpcId (an existing VPC); the stack creates its own subnets", "conflict"
                    )
            return self
        for name, key in CREATED_VPC_KEYS.items():
            if name in given:
                raise KeyProblem(
                    key, "describes the VPC the stack creates; with vpcId it creates none (leave it out)", "conflict"
                )
        if len(self.private_subnet_ids) < 2:
            raise KeyProblem(
                "privateSubnetIds",
                f"{len(self.private_subnet_ids)} given; EKS needs subnets in at least two AZs (AZ -> subnet-...)",
                "invalid",
            )
        shared = sorted(set(self.private_subnet_ids.values()) & set(self.public_subnet_ids.values()))
        if shared:
            raise KeyProblem("publicSubnetIds", f"{', '.join(shared)} is also a private subnet", "conflict")
        return self

    @property
    def existing(self) -> bool:
        """The stack uses an existing VPC (`vpcId`) instead of creating one."""
        return self.vpc_id is not None

    @property
    def private_subnet_prefix(self) -> int:
        """The prefix length of each private subnet of the VPC the stack creates."""
        return int(self.cidr.rpartition("/")[2]) + PRIVATE_SUBNET_EXTRA_BITS


def derived_azs(region: str, named: Sequence[str], count: int) -> list[str]:
    """The VPC's AZs when `network.availabilityZones` is not given: the AZs node groups name, in
    their order, padded with the region's first ones to `count` (the region's real AZ names: not
    every region has an `a`, `b`, `c`...). It moves when node groups are added, removed or
    reordered, so config.placement requires the list once a node group names its AZ."""
    azs: list[str] = []
    for az in named:
        if az not in azs:
            azs.append(az)
    known = availability_zones(region) or tuple(f"{region}{letter}" for letter in "abcdef")
    for az in known:
        if len(azs) >= count:
            break
        if az not in azs:
            azs.append(az)
    return azs


# --------------------------------------------------------------------------- raw rules (config.checks)


def vpc_azs(network: Any) -> tuple[str, list[Any] | None]:
    """The key that lists the VPC's AZs and its AZs: `network.availabilityZones`, or the AZs
    of an existing VPC's private subnets (`network.privateSubnetIds`); None when not given."""
    if not isinstance(network, dict):
        return "", None
    if network.get("vpcId") is not None:
        subnets = network.get("privateSubnetIds")
        return "network.privateSubnetIds", list(subnets) if isinstance(subnets, dict) else None
    azs = network.get("availabilityZones")
    return "network.availabilityZones", azs if isinstance(azs, list) else None
