"""Stack rules: each needs more than one resource to decide.

EFA node groups and their launch templates and subnets; EFA security groups and their
rules; rules of one group that together admit the internet; the FSx security group; S3
buckets and their versioning, encryption and public-access blocks; the log groups VPC flow
logs write to.

Inside CrossGuard these see each resource's outputs, after a preview or update. During a
first preview ids and ARNs are unknown: a reference is then followed through the engine's
property dependencies (see `props.refers`), and a value that stays unknown never makes a
violation by itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from facts import instances
from policy.rules.aws import open_to_internet
from policy.rules.model import Context, Finding
from policy.rules.props import (
    T_BUCKETS,
    T_FLOW_LOG,
    T_FSX,
    T_LAUNCH_TEMPLATE,
    T_LIFECYCLE,
    T_LOG_GROUP,
    T_NODE_GROUP,
    T_PUBLIC_ACCESS_BLOCK,
    T_SG,
    T_SSE,
    T_SUBNET,
    T_VERSIONING,
    Resource,
    all_traffic,
    as_list,
    dig,
    efa_interfaces,
    inputs,
    is_true,
    known,
    of_type,
    referenced,
    refers,
    rules_of,
    unknown,
)


def launch_template_of(resources: Sequence[Resource], ng: Resource) -> Resource | None:
    """The launch template a node group names (by id or name), if it is in the stack."""
    ref = inputs(ng).get("launchTemplate")
    values = [v for v in (dig(ref, "id"), dig(ref, "name")) if v is not None]
    found = referenced(resources, ng, "launchTemplate", values, T_LAUNCH_TEMPLATE) if values else []
    return found[0] if len(found) == 1 else None


def security_groups_of(resources: Sequence[Resource], lt: Resource) -> list[Resource]:
    i = inputs(lt)
    found = referenced(resources, lt, "vpcSecurityGroupIds", i.get("vpcSecurityGroupIds"), T_SG)
    for n in as_list(i.get("networkInterfaces")):
        for sg in referenced(resources, lt, "networkInterfaces", dig(n, "securityGroups"), T_SG):
            if sg not in found:
                found.append(sg)
    return found


def check_efa_security_groups(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """A launch template with EFA interfaces has a security group that allows all traffic to
    and from itself, in both directions (EFA error 4126 otherwise)."""
    for lt in of_type(resources, T_LAUNCH_TEMPLATE):
        if not efa_interfaces(lt):
            continue
        groups = security_groups_of(resources, lt)
        if not groups:
            continue  # groups made outside this stack: nothing to look at
        ok = False
        for sg in groups:
            dirs = {d for d, _, n in rules_of(resources, sg) if n["self"] and all_traffic(n["protocol"])}
            ok = ok or {"ingress", "egress"} <= dirs
        if not ok:
            yield (
                lt,
                "EFA interfaces need a security group that allows all traffic to and from itself, in both "
                "directions (EFA error 4126 otherwise); none of this template's groups does",
            )


def check_combined_ingress(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """The ingress rules of one group, each narrower, do not together admit the whole internet
    (`0.0.0.0/1` in one rule and `128.0.0.0/1` in another)."""
    for sg in of_type(resources, T_SG):
        rules = [(r, n) for d, r, n in rules_of(resources, sg) if d == "ingress"]
        alone = {tuple(c) for r, _ in rules for c in open_to_internet([n for rr, n in rules if rr is r])}
        for cidrs in open_to_internet([n for _, n in rules]):
            if tuple(cidrs) not in alone:
                yield sg, f"ingress rules together admit the whole internet ({', '.join(cidrs)})"


def _node_group_shape(resources: Sequence[Resource], ng: Resource, lt: Resource) -> Iterator[str]:
    i = inputs(ng)
    subnets, types = i.get("subnetIds"), i.get("instanceTypes")
    if not unknown(subnets) and len(as_list(subnets)) != 1:
        yield f"EFA node group spans {len(as_list(subnets))} subnets; EFA collectives need one subnet in one AZ"
    azs = subnet_azs(resources, ng)
    if len(azs) > 1:
        yield f"EFA node group spans AZs {', '.join(sorted(azs))}; use one"
    if unknown(types) or any(unknown(t) for t in as_list(types)):
        return
    types = as_list(types)
    if len(types) != 1:
        yield f"EFA node group has {len(types)} instance types; use exactly one"
    elif types[0] not in instances.CATALOG or not instances.CATALOG[types[0]].efa:
        yield f"{types[0]} is not an EFA instance type of the catalog"
    else:
        want = instances.CATALOG[types[0]].efa_interfaces
        got = len(efa_interfaces(lt))
        if got != want:
            yield f"launch template {lt.get('name')} has {got} EFA interfaces; {types[0]} has {want} EFA cards"


def subnet_azs(resources: Sequence[Resource], ng: Resource) -> set[str]:
    subnets = referenced(resources, ng, "subnetIds", inputs(ng).get("subnetIds"), T_SUBNET)
    return {str(az) for s in subnets if known(az := inputs(s).get("availabilityZone"))}


def check_efa_node_groups(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """EFA node groups: one subnet, one AZ, one instance type, one EFA interface per network
    card of the instance type; the capacity reservation and placement in the subnet's AZ."""
    for ng in of_type(resources, T_NODE_GROUP):
        lt = launch_template_of(resources, ng)
        if lt is None or not efa_interfaces(lt):
            continue
        for msg in _node_group_shape(resources, ng, lt):
            yield ng, msg
        azs = subnet_azs(resources, ng)
        rid = dig(inputs(lt), "capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId")
        reservation_az = context.reservation_azs.get(rid) if known(rid) else None
        placement_az = dig(inputs(lt), "placement", "availabilityZone")
        for label, az in ((f"capacity reservation {rid}", reservation_az), ("placement", placement_az)):
            if known(az) and azs and az not in azs:
                yield ng, f"{label} is in {az} but the node group's subnet is in {', '.join(sorted(azs))}"


