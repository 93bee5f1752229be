"""Preflight's checks of what an existing VPC and named placement groups must give, read from the
account instead of taken on trust.

With `network.vpcId` the stack creates no network: it puts nodes, pods, the file system and the
EKS interfaces into `privateSubnetIds`. Config can only check the ids' shape; the account says
whether each subnet exists, lies in the AZ it is keyed by and in that VPC, and has the free
addresses the plan needs (`config.checks.network.addresses_needed`); whether the VPC resolves DNS and
gives hostnames (nodes cannot join without them: EKS user guide, network-reqs); and whether the
route tables and security groups named for it are in it. A named placement group
(`capacity.placementGroupName`) must exist, be a `cluster` group, and hold no instances outside
the node group's AZ (a cluster group lives in one AZ: EC2 user guide, placement-strategies).
"""

from __future__ import annotations

from config.checks.network import EKS_INTERFACE_ADDRESSES, addresses_needed
from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from tools.aws.account import Account, Subnet
from tools.aws.reservations import Finding


def check_vpc(account: Account, cfg: StackConfig) -> list[Finding]:
    """An existing VPC, its subnets and the route tables and security groups named for it."""
    net = cfg.network
    if net.vpc_id is None:
        return []
    vpc = account.vpc(net.vpc_id)
    if vpc is None:
        return [Finding("vpc", "network.vpcId", False, f"{net.vpc_id} not found in {cfg.region}: check the id")]
    out = [
        Finding(
            "vpc",
            "network.vpcId",
            vpc.dns_support and vpc.dns_hostnames,
            f"{net.vpc_id}: DNS support {'on' if vpc.dns_support else 'OFF'}, DNS hostnames"
            f" {'on' if vpc.dns_hostnames else 'OFF'}"
            + ("" if vpc.dns_support and vpc.dns_hostnames else ": nodes cannot join the cluster; turn both on"),
        )
    ]
    held = _held_addresses(account, cfg)
    need = addresses_needed(cfg)
    for key, subnets in (("privateSubnetIds", net.private_subnet_ids), ("publicSubnetIds", net.public_subnet_ids)):
        for az, subnet_id in subnets.items():
            found = account.subnet(subnet_id)
            wanted = need.get(az, 0) if key == "privateSubnetIds" else 0
            out.append(
                _subnet_finding(f"network.{key}.{az}", subnet_id, found, az, net.vpc_id, wanted, held.get(az, 0))
            )
    named = [
        ("route-table", f"network.s3EndpointRouteTableIds[{i}]", r)
        for i, r in enumerate(net.s3_endpoint_route_table_ids)
    ]
    named += [
        ("security-group", f"cluster.privateAccessSecurityGroupIds[{i}]", g)
        for i, g in enumerate(cfg.cluster.private_access_security_group_ids)
    ]
    for kind, key, resource_id in named:
        owner = account.vpc_of(kind, resource_id)
        if owner == net.vpc_id:
            out.append(Finding("vpc", key, True, f"{resource_id} is in {owner}"))
        else:
            where = "not found" if owner is None else f"in {owner}"
            out.append(Finding("vpc", key, False, f"{resource_id} is {where}, not in {net.vpc_id}: fix the id"))
    return out


def _subnet_finding(
    key: str, subnet_id: str, found: Subnet | None, az: str, vpc_id: str, need: int, held: int
) -> Finding:
    if found is None:
        return Finding("subnet", key, False, f"{subnet_id} not found: check the id and the region")
    problems = []
    if found.vpc_id != vpc_id:
        problems.append(f"is in {found.vpc_id}, not network.vpcId {vpc_id}")
    if found.availability_zone != az:
        problems.append(f"lies in {found.availability_zone}, not {az}: key it by {found.availability_zone}")
    if found.available_addresses + held < need:
        problems.append(
            f"has {found.available_addresses} free addresses (+{held} this stack's nodes hold), the plan needs {need}"
            " at maximum size: use a larger subnet or lower maxSize"
        )
    if problems:
        return Finding("subnet", key, False, f"{subnet_id} " + "; ".join(problems))
    return Finding("subnet", key, True, f"{subnet_id} in {az}, {found.available_addresses} free (needs {need})")


def _held_addresses(account: Account, cfg: StackConfig) -> dict[str, int]:
    """AZ -> addresses this stack's deployed nodes already hold (an estimate, as the need is):
    the deployed accelerated groups' nodes in their AZ; once any is deployed, the system group at
    its desired size and the EKS interfaces in every AZ. Day 2 is not refused for the addresses
    the stack itself uses."""
    held: dict[str, int] = {}
    for ng in cfg.node_groups:
        deployed = account.node_group(cfg.cluster.name, ng.name)
        if deployed is not None:
            az = cfg.node_group_az(ng)
            held[az] = held.get(az, 0) + deployed.desired * ng.instance.vpc_cni_addresses
    if held:
        system = cfg.system_node_group
        for az in cfg.availability_zones:
            held[az] = held.get(az, 0) + system.desired_size * system.instance.vpc_cni_addresses
            held[az] += EKS_INTERFACE_ADDRESSES
    return held


def check_placement_groups(account: Account, cfg: StackConfig) -> list[Finding]:
    """Each placement group a node group names exists, is a cluster group, and is in its AZ."""
    return [_placement_finding(account, cfg, ng) for ng in cfg.node_groups if ng.capacity.placement_group_name]


def _placement_finding(account: Account, cfg: StackConfig, ng: NodeGroupConfig) -> Finding:
    name = str(ng.capacity.placement_group_name)
    subject = f"nodeGroups[{ng.name}] {name}"
    group = account.placement_group(name)
    if group is None:
        return Finding(
            "placement",
            subject,
            False,
            f"not found in {cfg.region}: create it (aws ec2 create-placement-group --group-name {name} --strategy"
            " cluster) or fix capacity.placementGroupName",
        )
    problems = []
    if group.strategy != "cluster":
        problems.append(f"is a {group.strategy} group; EFA collectives need a cluster group")
    if group.state not in (None, "available"):
        problems.append(f"is {group.state}, not available")
    az = cfg.node_group_az(ng)
    total = account.instances_in_group(name)
    if total and account.instances_in_group(name, az) < total:
        problems.append(f"holds instances outside {az}: a cluster group lives in one AZ; set availabilityZone to it")
    if problems:
        return Finding("placement", subject, False, "; ".join(problems))
    return Finding("placement", subject, True, f"cluster group, {total} instances, in {az}")
