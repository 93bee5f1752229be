"""Typed stack configuration: the only module that reads `pulumi.Config`.

Every key is validated before any resource is declared. Problems are collected and
reported together, one line each, naming the key path the way the stack file spells it
(`nodeGroups[0].capacity.reservationId: ...`) and saying what would be valid.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from infra import catalog

PROJECT = "llm-training-eks"

# EKS standard support as of 2026-11 (FACTS.md): 1.34 ends 2026-12-02, 1.35 runs to
# 2027-03-27, 1.36 is in the EKS guide since mid-2026. 1.35 is the default: in standard
# support today and for months to come.
SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")
DEFAULT_KUBERNETES_VERSION = "1.35"

# Regions where EKS and at least one accelerated type of the catalog are offered.
_REGION_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
_AZ_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")
# ODCR and Capacity Block ids: `cr-` and 17 hex digits (older ids have 8).
_RESERVATION_RE = re.compile(r"^cr-([0-9a-f]{8}|[0-9a-f]{17})$")
_ARN_PRINCIPAL_RE = re.compile(r"^arn:aws(-[a-z]+)?:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+$")
_DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class ConfigError(Exception):
    """Invalid stack config: `problems` holds one `key.path: message` line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid stack config:\n" + "\n".join(problems))


class _Model(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, validate_default=True
    )


class NetworkConfig(_Model):
    """The VPC: private subnets for nodes and pods, public subnets for NAT and load balancers."""

    cidr: str = Field("10.0.0.0/16", description="VPC IPv4 CIDR, /16 to /20.")
    availability_zones: list[str] | None = Field(
        None, description="AZ names; default: the node groups' AZs, then the region's first, to azCount."
    )
    az_count: int = Field(2, ge=2, le=4, description="Number of AZs when availabilityZones is not given (2-4).")
    nat_gateways: Literal["single", "per-az"] = Field(
        "single", description="One NAT gateway (cheaper) or one per AZ (survives an AZ outage)."
    )

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 network in CIDR notation, e.g. 10.0.0.0/16") from None
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
            if not _AZ_RE.match(az):
                raise ValueError(f"{az!r} is not an AZ name like us-west-2d")
        return v


class ClusterConfig(_Model):
    """The EKS control plane: secure by default."""

    name: str = Field("llm-training", description="EKS cluster name (letters, digits, hyphens; up to 100).")
    kubernetes_version: str = Field(DEFAULT_KUBERNETES_VERSION, description="Kubernetes minor version.")
    public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the public API endpoint; empty means the public endpoint is off.",
    )
    allow_public_access_from_anywhere: bool = Field(
        False, description="Must be true to put 0.0.0.0/0 in publicAccessCidrs; a deliberate choice."
    )
    admin_principal_arns: list[str] = Field(
        default_factory=list, description="IAM role/user ARNs given cluster-admin through EKS access entries."
    )
    log_retention_days: int = Field(90, description="CloudWatch retention of control-plane logs, days.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,99}", v):
            raise ValueError("must start with a letter and hold only letters, digits and hyphens (1-100)")
        return v

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"{v!r} is not in EKS standard support; valid: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}")
        return v

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for cidr in v:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError:
                raise ValueError(f"{cidr!r} is not an IPv4 CIDR such as 203.0.113.0/24") from None
        return v

    @field_validator("admin_principal_arns")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        for arn in v:
            if not _ARN_PRINCIPAL_RE.match(arn):
                raise ValueError(f"{arn!r} is not an IAM role or user ARN (arn:aws:iam::123456789012:role/name)")
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        allowed = (
            1,
            3,
            5,
            7,
            14,
            30,
            60,
            90,
            120,
            150,
            180,
            365,
            400,
            545,
            731,
            1096,
            1827,
            2192,
            2557,
            2922,
            3288,
            3653,
        )
        if v not in allowed:
            raise ValueError(f"CloudWatch accepts {', '.join(map(str, allowed))} days")
        return v

    @model_validator(mode="after")
    def _public_anywhere(self) -> ClusterConfig:
        opens_world = any(ipaddress.IPv4Network(c).prefixlen == 0 for c in self.public_access_cidrs)
        if opens_world and not self.allow_public_access_from_anywhere:
            raise ValueError(
                "publicAccessCidrs opens the API endpoint to the whole internet (0.0.0.0/0); list your "
                "networks instead, or set allowPublicAccessFromAnywhere: true on purpose"
            )
        return self


