"""Resource rules over AWS resources: each looks at one resource's properties.

Control plane, launch templates, security-group rules open to the internet, rule
descriptions, ECR, FSx durability, protection of stateful resources. An unknown value (during
a preview) never makes a violation: the rule runs again on known values at `pulumi up`,
before the resource is created.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from facts.names import (
    HOP_LIMIT_EXCEPTION_TAG,
    NO_SCAN_EXCEPTION_TAG,
    PUBLIC_ENDPOINT_EXCEPTION_TAG,
    SCRATCH_EXCEPTION_TAG,
)
from facts.networks import covers_internet
from policy.rules.model import Context
from policy.rules.props import (
    EKS_LOG_TYPES,
    T_EKS_COMPONENT,
    T_INGRESS,
    T_LOG_GROUP,
    T_SG,
    T_SG_RULE,
    Resource,
    all_traffic,
    as_list,
    as_map,
    classic_rule,
    dig,
    excepted,
    has_reason,
    inputs,
    is_false,
    is_true,
    number,
    tags_of,
    type_of,
    unknown,
    vpc_rule,
)

# The log group EKS writes control-plane logs to (EKS user guide, control-plane-logs:
# "/aws/eks/my-cluster/cluster").
EKS_LOG_GROUP_RE = re.compile(r"/aws/eks/[^/]+/cluster")
# Inputs of pulumi-eks's Cluster that say how the endpoint is set; CrossGuard may show the
# component's outputs instead (or nothing), and then its `aws:eks/cluster:Cluster` child,
# which always carries them, is the one checked.
_EKS_COMPONENT_SECURITY_INPUTS = (
    "endpointPublicAccess",
    "endpointPrivateAccess",
    "publicAccessCidrs",
    "encryptionConfigKeyArn",
    "enabledClusterLogTypes",
)


def _eks_settings(r: Resource) -> dict[str, Any] | None:
    """(public, private, cidrs, key, logs, tags) of an EKS control plane, absent values as the
    defaults of pulumi-eks and EKS (public endpoint on and open, private off); None when the
    resource does not show them."""
    i = inputs(r)
    if type_of(r) == T_EKS_COMPONENT:
        if not any(k in i for k in _EKS_COMPONENT_SECURITY_INPUTS):
            return None
        return {
            "public": i.get("endpointPublicAccess", True),
            "private": i.get("endpointPrivateAccess", False),
            "cidrs": i.get("publicAccessCidrs"),
            "key": i.get("encryptionConfigKeyArn"),
            "logs": i.get("enabledClusterLogTypes"),
            "tags": {**as_map(i.get("clusterTags")), **as_map(i.get("tags"))},
        }
    enc = i.get("encryptionConfig")
    enc = as_list(enc)[0] if as_list(enc) else enc  # one object in pulumi-aws 7; a list before
    secrets = dig(enc, "resources")
    key = dig(enc, "provider", "keyArn") if unknown(secrets) or "secrets" in as_list(secrets) else None
    public = dig(i, "vpcConfig", "endpointPublicAccess")
    private = dig(i, "vpcConfig", "endpointPrivateAccess")
    return {
        "public": True if public is None else public,
        "private": False if private is None else private,
        "cidrs": dig(i, "vpcConfig", "publicAccessCidrs"),
        "key": key,
        "logs": i.get("enabledClusterLogTypes"),
        "tags": tags_of(r),
    }


def check_eks_control_plane(r: Resource, context: Context) -> Iterator[str]:
    """EKS: public endpoint not open to the whole internet (unless excepted); private endpoint
    on; KMS secrets encryption; every control-plane log type."""
    s = _eks_settings(r)
    if s is None:
        return
    cidrs = s["cidrs"]
    cidrs_known = not unknown(cidrs) and not any(unknown(c) for c in as_list(cidrs))
    world = is_true(s["public"]) and cidrs_known and covers_internet(as_list(cidrs) or ["0.0.0.0/0"])
    if world and not has_reason(s["tags"], PUBLIC_ENDPOINT_EXCEPTION_TAG):
        shown = ", ".join(map(str, as_list(cidrs))) or "0.0.0.0/0, the default"
        yield (
            f"public API endpoint is open to the whole internet ({shown}); turn it off "
            "(cluster.publicAccessCidrs: []) or list your networks in cluster.publicAccessCidrs "
            f"(tag {PUBLIC_ENDPOINT_EXCEPTION_TAG}=<reason>, set by cluster.allowPublicAccessFromAnywhere, "
            "accepts it)"
        )
    if not unknown(s["private"]) and not is_true(s["private"]):
        yield "private API endpoint is off; nodes must reach the API inside the VPC (endpointPrivateAccess)"
    if not s["key"]:
        yield "Kubernetes secrets are not encrypted with a KMS key (encryptionConfigKeyArn)"
    if not unknown(s["logs"]):
        missing = [t for t in EKS_LOG_TYPES if t not in as_list(s["logs"])]
        if missing:
            yield f"control-plane log types not enabled: {', '.join(missing)}"


def check_launch_template(lt: Resource, context: Context) -> Iterator[str]:
    """Launch templates: IMDSv2 required, hop limit 1 (2 only by explicit exception),
    encrypted volumes, no public IPs."""
    i = inputs(lt)
    tokens = dig(i, "metadataOptions", "httpTokens")
    if not unknown(tokens) and tokens != "required":
        yield "IMDSv2 is not required (metadataOptions.httpTokens must be 'required')"
    raw_hop = dig(i, "metadataOptions", "httpPutResponseHopLimit")
    hop = number(raw_hop)
    if not unknown(raw_hop) and hop != 1 and not (hop == 2 and excepted(lt, HOP_LIMIT_EXCEPTION_TAG)):
        shown = "unset (AMIs made for IMDSv2 then default to 2)" if hop is None else f"{hop:g}"
        hint = f"; 2 only with tag {HOP_LIMIT_EXCEPTION_TAG}=<reason>" if hop == 2 else ""
        yield f"IMDS hop limit is {shown}, must be 1 so pods cannot use the node role{hint}"
    for bdm in as_list(i.get("blockDeviceMappings")):
        ebs = dig(bdm, "ebs")
        encrypted = dig(ebs, "encrypted")
        if isinstance(ebs, Mapping) and not unknown(encrypted) and not is_true(encrypted):
            yield f"EBS volume {dig(bdm, 'deviceName')} is not encrypted (ebs.encrypted)"
    for n in as_list(i.get("networkInterfaces")):
        if is_true(dig(n, "associatePublicIpAddress")):
            yield f"network interface on card {dig(n, 'networkCardIndex')} gets a public IP"


def own_rules(r: Resource) -> list[tuple[str, Mapping[str, Any]]]:
    """(direction, normalised rule) of the rules one resource holds itself: a standalone
    ingress/egress rule, a `SecurityGroupRule`, or the inline rules of a `SecurityGroup`."""
    i = inputs(r)
    t = type_of(r)
    if t == T_SG:
        return [(d, classic_rule(as_map(x))) for d in ("ingress", "egress") for x in as_list(i.get(d))]
    if t == T_SG_RULE:
        return [(str(i.get("type")), classic_rule(i))]
    return [("ingress" if t == T_INGRESS else "egress", vpc_rule(i))]


def open_to_internet(rules: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The CIDR lists that together admit the whole internet to one protocol and port range
    (an all-traffic rule admits to every one). Unknown CIDRs count for nothing."""
    by_port: dict[tuple[str, Any], list[str]] = {}
    everything: list[str] = []
    for rule in rules:
        cidrs = [c for c in as_list(rule["cidrs"]) if isinstance(c, str) and not unknown(c)]
        if all_traffic(rule["protocol"]):
            everything.extend(cidrs)
        else:
            by_port.setdefault((rule["protocol"], rule["ports"]), []).extend(cidrs)
    groups = [everything] + [cidrs + everything for cidrs in by_port.values()]
    found: list[list[str]] = []
    for cidrs in groups:
        if cidrs and covers_internet(cidrs) and sorted(set(cidrs)) not in found:
            found.append(sorted(set(cidrs)))
    return found


