"""Every planned input of the EKS, EC2, FSx, ECR, S3, KMS and IAM resources against the AWS API's
own model: botocore's shapes (enums, ranges, lengths, patterns, and the rules the API
documentation states in its fixed phrasing: config.aws.documented_rules).

`SHAPES` maps each input (dotted path of the plan's camelCase inputs, `[]` for list items, `*`
for a map's keys) to the API member it fills. `UNCONSTRAINED` lists inputs whose member has no
rule to check (ids, references, booleans, free text the API does not constrain). A new input
of these resources fails `test_every_input_is_mapped` until it is put in one or the other.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from config import aws
from tests.conftest import BASE, EXAMPLE_STACKS, plan_exit, stack_plan

LT = "ec2:CreateLaunchTemplate:LaunchTemplateData."
NG = "eks:CreateNodegroup:"
FSX = "fsx:CreateFileSystem:"
INGRESS = "ec2:AuthorizeSecurityGroupIngress:IpPermissions.[]."

SHAPES: dict[str, dict[str, str]] = {
    "aws:eks/cluster:Cluster": {
        "name": "eks:CreateCluster:name",
        "enabledClusterLogTypes[]": "eks:CreateCluster:logging.clusterLogging.[].types.[]",
        "accessConfig.authenticationMode": "eks:CreateCluster:accessConfig.authenticationMode",
        "upgradePolicy.supportType": "eks:CreateCluster:upgradePolicy.supportType",
        "tags": "eks:CreateCluster:tags",
        "tags.*": "eks:CreateCluster:tags.<key>",
    },
    "aws:eks/nodeGroup:NodeGroup": {
        "amiType": NG + "amiType",
        "capacityType": NG + "capacityType",
        "scalingConfig.desiredSize": NG + "scalingConfig.desiredSize",
        "scalingConfig.minSize": NG + "scalingConfig.minSize",
        "scalingConfig.maxSize": NG + "scalingConfig.maxSize",
        "updateConfig.maxUnavailable": NG + "updateConfig.maxUnavailable",
        "updateConfig.updateStrategy": NG + "updateConfig.updateStrategy",
        "taints[].key": NG + "taints.[].key",
        "taints[].value": NG + "taints.[].value",
        "taints[].effect": NG + "taints.[].effect",
        "labels.*": NG + "labels.<key>",
        "labels.{}": NG + "labels.{}",
        "nodeRepairConfig.maxParallelNodesRepairedCount": NG + "nodeRepairConfig.maxParallelNodesRepairedCount",
        "nodeRepairConfig.maxUnhealthyNodeThresholdPercentage": NG
        + "nodeRepairConfig.maxUnhealthyNodeThresholdPercentage",
        "nodeRepairConfig.nodeRepairConfigOverrides[].repairAction": NG
        + "nodeRepairConfig.nodeRepairConfigOverrides.[].repairAction",
        "nodeRepairConfig.nodeRepairConfigOverrides[].minRepairWaitTimeMins": NG
        + "nodeRepairConfig.nodeRepairConfigOverrides.[].minRepairWaitTimeMins",
        "tags": NG + "tags",
    },
    "aws:eks/addon:Addon": {
        "resolveConflictsOnCreate": "eks:CreateAddon:resolveConflicts",
        "resolveConflictsOnUpdate": "eks:UpdateAddon:resolveConflicts",
        "tags": "eks:CreateAddon:tags",
        "tags.*": "eks:CreateAddon:tags.<key>",
        "clusterName": "eks:CreateAddon:clusterName",
    },
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": {
        "accessScope.type": "eks:AssociateAccessPolicy:accessScope.type",
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {
        "description": "ec2:CreateLaunchTemplate:VersionDescription",
        "metadataOptions.httpTokens": LT + "MetadataOptions.HttpTokens",
        "metadataOptions.httpEndpoint": LT + "MetadataOptions.HttpEndpoint",
        "metadataOptions.httpPutResponseHopLimit": LT + "MetadataOptions.HttpPutResponseHopLimit",
        "blockDeviceMappings[].ebs.volumeType": LT + "BlockDeviceMappings.[].Ebs.VolumeType",
        "blockDeviceMappings[].ebs.throughput": LT + "BlockDeviceMappings.[].Ebs.Throughput",
        "networkInterfaces[].interfaceType": LT + "NetworkInterfaces.[].InterfaceType",
        "tagSpecifications[].resourceType": LT + "TagSpecifications.[].ResourceType",
        "instanceMarketOptions.marketType": LT + "InstanceMarketOptions.MarketType",
    },
    "aws:ec2/placementGroup:PlacementGroup": {"strategy": "ec2:CreatePlacementGroup:Strategy"},
    "aws:ec2/securityGroup:SecurityGroup": {"description": "ec2:CreateSecurityGroup:Description"},
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": {
        "description": INGRESS + "IpRanges.[].Description",
    },
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": {
        "description": "ec2:AuthorizeSecurityGroupEgress:IpPermissions.[].IpRanges.[].Description",
    },
    "aws:ec2/flowLog:FlowLog": {
        "trafficType": "ec2:CreateFlowLogs:TrafficType",
        "logDestinationType": "ec2:CreateFlowLogs:LogDestinationType",
    },
    "aws:ec2/vpcEndpoint:VpcEndpoint": {"vpcEndpointType": "ec2:CreateVpcEndpoint:VpcEndpointType"},
    "aws:ec2/eip:Eip": {"domain": "ec2:AllocateAddress:Domain"},
    "aws:fsx/lustreFileSystem:LustreFileSystem": {
        "deploymentType": FSX + "LustreConfiguration.DeploymentType",
        "storageType": FSX + "StorageType",
        "storageCapacity": FSX + "StorageCapacity",
        "perUnitStorageThroughput": FSX + "LustreConfiguration.PerUnitStorageThroughput",
        "dataCompressionType": FSX + "LustreConfiguration.DataCompressionType",
        "fileSystemTypeVersion": FSX + "FileSystemTypeVersion",
        "automaticBackupRetentionDays": FSX + "LustreConfiguration.AutomaticBackupRetentionDays",
        "dailyAutomaticBackupStartTime": FSX + "LustreConfiguration.DailyAutomaticBackupStartTime",
        "logConfiguration.level": FSX + "LustreConfiguration.LogConfiguration.Level",
        "securityGroupIds": FSX + "SecurityGroupIds",
        "securityGroupIds[]": FSX + "SecurityGroupIds.[]",
        "tags.*": FSX + "Tags.[].Key",
        "finalBackupTags.*": "fsx:DeleteFileSystem:LustreConfiguration.FinalBackupTags.[].Key",
    },
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": {
        "fileSystemPath": "fsx:CreateDataRepositoryAssociation:FileSystemPath",
        "dataRepositoryPath": "fsx:CreateDataRepositoryAssociation:DataRepositoryPath",
        "s3.autoImportPolicy.events[]": "fsx:CreateDataRepositoryAssociation:S3.AutoImportPolicy.Events.[]",
        "s3.autoExportPolicy.events[]": "fsx:CreateDataRepositoryAssociation:S3.AutoExportPolicy.Events.[]",
    },
    "aws:ecr/repository:Repository": {
        "name": "ecr:CreateRepository:repositoryName",
        "imageTagMutability": "ecr:CreateRepository:imageTagMutability",
        "encryptionConfigurations[].encryptionType": "ecr:CreateRepository:encryptionConfiguration.encryptionType",
    },
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": {"policy": "ecr:PutLifecyclePolicy:lifecyclePolicyText"},
    "aws:ecr/repositoryPolicy:RepositoryPolicy": {"policy": "ecr:SetRepositoryPolicy:policyText"},
    "aws:s3/bucketVersioning:BucketVersioning": {
        "versioningConfiguration.status": "s3:PutBucketVersioning:VersioningConfiguration.Status"
    },
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": {
        "rules[].applyServerSideEncryptionByDefault.sseAlgorithm": "s3:PutBucketEncryption:"
        "ServerSideEncryptionConfiguration.Rules.[].ApplyServerSideEncryptionByDefault.SSEAlgorithm",
    },
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": {
        "rule.objectOwnership": "s3:PutBucketOwnershipControls:OwnershipControls.Rules.[].ObjectOwnership"
    },
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": {
        "rules[].status": "s3:PutBucketLifecycleConfiguration:LifecycleConfiguration.Rules.[].Status",
        "rules[].noncurrentVersionExpiration.noncurrentDays": "s3:PutBucketLifecycleConfiguration:"
        "LifecycleConfiguration.Rules.[].NoncurrentVersionExpiration.NoncurrentDays",
        "rules[].noncurrentVersionExpiration.newerNoncurrentVersions": "s3:PutBucketLifecycleConfiguration:"
        "LifecycleConfiguration.Rules.[].NoncurrentVersionExpiration.NewerNoncurrentVersions",
        "rules[].expiration.days": "s3:PutBucketLifecycleConfiguration:LifecycleConfiguration.Rules.[].Expiration.Days",
    },
    "aws:kms/key:Key": {
        "deletionWindowInDays": "kms:ScheduleKeyDeletion:PendingWindowInDays",
        "description": "kms:CreateKey:Description",
        "policy": "kms:CreateKey:Policy",
        "tags.*": "kms:CreateKey:Tags.[].TagKey",
    },
    "aws:kms/alias:Alias": {"name": "kms:CreateAlias:AliasName"},
    "aws:iam/role:Role": {
        "description": "iam:CreateRole:Description",
        "assumeRolePolicy": "iam:CreateRole:AssumeRolePolicyDocument",
    },
    "aws:iam/rolePolicy:RolePolicy": {"policy": "iam:PutRolePolicy:PolicyDocument"},
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": {"policyArn": "iam:AttachRolePolicy:PolicyArn"},
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": {
        "clientIdLists[]": "iam:CreateOpenIDConnectProvider:ClientIDList.[]",
        "url": "iam:CreateOpenIDConnectProvider:Url",
    },
    "aws:cloudwatch/logGroup:LogGroup": {"name": "logs:CreateLogGroup:logGroupName"},
    "aws:autoscaling/schedule:Schedule": {
        "scheduledActionName": "autoscaling:PutScheduledUpdateGroupAction:ScheduledActionName",
        "autoscalingGroupName": "autoscaling:PutScheduledUpdateGroupAction:AutoScalingGroupName",
    },
}

# Inputs whose API member carries no enum, range or pattern: ids and references the provider
# resolves, booleans, and the names of the tags (their values are checked by config.checks.tag_rules).
# EC2's CapacityReservationResourceGroupArn has none either; config holds it to resource-groups' GroupArn.
UNCONSTRAINED = {
    "clusterName", "vpcId", "subnetId", "subnetIds", "subnetIds[]", "roleArn", "nodeRoleArn", "role", "bucket",
    "repository", "kmsKeyId", "kmsMasterKeyId", "securityGroupId", "referencedSecurityGroupId", "cidrIpv4",
    "ipProtocol", "fileSystemId", "targetKeyId", "allocationId", "routeTableId", "gatewayId", "natGatewayId",
    "instanceTypes[]", "version", "addonName", "addonVersion", "configurationValues", "launchTemplate.id",
    "launchTemplate.version", "principalArn", "policyArn", "accessScope.namespaces[]", "userData",
    "vpcSecurityGroupIds[]", "networkInterfaces[].securityGroups[]", "blockDeviceMappings[].deviceName",
    "capacityReservationSpecification.capacityReservationTarget.capacityReservationId", "placement.groupName",
    "capacityReservationSpecification.capacityReservationTarget.capacityReservationResourceGroupArn",
    "iamRoleArn", "logDestination", "logConfiguration.destination", "serviceName", "routeTableIds[]",
    "cidrBlock", "availabilityZone", "routes[].cidrBlock", "routes[].gatewayId", "routes[].natGatewayId",
    "encryptionConfigurations[].kmsKey", "encryptionConfig.provider.keyArn", "vpcConfig.subnetIds[]",
    "vpcConfig.publicAccessCidrs[]", "podIdentityAssociations[].roleArn", "podIdentityAssociations[].serviceAccount",
    "thumbprintLists[]", "retentionInDays", "bucketPrefix", "startTime", "desiredCapacity", "minSize", "maxSize",
    "nodeRepairConfig.nodeRepairConfigOverrides[].nodeMonitoringCondition",
    "nodeRepairConfig.nodeRepairConfigOverrides[].nodeUnhealthyReason", "userName", "kubernetesGroups[]", "type",
    "name", "policy", "description", "tags", "finalBackupTags", "preserve", "tags.*", "tagSpecifications[].tags.*", "encryptionConfig.resources[]",
    "nodeGroupName", "nodeGroupNamePrefix", "labels", "networkInterfaces[].networkCardIndex", "networkInterfaces[].deviceIndex",
    "networkInterfaces[].description", "fromPort", "toPort", "maxAggregationInterval",
    "rules[].applyServerSideEncryptionByDefault.kmsMasterKeyId",
    # S3 lifecycle members botocore types as plain strings and integers (the rule's id is ours, the
    # filter an empty prefix; the bounds the config checks are in tests/plan/test_bucket_lifecycle.py).
    "rules[].id", "rules[].filter.prefix", "rules[].abortIncompleteMultipartUpload.daysAfterInitiation",
    # Checked by the documented rules below (per volume type; two values in prose).
    "blockDeviceMappings[].ebs.iops", "blockDeviceMappings[].ebs.volumeSize",
    # The provider takes these EC2 booleans as strings.
    "blockDeviceMappings[].ebs.deleteOnTermination", "blockDeviceMappings[].ebs.encrypted",
    "networkInterfaces[].associatePublicIpAddress", "networkInterfaces[].deleteOnTermination",
    # No pattern in the API: held to the AMI release table instead (config.amis, tests/unit/test_drivers.py).
    "releaseVersion",
}  # fmt: skip
"""Also unconstrained: every boolean input (checked by type, not listed)."""


def values_at(obj: Any, path: str) -> Iterator[Any]:
    """Values of the plan inputs at `path` (`a.b[].c`; `x.*` yields the keys of map `x`, `x.{}` its values)."""
    head, _, rest = path.partition(".")
    if head in ("*", "{}"):
        yield from (obj.keys() if head == "*" else obj.values()) if isinstance(obj, Mapping) else ()
        return
    many = head.endswith("[]")
    key = head.removesuffix("[]")
    value = obj.get(key) if isinstance(obj, Mapping) else None
    items = value if many and isinstance(value, list) else [value] if not many else []
    for item in items:
        if rest:
            yield from values_at(item, rest)
        elif item is not None:
            yield item


def leaf_paths(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from leaf_paths(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(obj, list):
        for v in obj:
            yield from leaf_paths(v, prefix + "[]")
    else:
        yield prefix, obj


def all_resources() -> Iterator[tuple[str, dict[str, Any]]]:
    for stack in EXAMPLE_STACKS:
        for r in stack_plan(stack)["resources"]:
            if r["type"] in SHAPES:
                yield stack, r


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_planned_inputs_pass_the_aws_model(stack: str) -> None:
    refused = []
    for r in stack_plan(stack)["resources"]:
        for path, address in SHAPES.get(r["type"], {}).items():
            for value in values_at(r["inputs"], path):
                if value == "<computed>":
                    continue
                for p in aws.problems(value, address):
                    refused.append(f"{r['name']} {path}: {p} ({address})")
    assert not refused, "\n".join(refused)


def test_every_input_is_mapped() -> None:
    unmapped = set()
    for _, r in all_resources():
        mapped = SHAPES[r["type"]]
        for path, value in leaf_paths(r["inputs"]):
            maps = ("tags.", "labels.", "finalBackupTags.", "tagSpecifications[].tags.")
            generic = next((m + "*" for m in maps if path.startswith(m)), path)
            known = generic in mapped or path in mapped or path in UNCONSTRAINED or generic in UNCONSTRAINED
            if isinstance(value, bool) or known:
                continue
            unmapped.add(f"{r['type']} {path}")
    assert not unmapped, "map to an API member or list as unconstrained:\n" + "\n".join(sorted(unmapped))


def test_every_address_resolves_to_a_constrained_member() -> None:
    """Each mapped member has a rule to check (else it belongs in UNCONSTRAINED)."""
    empty = []
    for paths in SHAPES.values():
        for address in paths.values():
            s = aws.shape(address)
            rules = {k for k in ("min", "max", "pattern") if k in s.metadata} | set(aws.documented_rules(s))
            if not rules and not getattr(s, "enum", None):
                empty.append(address)
    assert not empty, empty


# ----------------------------------------------------------------- config that AWS would refuse


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"llm-training-eks:storage": {"dailyBackupStartTime": "24:30"}}, "storage.dailyBackupStartTime:"),
        ({"llm-training-eks:storage": {"backupRetentionDays": 91}}, "storage.backupRetentionDays:"),
        ({"llm-training-eks:storage": {"throughputPerTib": 2000}}, "storage.throughputPerTib:"),
        ({"llm-training-eks:tags": {"team": "a" * 257}}, "tags.team:"),
        ({"llm-training-eks:tags": {"aws:owner": "x"}}, "tags.aws:owner:"),
        ({"llm-training-eks:tags": {f"k{i}": "v" for i in range(49)}}, "tags:"),
        (
            {"llm-training-eks:cluster": {**BASE["llm-training-eks:cluster"], "logRetentionDays": 2}},
            "cluster.logRetentionDays:",
        ),
        ({"llm-training-eks:registry": {"repositories": {"A": {}}}}, "registry.repositories:"),
    ],
)
def test_config_aws_would_refuse_exits_2_naming_the_key(values: dict[str, Any], expected: str, tmp_path: Any) -> None:
    code, err = plan_exit({**BASE, **values}, tmp_path)
    assert code == 2 and "Traceback" not in err
    assert any(line.startswith(expected) for line in err.splitlines()), err


def test_log_retention_values_come_from_the_api_documentation() -> None:
    assert 90 in aws.documented_values("logs:PutRetentionPolicy:retentionInDays")
    assert 2 not in aws.documented_values("logs:PutRetentionPolicy:retentionInDays")


def test_update_strategy_minimal_is_in_the_api() -> None:
    """Reserved groups upgrade with MINIMAL, which terminates before it launches (eks
    NodegroupUpdateConfig.updateStrategy documentation)."""
    s = aws.shape(NG + "updateConfig.updateStrategy")
    assert "MINIMAL" in s.enum and "terminates the old instances before launching" in s.documentation


def _documented_range(address: str, volume_type: str) -> tuple[int, int]:
    """`gp3: 3,000 - 80,000` in the API documentation of a per-volume-type member."""
    import html
    import re

    doc = html.unescape(re.sub(r"<[^>]+>", "", aws.shape(address).documentation))
    match = re.search(rf"{volume_type}: ([\d,]+) - ([\d,]+)", doc)
    assert match, f"{address}: no {volume_type} range in botocore's documentation"
    low, high = (int(g.replace(",", "")) for g in match.groups())
    return low, high


def test_root_volumes_within_the_documented_gp3_limits(example_stack: str) -> None:
    for r in stack_plan(example_stack)["resources"]:
        if r["type"] != "aws:ec2/launchTemplate:LaunchTemplate":
            continue
        for bdm in r["inputs"]["blockDeviceMappings"]:
            ebs = bdm["ebs"]
            assert ebs["volumeType"] == "gp3"
            for key, member in (("iops", "Iops"), ("volumeSize", "VolumeSize")):
                low, high = _documented_range(LT + f"BlockDeviceMappings.[].Ebs.{member}", "gp3")
                assert low <= ebs[key] <= high, (r["name"], key, ebs[key], (low, high))


def test_flow_log_aggregation_interval_is_one_of_the_documented_two() -> None:
    doc = aws.shape("ec2:CreateFlowLogs:MaxAggregationInterval").documentation
    assert "60 seconds" in doc and "600 seconds" in doc
    for stack in EXAMPLE_STACKS:
        for r in stack_plan(stack)["resources"]:
            if r["type"] == "aws:ec2/flowLog:FlowLog":
                assert r["inputs"]["maxAggregationInterval"] in (60, 600)
