"""Preflight: ask the AWS account, before anything is created, whether the stack can run.

    python -m tools.preflight (--stack NAME | --config-file PATH) [--margin-hours N]

Checks, per accelerated node group: the instance type is offered in its AZ; it supports EFA
with the catalog's number of EFA interfaces; its capacity reservation or Capacity Block
exists, is active (or says when it starts), is for the right type and AZ, has enough free
instances, does not end within the margin, was made in the placement group the config names
(or none), and (Capacity Blocks) ends when `endsAt` says, with the scale-down still ahead; a
Capacity Block group is at desired size 0 before its Kubernetes version changes; the identity
running Pulumi is not listed again in `adminPrincipalArns` (EKS already made it admin); and the
account's On-Demand vCPU quota of each instance family covers the node groups at their
maximum size.

Exit 0 when every check passes, 1 with one line per failing check, 2 on bad config or no
AWS credentials. The same checks run at the start of a real `pulumi preview`/`up`
(`__main__.py`), never under mocks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.exceptions
import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings

from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from facts import instances
from tools.cli import add_stack_arguments, load_stack_config

DEFAULT_MARGIN_HOURS = 24

# Service Quotas codes of "Running On-Demand <family> instances" (vCPUs), service code ec2:
# L-1216C47A Standard (A, C, D, H, I, M, R, T, Z) (AWS CLI user guide, service-quotas
# examples); L-417A185B P; L-2C3B7624 Trn (names as ListServiceQuotas returns them).
QUOTA_CODES = {
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
}


@dataclass(frozen=True)
class Finding:
    """The outcome of one check; a failing one says what to do."""

    check: str
    subject: str
    ok: bool
    message: str

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAIL'} {self.check} {self.subject}: {self.message}"


def _groups(cfg: StackConfig) -> list[NodeGroupConfig]:
    return list(cfg.node_groups)


def check_offerings(ec2: Any, cfg: StackConfig) -> list[Finding]:
    """Each node group's instance type is offered in its AZ."""
    out = []
    for ng in _groups(cfg):
        az = cfg.node_group_az(ng)
        resp = ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [ng.instance_type]}, {"Name": "location", "Values": [az]}],
        )
        offered = any(o.get("Location") == az for o in resp.get("InstanceTypeOfferings", []))
        subject = f"nodeGroups[{ng.name}]"
        if offered:
            out.append(Finding("offering", subject, True, f"{ng.instance_type} is offered in {az}"))
        else:
            where = ec2.describe_instance_type_offerings(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": [ng.instance_type]}],
            )
            azs = sorted({o["Location"] for o in where.get("InstanceTypeOfferings", [])})
            hint = f"; offered in {', '.join(azs)}" if azs else f"; not offered anywhere in {cfg.region}"
            out.append(
                Finding(
                    "offering",
                    subject,
                    False,
                    f"{ng.instance_type} is not offered in {az}{hint}: set availabilityZone to one of those",
                )
            )
    return out


def check_efa(ec2: Any, cfg: StackConfig) -> list[Finding]:
    """Each instance type supports EFA with the number of interfaces the launch template makes."""
    out = []
    for itype in sorted({ng.instance_type for ng in _groups(cfg)}):
        want = next(ng.instance for ng in _groups(cfg) if ng.instance_type == itype).efa_interfaces
        info = (ec2.describe_instance_types(InstanceTypes=[itype]).get("InstanceTypes") or [{}])[0]
        net = info.get("NetworkInfo", {})
        have = net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0) if net.get("EfaSupported") else 0
        if have == want:
            out.append(Finding("efa", itype, True, f"EFA supported with {have} interfaces"))
        else:
            out.append(
                Finding(
                    "efa",
                    itype,
                    False,
                    f"EC2 reports {have} EFA interfaces, the catalog expects {want}: fix facts/instances.py",
                )
            )
    return out


