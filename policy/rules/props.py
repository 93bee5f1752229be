"""Type tokens and the readers the rules share: resources as the offline plan and CrossGuard
hand them (plain mappings; values that are unknown during a preview read as `<computed>`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Resource = Mapping[str, Any]

# Exceptions are explicit and carry a reason: a tag on the resource, its value the reason.
HOP_LIMIT_EXCEPTION_TAG = "llm-training-eks/policy-exception/imds-hop-limit-2"
SCRATCH_EXCEPTION_TAG = "llm-training-eks/policy-exception/scratch-file-system"

EKS_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
WORLD = ("0.0.0.0/0", "::/0")

T_EKS_COMPONENT = "eks:index:Cluster"
T_EKS_CLUSTER = "aws:eks/cluster:Cluster"
T_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
T_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
T_SUBNET = "aws:ec2/subnet:Subnet"
T_SG = "aws:ec2/securityGroup:SecurityGroup"
T_SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
T_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
T_EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
T_ECR = "aws:ecr/repository:Repository"
T_FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
T_KMS = "aws:kms/key:Key"
T_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
T_VERSIONING = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
T_SSE = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
T_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
T_HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
STATEFUL_TYPES = (T_FSX, T_ECR, T_KMS, *T_BUCKETS)

# Kubernetes kinds whose pods we check, and where their pod spec sits.
_TEMPLATE_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job")


def of_type(resources: Sequence[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if r.get("type") in types]


def inputs(r: Resource) -> Mapping[str, Any]:
    i = r.get("inputs")
    return i if isinstance(i, Mapping) else {}


def dig(obj: Any, *path: str | int) -> Any:
    for p in path:
        if isinstance(p, int):
            if not isinstance(obj, list) or len(obj) <= p:
                return None
            obj = obj[p]
        else:
            if not isinstance(obj, Mapping):
                return None
            obj = obj.get(p)
    return obj


def as_map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def is_true(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() == "true")


def is_false(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.lower() == "false")


def as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def known(v: Any) -> bool:
    return isinstance(v, str) and bool(v) and v != "<computed>"


def refers(r: Resource, target: Resource, value: Any) -> bool:
    """`value` (an input of r) names `target`: by physical id or name when known, else by
    the dependency the engine recorded (ids are unknown during a real preview)."""
    ids = {target.get("id"), inputs(target).get("bucket"), inputs(target).get("name")}
    if known(value) and value in {i for i in ids if known(i)}:
        return True
    return not known(value) and target.get("urn") in as_list(r.get("dependencies"))


def tags_of(r: Resource) -> Mapping[str, Any]:
    t = inputs(r).get("tags")
    return t if isinstance(t, Mapping) else {}


def is_world(cidr: Any) -> bool:
    if not isinstance(cidr, str):
        return False
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def subnet_azs(resources: Sequence[Resource], subnet_ids: list[Any]) -> set[str]:
    azs = set()
    for s in of_type(resources, T_SUBNET):
        if s.get("id") in subnet_ids and isinstance(inputs(s).get("availabilityZone"), str):
            azs.add(inputs(s)["availabilityZone"])
    return azs


def efa_interfaces(lt: Resource) -> list[Mapping[str, Any]]:
    return [
        n
        for n in as_list(inputs(lt).get("networkInterfaces"))
        if isinstance(n, Mapping) and n.get("interfaceType") in ("efa", "efa-only")
    ]


def launch_template_of(resources: Sequence[Resource], ng: Resource) -> Resource | None:
    ref = inputs(ng).get("launchTemplate") or {}
    for lt in of_type(resources, T_LAUNCH_TEMPLATE):
        if known(ref.get("id")) and ref.get("id") == lt.get("id"):
            return lt
        if known(ref.get("name")) and ref.get("name") == inputs(lt).get("name"):
            return lt
    for lt in of_type(resources, T_LAUNCH_TEMPLATE):
        if lt.get("urn") in as_list(ng.get("dependencies")):
            return lt
    return None


def security_groups_of(resources: Sequence[Resource], lt: Resource) -> list[Resource]:
    i = inputs(lt)
    ids = set(as_list(i.get("vpcSecurityGroupIds")))
    for n in as_list(i.get("networkInterfaces")):
        ids.update(as_list(dig(n, "securityGroups")))
    return [
        sg
        for sg in of_type(resources, T_SG)
        if sg.get("id") in ids or (sg.get("urn") in as_list(lt.get("dependencies")) and not known(sg.get("id")))
    ]


def rules_of(resources: Sequence[Resource], sg: Resource) -> list[tuple[str, Resource, Mapping[str, Any]]]:
    """(direction, rule resource, normalised rule) for standalone and inline rules of a group.
    Normalised: protocol, cidrs, referenced group (or "self"), description."""
    out: list[tuple[str, Resource, Mapping[str, Any]]] = []
    for t, direction in ((T_INGRESS, "ingress"), (T_EGRESS, "egress")):
        for r in of_type(resources, t):
            i = inputs(r)
            if not refers(r, sg, i.get("securityGroupId")):
                continue
            ref = i.get("referencedSecurityGroupId")
            is_self = (known(ref) and ref == i.get("securityGroupId")) or (
                ref is not None and not known(ref) and refers(r, sg, ref)
            )
            out.append(
                (
                    direction,
                    r,
                    {
                        "protocol": str(i.get("ipProtocol")),
                        "cidrs": [c for c in (i.get("cidrIpv4"), i.get("cidrIpv6")) if c],
                        "self": is_self,
                        "description": i.get("description"),
                    },
                )
            )
    for r in of_type(resources, T_SG_RULE):
        i = inputs(r)
        if refers(r, sg, i.get("securityGroupId")):
            out.append(
                (
                    str(i.get("type")),
                    r,
                    {
                        "protocol": str(i.get("protocol")),
                        "cidrs": as_list(i.get("cidrBlocks")) + as_list(i.get("ipv6CidrBlocks")),
                        "self": is_true(i.get("self")),
                        "description": i.get("description"),
                    },
                )
            )
    for direction in ("ingress", "egress"):
        for rule in as_list(inputs(sg).get(direction)):
            if isinstance(rule, Mapping):
                out.append(
                    (
                        direction,
                        sg,
                        {
                            "protocol": str(rule.get("protocol")),
                            "cidrs": as_list(rule.get("cidrBlocks")) + as_list(rule.get("ipv6CidrBlocks")),
                            "self": is_true(rule.get("self")),
                            "description": rule.get("description"),
                        },
                    )
                )
    return out


def all_traffic(protocol: str) -> bool:
    return protocol in ("-1", "all")


def kind_of(r: Resource) -> str:
    return str(r.get("type", "")).rsplit(":", 1)[-1]


def pod_specs(r: Resource) -> list[tuple[str, Mapping[str, Any]]]:
    """(where, pod spec) of a Kubernetes workload object: Pod, the template of a Deployment,
    DaemonSet, StatefulSet, Job or CronJob, and each replica template of an MPIJob or another
    Kubeflow job (`spec.<x>ReplicaSpecs`)."""
    if not str(r.get("type", "")).startswith("kubernetes:"):
        return []
    obj = inputs(r)
    kind = kind_of(r)
    spec = as_map(obj.get("spec"))
    found: list[tuple[str, Any]] = []
    if kind == "Pod":
        found.append(("spec", spec))
    elif kind in _TEMPLATE_KINDS:
        found.append(("spec.template.spec", dig(spec, "template", "spec")))
    elif kind == "CronJob":
        found.append(("spec.jobTemplate.spec.template.spec", dig(spec, "jobTemplate", "spec", "template", "spec")))
    else:
        for key, replicas in sorted(spec.items()):
            if key.endswith("ReplicaSpecs") and isinstance(replicas, Mapping):
                for role, rs in sorted(replicas.items()):
                    found.append((f"spec.{key}.{role}.template.spec", dig(rs, "template", "spec")))
    return [(where, ps) for where, ps in found if isinstance(ps, Mapping)]


def containers(ps: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for key in ("initContainers", "containers") for c in as_list(ps.get(key)) if isinstance(c, Mapping)]


def pod_workloads(resources: Sequence[Resource]) -> Iterator[tuple[Resource, str, Mapping[str, Any]]]:
    for r in resources:
        for where, ps in pod_specs(r):
            yield r, where, ps