def check_internet_ingress(r: Resource, context: Context) -> Iterator[str]:
    """No ingress rule, nor the inline rules of one group together, admits the whole internet."""
    ingress = [rule for direction, rule in own_rules(r) if direction == "ingress"]
    for cidrs in open_to_internet(ingress):
        yield f"ingress from the whole internet ({', '.join(cidrs)})"


def check_rule_descriptions(r: Resource, context: Context) -> Iterator[str]:
    """Security-group rules say why they exist."""
    for direction, rule in own_rules(r):
        if not rule["description"]:
            yield f"{direction} rule has no description"


def check_ecr(r: Resource, context: Context) -> Iterator[str]:
    """ECR: immutable tags, scan on push (unless excepted), KMS encryption."""
    i = inputs(r)
    mutability = i.get("imageTagMutability")
    if not unknown(mutability) and mutability not in ("IMMUTABLE", "IMMUTABLE_WITH_EXCLUSION"):
        yield "image tags are mutable; set imageTagMutability: IMMUTABLE so a tag always means one image"
    scan = dig(i, "imageScanningConfiguration", "scanOnPush")
    if not unknown(scan) and not is_true(scan) and not excepted(r, NO_SCAN_EXCEPTION_TAG):
        yield (
            "images are not scanned on push (imageScanningConfiguration.scanOnPush); "
            f"or tag {NO_SCAN_EXCEPTION_TAG}=<reason>"
        )
    encryption = dig(i, "encryptionConfigurations", 0, "encryptionType")
    if not unknown(encryption) and encryption not in ("KMS", "KMS_DSSE"):
        yield "repository is not encrypted with KMS (encryptionConfigurations[0].encryptionType: KMS)"