def check_reservations(ec2: Any, cfg: StackConfig, now: dt.datetime, margin_hours: float) -> list[Finding]:
    """Each reservation or Capacity Block exists, is active (or starts later), is for the node
    group's type and AZ, has enough free instances and does not end within the margin."""
    out = []
    for ng in _groups(cfg):
        if not ng.capacity.targets_reservation:
            continue
        rid = str(ng.capacity.reservation_id)
        subject = f"nodeGroups[{ng.name}] {rid}"
        try:
            found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid]).get("CapacityReservations", [])
        except botocore.exceptions.ClientError as e:
            found = []
            if "NotFound" not in e.response.get("Error", {}).get("Code", ""):
                raise
        if not found:
            out.append(
                Finding("reservation", subject, False, f"not found in {cfg.region}: check the id and the region")
            )
            continue
        cr = found[0]
        problems = []
        az = cfg.node_group_az(ng)
        if cr.get("InstanceType") != ng.instance_type:
            problems.append(f"is for {cr.get('InstanceType')}, not {ng.instance_type}: fix instanceType or the id")
        if cr.get("AvailabilityZone") != az:
            problems.append(f"is in {cr.get('AvailabilityZone')}, the node group in {az}: set availabilityZone to it")
        kind = "capacity-block" if cr.get("ReservationType") == "capacity-block" else "reservation"
        if kind != ng.capacity.type:
            problems.append(f"is a {kind}, config says capacity.type {ng.capacity.type}")
        state = cr.get("State")
        free = cr.get("AvailableInstanceCount", 0)
        if state == "scheduled":
            free = cr.get("TotalInstanceCount", 0)
            problems.append(f"is scheduled and starts at {_iso(cr.get('StartDate'))}: run `pulumi up` after that")
        elif state != "active":
            problems.append(f"is {state}, not active: use an active reservation")
        if free < ng.desired_size:
            problems.append(f"has {free} free instances, the node group needs {ng.desired_size}")
        end = cr.get("EndDate")
        if isinstance(end, dt.datetime) and end - now < dt.timedelta(hours=margin_hours):
            problems.append(
                f"ends at {_iso(end)}, within {margin_hours:g} h: extend it or scale the node group to 0 before then"
            )
        problems += placement_problems(cr, ng) + block_end_problems(cr, ng, now)
        for p in problems:
            out.append(Finding("reservation", subject, False, p))
        if not problems:
            out.append(Finding("reservation", subject, True, f"{state}, {free} free {ng.instance_type} in {az}"))
    return out


def placement_problems(cr: dict[str, Any], ng: NodeGroupConfig) -> list[str]:
    """Capacity made in a cluster placement group is usable only in that group, and capacity made
    without one only outside any (EC2 API reference, CreateCapacityReservation.PlacementGroupArn)."""
    arn = cr.get("PlacementGroupArn")
    actual = str(arn).rsplit("placement-group/", 1)[-1] if arn else None
    wanted = ng.capacity.placement_group_name
    if actual == wanted:
        return []
    if actual is None:
        return [f"was made without a placement group: remove capacity.placementGroupName ({wanted})"]
    return [f"was made in placement group {actual}: set capacity.placementGroupName: {actual} (config: {wanted})"]


def block_end_problems(cr: dict[str, Any], ng: NodeGroupConfig, now: dt.datetime) -> list[str]:
    """A Capacity Block group scales to 0 before the block's own end time: `endsAt` must be that
    EndDate, and the scheduled scale-down must still lie ahead (EC2 Auto Scaling refuses a
    scheduled action that starts in the past)."""
    c = ng.capacity
    end, when = cr.get("EndDate"), c.scale_down_at
    if c.type != "capacity-block" or c.ends_at is None or when is None:
        return []
    out = []
    if isinstance(end, dt.datetime) and end != c.ends_at:
        out.append(f"ends at {_iso(end)}, config says endsAt {_iso(c.ends_at)}: set capacity.endsAt to the block's end")
    if when <= now:
        out.append(
            f"the scale-down at {_iso(when)} is already past: remove the node group (desiredSize 0) or use a new block"
        )
    return out


def check_capacity_block_upgrades(eks: Any, cfg: StackConfig) -> list[Finding]:
    """EKS upgrades a Capacity Block node group only at desired size 0 (EKS user guide,
    capacity-blocks-mng). When this update changes the Kubernetes version of a deployed
    Capacity Block group that still runs nodes, the path is two steps: scale to 0, then upgrade."""
    out = []
    for ng in _groups(cfg):
        if ng.capacity.type != "capacity-block":
            continue
        subject = f"nodeGroups[{ng.name}]"
        try:
            found = eks.describe_nodegroup(clusterName=cfg.cluster.name, nodegroupName=ng.name)["nodegroup"]
        except botocore.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            out.append(Finding("upgrade", subject, True, "not deployed yet"))
            continue
        version, desired = found.get("version"), found.get("scalingConfig", {}).get("desiredSize", 0)
        if version != cfg.cluster.kubernetes_version and desired > 0:
            out.append(
                Finding(
                    "upgrade",
                    subject,
                    False,
                    f"runs {desired} nodes on Kubernetes {version}; EKS upgrades a Capacity Block group only at desired"
                    f" size 0: keep cluster.kubernetesVersion at {version} and `pulumi up` with desiredSize: 0 and"
                    f" minSize: 0 first, then raise it to {cfg.cluster.kubernetes_version}",
                )
            )
        else:
            out.append(Finding("upgrade", subject, True, f"Kubernetes {version}, desired {desired}"))
    return out


