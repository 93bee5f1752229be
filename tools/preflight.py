"""Preflight: ask the AWS account, before anything is created, whether the stack can run.

    python -m tools.preflight (--stack NAME | --config-file PATH) [--profile P] [--region R]
                              [--margin-hours N]

Checks, per accelerated node group: the instance type is offered in its AZ; it supports EFA
with the catalog's number of EFA interfaces; its capacity reservation or Capacity Block (see
tools/aws/reservations.py) exists, is for the right type and AZ, was made in the placement group the
config names (or none), can hold the node group (its free instances plus those the group's own
instances already use, so day 2 is not refused), is in a state that allows the group's desired
size (a scheduled block is fine at 0), does not end within the group's margin
(`capacity.endMarginHours`: by default 24 h for a reservation, 0 for a Capacity Block, whose own
scale-down drains it), and (Capacity Blocks) ends when `endsAt` says, with the scale-down after the
block's start (config refuses one already past); groups sharing a reservation fit it together; a
Capacity Block group is at desired size 0 before its Kubernetes version or AMI release changes
(either rolls its nodes); the identity running Pulumi is not listed again in `adminPrincipalArns`
(EKS already made it admin); and the account's On-Demand (and, for Spot groups, Spot) vCPU quota of
each instance family covers the node groups at their desired size, with a warning (and the request that
fixes it) when it does not reach their maximum size (tools/aws/quotas.py); with an existing VPC, that the
VPC resolves DNS and gives hostnames, each subnet exists in that VPC and in the AZ it is keyed by
with the free addresses the plan needs, and its named route tables and security groups are in it;
and that each named placement group exists, is a cluster group and is in its node group's AZ
(tools/aws/network_checks.py).

A deployed stack's day-2 edits are held against what is deployed: `cluster.kubernetesVersion`
moves one minor version at a time, forward (the system node group's version, which follows the
control plane); an upgrade never drains servers whose replicas start slower than EKS's 15-minute
eviction window (tools/aws/upgrade_checks.py); the file system is never asked to shrink or to
change its Lustre version or deployment type (tools/aws/storage_checks.py).

Exit 0 when every check passes (warnings included, printed to stderr as `WARN` lines), 1 with one
line per failing check, 2 on bad config (a day-2 edit the deployed stack cannot take included) or
when AWS cannot be asked (no network, no or expired credentials, a denied read): one line, no
traceback.
The command line asks with boto3 (`--profile`, default the environment's, as the stack's AWS
provider; the region is the stack's `aws:region`). The same checks run at the start of a real
`pulumi preview`/`up` (`gate`, from `__main__.py`) through the stack's own AWS provider
(tools/aws/account_invokes.py), never under mocks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings

from config import amis
from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from facts import instances
from facts.names import SYSTEM_NODE_GROUP
from facts.quotas import QUOTA_CODES
from infra.context import StackContext, aws_provider
from infra.nodegroups import nodeadm_user_data
from tools.aws.account import Account, AccountError, DeployedNodeGroup
from tools.aws.account_boto3 import Boto3Account
from tools.aws.account_invokes import ProviderAccount
from tools.aws.network_checks import check_placement_groups, check_vpc
from tools.aws.quotas import check_quotas
from tools.aws.reservations import Finding, check_reservations
from tools.aws.storage_checks import check_file_system
from tools.aws.upgrade_checks import check_upgrade_drains
from tools.cli import add_stack_arguments, load_stack_config

DAY2 = "day2"
"""Findings of this kind refuse a config edit the deployed stack cannot take in place (exit 2)."""

__all__ = ["QUOTA_CODES", "Finding", "check_quotas", "check_reservations", "gate", "main", "run_checks"]


def check_offerings(account: Account, cfg: StackConfig) -> list[Finding]:
    """Each node group's instance type is offered in its AZ."""
    out = []
    for ng in cfg.node_groups:
        az = cfg.node_group_az(ng)
        azs = account.offered_azs(ng.instance_type)
        subject = f"nodeGroups[{ng.name}]"
        if az in azs:
            out.append(Finding("offering", subject, True, f"{ng.instance_type} is offered in {az}"))
            continue
        hint = f"; offered in {', '.join(sorted(azs))}" if azs else f"; not offered anywhere in {cfg.region}"
        message = f"{ng.instance_type} is not offered in {az}{hint}: set availabilityZone to one of those"
        out.append(Finding("offering", subject, False, message))
    return out


