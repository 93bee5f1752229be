"""Shared storage (`storage`): FSx for Lustre and its S3 bucket."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config.aws import check
from config.base import AZ_RE, DNS_LABEL_RE, KeyProblem, Model, Refusal, matches
from estimates.checkpoints import FileSystem
from facts.names import DEFAULT_QUEUE

_HH_MM_RE = re.compile(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]", re.ASCII)
_FSX = "fsx:CreateFileSystem:"

# What a SCRATCH_2 file system cannot have: provisioned throughput (PerUnitStorageThroughput is for
# PERSISTENT types, botocore fsx CreateFileSystemLustreConfiguration), automatic backups (FSx for
# Lustre user guide, using-backups-fsx: not on scratch file systems) and the S3 export a data
# repository association makes (infra.storage links only a persistent file system).
PERSISTENT_ONLY = {
    "throughput_per_tib": "throughputPerTib",
    "backup_retention_days": "backupRetentionDays",
    "daily_backup_start_time": "dailyBackupStartTime",
    "sync_deletes": "syncDeletes",
    "export_retention_days": "exportRetentionDays",
    "export_retention_teams": "exportRetentionTeams",
}

# FSx for Lustre PERSISTENT_2 throughput tiers, MB/s per TiB of storage (FSx API reference,
# CreateFileSystemLustreConfiguration.PerUnitStorageThroughput).
LUSTRE_THROUGHPUT_TIERS = (125, 250, 500, 1000)


_LIFECYCLE = "s3:PutBucketLifecycleConfiguration:LifecycleConfiguration.Rules.[]."
NONCURRENT_DAYS = _LIFECYCLE + "NoncurrentVersionExpiration.NoncurrentDays"
NEWER_NONCURRENT_VERSIONS = _LIFECYCLE + "NoncurrentVersionExpiration.NewerNoncurrentVersions"
EXPIRATION_DAYS = _LIFECYCLE + "Expiration.Days"
EXPORT_RETENTION_DAYS = 30
"""Default days an exported run output stays current in S3. Bounded by default (the house rule):
the S3 copy is a second copy of what /shared keeps (itself backed up daily), so a month covers
fetching a run's results and checkpoints from S3 while every run ever made does not pile up
there; the expired copy then stays recoverable for `bucketLifecycle.noncurrentVersionDays`."""
MAX_LIFECYCLE_RULES = 1000
"""Rules one S3 lifecycle configuration may hold, not adjustable (botocore s3 model,
PutBucketLifecycleConfiguration: "up to 1,000 rules"; tests/upstream/botocore-s3-lifecycle.yaml)."""
SHARED_RULES = 2
"""The data bucket's rules that name no team: bounded-versions and expire-run-outputs (infra.buckets)."""
TEAM_NAME_RULE = "1-40 lowercase letters, digits and hyphens"


class BucketLifecycleConfig(Model):
    """How long every bucket of the stack (training data, image sources) keeps what is no longer
    current. Buckets are versioned: an overwritten or deleted object stays as a noncurrent version,
    and a re-exported checkpoint leaves its previous copy behind, until this rule expires it."""

    noncurrent_version_days: int = Field(
        14, description="Days an overwritten or deleted object's old version is kept (the window to recover it)."
    )
    newer_noncurrent_versions: int | None = Field(
        None,
        description="Keep this many newest old versions of an object beyond noncurrentVersionDays (1-100); default"
        " none.",
    )
    abort_incomplete_upload_days: int = Field(
        7,
        ge=1,
        le=3650,
        description="Days after which an unfinished multipart upload is aborted and its parts deleted.",
    )

    @field_validator("noncurrent_version_days")
    @classmethod
    def _days(cls, v: int) -> int:
        return check(v, NONCURRENT_DAYS)

    @field_validator("newer_noncurrent_versions")
    @classmethod
    def _versions(cls, v: int | None) -> int | None:
        return v if v is None else check(v, NEWER_NONCURRENT_VERSIONS)