def check_fsx_security_group(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """The file system's security groups admit other security groups (the nodes), no CIDRs."""
    for fs in of_type(resources, T_FSX):
        for sg in referenced(resources, fs, "securityGroupIds", inputs(fs).get("securityGroupIds"), T_SG):
            for direction, rule, norm in rules_of(resources, sg):
                cidrs = [c for c in norm["cidrs"] if not unknown(c)]
                if direction == "ingress" and cidrs:
                    yield (
                        rule,
                        f"file-system group {sg.get('name')} admits {', '.join(cidrs)}; "
                        "admit the node security groups instead",
                    )


_PUBLIC_ACCESS_SETTINGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def _enabled(status: object) -> bool:
    return status == "Enabled" or unknown(status)


def check_buckets(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """S3 buckets: versioned, encrypted, public access blocked (by their companion resources,
    or inline on a v1 bucket), and a versioned bucket's old versions and unfinished uploads bounded
    by a lifecycle rule."""
    for b in of_type(resources, *T_BUCKETS):
        i = inputs(b)

        def companions(*types: str, bucket: Resource = b) -> list[Resource]:
            return [c for c in of_type(resources, *types) if refers(c, "bucket", inputs(c).get("bucket"), bucket)]

        versioned = is_true(dig(i, "versioning", "enabled")) or any(
            _enabled(dig(inputs(v), "versioningConfiguration", "status")) for v in companions(*T_VERSIONING)
        )
        if not versioned:
            yield b, "bucket is not versioned (BucketVersioning with status Enabled)"
        encrypted = bool(i.get("serverSideEncryptionConfiguration")) or any(
            unknown(inputs(e).get("rules")) or as_list(inputs(e).get("rules")) for e in companions(*T_SSE)
        )
        if not encrypted:
            yield b, "bucket has no server-side encryption configuration (SSE-KMS or SSE-S3)"
        blocked = any(
            all(is_true(v) or unknown(v) for v in (inputs(p).get(k) for k in _PUBLIC_ACCESS_SETTINGS))
            for p in companions(T_PUBLIC_ACCESS_BLOCK)
        )
        if not blocked:
            yield b, "public access is not blocked (BucketPublicAccessBlock with all four settings true)"
        if versioned and not any(_bounds_versions(inputs(c).get("rules")) for c in companions(*T_LIFECYCLE)):
            yield (
                b,
                (
                    "versioned bucket keeps every old version forever: a BucketLifecycleConfiguration rule must expire"
                    " noncurrent versions and abort incomplete multipart uploads"
                ),
            )


def _bounds_versions(rules: object) -> bool:
    """An enabled rule that expires noncurrent versions and aborts unfinished uploads (unknown on a
    first preview counts)."""
    if unknown(rules):
        return True
    return any(
        _enabled(dig(r, "status"))
        and (unknown(dig(r, "noncurrentVersionExpiration")) or dig(r, "noncurrentVersionExpiration", "noncurrentDays"))
        and (
            unknown(dig(r, "abortIncompleteMultipartUpload"))
            or dig(r, "abortIncompleteMultipartUpload", "daysAfterInitiation")
        )
        for r in as_list(rules)
    )


def check_flow_log_groups(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """The CloudWatch log groups VPC flow logs write to are protected (an audit trail),
    unless the stack turns protection off on purpose."""
    if not context.protect_stateful_resources:
        return
    seen: set[str] = set()
    for fl in of_type(resources, T_FLOW_LOG):
        i = inputs(fl)
        if i.get("logDestinationType") not in (None, "cloud-watch-logs"):
            continue
        groups = referenced(resources, fl, "logDestination", i.get("logDestination"), T_LOG_GROUP)
        groups += referenced(resources, fl, "logGroupName", i.get("logGroupName"), T_LOG_GROUP)
        for g in groups:
            if not g.get("protect") and str(g.get("urn")) not in seen:
                seen.add(str(g.get("urn")))
                yield (
                    g,
                    "VPC flow logs write here but the log group is not protected; create it with "
                    "infra.protection.stateful() (or set protectStatefulResources: false for a throwaway stack)",
                )