def check_efa(account: Account, cfg: StackConfig) -> list[Finding]:
    """Each instance type supports EFA with the number of interfaces the launch template makes."""
    out = []
    for itype in sorted({ng.instance_type for ng in cfg.node_groups}):
        want = instances.get(itype).efa_interfaces
        have = account.efa_interfaces(itype)
        if have == want:
            out.append(Finding("efa", itype, True, f"EFA supported with {have} interfaces"))
        else:
            message = f"EC2 reports {have} EFA interfaces, the catalog expects {want}: fix facts/instances.py"
            out.append(Finding("efa", itype, False, message))
    return out


def check_capacity_block_upgrades(account: Account, cfg: StackConfig) -> list[Finding]:
    """EKS updates a Capacity Block node group only at desired size 0 (EKS user guide,
    capacity-blocks-mng): an update that rolls the nodes of a deployed block group that still runs
    some would evict its training mid-block. Refused while it has nodes: a Kubernetes version change,
    an AMI release change (a releaseVersion edit, or the newest release moving when facts/amis.py
    is refreshed), and any launch template edit (compared with the version the group runs); the way
    through is after the block, or at desired size 0 first."""
    out = []
    for ng in cfg.node_groups:
        if ng.capacity.type != "capacity-block":
            continue
        subject = f"nodeGroups[{ng.name}]"
        found = account.node_group(cfg.cluster.name, ng.name)
        if found is None:
            out.append(Finding("upgrade", subject, True, "not deployed yet"))
            continue
        out.append(_block_roll(account, found, cfg, ng, subject))
    return out


def _block_roll(
    account: Account, found: DeployedNodeGroup, cfg: StackConfig, ng: NodeGroupConfig, subject: str
) -> Finding:
    version, desired = found.version, found.desired
    pinned = amis.pinned_release(cfg, ng)
    release = pinned.release_version if pinned else None
    way = "`pulumi up` with desiredSize: 0 and minSize: 0 first (or wait for the block's end), then"
    if version != cfg.cluster.kubernetes_version and desired > 0:
        message = (
            f"runs {desired} nodes on Kubernetes {version}; EKS upgrades a Capacity Block group only at desired"
            f" size 0: keep cluster.kubernetesVersion at {version} and {way} raise it to"
            f" {cfg.cluster.kubernetes_version}"
        )
        return Finding("upgrade", subject, False, message)
    if found.release_version and release and found.release_version != release and desired > 0:
        message = (
            f"runs {desired} nodes on AMI release {found.release_version}; this update moves it to {release}, which"
            f" rolls every node of the group under its training (EKS updates a Capacity Block group only at desired"
            f" size 0): set nodeGroups[].releaseVersion: {found.release_version} until the block ends, or {way}"
            f" let it move to {release}"
        )
        return Finding("upgrade", subject, False, message)
    edits = _template_edits(account, found, ng) if desired > 0 else []
    if edits:
        message = (
            f"runs {desired} nodes; this update changes its launch template ({'; '.join(edits)}): a new template"
            " version, which rolls every node of the group under its training (EKS updates a Capacity Block group"
            f" only at desired size 0): make the edit after the block ends, or {way} make it"
        )
        return Finding("upgrade", subject, False, message)
    return Finding("upgrade", subject, True, f"Kubernetes {version}, AMI {found.release_version}, desired {desired}")