class StorageConfig(Model):
    """The shared FSx for Lustre file system (`/shared`) and its S3 bucket for datasets and checkpoints."""

    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = Field(
        "PERSISTENT_2",
        description="PERSISTENT_2 (replicated, backed up, exported to S3) or SCRATCH_2 (nothing durable: no backups,"
        " no export; for throwaway experiments only).",
    )
    storage_capacity_gib: int = Field(1200, description="Capacity in GiB: 1200 or a multiple of 2400.")
    throughput_per_tib: int = Field(250, description="PERSISTENT_2 throughput, MB/s per TiB: 125, 250, 500 or 1000.")
    data_compression: Literal["LZ4", "NONE"] = Field("LZ4", description="LZ4 (default) or NONE.")
    lustre_version: Literal["2.15", "2.12"] = Field("2.15", description="Lustre version: 2.15 or 2.12.")
    backup_retention_days: int = Field(7, description="Days of automatic daily backups kept (1-90); PERSISTENT_2 only.")
    daily_backup_start_time: str = Field("05:00", description="UTC start of the daily backup window, HH:MM.")
    availability_zone: str | None = Field(
        None,
        description="The file system's AZ (one of the VPC's AZs), fixed for its life: a new AZ is a new file system.",
        json_schema_extra={"x-default": "the VPC's first AZ; required once a node group names its AZ"},
    )
    sync_deletes: bool = Field(
        False,
        description="Also import and export DELETED: deleting a file on /shared then deletes it in S3 too.",
    )

    export_retention_days: int | None = Field(
        EXPORT_RETENTION_DAYS,
        description="Days after its last export that a run's output (`/shared/runs/`: checkpoints, logs, exports)"
        " expires from S3; the /shared copy stays (teams' runs: exportRetentionTeams). null: kept in S3 until"
        " deleted (the default with syncDeletes).",
    )
    export_retention_teams: list[str] | None = Field(
        None,
        description="Teams whose run outputs (`teams/<team>/runs/` in S3) also expire after exportRetentionDays, one"
        " lifecycle rule each (at most 998: S3 holds 1,000 rules). A layered aws stack lists every team of its"
        " cluster stack, which refuses a team missing here.",
        json_schema_extra={"x-default": "the stack's `teams` in an all-in-one stack; none in an aws-layer stack"},
    )

    @field_validator("export_retention_days")
    @classmethod
    def _export_days(cls, v: int | None) -> int | None:
        return v if v is None else check(v, EXPIRATION_DAYS)

    @field_validator("export_retention_teams")
    @classmethod
    def _export_teams(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        for name in v:
            if name == DEFAULT_QUEUE or len(name) > 40 or not matches(DNS_LABEL_RE, name):
                said = f"{name!r} is not a team name ({TEAM_NAME_RULE}, not {DEFAULT_QUEUE!r})"
                raise Refusal(said, allowed=TEAM_NAME_RULE)
        if len(set(v)) != len(v):
            raise Refusal(f"{sorted({n for n in v if v.count(n) > 1})} listed twice", "duplicate")
        most = MAX_LIFECYCLE_RULES - SHARED_RULES
        if len(v) > most:
            raise Refusal(
                f"{len(v)} teams need {len(v)} lifecycle rules beside the bucket's {SHARED_RULES}; S3 allows"
                f" {MAX_LIFECYCLE_RULES} per bucket",
                "too-many",
                allowed=f"at most {most} teams",
            )
        return sorted(v)

    @property
    def exports_expire_after(self) -> int | None:
        """Days after which S3 expires a run's exported outputs, or None: never (no export on
        scratch storage; with syncDeletes, a delete on /shared already reaches S3, and S3 is then
        as bounded as the file system)."""
        if not self.persistent:
            return None
        if self.sync_deletes and "export_retention_days" not in self.model_fields_set:
            return None
        return self.export_retention_days

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, v: int) -> int:
        check(v, _FSX + "StorageCapacity")
        if v != 1200 and (v <= 0 or v % 2400):
            raise Refusal(
                f"{v} GiB is not a valid Lustre capacity; use 1200 or a multiple of 2400 (2400, 4800, ...)", "invalid"
            )
        return v

    @field_validator("throughput_per_tib")
    @classmethod
    def _throughput(cls, v: int) -> int:
        check(v, _FSX + "LustreConfiguration.PerUnitStorageThroughput")
        if v not in LUSTRE_THROUGHPUT_TIERS:
            raise Refusal(
                f"{v} MB/s/TiB is not a PERSISTENT_2 tier; valid: {', '.join(map(str, LUSTRE_THROUGHPUT_TIERS))}",
                "not-supported",
            )
        return v

    @field_validator("availability_zone")
    @classmethod
    def _az(cls, v: str | None) -> str | None:
        if v is not None and not matches(AZ_RE, v):
            raise Refusal(f"{v!r} is not an AZ name like us-west-2d", "invalid")
        return v

    @field_validator("backup_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        check(v, _FSX + "LustreConfiguration.AutomaticBackupRetentionDays")
        if not 1 <= v <= 90:
            raise Refusal(
                f"{v} is outside 1..90 days (0 would turn daily backups off; FSx keeps at most 90)", "invalid"
            )
        return v

    @field_validator("daily_backup_start_time")
    @classmethod
    def _start(cls, v: str) -> str:
        check(v, _FSX + "LustreConfiguration.DailyAutomaticBackupStartTime")
        if not matches(_HH_MM_RE, v):
            raise Refusal(f"{v!r} is not a UTC time HH:MM such as 05:00", "invalid")
        return v

    @property
    def persistent(self) -> bool:
        return self.deployment_type == "PERSISTENT_2"

    @property
    def file_system(self) -> FileSystem:
        """The file system as the estimates read it (its throughput: `.mb_per_second`)."""
        return FileSystem(self.storage_capacity_gib, self.persistent, self.throughput_per_tib)

    @model_validator(mode="after")
    def _expiry_deletes(self) -> StorageConfig:
        # With DELETED in the auto-import policy, FSx deletes a file on the file system when its
        # object is deleted in S3 (FSx API reference, AutoImportPolicy): an expiry would then
        # delete the run's only copy on /shared.
        explicit = "export_retention_days" in self.model_fields_set
        if self.sync_deletes and self.export_retention_days is not None and self.persistent and explicit:
            raise KeyProblem(
                "exportRetentionDays",
                f"{self.export_retention_days} days with syncDeletes true: an expiry in S3 would delete the"
                " file on /shared too (auto-import of DELETED)",
                "conflict",
                allowed="null with syncDeletes",
                hint="leave exportRetentionDays out (or null), or set syncDeletes false",
            )
        return self

    @model_validator(mode="after")
    def _scratch(self) -> StorageConfig:
        if self.persistent:
            return self
        for name, key in PERSISTENT_ONLY.items():
            if name in self.model_fields_set and getattr(self, name) not in (False, None):
                raise KeyProblem(
                    key,
                    f"is not applied to a {self.deployment_type} file system (no provisioned throughput, no backups,"
                    " no export to S3 on scratch storage); leave it out, or use deploymentType PERSISTENT_2",
                    "conflict",
                )
        return self
