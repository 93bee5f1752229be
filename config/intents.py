"""What a key a stack file does not have was meant to do, and the key (or fact) that does it here.

People arrive with keys from the tools they know: eksctl's ClusterConfig, terraform-aws-eks and
terraform-aws-vpc inputs (written camelCase here: `instance_types` -> `instanceTypes`), the Data
on EKS Trainium blueprint's variables, the FSx API's own names. A "did you mean" by spelling
would point `amiType` nowhere useful; these hints say where the intent lives instead. Each
hint lists the stack-file keys it names (`use`) and where its key comes from (`sources`):
tests/unit/test_config_messages.py resolves every `use` against the models and finds every key
in the recorded upstream key sets (tests/upstream/*-config-keys.yaml), so a hint cannot point
at a renamed key or answer a key nobody writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from config.cluster import ClusterConfig, SystemNodeGroupConfig
from config.network import NetworkConfig
from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from config.storage import StorageConfig

EKSCTL, TF_EKS, TF_VPC, DOEKS, FSX = "eksctl", "terraform-aws-eks", "terraform-aws-vpc", "data-on-eks", "fsx-api"
OWN = "this project"
"""A key people write from this project's own vocabulary: a bucket key (`storage.bucketName`,
`storage.dataBucket`) named after the stack output `dataBucket`, though the stack creates its bucket."""


@dataclass(frozen=True)
class Intent:
    """Where the intent of an unknown key lives: `says` names the keys in `use`."""

    says: str
    use: tuple[str, ...]
    sources: tuple[str, ...]


def _same(says: str, use: tuple[str, ...], *keys: tuple[str, tuple[str, ...]]) -> dict[str, Intent]:
    return {key: Intent(says, use, sources) for key, sources in keys}


_BUCKET = (
    "the stack creates its own bucket (stack output dataBucket) and links it to /shared: put data under"
    " s3://<dataBucket>/datasets/ and it appears at /shared/datasets/"
)
_EFA_AND_AMI = "derived from instanceType (AL2023 accelerated AMI, one EFA device per network card); not set here"
_ONE_TYPE = (
    "one instance type per node group: instanceType (EFA layout and pod resources follow from it); add a group per type"
)
_ROOT = "rootVolumeSizeGiB (an encrypted gp3 root volume; the instance store is striped for data)"

_NODE_GROUP: dict[str, Intent] = {
    **_same(_ONE_TYPE, ("nodeGroups[].instanceType",), ("instanceTypes", (EKSCTL, TF_EKS))),
    **_same(
        "the AMI is " + _EFA_AND_AMI,
        ("nodeGroups[].instanceType",),
        ("amiType", (TF_EKS,)),
        ("amiFamily", (EKSCTL,)),
        ("ami", (EKSCTL,)),
        ("amiId", (TF_EKS,)),
    ),
    **_same(
        "EFA is always on: " + _EFA_AND_AMI,
        ("nodeGroups[].instanceType",),
        ("efaEnabled", (EKSCTL,)),
        ("enableEfaSupport", (TF_EKS,)),
    ),
    **_same(
        "use releaseVersion: the node group's AMI release, pinned by default to the newest whose accelerator"
        " driver fits the images run on it",
        ("nodeGroups[].releaseVersion",),
        ("amiReleaseVersion", (TF_EKS,)),
    ),
    **_same(
        "use " + _ROOT,
        ("nodeGroups[].rootVolumeSizeGiB",),
        ("diskSize", (TF_EKS,)),
        ("volumeSize", (EKSCTL,)),
        ("volumeType", (EKSCTL,)),
        ("volumeEncrypted", (EKSCTL,)),
        ("blockDeviceMappings", (TF_EKS,)),
    ),
    **_same(
        "use capacity.type: on-demand, reservation, capacity-block or spot",
        ("nodeGroups[].capacity.type",),
        ("capacityType", (TF_EKS,)),
        ("spot", (EKSCTL,)),
        ("instanceMarketOptions", (EKSCTL, TF_EKS)),
    ),
    **_same(
        "use capacity.reservationId with capacity.type reservation or capacity-block",
        ("nodeGroups[].capacity.reservationId", "nodeGroups[].capacity.type"),
        ("capacityReservation", (EKSCTL,)),
        ("capacityReservationSpecification", (TF_EKS,)),
    ),
    **_same("use desiredSize", ("nodeGroups[].desiredSize",), ("desiredCapacity", (EKSCTL,))),
    **_same(
        "one AZ per group, for EFA collectives: use availabilityZone; the stack picks its private subnet there",
        ("nodeGroups[].availabilityZone",),
        ("availabilityZones", (EKSCTL,)),
        ("subnets", (EKSCTL,)),
        ("subnetIds", (TF_EKS,)),
    ),
    **_same(
        "use placementGroup (true/false), or capacity.placementGroupName for capacity made in a placement group",
        ("nodeGroups[].placementGroup", "nodeGroups[].capacity.placementGroupName"),
        ("placement", (EKSCTL, TF_EKS)),
        ("createPlacementGroup", (TF_EKS,)),
    ),
    **_same(
        "the taints follow from instanceType (aws.amazon.com/neuron or nvidia.com/gpu, NoSchedule); extra node"
        " labels go in labels",
        ("nodeGroups[].labels",),
        ("taints", (EKSCTL, TF_EKS)),
    ),
    **_same("tags go in the top-level tags (every AWS resource)", ("tags",), ("tags", (EKSCTL, TF_EKS))),
    **_same("use maxUnavailable", ("nodeGroups[].maxUnavailable",), ("updateConfig", (EKSCTL, TF_EKS))),
    **_same("use nodeRepair", ("nodeGroups[].nodeRepair",), ("nodeRepairConfig", (EKSCTL, TF_EKS))),
    **_same(
        "nodes take no SSH key; a shell goes through SSM Session Manager (the node role allows it)",
        (),
        ("ssh", (EKSCTL,)),
        ("keyName", (TF_EKS,)),
        ("remoteAccess", (TF_EKS,)),
    ),
}

_SYSTEM_GROUP: dict[str, Intent] = {
    **_same(
        "one instance type: instanceType (general purpose)",
        ("systemNodeGroup.instanceType",),
        ("instanceTypes", (EKSCTL, TF_EKS)),
    ),
    **_same(
        "the AMI follows from instanceType (AL2023 standard); not set here",
        ("systemNodeGroup.instanceType",),
        ("amiType", (TF_EKS,)),
        ("amiFamily", (EKSCTL,)),
    ),
    **_same("use " + _ROOT, ("systemNodeGroup.rootVolumeSizeGiB",), ("diskSize", (TF_EKS,)), ("volumeSize", (EKSCTL,))),
    **_same("use desiredSize", ("systemNodeGroup.desiredSize",), ("desiredCapacity", (EKSCTL,))),
}

_PUBLIC = (
    "the public endpoint is on exactly when cluster.publicAccessCidrs lists networks (the private one always"
    " is): use cluster.publicAccessCidrs"
)
_LOGS = "every control-plane log type is on; keep them with logRetentionDays"
_CLUSTER: dict[str, Intent] = {
    **_same(
        "use kubernetesVersion",
        ("cluster.kubernetesVersion",),
        ("version", (EKSCTL,)),
        ("eksClusterVersion", (DOEKS,)),
    ),
    **_same("the region is aws:region (the AWS provider's)", ("aws:region",), ("region", (EKSCTL, TF_EKS, DOEKS))),
    **_same(
        _PUBLIC,
        ("cluster.publicAccessCidrs",),
        ("endpointPublicAccess", (TF_EKS,)),
        ("publicAccess", (EKSCTL,)),
        ("clusterEndpoints", (EKSCTL,)),
        ("endpointPublicAccessCidrs", (TF_EKS,)),
        ("publicAccessCIDRs", (EKSCTL,)),
    ),
    **_same(
        "the private endpoint is always on; who reaches it: privateAccessCidrs, privateAccessSecurityGroupIds",
        ("cluster.privateAccessCidrs", "cluster.privateAccessSecurityGroupIds"),
        ("endpointPrivateAccess", (TF_EKS,)),
        ("privateAccess", (EKSCTL,)),
    ),
    **_same(
        _LOGS,
        ("cluster.logRetentionDays",),
        ("enabledLogTypes", (TF_EKS,)),
        ("clusterLogging", (EKSCTL,)),
        ("enableTypes", (EKSCTL,)),
        ("cloudwatchLogGroupRetentionInDays", (TF_EKS,)),
        ("logRetentionInDays", (EKSCTL,)),
    ),
    **_same(
        "the identity running Pulumi is admin already; other admins go in adminPrincipalArns",
        ("cluster.adminPrincipalArns",),
        ("accessEntries", (TF_EKS, DOEKS)),
        ("enableClusterCreatorAdminPermissions", (TF_EKS,)),
        ("accessConfig", (EKSCTL,)),
    ),
    **_same(
        "the stack creates its own KMS key for Kubernetes secrets; not set here",
        (),
        ("encryptionConfig", (TF_EKS,)),
        ("createKmsKey", (TF_EKS,)),
        ("secretsEncryption", (EKSCTL,)),
    ),
    **_same(
        "subnets are the network's: network.vpcId and network.privateSubnetIds for an existing VPC",
        ("network.vpcId", "network.privateSubnetIds"),
        ("vpcId", (TF_EKS,)),
        ("subnetIds", (TF_EKS,)),
        ("controlPlaneSubnetIds", (TF_EKS,)),
    ),
    **_same("EKS add-on versions go in addons.eksAddonVersions", ("addons.eksAddonVersions",), ("addons", (TF_EKS,))),
}

_NAT = "use natGateways: single or per-az"
_NETWORK: dict[str, Intent] = {
    **_same("use availabilityZones", ("network.availabilityZones",), ("azs", (TF_VPC,))),
    **_same(
        "a created VPC's subnets are carved from cidr; an existing VPC's go in privateSubnetIds/publicSubnetIds",
        ("network.cidr", "network.privateSubnetIds", "network.publicSubnetIds"),
        ("privateSubnets", (TF_VPC,)),
        ("publicSubnets", (TF_VPC,)),
        ("subnets", (EKSCTL,)),
        ("subnetIds", (TF_EKS,)),
    ),
    **_same(
        _NAT,
        ("network.natGateways",),
        ("enableNatGateway", (TF_VPC,)),
        ("singleNatGateway", (TF_VPC,)),
        ("oneNatGatewayPerAz", (TF_VPC,)),
        ("nat", (EKSCTL,)),
    ),
    **_same("use flowLogs", ("network.flowLogs",), ("enableFlowLog", (TF_VPC,))),
    **_same("use vpcId", ("network.vpcId",), ("id", (EKSCTL,))),
    **_same(
        "one VPC CIDR: use cidr (/16 to /20)",
        ("network.cidr",),
        ("vpcCidr", (DOEKS,)),
        ("secondaryCidrBlocks", (TF_VPC, DOEKS)),
    ),
    **_same(
        _PUBLIC,
        ("cluster.publicAccessCidrs",),
        ("clusterEndpoints", (EKSCTL,)),
        ("publicAccessCIDRs", (EKSCTL,)),
    ),
}

_STORAGE: dict[str, Intent] = {
    **_same(_BUCKET, (), ("bucketName", (OWN,)), ("bucket", (OWN,)), ("dataBucket", (OWN,)), ("s3Bucket", (OWN,))),
    **_same("use storageCapacityGib", ("storage.storageCapacityGib",), ("storageCapacity", (FSX,))),
    **_same("use throughputPerTib", ("storage.throughputPerTib",), ("perUnitStorageThroughput", (FSX,))),
    **_same("use backupRetentionDays", ("storage.backupRetentionDays",), ("automaticBackupRetentionDays", (FSX,))),
    **_same("use dailyBackupStartTime", ("storage.dailyBackupStartTime",), ("dailyAutomaticBackupStartTime", (FSX,))),
    **_same("use lustreVersion", ("storage.lustreVersion",), ("fileSystemTypeVersion", (FSX,))),
    **_same("use dataCompression", ("storage.dataCompression",), ("dataCompressionType", (FSX,))),
    **_same(
        "the whole file system is linked to s3://<dataBucket>/; syncDeletes decides whether deletes reach S3",
        ("storage.syncDeletes",),
        ("importPath", (FSX,)),
        ("exportPath", (FSX,)),
    ),
}

_TOP: dict[str, Intent] = {
    **_same(
        "node groups go in nodeGroups (EKS managed node groups, one instance type each)",
        ("nodeGroups",),
        ("managedNodeGroups", (EKSCTL,)),
        ("eksManagedNodeGroups", (TF_EKS,)),
    ),
    **_same(
        "the cluster name goes in cluster.name, the region in aws:region",
        ("cluster.name", "aws:region"),
        ("metadata", (EKSCTL,)),
    ),
    **_same("use cluster.name", ("cluster.name",), ("name", (TF_EKS, DOEKS))),
    **_same(
        "use cluster.kubernetesVersion",
        ("cluster.kubernetesVersion",),
        ("kubernetesVersion", (TF_EKS,)),
        ("eksClusterVersion", (DOEKS,)),
    ),
    **_same("VPC settings go in network", ("network",), ("vpc", (EKSCTL,))),
    **_same("use network.availabilityZones", ("network.availabilityZones",), ("availabilityZones", (EKSCTL,))),
    **_same("use network.cidr", ("network.cidr",), ("vpcCidr", (DOEKS,)), ("cidr", (TF_VPC,))),
    **_same("use network.vpcId", ("network.vpcId",), ("vpcId", (TF_EKS,))),
    **_same(
        _PUBLIC,
        ("cluster.publicAccessCidrs",),
        ("endpointPublicAccess", (TF_EKS,)),
        ("endpointPublicAccessCidrs", (TF_EKS,)),
    ),
    **_same(
        "control-plane logs: cluster.logRetentionDays",
        ("cluster.logRetentionDays",),
        ("cloudWatch", (EKSCTL,)),
        ("cloudwatchLogGroupRetentionInDays", (TF_EKS,)),
    ),
    **_same(
        "other cluster admins go in cluster.adminPrincipalArns",
        ("cluster.adminPrincipalArns",),
        ("accessEntries", (TF_EKS, DOEKS)),
    ),
    **_same(
        "the MPI operator is always installed; pin it with addons.mpiOperatorVersion",
        ("addons.mpiOperatorVersion",),
        ("enableMpiOperator", (DOEKS,)),
    ),
    **_same(
        "the shared FSx for Lustre file system is always created; size it in storage",
        ("storage",),
        ("enableFsxForLustre", (DOEKS,)),
    ),
    **_same(
        "node group sizes go in nodeGroups[].minSize and desiredSize",
        ("nodeGroups[].minSize", "nodeGroups[].desiredSize"),
        ("trn132XlMinSize", (DOEKS,)),
        ("trn132XlDesiredSize", (DOEKS,)),
    ),
    **_same(_BUCKET, (), ("bucketName", (OWN,)), ("dataBucket", (OWN,))),
}

INTENTS: dict[type[BaseModel], dict[str, Intent]] = {
    StackConfig: _TOP,
    ClusterConfig: _CLUSTER,
    NetworkConfig: _NETWORK,
    NodeGroupConfig: _NODE_GROUP,
    SystemNodeGroupConfig: _SYSTEM_GROUP,
    StorageConfig: _STORAGE,
}
"""Per model: unknown key (camelCase) -> where its intent lives."""


def intent(model: type[BaseModel], key: str) -> str | None:
    """What to write instead of the unknown `key` of `model`, if the key has a known intent
    (looked up as written and camelCased: terraform users write `instance_types`)."""
    hints = INTENTS.get(model, {})
    found = hints.get(key) or hints.get(to_camel(key))
    return found.says if found else None
