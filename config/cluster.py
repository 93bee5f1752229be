"""The EKS control plane (`cluster`) and the system node group (`systemNodeGroup`)."""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, field_validator, model_validator

from config.aws import check, check_log_retention
from config.base import KeyProblem, Model, Refusal, check_sizes, ipv4_cidr, matches
from facts import instances
from facts.names import NODE_GROUP_LABEL, SYSTEM_NODE_GROUP
from facts.networks import covers_internet, never_a_peer
from facts.nodegroups import NodeGroup
from facts.regions import PARTITION

# EKS standard support as of 2026-11 (EKS user guide, kubernetes-versions; endoflife.date/amazon-eks):
# 1.34 ends 2026-12-02, 1.35 runs to 2027-03-27, 1.36 is in the EKS guide since mid-2026.
# 1.35 is the default: in standard support today and for months to come.
SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")
DEFAULT_KUBERNETES_VERSION = "1.35"
# IAM role and user ARNs (with an optional path) of this partition: EKS access entries take IAM
# principals, never STS session (assumed-role) ARNs (botocore eks CreateAccessEntry.principalArn
# documentation); names as IAM allows them (iam CreateRole.RoleName: [\w+=,.@-]+, ASCII).
_ARN_PRINCIPAL_RE = re.compile(
    rf"arn:{PARTITION}:iam::[0-9]{{12}}:(?:role|user)/(?:[A-Za-z0-9+=,.@_-]+/)*[A-Za-z0-9+=,.@_-]{{1,64}}", re.ASCII
)
# Security group ids: `sg-` and 8 or 17 hex digits (EC2 user guide, resource IDs).
_SG_ID_RE = re.compile(r"sg-(?:[0-9a-f]{8}|[0-9a-f]{17})", re.ASCII)
# The cluster name also names S3 buckets (`<name>-training-data-...`), ECR repositories
# (`<name>/<key>`), IAM, KMS alias and log-group names: lowercase letters, digits and hyphens
# satisfy all of them. S3 refuses bucket names starting with these (S3 user guide, "General
# purpose bucket naming rules").
_CLUSTER_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,99}", re.ASCII)
S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")


def _ipv4_cidrs(v: list[str]) -> list[str]:
    for cidr in v:
        ipv4_cidr(cidr)
        kind = never_a_peer(cidr)
        if kind:
            raise Refusal(
                f"{cidr} is {kind} space: no client reaches the API from there; list the networks you use", "invalid"
            )
    if len(set(v)) != len(v):
        raise Refusal("lists a CIDR twice", "duplicate")
    return v