def _template_edits(account: Account, found: DeployedNodeGroup, ng: NodeGroupConfig) -> list[str]:
    """What this update changes in the group's launch template, of the fields config alone sets
    (infra/nodegroups.py `_launch_template`), against the version the deployed group runs. Any change
    is a new version (EC2 CreateLaunchTemplateVersion, tools/offline/versions.py), which the node group
    takes with UpdateNodegroupVersion: every node replaced. Empty when nothing changes or the deployed
    version cannot be read."""
    if found.launch_template is None:
        return []
    deployed = account.launch_template(*found.launch_template)
    if deployed is None:
        return []
    reservation = ng.capacity.reservation_id
    pairs = [
        ("rootVolumeSizeGiB", deployed.root_volume_gib, ng.root_volume_size_gib),
        ("capacity.reservationId", deployed.reservation_id, reservation),
        ("user data (the NVMe layout)", deployed.user_data, nodeadm_user_data(ng.instance)),
        ("market type", deployed.market_type, "capacity-block"),
    ]
    return [f"{key} {was} -> {now}" if len(str(now)) < 40 else key for key, was, now in pairs if was != now]


def _minor(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor.split(".")[0] or 0)


def check_version_step(account: Account, cfg: StackConfig) -> list[Finding]:
    """EKS updates a cluster one minor version at a time, never back (EKS user guide,
    update-cluster; tests/upstream/aws-eks-update-cluster-2024-12.yaml). The deployed version is
    the system node group's: it follows the control plane in every update of this program, and
    UpdateClusterVersion needs every managed group at the cluster's version before it moves."""
    subject = "cluster.kubernetesVersion"
    found = account.node_group(cfg.cluster.name, SYSTEM_NODE_GROUP)
    if found is None:
        return [Finding(DAY2, subject, True, "not deployed yet")]
    deployed, wanted = _minor(found.version), _minor(cfg.cluster.kubernetes_version)
    step = (wanted[0] - deployed[0]) * 100 + wanted[1] - deployed[1]
    if 0 <= step <= 1:
        return [Finding(DAY2, subject, True, f"{found.version} -> {cfg.cluster.kubernetes_version}")]
    if step < 0:
        message = (
            f"{cfg.cluster.kubernetes_version} is below the deployed {found.version}; EKS never downgrades a cluster"
        )
    else:
        nxt = f"{deployed[0]}.{deployed[1] + 1}"
        message = (
            f"{cfg.cluster.kubernetes_version} is {step} minor versions past the deployed {found.version}; EKS updates"
            f" one minor version at a time: set {nxt} and `pulumi up`, then the next one"
        )
    return [Finding(DAY2, subject, False, message)]


def check_admin_entries(account: Account, cfg: StackConfig) -> list[Finding]:
    """pulumi-eks creates the cluster with bootstrapClusterCreatorAdminPermissions, so the
    identity running `pulumi up` already has an access entry; listing it again in
    adminPrincipalArns makes CreateAccessEntry fail with ResourceInUseException
    (tests/upstream/pulumi-eks-4.4.0.yaml; botocore's eks CreateAccessEntry errors)."""
    arn = account.caller_arn()
    # An assumed role's session ARN names the role: arn:aws:sts::<account>:assumed-role/<role>/<session>.
    account_part, _, rest = arn.partition(":assumed-role/") if ":assumed-role/" in arn else (arn, "", "")
    role = rest.split("/", 1)[0] if rest else None
    role_prefix = account_part.replace(":sts:", ":iam:") + ":role/"
    same = [
        a
        for a in cfg.cluster.admin_principal_arns
        if a == arn or (role and a.startswith(role_prefix) and a.endswith("/" + role))
    ]
    subject = "cluster.adminPrincipalArns"
    if same:
        message = (
            f"{same[0]} is the identity running Pulumi, which EKS already makes a cluster admin at creation:"
            " remove it from adminPrincipalArns (a second access entry for it fails)"
        )
        return [Finding("admins", subject, False, message)]
    return [Finding("admins", subject, True, f"the deployer ({arn}) is not listed again")]


