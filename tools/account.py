"""What preflight reads from the AWS account, behind one small interface with two sources.

`Account` is the handful of reads the checks need (tools/preflight.py). Two sources implement it:
`Boto3Account` here (the command line, `--profile`/`--region`) and `ProviderAccount`
(tools/account_invokes.py: the stack's own AWS provider inside `pulumi preview`/`up`, so its
region and credentials apply). Both turn "AWS could not be asked" (no network, expired or missing
credentials, a denied action) into one `AccountError` line; `explain_api_error` and
`explain_text` say what each error means and what to do (tests/upstream/aws-error-shapes.yaml).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import boto3
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


@dataclass(frozen=True)
class DeployedNodeGroup:
    """What EKS reports of a node group that already exists."""

    version: str
    desired: int


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

    def instances_in(self, reservation_id: str, tags: Mapping[str, str]) -> int:
        """Pending or running instances carrying all `tags` that were launched into the reservation."""
        ...

    def file_system(self, cluster: str) -> DeployedFileSystem | None:
        """The stack's Lustre file system (by `file_system_tags`), or None before it exists."""
        ...

    def caller_arn(self) -> str:
        """The ARN of the identity asking (STS GetCallerIdentity)."""
        ...

    def quota(self, code: str) -> float:
        """The value of an EC2 service quota."""
        ...


def candidates(name: str, names: Iterable[str]) -> list[str]:
    """EKS node group names that may be the stack's group `name`: `name` itself (a group deployed
    before names had a unique suffix), then `name-<suffix>` (infra.cluster.node_group_name_prefix);
    the node-group label decides among the latter."""
    names = list(names)
    return [n for n in names if n == name] + sorted(n for n in names if n.startswith(f"{name}-"))


def is_group(eks_name: str, labels: Mapping[str, str] | None, name: str) -> bool:
    """The EKS group `eks_name` is the stack's group `name` (by its fixed name or its label)."""
    return eks_name == name or (labels or {}).get(NODE_GROUP_LABEL) == name


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


