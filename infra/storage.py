"""Shared storage: FSx for Lustre on `/shared`, linked to an S3 bucket for datasets and checkpoints.

FSx and EKS each take ten minutes or more to create, so `SharedStorage` takes nothing from
the cluster or the node groups: `pulumi up` creates both in parallel. The security-group
rules that let the nodes in (`allow_clients`) and the Kubernetes volume (`SharedVolume`)
are separate resources declared once both sides exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from config.storage import StorageConfig
from facts.names import (
    DEFAULT_QUEUE,
    RUNS_DIR,
    SCRATCH_EXCEPTION_TAG,
    SHARED_VOLUME,
    VOLUME_LABEL,
    component_type,
    team_sub_path,
)
from infra.buckets import EXPIRY_RULE_ID, Expiry, harden
from infra.context import StackContext
from infra.iam import account_and_partition, data_key_policy, kms_key
from infra.network import Network
from infra.protection import empties_on_delete, policy_exception, stateful

# Lustre: TCP 988 for LNet, 1018-1023 for the Lustre services (FSx for Lustre user guide,
# "File system access control with Amazon VPC").
LUSTRE_PORTS = ((988, 988), (1018, 1023))
FSX_CSI_DRIVER = "fsx.csi.aws.com"


def run_output_expiries(days: int | None, teams: Sequence[str] = ()) -> tuple[Expiry, ...]:
    """The lifecycle rules that expire exported run outputs: the file system links to the bucket
    at its root, so the run directories `runs/<workload>/<runId>/` of the whole file system (a
    stack without teams, and the default tenant's runs) are the key prefix `runs/`, and a team's
    (its pods see `teams/<team>/` as /shared) are `teams/<team>/runs/`. One rule for the shared
    prefix and one per team in `teams` (`storage.exportRetentionTeams`), never one per run or
    workload, so a next run or a removed workload needs no new rule."""
    if days is None:
        return ()
    shared = Expiry(EXPIRY_RULE_ID, f"{RUNS_DIR}/", days)
    return (shared, *(Expiry(team_expiry_rule_id(t), team_runs_prefix(t), days) for t in sorted(teams)))


def team_runs_prefix(team: str) -> str:
    """The S3 key prefix of a team's run outputs."""
    return f"{team_sub_path(team)}/{RUNS_DIR}/"


def team_expiry_rule_id(team: str) -> str:
    """The lifecycle rule of a team's run outputs (at most 60 characters: S3 allows 255)."""
    return f"{EXPIRY_RULE_ID}-{team}"


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
    association: aws.fsx.DataRepositoryAssociation | None

    def __init__(
        self,
        name: str,
        storage: StorageConfig,
        ctx: StackContext,
        network: Network,
        availability_zone: str,
        opts: pulumi.ResourceOptions | None = None,
        expiring_teams: Sequence[str] = (),
    ):
        super().__init__(component_type("infra", "SharedStorage"), name, None, opts)
        self._expiries = run_output_expiries(storage.exports_expire_after, expiring_teams)
        self._name = name
        self._ctx = ctx
        self._tags = ctx.owned_tags
        self.availability_zone = availability_zone
        cluster = ctx.cluster_name
        self.bucket = aws.s3.Bucket(
            f"{name}-data",
            # bucket_prefix: bucket names are global, the prefix gets a unique suffix.
            bucket_prefix=f"{cluster}-training-data-"[:37],
            force_destroy=empties_on_delete(ctx.protect),
            tags=self._tags,
            opts=stateful(ctx.protect, pulumi.ResourceOptions(parent=self)),
        )
        self.key = kms_key(
            f"{name}-key",
            description=f"FSx for Lustre and S3 training data of {cluster}",
            alias=f"{cluster}-training-data",
            protect=ctx.protect,
            parent=self,
            tags=self._tags,
            policy=self._key_policy(),
        )
        self._secure_bucket()
        sg = aws.ec2.SecurityGroup(
            f"{name}-lustre-sg",
            vpc_id=network.vpc_id,
            description=f"FSx for Lustre of {cluster}: Lustre ports from the cluster nodes only",
            tags={**self._tags, "Name": f"{cluster}-lustre"},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.security_group_id = sg.id
        # The file servers talk to each other on the Lustre ports. CreateFileSystem checks that the
        # group allows this, so the file system waits for these rules, not just the empty group
        # (FSx for Lustre guide, "File system access control with Amazon VPC" and troubleshooting).
        self_rules = self._lustre_rules(f"{name}-self", sg.id, "the file system itself")
        self.file_system = self._file_system(storage, network, self_rules)
        self.association = self._s3_link(storage.sync_deletes) if storage.persistent else None
        self.register_outputs(
            {
                "fileSystemId": self.file_system.id,
                "bucket": self.bucket.bucket,
                "securityGroupId": sg.id,
            }
        )

    def _key_policy(self) -> pulumi.Output[str]:
        """The account administers the key (the default key policy), and the file system's S3
        service-linked role may use it through S3 on this bucket's objects: without that, import
        from and export to an SSE-KMS bucket fail with KMS AccessDenied (FSx for Lustre guide,
        "Working with server-side encrypted Amazon S3 buckets")."""
        return pulumi.Output.all(account_and_partition(self), self.bucket.arn).apply(
            lambda a: data_key_policy(account_id=a[0][0], partition=a[0][1], region=self._ctx.region, bucket_arn=a[1])
        )

    def _secure_bucket(self) -> None:
        """Versioned with bounded old versions, SSE-KMS, private, owner-enforced, TLS only; protected
        like the file system."""
        name, child, bucket = self._name, pulumi.ResourceOptions(parent=self), self.bucket
        lifecycle = self._ctx.bucket_lifecycle
        harden(f"{name}-data", bucket, child, lifecycle, kms_key_arn=self.key.arn, expiries=self._expiries)

    def _file_system(
        self, s: StorageConfig, network: Network, rules: list[pulumi.Resource]
    ) -> aws.fsx.LustreFileSystem:
        name, cluster, tags = self._name, self._ctx.cluster_name, self._tags
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-lustre-logs",
            name=f"/aws/fsx/lustre/{cluster}",
            retention_in_days=self._ctx.log_retention_days,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        persistent = s.persistent
        return aws.fsx.LustreFileSystem(
            f"{name}-lustre",
            deployment_type=s.deployment_type,
            storage_type="SSD",
            storage_capacity=s.storage_capacity_gib,
            per_unit_storage_throughput=s.throughput_per_tib if persistent else None,
            data_compression_type=s.data_compression,
            file_system_type_version=s.lustre_version,
            subnet_ids=network.private_subnet_ids[self.availability_zone],  # one subnet (a str in pulumi-aws 7)
            security_group_ids=[self.security_group_id],
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
            tags={
                **tags,
                "Name": f"{cluster}-shared",
                **policy_exception(
                    SCRATCH_EXCEPTION_TAG,
                    None if persistent else f"stack config storage.deploymentType {s.deployment_type}",
                ),
            },
            opts=stateful(self._ctx.protect, pulumi.ResourceOptions(parent=self, depends_on=rules)),
        )

    def _s3_link(self, sync_deletes: bool) -> aws.fsx.DataRepositoryAssociation:
        """The whole file system linked to the bucket: imports and exports new and changed files."""
        events = data_repository_events(sync_deletes)
        return aws.fsx.DataRepositoryAssociation(
            f"{self._name}-s3",
            file_system_id=self.file_system.id,
            file_system_path="/",
            data_repository_path=self.bucket.bucket.apply(lambda b: f"s3://{b}"),
            batch_import_meta_data_on_create=True,
            delete_data_in_filesystem=False,
            s3=aws.fsx.DataRepositoryAssociationS3Args(
                auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=events),
                auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(events=events),
            ),
            tags=self._tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _lustre_rules(self, name: str, source_sg_id: pulumi.Input[str], who: str) -> list[pulumi.Resource]:
        """The Lustre ports between this file system's group and another (or itself), both ways."""
        directions: tuple[tuple[Any, str, str], ...] = (
            (aws.vpc.SecurityGroupIngressRule, "", "from"),
            (aws.vpc.SecurityGroupEgressRule, "-out", "to"),
        )
        return [
            rule(
                f"{name}-{low}{suffix}",
                security_group_id=self.security_group_id,
                referenced_security_group_id=source_sg_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"Lustre {low}-{high} {way} {who}",
                opts=pulumi.ResourceOptions(parent=self),
            )
            for low, high in LUSTRE_PORTS
            for rule, suffix, way in directions
        ]

    def allow_clients(self, client_security_groups: dict[str, pulumi.Input[str]]) -> list[pulumi.Resource]:
        """Let the nodes in: Lustre ports from (and, for server callbacks, to) each client security
        group, as separate rules so that the file system never waits for the cluster. Returns the
        rules, for what mounts the file system to wait on."""
        rules: list[pulumi.Resource] = []
        for label, sg_id in client_security_groups.items():
            rules += self._lustre_rules(f"{self._name}-from-{label}", sg_id, label)
            # Lustre servers also connect back to clients (LNet), so clients take the ports from FSx.
            for low, high in LUSTRE_PORTS:
                rule = aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-to-{label}-{low}",
                    security_group_id=sg_id,
                    referenced_security_group_id=self.security_group_id,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"Lustre {low}-{high} from the shared file system",
                    opts=pulumi.ResourceOptions(parent=self),
                )
                rules.append(rule)
        return rules


@dataclass(frozen=True)
class FileSystemRef:
    """What Kubernetes needs to mount the file system: from the `SharedStorage` of the same
    stack, or from the aws layer's outputs."""

    id: pulumi.Input[str]
    dns_name: pulumi.Input[str]
    mount_name: pulumi.Input[str]


class SharedVolume(pulumi.ComponentResource):
    """The file system as Kubernetes sees it: per tenant namespace, a static PersistentVolume (FSx
    CSI driver, `flock`) and the ReadWriteMany claim that its jobs mount on `/shared`.

    A claim is namespaced and binds one volume, so each team's namespace gets its own pair over
    the same file system; its pods mount the claim with `subPath: teams/<team>` (infra.tenancy),
    so a team's runs see their own directory as `/shared` and never another team's data by
    accident. Why a sub-path and not a volume of the sub-directory (`mountname` set to
    `<mountname>/teams/<team>`, a Lustre fileset mount, which the driver would pass through
    verbatim): the directory must exist before a fileset mount, and only a mount of the whole
    file system could create it; the kubelet creates a missing sub-path itself. Each volume
    has its own `volumeHandle` (Kubernetes: it identifies the volume uniquely); the driver
    (v1.9.0) uses the handle only to key its in-flight calls, since it mounts every pod's
    volume in NodePublishVolume (no staging, no attach). A stack without teams keeps its one
    volume and claim, with their names and handle, over the whole file system.
    """

    claims: dict[str, k8s.core.v1.PersistentVolumeClaim]
    """Tenant (team, or `default`) -> its claim."""

    def __init__(
        self,
        name: str,
        capacity_gib: int,
        file_system: FileSystemRef,
        namespaces: Mapping[str, k8s.core.v1.Namespace],
        claim_name: str,
        provider: k8s.Provider,
        depends_on: list[pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "SharedVolume"), name, None, opts)
        self._name, self._size, self._fs = name, f"{capacity_gib}Gi", file_system
        self._opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on or [])
        self.claims = {key: self._claim(key, namespace, claim_name) for key, namespace in namespaces.items()}
        self.register_outputs({"claims": {key: c.metadata.name for key, c in self.claims.items()}})

    def _claim(self, key: str, namespace: k8s.core.v1.Namespace, claim_name: str) -> k8s.core.v1.PersistentVolumeClaim:
        fs, size = self._fs, self._size
        default = key == DEFAULT_QUEUE
        prefix = self._name if default else f"{self._name}-{key}"
        pv = k8s.core.v1.PersistentVolume(
            f"{prefix}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=SHARED_VOLUME if default else f"{SHARED_VOLUME}-{key}", labels={VOLUME_LABEL: SHARED_VOLUME}
            ),
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
                    volume_handle=fs.id if default else pulumi.Output.concat(fs.id, "::", key),
                    volume_attributes={"dnsname": fs.dns_name, "mountname": fs.mount_name},
                ),
            ),
            opts=self._opts,
        )
        return k8s.core.v1.PersistentVolumeClaim(
            f"{prefix}-pvc",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=claim_name, namespace=namespace.metadata.name),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=pv.metadata.name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": size}),
            ),
            # The request is the capacity when the claim is made, and never follows it: a static
            # volume's claim cannot grow (the PersistentVolumeClaimResize admission plugin refuses a
            # larger request unless the StorageClass allows expansion; a claim of "" has none), so
            # growing the file system would fail the update here. The volume's capacity follows the
            # file system; a request below it binds, and the mount sees the whole file system.
            opts=pulumi.ResourceOptions.merge(
                self._opts, pulumi.ResourceOptions(ignore_changes=["spec.resources.requests.storage"])
            ),
        )
