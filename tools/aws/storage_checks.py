"""Preflight's day-2 check of the shared file system: an edit FSx cannot make in place is refused
before anything changes.

FSx for Lustre grows a file system but never shrinks it, and its Lustre version and deployment type
are fixed at creation: terraform-provider-aws forces a new file system for each
(tests/upstream/pulumi-replacements-2026-11.yaml), which `protect` then blocks in the middle of the
update, after everything before it has changed; unprotected, `/shared` would be gone. The offline
plan knows no deployed value, so the check reads the live file system (DescribeFileSystems, or
Cloud Control inside `pulumi up`) through the account interface.
"""

from __future__ import annotations

from config.stack import StackConfig
from tools.aws.account import Account
from tools.aws.reservations import Finding

DAY2 = "day2"
RESTORE = "docs/platform.md, Restore from a backup"


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def check_file_system(account: Account, cfg: StackConfig) -> list[Finding]:
    """The storage keys FSx cannot change in place still match the deployed file system."""
    subject = "storage"
    if cfg.layer not in ("all", "aws"):
        return []
    found = account.file_system(cfg.cluster.name)
    if found is None:
        return [Finding(DAY2, subject, True, "not deployed yet")]
    s, out = cfg.storage, []
    if s.storage_capacity_gib < found.capacity_gib:
        out.append(
            f"storage.storageCapacityGib: {s.storage_capacity_gib} GiB is below the deployed file system's"
            f" {found.capacity_gib} GiB ({found.id}); FSx never shrinks a file system, and a new one would be blocked"
            f" by protection mid-update: keep {found.capacity_gib}, or copy what you keep into a new, smaller file"
            f" system from a backup ({RESTORE}) and bring it under the stack"
        )
    if s.lustre_version != found.lustre_version:
        newer = _version(s.lustre_version) > _version(found.lustre_version)
        how = (
            f"FSx upgrades in place: `aws fsx update-file-system --file-system-id {found.id}"
            f" --file-system-type-version {s.lustre_version}`, then `pulumi refresh` before setting it here"
            if newer
            else f"a downgrade needs a new file system from a backup ({RESTORE})"
        )
        out.append(
            f"storage.lustreVersion: the deployed file system ({found.id}) runs Lustre {found.lustre_version}, and"
            " pulumi-aws replaces a file system for another version, which protection blocks mid-update: keep"
            f" {found.lustre_version}; {how}"
        )
    if s.deployment_type != found.deployment_type:
        out.append(
            f"storage.deploymentType: the deployed file system ({found.id}) is {found.deployment_type}; a new"
            f" deployment type is a new file system: keep {found.deployment_type} ({RESTORE})"
        )
    if not out:
        return [Finding(DAY2, subject, True, f"{found.id}: {found.capacity_gib} GiB, Lustre {found.lustre_version}")]
    return [Finding(DAY2, subject, False, line) for line in out]
