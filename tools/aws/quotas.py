"""On-Demand and Spot vCPU quotas: what a stack's node groups run and may scale to, per Service Quotas code.

EC2 limits running On-Demand instances per Region in vCPUs, one quota per instance family
group (EC2 user guide, "On-Demand Instance quotas"); instances launched into an On-Demand
Capacity Reservation count against it, Capacity Blocks and Spot do not. Spot groups count
against the Spot quota of their family group instead (EC2 user guide, using-spot-limits), which a
new account has at 0 for P and Trn: without it the group passes every other check and never gets
a node ("Max spot instance count exceeded"). A stack needs its
groups' desired size now and their maximum size to scale: preflight fails when the quota does
not cover the desired size (EC2 would refuse the nodes the first `pulumi up` asks for) and only
warns when it leaves no head-room to the maximum (nothing fails until something scales up),
each time with the exact request that fixes it.

A new account has small quotas (facts/quotas.py): tests/unit/test_quotas.py runs preflight on
the example stacks against an account holding them. `requirements_table` renders what each
example stack needs (region, AZs, capacity, quotas) from `quota_needs`, for the docs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from config.layers import owner_of
from config.stack import StackConfig
from facts import instances
from facts.quotas import NEW_ACCOUNT, QUOTA_CODES, SPOT_QUOTA_CODES
from tools.aws.account import Account
from tools.aws.reservations import Finding

ON_DEMAND_QUOTA_CAPACITY = ("on-demand", "reservation")
"""Capacity types whose instances count against the On-Demand quota (ODCRs do; Capacity Blocks and Spot do not)."""
COUNTED_CAPACITY = (*ON_DEMAND_QUOTA_CAPACITY, "spot")
"""Capacity types preflight counts against a vCPU quota (Spot against its own)."""


@dataclass(frozen=True)
class QuotaNeed:
    """The vCPUs of one On-Demand quota a stack's node groups use."""

    code: str
    name: str
    desired: int
    """vCPUs at the groups' desired sizes: what the first `pulumi up` launches."""
    maximum: int
    """vCPUs at the groups' maximum sizes: what scaling up may reach."""
    groups: tuple[str, ...]
    """The node groups counted (`systemNodeGroup`, `nodeGroups[<name>]`)."""


def quota_family(instance_type: str) -> str:
    """The On-Demand quota family of an instance type (`standard`, `p` or `trn`)."""
    family = instance_type.split(".", 1)[0]
    if family.startswith("trn"):
        return "trn"
    if family.startswith("p"):
        return "p"
    return "standard"


def quota_codes(capacity_type: str) -> dict[str, tuple[str, str]]:
    """Family group -> (code, name) of the quota a capacity type's instances count against: Spot's
    own quotas for spot, the On-Demand ones otherwise (Capacity Blocks are not counted at all)."""
    return SPOT_QUOTA_CODES if capacity_type == "spot" else QUOTA_CODES


def quota_needs(cfg: StackConfig) -> dict[str, QuotaNeed]:
    """Quota code -> the vCPUs this stack's node groups need of it, at desired and maximum size.
    Empty for a layer that declares no node groups (cluster, runs)."""
    if cfg.layer not in ("all", owner_of("nodeGroups")):
        return {}
    desired: dict[tuple[str, str], int] = defaultdict(int)
    maximum: dict[tuple[str, str], int] = defaultdict(int)
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    s = cfg.system_node_group
    counted = [("systemNodeGroup", s.instance_type, "on-demand", s.desired_size, s.max)]
    counted += [
        (f"nodeGroups[{ng.name}]", ng.instance_type, ng.capacity.type, ng.desired_size, ng.max)
        for ng in cfg.node_groups
        if ng.capacity.type in COUNTED_CAPACITY
    ]
    for subject, instance_type, capacity_type, at_desired, at_max in counted:
        key = quota_codes(capacity_type)[quota_family(instance_type)]
        vcpus = instances.get(instance_type).vcpus
        desired[key] += vcpus * at_desired
        maximum[key] += vcpus * at_max
        groups[key].append(subject)
    return {
        code: QuotaNeed(code, name, desired[code, name], maximum[code, name], tuple(groups[code, name]))
        for code, name in sorted(desired)
    }


