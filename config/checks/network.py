"""Rules of addresses and counts: subnets that hold the nodes' addresses, security groups within
their rule quota, Kueue's queue within its flavor limit."""

from __future__ import annotations

from collections.abc import Collection

from config.checks.groups import size_key
from config.problems import problem
from config.stack import StackConfig
from facts.limits import EKS_CLUSTER_SG_INBOUND, KUEUE_MAX_FLAVORS, SECURITY_GROUP_RULES, SUBNET_RESERVED_ADDRESSES

EKS_INTERFACE_ADDRESSES = 16
"""Free addresses EKS recommends in each subnet it may put its cluster interfaces in (at least 6)."""
LUSTRE_PORT_RANGES = 2
"""Lustre's port ranges (988, 1018-1023): one rule each (infra.storage.LUSTRE_PORTS)."""


def addresses_needed(cfg: StackConfig) -> dict[str, int]:
    """AZ -> VPC addresses its private subnet must have free: the VPC CNI holds
    `vpc_cni_addresses` per node (its default WARM_ENI_TARGET=1: the primary interface's and one
    warm interface's), for each accelerated group's maxSize in its AZ and the system group's
    maxSize in every AZ (its nodes may all land in one), plus the 16 addresses EKS recommends in
    each cluster subnet for its interfaces (EKS user guide, network-reqs). EFA-only interfaces
    take no address. A created VPC is held against it here; preflight holds an existing one."""
    system = cfg.system_node_group
    need = {
        az: system.max * system.instance.vpc_cni_addresses + EKS_INTERFACE_ADDRESSES for az in cfg.availability_zones
    }
    for ng in cfg.node_groups:
        az = cfg.node_group_az(ng)
        need[az] = need.get(az, EKS_INTERFACE_ADDRESSES) + ng.max * ng.instance.vpc_cni_addresses
    return need


def created_vpc_fits(cfg: StackConfig) -> list[str]:
    """The private subnet the stack creates in each AZ holds the addresses its nodes need: a
    node that gets no address never becomes Ready, and its pods none either (VPC CNI)."""
    if cfg.network.existing or cfg.layer not in ("all", "aws"):
        return []
    prefix = cfg.network.private_subnet_prefix
    holds = 2 ** (32 - prefix) - SUBNET_RESERVED_ADDRESSES
    problems: list[str] = []
    for az, need in sorted(addresses_needed(cfg).items()):
        if need <= holds:
            continue
        alone = [
            (i, ng)
            for i, ng in enumerate(cfg.node_groups)
            if cfg.node_group_az(ng) == az and ng.max * ng.instance.vpc_cni_addresses + EKS_INTERFACE_ADDRESSES > holds
        ]
        if alone:
            i, ng = alone[0]
            per_node = ng.instance.vpc_cni_addresses
            most = (holds - EKS_INTERFACE_ADDRESSES) // per_node
            problems.append(
                problem(
                    size_key(i, ng),
                    "conflict",
                    f"{ng.max} x {ng.instance_type} need {ng.max * per_node} VPC addresses ({per_node} per node,"
                    f" VPC CNI), more than the {holds} of the /{prefix} private subnet in {az}: use at most {most}"
                    " nodes, or an existing VPC with larger subnets (network.vpcId)",
                    value=str(ng.max),
                    allowed=f"at most {most}",
                    hint="or an existing VPC with larger subnets (network.vpcId)",
                )
            )
            continue
        problems.append(
            problem(
                "network.cidr",
                "conflict",
                f"the nodes in {az} need {need} VPC addresses at their maxSize (VPC CNI), more than the {holds} of"
                f" its /{prefix} private subnet: use a larger network.cidr (a /16 gives"
                f" {2**13 - SUBNET_RESERVED_ADDRESSES} per AZ), or lower maxSize",
                value=str(cfg.network.cidr),
                hint="a larger network.cidr, or lower maxSize",
            )
        )
    return problems


def flavors_fit(
    teams: Collection[str], accelerated: int, where: str = "nodeGroups", default_queue: bool | None = None
) -> list[str]:
    """Without teams, or beside them when `queueing.defaultQueue` keeps it, one `default`
    ClusterQueue lists every accelerated node group as a flavor of one resource group, and the
    system group (infra.queues), and Kueue takes at most 64 of them. `where`: the key to name
    (an all-in-one stack's `nodeGroups`; a cluster layer's `teams`, whose node groups are the
    aws layer's)."""
    if (teams and not default_queue) or accelerated + 1 <= KUEUE_MAX_FLAVORS:
        return []
    if teams:
        return [
            problem(
                "queueing.defaultQueue",
                "conflict",
                f"the default queue kept beside teams lists all {accelerated} accelerated node groups and the system"
                f" group, {accelerated + 1} Kueue flavors, and Kueue takes at most {KUEUE_MAX_FLAVORS} per resource"
                f" group: set it to false, or use at most {KUEUE_MAX_FLAVORS - 1} node groups",
                value="true",
                hint=f"set it to false, or use at most {KUEUE_MAX_FLAVORS - 1} node groups",
            )
        ]
    return [
        problem(
            where,
            "invalid",
            f"{accelerated} accelerated node groups and the system group make {accelerated + 1} Kueue flavors in"
            f" the default queue, and Kueue takes at most {KUEUE_MAX_FLAVORS} per resource group: use at most"
            f" {KUEUE_MAX_FLAVORS - 1} node groups, or define teams (each team's queue lists only its own group)",
            value=f"{accelerated} node groups",
            allowed=f"at most {KUEUE_MAX_FLAVORS - 1} node groups",
            hint="or define teams (each team's queue lists only its own group)",
        )
    ]


def cluster_security_group_rules(cfg: StackConfig) -> list[str]:
    """The cluster security group's inbound rules stay within EC2's default quota: EKS's own rule,
    the Lustre callbacks from the file system, TCP 443 from each private-access network and
    group, and from the CI runner (VPC user guide, amazon-vpc-limits)."""
    c = cfg.cluster
    if cfg.layer not in ("all", "aws"):
        return []
    runner = 1 if cfg.ci_runner.enabled else 0
    fixed = EKS_CLUSTER_SG_INBOUND + LUSTRE_PORT_RANGES + runner
    total = fixed + len(c.private_access_cidrs) + len(c.private_access_security_group_ids)
    if total <= SECURITY_GROUP_RULES:
        return []
    return [
        problem(
            "cluster.privateAccessCidrs",
            "invalid",
            f"{len(c.private_access_cidrs)} networks and {len(c.private_access_security_group_ids)} security groups"
            f" (privateAccessSecurityGroupIds) make {total} inbound rules on the cluster security group, with"
            f" {fixed} of its own; EC2 allows {SECURITY_GROUP_RULES} by default (RulesPerSecurityGroupLimitExceeded):"
            " merge networks into fewer, larger CIDRs",
            value=f"{len(c.private_access_cidrs)} networks",
            allowed=f"at most {SECURITY_GROUP_RULES - fixed} networks and security groups together",
            hint="merge networks into fewer, larger CIDRs",
        )
    ]


def network_problems(cfg: StackConfig) -> list[str]:
    """Every rule of this module."""
    groups = len(cfg.node_groups)
    own = flavors_fit(cfg.teams, groups, default_queue=cfg.queueing.default_queue) if cfg.layer == "all" else []
    return [*created_vpc_fits(cfg), *own, *cluster_security_group_rules(cfg)]
