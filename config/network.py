"""The VPC section (`network`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from config.base import AZ_RE, Model, ipv4_cidr, matches


class NetworkConfig(Model):
    """The VPC: private subnets for nodes and pods, public subnets for NAT and load balancers."""

    cidr: str = Field("10.0.0.0/16", description="VPC IPv4 CIDR, /16 to /20.")
    availability_zones: list[str] | None = Field(
        None, description="AZ names; default: the node groups' AZs, then the region's first, to azCount."
    )
    az_count: int = Field(2, ge=2, le=4, description="Number of AZs when availabilityZones is not given (2-4).")
    nat_gateways: Literal["single", "per-az"] = Field(
        "single", description="One NAT gateway (cheaper) or one per AZ (survives an AZ outage)."
    )
    flow_logs: bool = Field(True, description="VPC flow logs (rejected traffic) to CloudWatch Logs.")

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        net = ipv4_cidr(v)
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"prefix /{net.prefixlen} is outside /16../20 (pods take one VPC IP each)")
        if not net.is_private:
            raise ValueError(f"{v} is not a private (RFC 1918) range")
        return v

    @field_validator("availability_zones")
    @classmethod
    def _azs(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if len(v) < 2 or len(v) > 4:
            raise ValueError(f"give 2 to 4 AZs (EKS needs two), got {len(v)}")
        if len(set(v)) != len(v):
            raise ValueError("AZs are repeated")
        for az in v:
            if not matches(AZ_RE, az):
                raise ValueError(f"{az!r} is not an AZ name like us-west-2d")
        return v