def increase_command(code: str, vcpus: int, region: str) -> str:
    """The AWS CLI request for a quota of `vcpus` (AWS CLI reference, request-service-quota-increase)."""
    return (
        f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code}"
        f" --desired-value {vcpus} --region {region}"
    )


def check_quotas(account: Account, cfg: StackConfig) -> list[Finding]:
    """Each On-Demand and Spot vCPU quota covers the node groups at desired size (else it fails) and at
    maximum size (else a warning: the groups cannot scale that far)."""
    out = []
    for code, need in quota_needs(cfg).items():
        value = account.quota(code)
        subject = f"{code} ({need.name})"
        groups = ", ".join(need.groups)
        if value >= need.maximum:
            message = f"{value:g} vCPUs >= {need.maximum} needed at maximum size ({need.desired} at desired size)"
            out.append(Finding("quota", subject, True, message))
        elif value >= need.desired:
            message = (
                f"{value:g} vCPUs cover the desired size ({need.desired}) but not the maximum ({need.maximum}) of"
                f" {groups}: they cannot scale up that far; to allow it, request"
                f" `{increase_command(code, need.maximum, cfg.region)}`"
            )
            out.append(Finding("quota", subject, True, message, warning=True))
        else:
            room = f" ({need.maximum} also covers the maximum size)" if need.maximum > need.desired else ""
            message = (
                f"{value:g} vCPUs < {need.desired} needed at desired size by {groups} (EC2 would refuse the nodes):"
                f" request `{increase_command(code, need.maximum, cfg.region)}`{room}, or lower desiredSize"
            )
            out.append(Finding("quota", subject, False, message))
    return out


def _figures(need: QuotaNeed | None) -> str:
    return f"{need.desired} / {need.maximum}" if need else "-"


def _fits(needs: Mapping[str, QuotaNeed], quotas: Mapping[str, float]) -> str:
    short = [n for n in needs.values() if quotas.get(n.code, 0) < n.desired]
    tight = [n for n in needs.values() if n.desired <= quotas.get(n.code, 0) < n.maximum]
    if short:
        return "fails: raise " + ", ".join(f"{n.code} to {n.maximum}" for n in short)
    if tight:
        return "passes; warns: " + ", ".join(f"{n.code} to {n.maximum} to scale up" for n in tight)
    return "passes"


def _capacity(cfg: StackConfig) -> str:
    kinds = sorted({ng.capacity.type for ng in cfg.node_groups})
    return ", ".join(kinds) if kinds else "-"


def requirements_table(stacks: Mapping[str, StackConfig], quotas: Mapping[str, float] = NEW_ACCOUNT) -> str:
    """A markdown table of what each stack needs: region, the AZ of each accelerated node group
    (the instance type must be offered there), capacity types, vCPUs per On-Demand quota at
    desired / maximum size, and whether an account with `quotas` (a new account's) passes
    preflight's quota check."""
    codes = [code for code, _ in QUOTA_CODES.values()]
    head = ["stack", "aws:region", "node group AZs", "capacity", *codes, "quota check on a new account"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, cfg in stacks.items():
        needs = quota_needs(cfg)
        if cfg.layer not in ("all", owner_of("nodeGroups")):
            azs, capacity, fits = f"- ({cfg.layer} layer: none of its own)", "-", "passes (no quota check)"
        else:
            azs = ", ".join(f"{ng.name}: {cfg.node_group_az(ng)}" for ng in cfg.node_groups) or "-"
            capacity, fits = _capacity(cfg), _fits(needs, quotas)
        cells = [f"`{name}`", cfg.region, azs, capacity, *(_figures(needs.get(c)) for c in codes), fits]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
