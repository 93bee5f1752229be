"""Preflight's reads through boto3 clients of one region (the command line, `--profile`/`--region`).

The same reads as `tools.aws.account.Account`; errors become one `AccountError` line each
(`explain_api_error`, `explain_botocore`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import boto3
import botocore.exceptions

from tools.aws.account import (
    OWN_INSTANCE_STATES,
    UPCOMING_TAG,
    AccountError,
    DeployedFileSystem,
    DeployedNodeGroup,
    DeployedTemplate,
    PlacementGroup,
    Reservation,
    Subnet,
    Vpc,
    candidates,
    explain_api_error,
    explain_botocore,
    file_system_tags,
    is_group,
)

# What EC2 answers for an id or name it does not have (EC2 API reference, "Error codes";
# tests/upstream/aws-ec2-missing-codes-2026-11.yaml).
MISSING = {
    "vpc": ("InvalidVpcID.NotFound",),
    "subnet": ("InvalidSubnetID.NotFound",),
    "route-table": ("InvalidRouteTableID.NotFound",),
    "security-group": ("InvalidGroup.NotFound", "InvalidGroupId.NotFound"),
    "placement-group": ("InvalidPlacementGroup.Unknown",),
}
VPC_MEMBERS = {
    "route-table": ("describe_route_tables", "RouteTableIds", "RouteTables"),
    "security-group": ("describe_security_groups", "GroupIds", "SecurityGroups"),
}
"""Kind -> the describe call, its id list parameter and the list it answers with."""


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
        platform=cr.get("InstancePlatform"),
        tenancy=cr.get("Tenancy"),
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
            found = self._call(
                "eks", "describe_nodegroup", missing=missing, clusterName=cluster, nodegroupName=eks_name
            )
            group = found[0]["nodegroup"] if found else {}
            if group and is_group(eks_name, group.get("labels"), name):
                desired = int(group.get("scalingConfig", {}).get("desiredSize", 0))
                lt = group.get("launchTemplate") or {}
                template = (str(lt["id"]), str(lt["version"])) if lt.get("id") and lt.get("version") else None
                return DeployedNodeGroup(str(group.get("version")), desired, group.get("releaseVersion"), template)
        return None

    def launch_template(self, template_id: str, version: str) -> DeployedTemplate | None:
        pages = self._call(
            "ec2",
            "describe_launch_template_versions",
            missing=("InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateId.VersionNotFound"),
            LaunchTemplateId=template_id,
            Versions=[version],
        )
        found = [v for p in pages or [] for v in p.get("LaunchTemplateVersions", [])]
        if not found:
            return None
        data = found[0].get("LaunchTemplateData", {})
        root: dict[str, Any] = next((m["Ebs"] for m in data.get("BlockDeviceMappings", []) if m.get("Ebs")), {})
        target = data.get("CapacityReservationSpecification", {}).get("CapacityReservationTarget", {})
        return DeployedTemplate(
            root_volume_gib=root.get("VolumeSize"),
            user_data=data.get("UserData"),
            reservation_id=target.get("CapacityReservationId"),
            market_type=data.get("InstanceMarketOptions", {}).get("MarketType"),
        )

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

    def vpc(self, vpc_id: str) -> Vpc | None:
        pages = self._call("ec2", "describe_vpcs", missing=MISSING["vpc"], VpcIds=[vpc_id])
        if not [v for p in pages or [] for v in p.get("Vpcs", [])]:
            return None

        def attribute(name: str) -> bool:
            found = self._call("ec2", "describe_vpc_attribute", VpcId=vpc_id, Attribute=name)[0]
            return bool(found.get(name[0].upper() + name[1:], {}).get("Value"))

        return Vpc(vpc_id, attribute("enableDnsSupport"), attribute("enableDnsHostnames"))

    def subnet(self, subnet_id: str) -> Subnet | None:
        pages = self._call("ec2", "describe_subnets", missing=MISSING["subnet"], SubnetIds=[subnet_id])
        found = [s for p in pages or [] for s in p.get("Subnets", [])]
        if not found:
            return None
        s = found[0]
        return Subnet(
            subnet_id, str(s.get("VpcId")), str(s.get("AvailabilityZone")), int(s.get("AvailableIpAddressCount") or 0)
        )

    def vpc_of(self, kind: str, resource_id: str) -> str | None:
        operation, ids, key = VPC_MEMBERS[kind]
        pages = self._call("ec2", operation, missing=MISSING[kind], **{ids: [resource_id]})
        found = [r for p in pages or [] for r in p.get(key, [])]
        return str(found[0].get("VpcId")) if found else None

    def placement_group(self, name: str) -> PlacementGroup | None:
        pages = self._call("ec2", "describe_placement_groups", missing=MISSING["placement-group"], GroupNames=[name])
        found = [g for p in pages or [] for g in p.get("PlacementGroups", [])]
        if not found:
            return None
        return PlacementGroup(name, str(found[0].get("Strategy")), str(found[0].get("State")))

    def instances_in_group(self, name: str, availability_zone: str | None = None) -> int:
        filters = [
            {"Name": "placement-group-name", "Values": [name]},
            {"Name": "instance-state-name", "Values": list(OWN_INSTANCE_STATES)},
            *([{"Name": "availability-zone", "Values": [availability_zone]}] if availability_zone else []),
        ]
        pages = self._call("ec2", "describe_instances", Filters=filters)
        return sum(len(r.get("Instances", [])) for p in pages for r in p.get("Reservations", []))


def _camel(operation: str) -> str:
    return "".join(part.capitalize() for part in operation.split("_"))