class SystemNodeGroupConfig(_Model):
    """The general-purpose managed node group that runs controllers and add-ons, across AZs."""

    instance_type: str = Field("m6i.2xlarge", description="General-purpose instance type from the catalog.")
    desired_size: int = Field(2, ge=1, description="Nodes (at least one per AZ is recommended).")
    min_size: int | None = Field(None, ge=1, description="Default: desiredSize.")
    max_size: int | None = Field(None, ge=1, description="Default: desiredSize + 2.")
    root_volume_size_gib: int = Field(100, ge=50, le=16384, description="Encrypted gp3 root volume, GiB.")

    @field_validator("instance_type")
    @classmethod
    def _type(cls, v: str) -> str:
        if v not in catalog.GENERAL_PURPOSE:
            raise ValueError(f"unknown system instance type {v!r}; valid: {', '.join(catalog.GENERAL_PURPOSE)}")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> SystemNodeGroupConfig:
        _check_sizes(self.desired_size, self.min_size, self.max_size)
        return self

    @property
    def min(self) -> int:
        return self.min_size if self.min_size is not None else self.desired_size

    @property
    def max(self) -> int:
        return self.max_size if self.max_size is not None else self.desired_size + 2


class CapacityConfig(_Model):
    """Where a node group's instances come from."""

    type: Literal["on-demand", "reservation", "capacity-block", "spot"] = Field(
        "on-demand", description="on-demand | reservation (ODCR) | capacity-block (Capacity Block for ML) | spot."
    )
    reservation_id: str | None = Field(
        None, description="cr-... id; required for reservation and capacity-block, not allowed otherwise."
    )

    @field_validator("reservation_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not _RESERVATION_RE.match(v):
            raise ValueError(
                f"{v!r} is not a capacity reservation id (cr- and 17 hex digits, e.g. cr-0123456789abcdef0)"
            )
        return v

    @model_validator(mode="after")
    def _needs_id(self) -> CapacityConfig:
        if self.type in ("reservation", "capacity-block") and self.reservation_id is None:
            raise _KeyError("reservationId", f"required when type is {self.type} (the cr-... id of the reservation)")
        if self.type in ("on-demand", "spot") and self.reservation_id is not None:
            raise _KeyError("reservationId", f"only for reservation and capacity-block, not {self.type}")
        return self

    @property
    def targets_reservation(self) -> bool:
        return self.type in ("reservation", "capacity-block")


class NodeGroupConfig(_Model):
    """One accelerated EFA node group: one instance type, one AZ, one subnet."""

    name: str = Field(description="Node group name: lowercase letters, digits, hyphens (1-40).")
    instance_type: str = Field(description="Accelerated instance type from the catalog.")
    desired_size: int = Field(description="Nodes to run.", ge=0)
    min_size: int | None = Field(None, ge=0, description="Default: desiredSize.")
    max_size: int | None = Field(None, ge=0, description="Default: desiredSize (at least 1).")
    availability_zone: str | None = Field(
        None, description="AZ of the nodes (and of the reservation); default: the VPC's first AZ."
    )
    capacity: CapacityConfig = Field(default_factory=CapacityConfig, description="Capacity source.")
    placement_group: bool = Field(
        True,
        description="Launch into a `cluster` placement group; turn off for ODCRs/Capacity Blocks made without one.",
    )
    root_volume_size_gib: int = Field(
        500, ge=100, le=16384, description="Encrypted gp3 root volume, GiB (training images are many GB)."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra node labels.")
    max_unavailable: int = Field(1, ge=1, description="Nodes an update may replace at once.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if len(v) > 40 or not _DNS_LABEL_RE.match(v):
            raise ValueError(f"{v!r} must be lowercase letters, digits and hyphens, starting with a letter (1-40)")
        return v

    @field_validator("instance_type")
    @classmethod
    def _type(cls, v: str) -> str:
        if v not in catalog.ACCELERATED:
            hint = _did_you_mean(v, catalog.ACCELERATED)
            raise ValueError(f"unknown instance type {v!r}{hint}; valid: {', '.join(catalog.ACCELERATED)}")
        return v

    @field_validator("availability_zone")
    @classmethod
    def _az(cls, v: str | None) -> str | None:
        if v is not None and not _AZ_RE.match(v):
            raise ValueError(f"{v!r} is not an AZ name like us-west-2d")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> NodeGroupConfig:
        _check_sizes(self.desired_size, self.min_size, self.max_size)
        return self

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.ACCELERATED[self.instance_type]

    @property
    def min(self) -> int:
        return self.min_size if self.min_size is not None else self.desired_size

    @property
    def max(self) -> int:
        return self.max_size if self.max_size is not None else max(1, self.desired_size)


class StackConfig(_Model):
    """The whole stack config (`llm-training-eks:*` keys plus `aws:region`)."""

    region: str = Field(description="aws:region")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="VPC layout.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="EKS control plane.")
    system_node_group: SystemNodeGroupConfig = Field(
        default_factory=SystemNodeGroupConfig, description="Nodes for controllers and add-ons."
    )
    node_groups: list[NodeGroupConfig] = Field(default_factory=list, description="Accelerated EFA node groups.")
    protect_stateful_resources: bool = Field(
        True, description="Protect KMS keys, FSx, buckets and ECR from deletion by `pulumi destroy`/`up`."
    )
    tags: dict[str, str] = Field(default_factory=dict, description="Tags on every AWS resource.")
    hugging_face_token: str | None = Field(
        None,
        repr=False,
        description="Hugging Face token for gated tokenizers and datasets; a Pulumi secret (config set --secret).",
    )

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not _REGION_RE.match(v):
            raise ValueError(f"{v!r} is not an AWS region name like us-west-2")
        return v

    @property
    def availability_zones(self) -> list[str]:
        """The VPC's AZs: as configured, or the node groups' AZs padded with the region's first ones."""
        if self.network.availability_zones:
            return list(self.network.availability_zones)
        azs: list[str] = []
        for ng in self.node_groups:
            if ng.availability_zone and ng.availability_zone not in azs:
                azs.append(ng.availability_zone)
        for letter in "abcdef":
            if len(azs) >= self.network.az_count:
                break
            az = f"{self.region}{letter}"
            if az not in azs:
                azs.append(az)
        return azs

    def node_group_az(self, ng: NodeGroupConfig) -> str:
        """The AZ a node group runs in."""
        return ng.availability_zone or self.availability_zones[0]


# --------------------------------------------------------------------------- helpers


class _KeyError(ValueError):
    """A model-level check that blames one field of the model (turned into `path.field`)."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


def _check_sizes(desired: int, min_size: int | None, max_size: int | None) -> None:
    lo = min_size if min_size is not None else desired
    hi = max_size if max_size is not None else max(desired, lo, 1)
    if lo > hi:
        raise _KeyError("minSize", f"{lo} is greater than maxSize {hi}")
    if not lo <= desired <= hi:
        raise _KeyError("desiredSize", f"{desired} must lie between minSize {lo} and maxSize {hi}")
    if hi < 1:
        raise _KeyError("maxSize", "must be at least 1 (EKS requires it)")


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _fields_of(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """camelCase key -> nested model class (or None) for a model's fields."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        ann = info.annotation
        nested = None
        for cand in (ann, *getattr(ann, "__args__", ())):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                nested = cand
        out[key] = nested
    return out


def _model_at(path: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = StackConfig
    for part in path:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        model = _fields_of(model).get(part)
    return model


def _format_path(loc: Iterable[Any]) -> str:
    parts = list(loc)
    if parts[:1] == ["region"]:
        return "aws:region"
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _messages(err: ValidationError) -> list[str]:
    lines: list[str] = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = e["msg"]
        kind = e["type"]
        if kind == "value_error":
            msg = msg.removeprefix("Value error, ")
            exc = (e.get("ctx") or {}).get("error")
            if isinstance(exc, _KeyError):
                loc = (*loc, exc.key)
                msg = msg.removeprefix(f"{exc.key}: ")
        elif kind == "extra_forbidden":
            parent = _model_at(loc[:-1])
            valid = sorted(_fields_of(parent)) if parent else []
            hint = _did_you_mean(str(loc[-1]), valid)
            msg = f"unknown key{hint}; valid keys here: {', '.join(valid)}"
        elif kind == "missing":
            msg = "required key is missing"
        elif kind == "literal_error":
            msg = f"{e['input']!r} is not allowed; " + msg[0].lower() + msg[1:]
        elif kind in (
            "int_parsing",
            "int_type",
            "bool_parsing",
            "bool_type",
            "string_type",
            "list_type",
            "dict_type",
            "model_type",
            "model_attributes_type",
            "int_from_float",
        ):
            msg = f"{msg} (got {e['input']!r})"
        lines.append(f"{_format_path(loc)}: {msg}")
    return lines


def _cross_checks(raw: Mapping[str, Any]) -> list[str]:
    """Checks that span sections. They read the raw dict defensively so that they still
    run (and their problems are reported with the rest) when another key is invalid."""
    problems: list[str] = []
    region = raw.get("region")
    groups = raw.get("nodeGroups")
    network = raw.get("network") if isinstance(raw.get("network"), dict) else {}
    vpc_azs = network.get("availabilityZones") if isinstance(network, dict) else None

    if isinstance(vpc_azs, list) and isinstance(region, str):
        for i, az in enumerate(vpc_azs):
            if isinstance(az, str) and _AZ_RE.match(az) and not az.startswith(region):
                problems.append(f"network.availabilityZones[{i}]: {az} is not in region {region}")

    if not isinstance(groups, list):
        return problems
    seen: dict[str, int] = {}
    for i, ng in enumerate(groups):
        if not isinstance(ng, dict):
            continue
        name = ng.get("name")
        if isinstance(name, str):
            if name in seen:
                problems.append(
                    f"nodeGroups[{i}].name: {name!r} is already used by nodeGroups[{seen[name]}]; names must be unique"
                )
            else:
                seen[name] = i
        az = ng.get("availabilityZone")
        if isinstance(az, str) and _AZ_RE.match(az):
            if isinstance(region, str) and not az.startswith(region):
                problems.append(
                    f"nodeGroups[{i}].availabilityZone: {az} is not in region {region}; use {region}a, {region}b, ..."
                )
            elif isinstance(vpc_azs, list) and az not in vpc_azs:
                problems.append(
                    f"nodeGroups[{i}].availabilityZone: {az} is not one of network.availabilityZones"
                    f" ({', '.join(map(str, vpc_azs))})"
                )
    return problems


# --------------------------------------------------------------------------- loading


def parse(raw: Mapping[str, Any]) -> StackConfig:
    """Validate a config dict (camelCase keys, `region` for aws:region) into a StackConfig.

    Raises ConfigError with every problem found.
    """
    problems: list[str] = []
    cfg: StackConfig | None = None
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as e:
        problems.extend(_messages(e))
    for p in _cross_checks(raw):
        if p not in problems:
            problems.append(p)
    if problems or cfg is None:
        raise ConfigError(problems)
    return cfg


def from_stack_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn flat stack config (`llm-training-eks:key` / `aws:region`) into the dict `parse` takes.

    Values may be native (read from a stack file) or strings as the Pulumi engine passes
    them (objects and lists JSON-encoded, scalars as text); both give the same result.
    Keys of other namespaces (aws:, kubernetes:, pulumi:) are not ours and are left alone.
    """
    raw: dict[str, Any] = {}
    for full_key, value in values.items():
        ns, _, key = full_key.rpartition(":")
        if full_key == "aws:region":
            raw["region"] = value
        elif ns in ("", PROJECT):
            if isinstance(value, str) and value[:1] in ("{", "["):
                with contextlib.suppress(json.JSONDecodeError):
                    value = json.loads(value)
            raw[key] = value
    if "region" not in raw:
        raw["region"] = None
    return raw


def load() -> StackConfig:
    """Read and validate the current stack's config from the Pulumi engine.

    On invalid config, logs each problem as a Pulumi error and raises `pulumi.RunError`
    (reported without a traceback) before any resource is declared.
    """
    import pulumi
    import pulumi.runtime.config as runtime_config

    values = dict(runtime_config.CONFIG.get())
    try:
        return parse(from_stack_values(values))
    except ConfigError as e:
        for line in e.problems:
            pulumi.log.error(line)
        raise pulumi.RunError(f"invalid stack config ({len(e.problems)} problem(s)); nothing was created") from None
