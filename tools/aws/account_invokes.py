"""Preflight's reads through the stack's own AWS provider (inside `pulumi preview`/`up`).

Each read is a pulumi-aws invoke with `InvokeOptions(provider=...)`, the provider
`infra.context.aws_provider` builds for every AWS resource of the stack: the checks ask with the
same region and the same credentials (profile, role, environment) that will create the
resources, not with whatever a bare boto3 session would find. The invokes are the synchronous
forms, so a failing check stops the program before any other resource is declared.

What each data source returns, and that it errors rather than returning nothing for a missing
reservation, is in tests/upstream/pulumi-aws-invokes-7.51.1.yaml.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

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
    explain_text,
    file_system_tags,
    is_group,
)

# A data source that finds nothing fails with terraform-provider-aws's NotFoundError ("couldn't
# find resource") or EmptyResultError ("empty result"), or EC2's own NotFound code.
_NOT_FOUND = (
    "couldn't find resource",
    "empty result",
    "InvalidCapacityReservationId.NotFound",
    # A singular data source (aws_vpc, aws_subnet, ...) that matches nothing: tfresource
    # SingularDataSourceFindError, "no matching EC2 Subnet found".
    "no matching ",
)
# AWS::EC2::PlacementGroup through Cloud Control (pulumi-aws has no placement group data source):
# its properties GroupName, Strategy, SpreadLevel, PartitionCount (CloudFormation user guide,
# aws-resource-ec2-placementgroup); no state.
PLACEMENT_GROUP_TYPE = "AWS::EC2::PlacementGroup"
FILE_SYSTEM_TYPE = "AWS::FSx::FileSystem"
"""Cloud Control's type of an FSx file system (CloudFormation template reference, aws-resource-fsx-filesystem)."""
FILE_SYSTEM_ARN_TYPE = "fsx:file-system"
"""The Resource Groups Tagging API's resource type filter for FSx file systems (service:resource)."""


def _date(value: Any) -> dt.datetime | None:
    """The data sources give RFC 3339 strings (timetypes.RFC3339)."""
    if not value:
        return None
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