class ClusterConfig(Model):
    """The EKS control plane: secure by default."""

    name: str = Field(
        "llm-training",
        description="EKS cluster name: lowercase letters, digits, hyphens; up to 100 (it also names S3"
        " buckets and ECR repositories).",
    )
    kubernetes_version: str = Field(
        DEFAULT_KUBERNETES_VERSION,
        description="Kubernetes minor version in EKS standard support: "
        + ", ".join(SUPPORTED_KUBERNETES_VERSIONS)
        + ".",
    )
    public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the public API endpoint; empty: the public endpoint is off.",
        json_schema_extra={"x-default": "`[]` (public endpoint off)"},
    )
    private_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs routed into the VPC (VPN, Direct Connect, peering, Transit Gateway) allowed to reach the"
        " private API endpoint: ingress on TCP 443 of the cluster security group.",
    )
    private_access_security_group_ids: list[str] = Field(
        default_factory=list,
        description="Security groups (sg-...) allowed to reach the private API endpoint on TCP 443 (a bastion or CI"
        " runner in a peered VPC of the same region).",
    )
    allow_public_access_from_anywhere: bool = Field(
        False, description="Must be true to put 0.0.0.0/0 in publicAccessCidrs; a deliberate choice."
    )
    admin_principal_arns: list[str] = Field(
        default_factory=list,
        description=(
            "IAM role or user ARNs given cluster admin through EKS access entries (not STS session ARNs, each "
            "once; the identity running Pulumi is admin already)."
        ),
    )
    log_retention_days: int = Field(90, description="CloudWatch retention of the control-plane logs, days.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        check(v, "eks:CreateCluster:name")
        # Stricter than EKS: the name also prefixes S3 bucket, ECR, IAM, KMS alias and log-group names.
        if not matches(_CLUSTER_NAME_RE, v) or v.endswith("-"):
            raise Refusal(
                f"{v!r}: must start with a lowercase letter and hold only lowercase letters, digits and hyphens"
                " (1-100), not ending in a hyphen (no capitals: it also names S3 buckets and ECR repositories)",
                "invalid",
            )
        if v.startswith(S3_RESERVED_PREFIXES):
            raise Refusal(
                f"{v!r}: S3 refuses bucket names starting with {', '.join(S3_RESERVED_PREFIXES)}", "forbidden"
            )
        return v

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v not in SUPPORTED_KUBERNETES_VERSIONS:
            raise Refusal(
                f"{v!r} is not in EKS standard support; valid: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}",
                "not-supported",
            )
        return v

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        return _ipv4_cidrs(v)

    @field_validator("private_access_cidrs")
    @classmethod
    def _private_cidrs(cls, v: list[str]) -> list[str]:
        for cidr in _ipv4_cidrs(v):
            if ipaddress.IPv4Network(cidr).prefixlen == 0:
                raise Refusal(f"{cidr} admits every address; list the networks routed into the VPC", "invalid")
        return v

    @field_validator("private_access_security_group_ids")
    @classmethod
    def _sg_ids(cls, v: list[str]) -> list[str]:
        for sg in v:
            if not matches(_SG_ID_RE, sg):
                raise Refusal(f"{sg!r} is not a security group id (sg- and 8 or 17 hex digits)", "invalid")
        if len(set(v)) != len(v):
            # One ingress rule per group: EC2 refuses the second (InvalidPermission.Duplicate).
            raise Refusal("lists a security group twice", "duplicate")
        return v

    @field_validator("admin_principal_arns")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        for arn in v:
            if not matches(_ARN_PRINCIPAL_RE, arn):
                raise Refusal(
                    f"{arn!r} is not an IAM role or user ARN of the {PARTITION} partition"
                    f" (arn:{PARTITION}:iam::123456789012:role/name); EKS access entries take no STS session ARNs",
                    "invalid",
                )
        if len(set(v)) != len(v):
            raise Refusal("lists a principal twice; EKS takes one access entry per principal", "duplicate")
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return check_log_retention(v)

    @model_validator(mode="after")
    def _public_anywhere(self) -> ClusterConfig:
        # Several CIDRs can add up to the whole internet (0.0.0.0/1 + 128.0.0.0/1).
        if covers_internet(self.public_access_cidrs) and not self.allow_public_access_from_anywhere:
            raise KeyProblem(
                "publicAccessCidrs",
                f"{', '.join(self.public_access_cidrs)} opens the API endpoint to the whole internet; list your"
                " networks instead, or set allowPublicAccessFromAnywhere: true on purpose",
                "forbidden",
                hint="list your networks, or set allowPublicAccessFromAnywhere: true on purpose",
            )
        return self


class SystemNodeGroupConfig(Model):
    """The general-purpose managed node group that runs controllers, add-ons and MPI launchers,
    across AZs; CPU runs (recipe ddp-cpu) train there too, as node group `system`."""

    instance_type: str = Field(
        "m6i.2xlarge",
        description=(
            "Nodes for controllers, add-ons, MPI launchers and CPU runs (node group `system`): a general-purpose "
            "instance type."
        ),
    )
    desired_size: int = Field(
        2, ge=1, description="Nodes, spread across the VPC's AZs (at least one per AZ is recommended)."
    )
    min_size: int | None = Field(
        None, ge=1, description="Autoscaling floor.", json_schema_extra={"x-default": "`desiredSize`"}
    )
    max_size: int | None = Field(
        None, ge=1, description="Autoscaling ceiling.", json_schema_extra={"x-default": "`desiredSize` + 2"}
    )
    root_volume_size_gib: int = Field(
        100, ge=50, le=16384, alias="rootVolumeSizeGiB", description="Encrypted gp3 root volume, GiB."
    )

    @field_validator("instance_type")
    @classmethod
    def _type(cls, v: str) -> str:
        if v not in instances.GENERAL_PURPOSE:
            raise Refusal(
                f"unknown system instance type {v!r}; valid: {', '.join(instances.GENERAL_PURPOSE)}", "not-supported"
            )
        return v

    @model_validator(mode="after")
    def _sizes(self) -> SystemNodeGroupConfig:
        check_sizes(self.desired_size, self.min_size, self.max_size)
        return self

    @property
    def instance(self) -> instances.InstanceType:
        return instances.GENERAL_PURPOSE[self.instance_type]

    @property
    def min(self) -> int:
        return self.min_size if self.min_size is not None else self.desired_size

    @property
    def max(self) -> int:
        return self.max_size if self.max_size is not None else self.desired_size + 2

    def node_group(self, availability_zones: list[str]) -> NodeGroup:
        """The system node group as every layer sees it (MPI launchers and CPU runs, recipe
        ddp-cpu, run there), spread over `availability_zones`."""
        return NodeGroup(
            name=SYSTEM_NODE_GROUP,
            instance=self.instance,
            nodes=self.desired_size,
            max_nodes=self.max,
            availability_zone=",".join(availability_zones),
            labels={NODE_GROUP_LABEL: SYSTEM_NODE_GROUP},
            max_key="systemNodeGroup.maxSize",
        )
