"""What preflight reads from the AWS account, behind one small interface with two sources.

`Account` is the handful of reads the checks need (tools/preflight.py). Two sources implement it:
`Boto3Account` (tools/aws/account_boto3.py: the command line, `--profile`/`--region`) and `ProviderAccount`
(tools/aws/account_invokes.py: the stack's own AWS provider inside `pulumi preview`/`up`, so its
region and credentials apply). Both turn "AWS could not be asked" (no network, expired or missing
credentials, a denied action) into one `AccountError` line; `explain_api_error` and
`explain_text` say what each error means and what to do (tests/upstream/aws-error-shapes.yaml).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import botocore.exceptions

from facts.names import CLUSTER_TAG, NODE_GROUP_LABEL

UPCOMING_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"
"""Before a Capacity Block starts its available count shows 0; this tag holds how many instances
it will have (EC2 user guide, capacity-blocks-view)."""

OWN_INSTANCE_STATES = ("pending", "running")
"""Instances that hold a slot of the reservation they were launched into."""

# Error codes, by what they mean (botocore's service models and the AWS common-error pages;
# tests/upstream/aws-error-shapes.yaml).
EXPIRED = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired"})
DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "NotAuthorized"})
REJECTED = frozenset(
    {
        "AuthFailure",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "UnauthorizedException",
    }
)
MAX_MESSAGE = 300
"""An error line stays one short line, whatever AWS or the provider put in the message."""


class AccountError(Exception):
    """AWS could not be asked (network, credentials, permissions): one line saying why and what to do."""


@dataclass(frozen=True)
class Reservation:
    """A capacity reservation or Capacity Block, as DescribeCapacityReservations describes it."""

    id: str
    instance_type: str
    availability_zone: str
    kind: str
    """ReservationType: `default` (an ODCR) or `capacity-block`."""
    state: str
    total: int
    available: int
    start: dt.datetime | None
    end: dt.datetime | None
    placement_group_arn: str | None
    upcoming: int | None
    """Instances a Capacity Block will have once it starts (`UPCOMING_TAG`), if tagged."""
    platform: str | None = None
    """InstancePlatform (`Linux/UNIX`, `Windows`, `Red Hat Enterprise Linux`, ...): an ODCR's choice."""
    tenancy: str | None = None
    """Tenancy: `default` or `dedicated` (an ODCR's choice)."""


@dataclass(frozen=True)
class DeployedNodeGroup:
    """What EKS reports of a node group that already exists."""

    version: str
    desired: int
    release_version: str | None = None
    """The AMI release the group runs (DescribeNodegroup releaseVersion), where EKS reports it."""
    launch_template: tuple[str, str] | None = None
    """The id and version of the group's own launch template (DescribeNodegroup launchTemplate)."""


@dataclass(frozen=True)
class DeployedTemplate:
    """The fields of a deployed launch template version the stack sets from config alone, so
    preflight can tell whether this update writes a new version (which rolls the group's nodes).
    None where the template has no such field."""

    root_volume_gib: int | None
    user_data: str | None
    reservation_id: str | None
    market_type: str | None


@dataclass(frozen=True)
class Vpc:
    """An existing VPC, as DescribeVpcs and DescribeVpcAttribute describe it."""

    id: str
    dns_support: bool
    dns_hostnames: bool


@dataclass(frozen=True)
class Subnet:
    """An existing subnet, as DescribeSubnets describes it."""

    id: str
    vpc_id: str
    availability_zone: str
    available_addresses: int


@dataclass(frozen=True)
class PlacementGroup:
    """An existing placement group (DescribePlacementGroups; the stack's provider reads it through
    Cloud Control, whose AWS::EC2::PlacementGroup has no state: None then)."""

    name: str
    strategy: str
    state: str | None


@dataclass(frozen=True)
class DeployedFileSystem:
    """What FSx reports of the stack's Lustre file system (DescribeFileSystems' FileSystem members)."""

    id: str
    capacity_gib: int
    """StorageCapacity."""
    lustre_version: str
    """FileSystemTypeVersion."""
    deployment_type: str
    """LustreConfiguration.DeploymentType."""


def file_system_tags(cluster: str) -> dict[str, str]:
    """Tags the stack's file system carries (infra.storage: the owned tags and `Name`)."""
    return {CLUSTER_TAG: cluster, "Name": f"{cluster}-shared"}


def candidates(name: str, names: Iterable[str]) -> list[str]:
    """EKS node group names that may be the stack's group `name`: `name` itself (a group deployed
    before names had a unique suffix), then `name-<suffix>` (infra.cluster.node_group_name_prefix);
    the node-group label decides among the latter."""
    names = list(names)
    return [n for n in names if n == name] + sorted(n for n in names if n.startswith(f"{name}-"))


def is_group(eks_name: str, labels: Mapping[str, str] | None, name: str) -> bool:
    """The EKS group `eks_name` is the stack's group `name` (by its fixed name or its label)."""
    return eks_name == name or (labels or {}).get(NODE_GROUP_LABEL) == name


