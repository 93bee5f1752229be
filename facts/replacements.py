"""When `pulumi up` replaces a resource instead of updating it, and in which order: the provider
rules `make diff` (tools/offline/plan_diff.py) and the day-2 tests judge an edit by.

Read from the sources at the versions the project pins: terraform-provider-aws's ForceNew
attributes as pulumi-aws 7.51.1 bridges them, pulumi-kubernetes's forceNew fields and its
delete-before-replace rule, the bridge's delete-before-replace for an explicitly set autonamed
property, the engine's deleteBeforeReplace option. tests/upstream/pulumi-replacements-2026-11.yaml
records each source (repository, commit, path) with its comments; tests/unit/test_plan_diff.py
holds these tables equal to it. A type missing here has no verdict: its change is reported as
"replacement rules not read".
"""

from __future__ import annotations

AWS_FORCE_NEW = {
    "aws:eks/nodeGroup:NodeGroup": [
        "amiType",
        "capacityType",
        "clusterName",
        "diskSize",
        "instanceTypes",
        "launchTemplate.id",
        "launchTemplate.name",
        "nodeGroupName",
        "nodeGroupNamePrefix",
        "nodeRoleArn",
        "remoteAccess",
        "subnetIds",
    ],
    "aws:ec2/routeTable:RouteTable": ["vpcId"],
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ["gatewayId", "subnetId"],
    "aws:ec2/vpcEndpoint:VpcEndpoint": [
        "dnsOptions.privateDnsPreference",
        "dnsOptions.privateDnsSpecifiedDomains",
        "resourceConfigurationArn",
        "serviceName",
        "serviceNetworkArn",
        "serviceRegion",
        "vpcEndpointType",
        "vpcId",
    ],
    "aws:ec2/launchTemplate:LaunchTemplate": ["name", "namePrefix"],
    "aws:autoscaling/schedule:Schedule": ["autoscalingGroupName", "scheduledActionName"],
    "aws:iam/rolePolicy:RolePolicy": ["name", "namePrefix", "role"],
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": [
        "dataRepositoryPath",
        "fileSystemId",
        "fileSystemPath",
    ],
    "aws:eks/accessEntry:AccessEntry": ["clusterName", "principalArn", "type"],
    "aws:eks/cluster:Cluster": ["name", "roleArn", "bootstrapSelfManagedAddons", "encryptionConfig"],
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": [
        "accessScope",
        "clusterName",
        "policyArn",
        "principalArn",
    ],
    "aws:ec2/subnet:Subnet": [
        "availabilityZone",
        "availabilityZoneId",
        "cidrBlock",
        "ipv4IpamPoolId",
        "ipv4NetmaskLength",
        "ipv6IpamPoolId",
        "ipv6Native",
        "ipv6NetmaskLength",
        "outpostArn",
        "vpcId",
    ],
    # Its rules are one PutBucketLifecycleConfiguration: a new retention is an update in place.
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": ["bucket", "expectedBucketOwner"],
    "aws:fsx/lustreFileSystem:LustreFileSystem": [
        "backupId",
        "copyTagsToBackups",
        "deploymentType",
        "driveCacheType",
        "exportPath",
        "fileSystemTypeVersion",
        "importPath",
        "importedFileChunkSize",
        "kmsKeyId",
        "securityGroupIds",
        "storageType",
        "subnetIds",
    ],
}
"""Pulumi type -> input paths (camelCase; `.` descends into an object) whose change forces a replacement."""

AWS_FORCE_NEW_IF_DECREASED = {"aws:fsx/lustreFileSystem:LustreFileSystem": ["storageCapacity"]}
"""Pulumi type -> inputs that force a replacement when they shrink (a CustomizeDiff ForceNew)."""

AWS_SETS = {
    "aws:eks/nodeGroup:NodeGroup": ["subnetIds"],
    "aws:ec2/vpcEndpoint:VpcEndpoint": ["routeTableIds", "subnetIds", "securityGroupIds"],
}
"""Pulumi type -> set-typed inputs (schema.TypeSet): a new order is no change."""

AWS_AUTONAMED = {"aws:eks/nodeGroup:NodeGroup": "nodeGroupName"}
"""Pulumi type -> its autonamed input: set explicitly, the bridge replaces delete-first."""

KUBERNETES_FORCE_NEW = {
    "every_kind": ["metadata.name", "metadata.namespace"],
    "PersistentVolume": [
        "spec.awsElasticBlockStore",
        "spec.azureDisk",
        "spec.azureFile",
        "spec.cephfs",
        "spec.cinder",
        "spec.csi",
        "spec.fc",
        "spec.flexVolume",
        "spec.flocker",
        "spec.gcePersistentDisk",
        "spec.glusterfs",
        "spec.hostPath",
        "spec.iscsi",
        "spec.local",
        "spec.nfs",
        "spec.photonPersistentDisk",
        "spec.portworxVolume",
        "spec.quobyte",
        "spec.rbd",
        "spec.scaleIO",
        "spec.storageos",
        "spec.vsphereVolume",
    ],
    "PersistentVolumeClaim": ["spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"],
    "Job": ["spec.completions", "spec.parallelism", "spec.selector", "spec.template"],
    "Deployment": ["spec.selector"],
    "Secret": ["type"],
    "Service": ["spec.clusterIP"],
}
"""Kind -> fields whose change replaces the object (`every_kind`: for all); a named object keeping
its name and namespace is replaced delete-first."""
EKS_NODE_GROUP_ROLLS = (
    "launchTemplate.version",
    "launchTemplate.id",
    "launchTemplate.name",
    "releaseVersion",
    "version",
)
"""Node group inputs whose in-place change EKS applies by replacing every node of the group
(terraform-provider-aws internal/service/eks/node_group.go resourceNodeGroupUpdate: a change of
launch_template, release_version or version calls UpdateNodegroupVersion; labels, scaling_config,
taint, update_config and node_repair_config go through UpdateNodegroupConfig, which replaces no node).
Recorded in tests/upstream/terraform-provider-aws-launch-template-versions.yaml."""