def _tags(items: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    return {str(t.get("Key")): str(t.get("Value")) for t in items or []}


def _count(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def reservation_from(cr: Mapping[str, Any], tags: Mapping[str, str]) -> Reservation:
    """A Reservation from DescribeCapacityReservations' member names (dates already datetimes)."""
    return Reservation(
        id=str(cr.get("CapacityReservationId")),
        instance_type=str(cr.get("InstanceType")),
        availability_zone=str(cr.get("AvailabilityZone")),
        kind=str(cr.get("ReservationType") or "default"),
        state=str(cr.get("State")),
        total=int(cr.get("TotalInstanceCount") or 0),
        available=int(cr.get("AvailableInstanceCount") or 0),
        start=cr.get("StartDate"),
        end=cr.get("EndDate"),
        placement_group_arn=cr.get("PlacementGroupArn") or None,
        upcoming=_count(tags.get(UPCOMING_TAG)),
    )


class Boto3Account:
    """The reads through boto3 clients of one region (the command line)."""

    def __init__(self, client: Callable[[str], Any]):
        self._client = client

    @classmethod
    def from_session(cls, session: Any, region: str) -> Boto3Account:
        """Clients of a boto3 session (or anything with `.client(name, region_name=...)`)."""
        return cls(lambda service: session.client(service, region_name=region))

    @classmethod
    def for_profile(cls, profile: str | None, region: str) -> Boto3Account:
        """A session of `profile` (default: the environment's, as the stack's AWS provider uses)."""
        try:
            session = boto3.Session(profile_name=profile)
        except botocore.exceptions.BotoCoreError as e:
            raise AccountError(explain_botocore(e, "the AWS profile")) from None
        if session.get_credentials() is None:
            raise AccountError(explain_botocore(botocore.exceptions.NoCredentialsError(), "sts:GetCallerIdentity"))
        return cls.from_session(session, region)

    def _call(self, service: str, operation: str, missing: Sequence[str] = (), **params: Any) -> Any:
        """One API call (all pages for a pageable operation); None when the error code is in `missing`."""
        action = f"{service.replace('service-quotas', 'servicequotas')}:{_camel(operation)}"
        try:
            client = self._client(service)
            if client.can_paginate(operation):
                return list(client.get_paginator(operation).paginate(**params))
            return [getattr(client, operation)(**params)]
        except botocore.exceptions.ClientError as e:
            error = e.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in missing:
                return None
            raise AccountError(explain_api_error(code, str(error.get("Message", "")), action)) from None
        except botocore.exceptions.BotoCoreError as e:
            raise AccountError(explain_botocore(e, action)) from None

    def offered_azs(self, instance_type: str) -> set[str]:
        pages = self._call(
            "ec2",
            "describe_instance_type_offerings",
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}],
        )
        return {o["Location"] for p in pages for o in p.get("InstanceTypeOfferings", [])}

    def efa_interfaces(self, instance_type: str) -> int:
        pages = self._call("ec2", "describe_instance_types", InstanceTypes=[instance_type])
        info: dict[str, Any] = next((t for p in pages for t in p.get("InstanceTypes", [])), {})
        net = info.get("NetworkInfo", {})
        return int(net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)) if net.get("EfaSupported") else 0

    def reservation(self, reservation_id: str) -> Reservation | None:
        pages = self._call(
            "ec2",
            "describe_capacity_reservations",
            missing=("InvalidCapacityReservationId.NotFound",),
            CapacityReservationIds=[reservation_id],
        )
        found = [cr for p in pages or [] for cr in p.get("CapacityReservations", [])]
        return reservation_from(found[0], _tags(found[0].get("Tags"))) if found else None

    def node_group(self, cluster: str, name: str) -> DeployedNodeGroup | None:
        # Listing first, as the provider's source does: a missing cluster or group is an answer.
        if cluster not in (n for p in self._call("eks", "list_clusters") for n in p.get("clusters", [])):
            return None
        missing = ("ResourceNotFoundException",)
        listed = self._call("eks", "list_nodegroups", missing=missing, clusterName=cluster)
        for eks_name in candidates(name, (n for p in listed or [] for n in p.get("nodegroups", []))):
            pages = self._call(
                "eks", "describe_nodegroup", missing=missing, clusterName=cluster, nodegroupName=eks_name
            )
            group = pages[0]["nodegroup"] if pages else {}
            if group and is_group(eks_name, group.get("labels"), name):
                desired = int(group.get("scalingConfig", {}).get("desiredSize", 0))
                return DeployedNodeGroup(str(group.get("version")), desired)
        return None

    def instances_in(self, reservation_id: str, tags: Mapping[str, str]) -> int:
        filters = [
            {"Name": "capacity-reservation-id", "Values": [reservation_id]},
            {"Name": "instance-state-name", "Values": list(OWN_INSTANCE_STATES)},
            *({"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())),
        ]
        pages = self._call("ec2", "describe_instances", Filters=filters)
        return sum(len(r.get("Instances", [])) for p in pages for r in p.get("Reservations", []))

    def file_system(self, cluster: str) -> DeployedFileSystem | None:
        wanted = file_system_tags(cluster).items()
        for page in self._call("fsx", "describe_file_systems"):
            for fs in page.get("FileSystems", []):
                if fs.get("FileSystemType") == "LUSTRE" and wanted <= _tags(fs.get("Tags")).items():
                    return DeployedFileSystem(
                        id=str(fs.get("FileSystemId")),
                        capacity_gib=int(fs.get("StorageCapacity") or 0),
                        lustre_version=str(fs.get("FileSystemTypeVersion")),
                        deployment_type=str(fs.get("LustreConfiguration", {}).get("DeploymentType")),
                    )
        return None

    def caller_arn(self) -> str:
        return str(self._call("sts", "get_caller_identity")[0].get("Arn", ""))

    def quota(self, code: str) -> float:
        pages = self._call("service-quotas", "get_service_quota", ServiceCode="ec2", QuotaCode=code)
        return float(pages[0]["Quota"]["Value"])


def _camel(operation: str) -> str:
    return "".join(part.capitalize() for part in operation.split("_"))