class Account(Protocol):
    """The reads preflight makes, whatever answers them."""

    def offered_azs(self, instance_type: str) -> set[str]:
        """The AZs of the region where the instance type is offered."""
        ...

    def efa_interfaces(self, instance_type: str) -> int:
        """Maximum EFA interfaces of the type (0 without EFA support)."""
        ...

    def reservation(self, reservation_id: str) -> Reservation | None:
        """The reservation, or None when the region has no such id."""
        ...

    def node_group(self, cluster: str, name: str) -> DeployedNodeGroup | None:
        """The deployed EKS node group the stack calls `name` (its EKS name is `name`, or, since
        node groups are replaced create-first, `name-` and a unique suffix with the node-group
        label `name`: `candidates`), or None when it (or its cluster) does not exist yet."""
        ...

    def launch_template(self, template_id: str, version: str) -> DeployedTemplate | None:
        """That version of the launch template (EC2 DescribeLaunchTemplateVersions), or None when
        it is gone."""
        ...

    def instances_in(self, reservation_id: str, tags: Mapping[str, str]) -> int:
        """Pending or running instances carrying all `tags` that were launched into the reservation."""
        ...

    def caller_arn(self) -> str:
        """The ARN of the identity asking (STS GetCallerIdentity)."""
        ...

    def quota(self, code: str) -> float:
        """The value of an EC2 service quota."""
        ...

    def vpc(self, vpc_id: str) -> Vpc | None:
        """The VPC with its DNS attributes, or None when the region has no such id."""
        ...

    def subnet(self, subnet_id: str) -> Subnet | None:
        """The subnet, or None when the region has no such id."""
        ...

    def vpc_of(self, kind: str, resource_id: str) -> str | None:
        """The VPC of a route table (`route-table`) or security group (`security-group`), or None
        when the region has no such id."""
        ...

    def placement_group(self, name: str) -> PlacementGroup | None:
        """The placement group, or None when the region has none of that name."""
        ...

    def instances_in_group(self, name: str, availability_zone: str | None = None) -> int:
        """Pending or running instances in the placement group (in the AZ, if given)."""
        ...

    def file_system(self, cluster: str) -> DeployedFileSystem | None:
        """The stack's Lustre file system (by `file_system_tags`), or None before it exists."""
        ...


def _first_line(text: str) -> str:
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


PREFLIGHT_DENIED = (
    "allow it (docs/guardrails.md, Preflight, lists the read actions) or skip the preflight with"
    " LLM_TRAINING_EKS_PREFLIGHT=false"
)


def explain_api_error(code: str, message: str, action: str, denied: str = PREFLIGHT_DENIED) -> str:
    """One line for an error AWS returned to `action` (e.g. `ec2:DescribeCapacityReservations`);
    `denied` says what to do when the action is not allowed."""
    if code in EXPIRED:
        return (
            f"the AWS credentials have expired ({code} from {action}): renew them"
            " (aws sso login, or a new session) and run again"
        )
    if code in DENIED:
        return f"the AWS identity may not call {action} ({code}): {denied}"
    if code in REJECTED:
        return f"AWS did not accept the credentials ({code} from {action}): check AWS_PROFILE or the access key"
    return _first_line(f"AWS refused {action}: {code}: {message}")


def explain_botocore(e: botocore.exceptions.BotoCoreError, action: str) -> str:
    """One line for an error botocore raised before (or instead of) an answer from AWS."""
    text = _first_line(str(e))
    if isinstance(e, botocore.exceptions.NoCredentialsError):
        return (
            "no AWS credentials: set AWS_PROFILE (or --profile) or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
            " (or run where an instance role applies); the offline plan needs none"
        )
    if isinstance(e, botocore.exceptions.ConnectionError | botocore.exceptions.HTTPClientError):
        return f"could not reach AWS for {action} ({text}): check the network, proxy and region"
    if isinstance(
        e,
        botocore.exceptions.TokenRetrievalError
        | botocore.exceptions.SSOError
        | botocore.exceptions.CredentialRetrievalError,
    ):
        return (
            f"the AWS credentials have expired or cannot be loaded ({text}): renew them (aws sso login) and run again"
        )
    if isinstance(e, botocore.exceptions.ProfileNotFound):
        return f"{text}: name a profile of ~/.aws/config with --profile or AWS_PROFILE"
    return f"could not ask AWS for {action}: {text}"


# What the AWS SDK for Go (the provider's) prints (smithy-go errors.go, transport/http/client.go;
# aws-sdk-go-base errors.go): "api error <Code>: <Message>", "request send failed, dial tcp ...",
# "no valid credential sources for ... found".
_API_ERROR = re.compile(r"api error (?P<code>[A-Za-z0-9.]+): (?P<message>[^\n]*)")
_NETWORK = ("request send failed", "dial tcp", "no such host", "connection refused", "i/o timeout")


_WRAPPERS = re.compile(r"(invoke of \S+ failed: |invocation of \S+ returned an error: )")
"""What the Pulumi SDK and engine put around a provider's error (tests/upstream/aws-error-shapes.yaml)."""


def explain_text(text: str, action: str) -> str:
    """One line for an error that arrives as text (a failed provider invoke under `pulumi up`)."""
    text = _WRAPPERS.sub("", str(text))
    m = _API_ERROR.search(text)
    if m:
        return explain_api_error(m.group("code"), m.group("message"), action)
    if "no valid credential sources" in text:
        return (
            "no AWS credentials for the stack's AWS provider: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY where `pulumi` runs"
        )
    at = min((i for s in _NETWORK if (i := text.find(s)) >= 0), default=-1)
    if at >= 0:
        return f"could not reach AWS for {action} ({_first_line(text[at:])}): check the network, proxy and region"
    return f"could not ask AWS for {action}: {_first_line(text)}"