class ProviderAccount:
    """The `tools.aws.account.Account` reads as invokes of one explicit AWS provider."""

    def __init__(self, provider: pulumi.ProviderResource):
        self._opts = pulumi.InvokeOptions(provider=provider)

    def _invoke(self, function: Callable[..., Any], action: str, not_found: bool = False, **args: Any) -> Any:
        try:
            return function(**args, opts=self._opts)
        except Exception as e:  # noqa: BLE001 - a failed invoke is a plain Exception carrying the provider's text
            text = str(e)
            if not_found and any(s in text for s in _NOT_FOUND):
                return None
            raise AccountError(explain_text(text, action)) from None

    def offered_azs(self, instance_type: str) -> set[str]:
        found = self._invoke(
            aws.ec2.get_instance_type_offerings,
            "ec2:DescribeInstanceTypeOfferings",
            filters=[{"name": "instance-type", "values": [instance_type]}],
            location_type="availability-zone",
        )
        return set(found.locations or [])

    def efa_interfaces(self, instance_type: str) -> int:
        info = self._invoke(aws.ec2.get_instance_type, "ec2:DescribeInstanceTypes", instance_type=instance_type)
        return int(info.efa_maximum_interfaces or 0) if info.efa_supported else 0

    def reservation(self, reservation_id: str) -> Reservation | None:
        # Despite its name, this data source describes any reservation by id, ODCRs too: it calls
        # DescribeCapacityReservations (the ODCR API) with the id and no type filter, and flattens
        # the whole CapacityReservation, the ODCR's own members (InstancePlatform, Tenancy,
        # InstanceMatchCriteria, EndDateType) included (tests/upstream/pulumi-aws-invokes-7.51.1.yaml).
        cr = self._invoke(
            aws.ec2.get_capacity_block_reservation,
            "ec2:DescribeCapacityReservations",
            not_found=True,
            id=reservation_id,
        )
        if cr is None:
            return None
        tags: Mapping[str, str] = cr.tags or {}
        upcoming = tags.get(UPCOMING_TAG)
        return Reservation(
            id=str(cr.id),
            instance_type=str(cr.instance_type),
            availability_zone=str(cr.availability_zone),
            kind=str(cr.reservation_type or "default"),
            state=str(cr.state),
            total=int(cr.instance_count or 0),
            available=int(cr.available_instance_count or 0),
            start=_date(cr.start_date),
            end=_date(cr.end_date),
            placement_group_arn=cr.placement_group_arn or None,
            upcoming=int(upcoming) if upcoming and str(upcoming).isdigit() else None,
            platform=cr.instance_platform or None,
            tenancy=cr.tenancy or None,
        )

    def node_group(self, cluster: str, name: str) -> DeployedNodeGroup | None:
        # Listing first: a missing cluster or group is an answer, not an error to parse.
        clusters = self._invoke(aws.eks.get_clusters, "eks:ListClusters")
        if cluster not in (clusters.names or []):
            return None
        groups = self._invoke(aws.eks.get_node_groups, "eks:ListNodegroups", cluster_name=cluster)
        for eks_name in candidates(name, groups.names or []):
            group = self._invoke(
                aws.eks.get_node_group, "eks:DescribeNodegroup", cluster_name=cluster, node_group_name=eks_name
            )
            if is_group(eks_name, group.labels, name):
                scaling = (group.scaling_configs or [None])[0]
                desired = int(scaling.desired_size) if scaling else 0
                lt = (group.launch_templates or [None])[0]
                template = (str(lt.id), str(lt.version)) if lt and lt.id and lt.version else None
                return DeployedNodeGroup(str(group.version), desired, group.release_version or None, template)
        return None

    def launch_template(self, template_id: str, version: str) -> DeployedTemplate | None:
        # getLaunchTemplate reads the template's latest version (terraform-provider-aws
        # ec2_launch_template_data_source.go @0762c41e: DescribeLaunchTemplates, then the version
        # LatestVersionNumber), the one the stack gives its node group. Another version: None.
        lt = self._invoke(
            aws.ec2.get_launch_template, "ec2:DescribeLaunchTemplateVersions", not_found=True, id=template_id
        )
        if lt is None or str(lt.latest_version) != version:
            return None
        root = next((e for m in lt.block_device_mappings or [] for e in m.ebs or []), None)
        spec = (lt.capacity_reservation_specifications or [None])[0]
        target = (spec.capacity_reservation_targets or [None])[0] if spec else None
        market = (lt.instance_market_options or [None])[0]
        return DeployedTemplate(
            root_volume_gib=int(root.volume_size) if root and root.volume_size else None,
            user_data=lt.user_data or None,
            reservation_id=(target.capacity_reservation_id or None) if target else None,
            market_type=(market.market_type or None) if market else None,
        )

    def instances_in(self, reservation_id: str, tags: Mapping[str, str]) -> int:
        found = self._invoke(
            aws.ec2.get_instances,
            "ec2:DescribeInstances",
            filters=[{"name": "capacity-reservation-id", "values": [reservation_id]}],
            instance_state_names=list(OWN_INSTANCE_STATES),
            instance_tags=dict(tags),
        )
        return len(found.ids or [])

    def file_system(self, cluster: str) -> DeployedFileSystem | None:
        # No data source describes a Lustre file system: find it by its tags (Resource Groups
        # Tagging API), then read it through Cloud Control (AWS::FSx::FileSystem).
        tags = file_system_tags(cluster)
        found = self._invoke(
            aws.resourcegroupstaggingapi.get_resources,
            "tag:GetResources",
            resource_type_filters=[FILE_SYSTEM_ARN_TYPE],
            tag_filters=[{"key": k, "values": [v]} for k, v in tags.items()],
        )
        for mapping in found.resource_tag_mapping_lists or []:
            fs_id = str(mapping.resource_arn).rsplit("/", 1)[-1]
            resource = self._invoke(
                aws.cloudcontrol.get_resource,
                "cloudformation:GetResource",
                not_found=True,
                type_name=FILE_SYSTEM_TYPE,
                identifier=fs_id,
            )
            props = json.loads(resource.properties or "{}") if resource is not None else {}
            if props.get("FileSystemType") == "LUSTRE":
                return DeployedFileSystem(
                    id=fs_id,
                    capacity_gib=int(props.get("StorageCapacity") or 0),
                    lustre_version=str(props.get("FileSystemTypeVersion")),
                    deployment_type=str(props.get("LustreConfiguration", {}).get("DeploymentType")),
                )
        return None

    def caller_arn(self) -> str:
        return str(self._invoke(aws.get_caller_identity, "sts:GetCallerIdentity").arn)

    def quota(self, code: str) -> float:
        found = self._invoke(
            aws.servicequotas.get_service_quota,
            "servicequotas:GetServiceQuota",
            service_code="ec2",
            quota_code=code,
        )
        return float(found.value)

    def vpc(self, vpc_id: str) -> Vpc | None:
        found = self._invoke(aws.ec2.get_vpc, "ec2:DescribeVpcs", not_found=True, id=vpc_id)
        if found is None:
            return None
        return Vpc(vpc_id, bool(found.enable_dns_support), bool(found.enable_dns_hostnames))

    def subnet(self, subnet_id: str) -> Subnet | None:
        found = self._invoke(aws.ec2.get_subnet, "ec2:DescribeSubnets", not_found=True, id=subnet_id)
        if found is None:
            return None
        return Subnet(
            subnet_id, str(found.vpc_id), str(found.availability_zone), int(found.available_ip_address_count or 0)
        )

    def vpc_of(self, kind: str, resource_id: str) -> str | None:
        if kind == "route-table":
            found = self._invoke(
                aws.ec2.get_route_table, "ec2:DescribeRouteTables", not_found=True, route_table_id=resource_id
            )
        else:
            found = self._invoke(
                aws.ec2.get_security_group, "ec2:DescribeSecurityGroups", not_found=True, id=resource_id
            )
        return None if found is None else str(found.vpc_id)

    def placement_group(self, name: str) -> PlacementGroup | None:
        found = self._invoke(
            aws.cloudcontrol.get_resource,
            "cloudformation:GetResource",
            not_found=True,
            type_name=PLACEMENT_GROUP_TYPE,
            identifier=name,
        )
        if found is None:
            return None
        properties = json.loads(found.properties or "{}")
        return PlacementGroup(name, str(properties.get("Strategy")), None)

    def instances_in_group(self, name: str, availability_zone: str | None = None) -> int:
        filters = [{"name": "placement-group-name", "values": [name]}]
        if availability_zone:
            filters.append({"name": "availability-zone", "values": [availability_zone]})
        found = self._invoke(
            aws.ec2.get_instances,
            "ec2:DescribeInstances",
            filters=filters,
            instance_state_names=list(OWN_INSTANCE_STATES),
        )
        return len(found.ids or [])