def check_admin_entries(sts: Any, cfg: StackConfig) -> list[Finding]:
    """pulumi-eks creates the cluster with bootstrapClusterCreatorAdminPermissions, so the
    identity running `pulumi up` already has an access entry; listing it again in
    adminPrincipalArns makes CreateAccessEntry fail with ResourceInUseException
    (tests/upstream/pulumi-eks-4.4.0.yaml; botocore's eks CreateAccessEntry errors)."""
    arn = str(sts.get_caller_identity().get("Arn", ""))
    # An assumed role's session ARN names the role: arn:aws:sts::<account>:assumed-role/<role>/<session>.
    account, _, rest = arn.partition(":assumed-role/") if ":assumed-role/" in arn else (arn, "", "")
    role = rest.split("/", 1)[0] if rest else None
    same = [
        a
        for a in cfg.cluster.admin_principal_arns
        if a == arn or (role and a.startswith(account.replace(":sts:", ":iam:") + ":role/") and a.endswith("/" + role))
    ]
    if same:
        return [
            Finding(
                "admins",
                "cluster.adminPrincipalArns",
                False,
                f"{same[0]} is the identity running Pulumi, which EKS already makes a cluster admin at creation:"
                " remove it from adminPrincipalArns (a second access entry for it fails)",
            )
        ]
    return [Finding("admins", "cluster.adminPrincipalArns", True, f"the deployer ({arn}) is not listed again")]


def quota_family(instance_type: str) -> str:
    family = instance_type.split(".", 1)[0]
    if family.startswith("trn"):
        return "trn"
    if family.startswith("p"):
        return "p"
    return "standard"


def check_quotas(service_quotas: Any, cfg: StackConfig) -> list[Finding]:
    """The On-Demand vCPU quota of each family covers the node groups at maximum size.
    ODCR instances count against it; Capacity Blocks and spot do not."""
    need: dict[str, int] = defaultdict(int)
    s = cfg.system_node_group
    need[quota_family(s.instance_type)] += instances.get(s.instance_type).vcpus * s.max
    for ng in _groups(cfg):
        if ng.capacity.type in ("on-demand", "reservation"):
            need[quota_family(ng.instance_type)] += ng.instance.vcpus * ng.max
    out = []
    for family, vcpus in sorted(need.items()):
        code, name = QUOTA_CODES[family]
        value = service_quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
        subject = f"{code} ({name})"
        if value >= vcpus:
            out.append(Finding("quota", subject, True, f"{value:g} vCPUs >= {vcpus} needed"))
        else:
            out.append(
                Finding(
                    "quota",
                    subject,
                    False,
                    f"{value:g} vCPUs < {vcpus} needed at maximum size: request an increase "
                    f"(aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
                    f"--desired-value {vcpus})",
                )
            )
    return out


def run_checks(
    session: Any, cfg: StackConfig, *, margin_hours: float = DEFAULT_MARGIN_HOURS, now: dt.datetime | None = None
) -> list[Finding]:
    """Every check against the account behind a boto3 session (or anything with `.client`)."""
    ec2 = session.client("ec2", region_name=cfg.region)
    quotas = session.client("service-quotas", region_name=cfg.region)
    eks = session.client("eks", region_name=cfg.region)
    sts = session.client("sts", region_name=cfg.region)
    now = now or dt.datetime.now(dt.UTC)
    return [
        *check_offerings(ec2, cfg),
        *check_efa(ec2, cfg),
        *check_reservations(ec2, cfg, now, margin_hours),
        *check_capacity_block_upgrades(eks, cfg),
        *check_admin_entries(sts, cfg),
        *check_quotas(quotas, cfg),
    ]


def _iso(v: Any) -> str:
    return v.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if isinstance(v, dt.datetime) else str(v)


class NoCredentials(Exception):
    """No AWS credentials are configured."""


def session_with_credentials() -> Any:
    session = boto3.Session()
    if session.get_credentials() is None:
        raise NoCredentials(
            "no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
            "(or run where an instance role applies); the offline plan needs none"
        )
    return session


def under_mocks() -> bool:
    """True when the Pulumi runtime talks to mocks (tests, offline plan), not an engine."""
    return isinstance(settings.get_monitor(), pulumi_mocks.MockMonitor)


def gate(cfg: StackConfig) -> None:
    """Run preflight inside a real `pulumi preview`/`up`: log each failing check as a Pulumi
    error and stop with RunError before any resource is declared."""
    failing = [f for f in run_checks(session_with_credentials(), cfg) if not f.ok]
    for f in failing:
        pulumi.log.error(f.line())
    if failing:
        raise pulumi.RunError(f"preflight: {len(failing)} check(s) failed; nothing was created")


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None, session: Any = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m tools.preflight", description=__doc__.split("\n")[0] if __doc__ else None
    )
    add_stack_arguments(parser)
    parser.add_argument("--margin-hours", type=float, default=DEFAULT_MARGIN_HOURS, help="reservation end margin")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    cfg = load_stack_config(args, stderr)
    if cfg is None:
        return 2
    try:
        findings = run_checks(session or session_with_credentials(), cfg, margin_hours=args.margin_hours)
    except NoCredentials as e:
        print(f"error: {e}", file=stderr)
        return 2
    for f in findings:
        if f.ok:
            print(f.line(), file=stdout)
    failing = [f for f in findings if not f.ok]
    for f in failing:
        print(f.line(), file=stderr)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