def check_fsx(fs: Resource, context: Context) -> Iterator[str]:
    """FSx for Lustre: persistent deployment (SCRATCH only by explicit exception), backups on,
    final backup on delete, a security group of its own."""
    i = inputs(fs)
    deployment = i.get("deploymentType") or "SCRATCH_1"
    if unknown(deployment):
        return
    persistent = str(deployment).startswith("PERSISTENT")
    if not persistent and not excepted(fs, SCRATCH_EXCEPTION_TAG):
        yield (
            f"deploymentType {deployment} is not replicated; use PERSISTENT_2 for checkpoints "
            f"(or tag {SCRATCH_EXCEPTION_TAG}=<reason> for throwaway data)"
        )
    if persistent:
        raw_days = i.get("automaticBackupRetentionDays")
        days = number(raw_days)
        if not unknown(raw_days) and (days is None or days < 1):
            yield "automatic backups are off (automaticBackupRetentionDays: 1 to 90)"
        skip = i.get("skipFinalBackup")
        if not unknown(skip) and not is_false(skip):
            yield "no final backup on delete (skipFinalBackup defaults to true; set it to false)"
    groups = i.get("securityGroupIds")
    if not unknown(groups) and not as_list(groups):
        yield "no security group: the VPC default group applies; allow Lustre ports from the nodes only"


def stateful(r: Resource) -> bool:
    """Holds data worth keeping: the data stores, and the log group of the EKS audit trail."""
    if type_of(r) != T_LOG_GROUP:
        return True
    name = inputs(r).get("name")
    return isinstance(name, str) and EKS_LOG_GROUP_RE.fullmatch(name) is not None


def check_stateful_protected(r: Resource, context: Context) -> Iterator[str]:
    """FSx, S3 buckets, ECR, KMS keys and the EKS control-plane log group are protected,
    unless the stack turns protection off on purpose."""
    if context.protect_stateful_resources and stateful(r) and not r.get("protect"):
        yield (
            "holds data but is not protected; create it with infra.protection.stateful() "
            "(or set protectStatefulResources: false for a throwaway stack)"
        )
