"""Shared storage: FSx for Lustre on `/shared`, linked to an S3 bucket for datasets and checkpoints.

FSx and EKS each take ten minutes or more to create, so `SharedStorage` takes nothing from
the cluster or the node groups: `pulumi up` creates both in parallel. The security-group
rules that let the nodes in (`allow_clients`) and the Kubernetes volume (`SharedVolume`)
are separate resources declared once both sides exist.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.config import StackConfig
from infra.network import Network
from infra.protection import stateful

# Lustre: TCP 988 for LNet, 1018-1023 for the Lustre services (FSx user guide, "File system
# access control with Amazon VPC"; FACTS.md).
LUSTRE_PORTS = ((988, 988), (1018, 1023))
FSX_CSI_DRIVER = "fsx.csi.aws.com"
PV_NAME = "shared-fsx"


def lustre_subnet_az(cfg: StackConfig) -> str:
    """The AZ of the file system: that of the first accelerated node group (or the VPC's first AZ).

    A Lustre file system lives in one subnet. Node groups in other AZs still mount it, across
    AZs, with more latency and cross-AZ data charges: put training node groups in one AZ.
    """
    if cfg.node_groups:
        return cfg.node_group_az(cfg.node_groups[0])
    return cfg.availability_zones[0]


def data_repository_events(sync_deletes: bool) -> list[str]:
    """S3 <-> Lustre events the data repository association imports and exports."""
    return ["NEW", "CHANGED", "DELETED"] if sync_deletes else ["NEW", "CHANGED"]


class SharedStorage(pulumi.ComponentResource):
    """FSx for Lustre (PERSISTENT_2, daily backups, final backup on delete, protected) in the
    training AZ, its security group, a KMS key, and a versioned, encrypted, private S3 bucket
    linked to the whole file system by a data repository association."""

    file_system: aws.fsx.LustreFileSystem
    bucket: aws.s3.Bucket
    security_group_id: pulumi.Output[str]
    availability_zone: str

    def __init__(self, name: str, cfg: StackConfig, network: Network, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-training-eks:infra:SharedStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = stateful(cfg.protect_stateful_resources, child)
        s = cfg.storage
        cluster = cfg.cluster.name
        tags = {**cfg.tags, "llm-training-eks/cluster": cluster}
        self.availability_zone = lustre_subnet_az(cfg)
        self._name = name
        self._cfg = cfg

        self.key = aws.kms.Key(
            f"{name}-key",
            description=f"FSx for Lustre and S3 training data of {cluster}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=keep,
        )
        aws.kms.Alias(f"{name}-key", name=f"alias/{cluster}-training-data", target_key_id=self.key.key_id, opts=child)

        # bucket_prefix: bucket names are global, the prefix gets a unique suffix.
        self.bucket = aws.s3.Bucket(
            f"{name}-data",
            bucket_prefix=f"{cluster}-training-data-"[:37],
            force_destroy=False,
            tags=tags,
            opts=keep,
        )
        aws.s3.BucketVersioning(
            f"{name}-data",
            bucket=self.bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-data",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms", kms_master_key_id=self.key.arn
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-data",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-data",
            bucket=self.bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-data-tls",
            bucket=self.bucket.id,
            policy=self.bucket.arn.apply(_deny_insecure_transport),
            opts=child,
        )

        sg = aws.ec2.SecurityGroup(
            f"{name}-lustre-sg",
            vpc_id=network.vpc_id,
            description=f"FSx for Lustre of {cluster}: Lustre ports from the cluster nodes only",
            tags={**tags, "Name": f"{cluster}-lustre"},
            opts=child,
        )
        self.security_group_id = sg.id
        # The file servers talk to each other on the Lustre ports.
        self._lustre_rules(f"{name}-self", sg.id, "the file system itself")

        log_group = aws.cloudwatch.LogGroup(
            f"{name}-lustre-logs",
            name=f"/aws/fsx/lustre/{cluster}",
            retention_in_days=cfg.cluster.log_retention_days,
            tags=tags,
            opts=child,
        )

        persistent = s.persistent
        self.file_system = aws.fsx.LustreFileSystem(
            f"{name}-lustre",
            deployment_type=s.deployment_type,
            storage_type="SSD",
            storage_capacity=s.storage_capacity_gib,
            per_unit_storage_throughput=s.throughput_per_tib if persistent else None,
            data_compression_type=s.data_compression,
            file_system_type_version=s.lustre_version,
            subnet_ids=network.private_subnet_ids[self.availability_zone],  # one subnet (a str in pulumi-aws 7)
            security_group_ids=[sg.id],
            kms_key_id=self.key.arn if persistent else None,
            automatic_backup_retention_days=s.backup_retention_days if persistent else None,
            daily_automatic_backup_start_time=s.daily_backup_start_time if persistent else None,
            copy_tags_to_backups=True if persistent else None,
            # The provider defaults to skipping it; a deleted file system leaves its last backup.
            skip_final_backup=False if persistent else None,
            final_backup_tags={**tags, "llm-training-eks/final-backup": "true"} if persistent else None,
            # SCRATCH_2 cannot export: it only imports the datasets from the bucket.
            import_path=None if persistent else self.bucket.bucket.apply(lambda b: f"s3://{b}/datasets"),
            log_configuration=aws.fsx.LustreFileSystemLogConfigurationArgs(
                level="WARN_ERROR", destination=log_group.arn
            ),
            tags={**tags, "Name": f"{cluster}-shared"},
            opts=keep,
        )

        self.association: aws.fsx.DataRepositoryAssociation | None = None
        if persistent:
            events = data_repository_events(s.sync_deletes)
            self.association = aws.fsx.DataRepositoryAssociation(
                f"{name}-s3",
                file_system_id=self.file_system.id,
                file_system_path="/",
                data_repository_path=self.bucket.bucket.apply(lambda b: f"s3://{b}"),
                batch_import_meta_data_on_create=True,
                delete_data_in_filesystem=False,
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=events),
                    auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(events=events),
                ),
                tags=tags,
                opts=child,
            )

        self.register_outputs(
            {
                "fileSystemId": self.file_system.id,
                "bucket": self.bucket.bucket,
                "securityGroupId": sg.id,
            }
        )

    def _lustre_rules(self, name: str, source_sg_id: pulumi.Input[str], who: str) -> None:
        for low, high in LUSTRE_PORTS:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-{low}",
                security_group_id=self.security_group_id,
                referenced_security_group_id=source_sg_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"Lustre {low}-{high} from {who}",
                opts=pulumi.ResourceOptions(parent=self),
            )
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-{low}-out",
                security_group_id=self.security_group_id,
                referenced_security_group_id=source_sg_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"Lustre {low}-{high} to {who}",
                opts=pulumi.ResourceOptions(parent=self),
            )

    def allow_clients(self, client_security_groups: dict[str, pulumi.Input[str]]) -> None:
        """Let the nodes in: Lustre ports from (and, for server callbacks, to) each client security
        group, as separate rules so that the file system never waits for the cluster."""
        for label, sg_id in client_security_groups.items():
            self._lustre_rules(f"{self._name}-from-{label}", sg_id, label)
            # Lustre servers also connect back to clients (LNet), so clients take the ports from FSx.
            for low, high in LUSTRE_PORTS:
                aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-to-{label}-{low}",
                    security_group_id=sg_id,
                    referenced_security_group_id=self.security_group_id,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"Lustre {low}-{high} from the shared file system",
                    opts=pulumi.ResourceOptions(parent=self),
                )


def _deny_insecure_transport(bucket_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


class SharedVolume(pulumi.ComponentResource):
    """The file system as Kubernetes sees it: a static PersistentVolume (FSx CSI driver, `flock`)
    and the ReadWriteMany claim that jobs mount on `/shared`."""

    claim: k8s.core.v1.PersistentVolumeClaim

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        storage: SharedStorage,
        namespace: k8s.core.v1.Namespace,
        claim_name: str,
        provider: k8s.Provider,
        depends_on: list[pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llm-training-eks:infra:SharedVolume", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on or [])
        size = f"{cfg.storage.storage_capacity_gib}Gi"
        fs = storage.file_system
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=PV_NAME, labels={"llm-training-eks/volume": PV_NAME}),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": size},
                volume_mode="Filesystem",
                access_modes=["ReadWriteMany"],
                # flock: training code and tools lock checkpoint and cache files across nodes.
                mount_options=["flock"],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=FSX_CSI_DRIVER,
                    volume_handle=fs.id,
                    volume_attributes={"dnsname": fs.dns_name, "mountname": fs.mount_name},
                ),
            ),
            opts=k8s_opts,
        )
        self.claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=claim_name, namespace=namespace.metadata.name),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=pv.metadata.name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": size}),
            ),
            opts=k8s_opts,
        )
        self.register_outputs({"claim": self.claim.metadata.name})