def run_checks(
    account: Account, cfg: StackConfig, *, margin_hours: float | None = None, now: dt.datetime | None = None
) -> list[Finding]:
    """Every check against the account behind `account`; AccountError when AWS cannot be asked.
    `margin_hours` overrides every group's reservation end margin (the command line's --margin-hours)."""
    now = now or dt.datetime.now(dt.UTC)
    return [
        *check_offerings(account, cfg),
        *check_efa(account, cfg),
        *check_vpc(account, cfg),
        *check_reservations(account, cfg, now, margin_hours),
        *check_placement_groups(account, cfg),
        *check_capacity_block_upgrades(account, cfg),
        *check_version_step(account, cfg),
        *check_upgrade_drains(account, cfg),
        *check_file_system(account, cfg),
        *check_admin_entries(account, cfg),
        *check_quotas(account, cfg),
    ]


def under_mocks() -> bool:
    """True when the Pulumi runtime talks to mocks (tests, offline plan), not an engine."""
    return isinstance(settings.get_monitor(), pulumi_mocks.MockMonitor)


def gate(cfg: StackConfig, account: Account | None = None) -> None:
    """Run preflight inside a real `pulumi preview`/`up`, through the stack's own AWS provider:
    log each warning as a Pulumi warning, each failing check (or the one reason AWS could not be
    asked) as a Pulumi error, and stop with RunError on a failure before any other resource is
    declared."""
    if account is None:
        account = ProviderAccount(aws_provider(StackContext.from_config(cfg)))
    try:
        findings = run_checks(account, cfg)
    except AccountError as e:
        pulumi.log.error(f"preflight: {e}")
        raise pulumi.RunError("preflight could not ask AWS; nothing was created") from None
    for f in findings:
        if f.warning:
            pulumi.log.warn(f"preflight: {f.line()}")
    failing = [f for f in findings if not f.ok]
    for f in failing:
        pulumi.log.error(f.line())
    if failing:
        raise pulumi.RunError(f"preflight: {len(failing)} check(s) failed; nothing was created")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.preflight", description=__doc__.split("\n")[0] if __doc__ else None
    )
    add_stack_arguments(parser)
    parser.add_argument(
        "--profile", help="AWS profile to ask with (default: the environment's, as the stack's AWS provider uses)"
    )
    parser.add_argument("--region", help="must be the stack's aws:region (the default), where its provider works")
    parser.add_argument(
        "--margin-hours",
        type=float,
        default=None,
        help="reservation end margin for every group (default: each group's capacity.endMarginHours, or 24 h for a"
        " reservation and 0 for a Capacity Block)",
    )
    return parser


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None, session: Any = None) -> int:
    """The command line; `session` (anything with boto3's `.client`) replaces the profile's in tests."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    cfg = load_stack_config(args, stderr)
    if cfg is None:
        return 2
    if args.region and args.region != cfg.region:
        print(
            f"error: --region {args.region} is not the stack's aws:region {cfg.region}, where it deploys", file=stderr
        )
        return 2
    try:
        account = (
            Boto3Account.from_session(session, cfg.region)
            if session is not None
            else Boto3Account.for_profile(args.profile, cfg.region)
        )
        findings = run_checks(account, cfg, margin_hours=args.margin_hours)
    except AccountError as e:
        print(f"error: {e}", file=stderr)
        return 2
    for f in findings:
        if f.ok and not f.warning:
            print(f.line(), file=stdout)
    # Warnings and failures go to stderr, so they show when stdout is piped or silenced.
    for f in [f for f in findings if f.warning] + [f for f in findings if not f.ok]:
        print(f.line(), file=stderr)
    failing = [f for f in findings if not f.ok]
    if any(f.check == DAY2 for f in failing):
        return 2  # the config asks for an edit the deployed stack cannot take: bad input
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
