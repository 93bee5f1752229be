"""Type tokens and the readers the rules share.

A resource is a mapping shaped like an entry of the offline plan's `resources`
(`{"urn", "id", "type", "name", "protect", "dependencies", "inputs"}`, plus
`"propertyDependencies"` where the engine gives them). Its `inputs` are the properties the
rule sees: a resource's inputs for a resource rule, its outputs for a stack rule inside
CrossGuard. Values unknown during a preview read as `UNKNOWN` (the CrossGuard adapter maps
pulumi-policy's sentinels to it; the offline plan writes the same string).

Readers accept any `Mapping`/`Sequence`, not only `dict`/`list`: pulumi-policy hands
properties in its own proxy types. No reader raises; an unknown is a value like any other,
and each rule decides what an unknown means for it (never a mandatory violation by itself).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Resource = Mapping[str, Any]

UNKNOWN = "<computed>"
"""A value the engine does not know yet (an id, an ARN, anything computed from one)."""

EKS_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")

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
T_LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
T_FLOW_LOG = "aws:ec2/flowLog:FlowLog"
T_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
T_VERSIONING = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
T_SSE = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
T_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
T_LIFECYCLE = (
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2",
)
T_HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
T_KUBERNETES = "kubernetes:*"
"""Every Kubernetes object (a prefix: rules match `kubernetes:` types)."""
STATEFUL_TYPES = (T_FSX, T_ECR, T_KMS, *T_BUCKETS)

# Kubernetes kinds whose pods we check, and where their pod spec sits.
_TEMPLATE_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job")

# --------------------------------------------------------------------------- values


def unknown(v: Any) -> bool:
    return isinstance(v, str) and v == UNKNOWN


def known(v: Any) -> bool:
    """A known, non-empty string (an id, a name, an ARN)."""
    return isinstance(v, str) and bool(v) and v != UNKNOWN


def as_map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, Sequence) and not isinstance(v, (str, bytes)) else []


def dig(obj: Any, *path: str | int) -> Any:
    """obj[p0][p1]...: None where a step is missing; UNKNOWN below an unknown value (the
    fields of an unknown object are unknown, not absent)."""
    for p in path:
        if unknown(obj):
            return UNKNOWN
        if isinstance(p, int):
            items = as_list(obj)
            if len(items) <= p:
                return None
            obj = items[p]
        else:
            if not isinstance(obj, Mapping):
                return None
            obj = obj.get(p)
    return obj


def is_true(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() == "true")


def is_false(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.lower() == "false")


def number(v: Any) -> float | None:
    """A number (the engine carries every number as a double), or None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# --------------------------------------------------------------------------- resources


def type_of(r: Resource) -> str:
    return str(r.get("type", ""))


def matches(type_: str, patterns: Sequence[str]) -> bool:
    """`type_` is one of the patterns (`prefix*` matches a prefix)."""
    return any(type_ == p or (p.endswith("*") and type_.startswith(p[:-1])) for p in patterns)


def of_type(resources: Sequence[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if matches(type_of(r), types)]


def inputs(r: Resource) -> Mapping[str, Any]:
    return as_map(r.get("inputs"))


def tags_of(r: Resource) -> Mapping[str, Any]:
    return as_map(inputs(r).get("tags"))


def has_reason(tags: Mapping[str, Any], tag: str) -> bool:
    """The tags (or annotations) hold `tag` with a reason: a non-empty value."""
    reason = tags.get(tag)
    return isinstance(reason, str) and bool(reason.strip()) and not unknown(reason)


def excepted(r: Resource, tag: str) -> bool:
    """The resource carries the exception tag with a reason."""
    return has_reason(tags_of(r), tag)


def _handles(target: Resource) -> set[str]:
    """What an input of another resource may hold to name `target`: its id, ARN, name."""
    i = inputs(target)
    values = (target.get("id"), i.get("id"), i.get("arn"), i.get("name"), i.get("bucket"), i.get("keyId"))
    return {str(v) for v in values if known(v)}


def refers(r: Resource, prop: str, value: Any, target: Resource) -> bool:
    """`value`, held in r's top-level input `prop`, names `target`.

    A known value is compared with the target's id, ARN and name. An unknown one (an id
    during a first preview), or one the target cannot be compared with (it shows no id, or
    no ARN for an ARN), is resolved through the engine's dependencies: those of the property
    where the engine gives them (CrossGuard), else all of r's dependencies."""
    if known(value):
        if value in _handles(target):
            return True
        # A target that shows its id (or ARN), known or not, is not this value. One that does
        # not show it (the offline plan records inputs, without ARNs): follow the graph.
        shown = inputs(target).get("arn") if value.startswith("arn:") else target.get("id")
        if shown is not None:
            return False
    elif value is None:
        return False
        return False
    by_prop = as_map(r.get("propertyDependencies"))
    deps = by_prop[prop] if prop in by_prop else r.get("dependencies")
    return target.get("urn") in as_list(deps)


def referenced(resources: Sequence[Resource], r: Resource, prop: str, values: Any, *types: str) -> list[Resource]:
    """The resources of `types` that r's input `prop` (one value or a list) names."""
    wanted = as_list(values) if isinstance(values, Sequence) and not isinstance(values, str) else [values]
    return [t for t in of_type(resources, *types) if any(refers(r, prop, v, t) for v in wanted)]


# --------------------------------------------------------------------------- security groups


def rules_of(resources: Sequence[Resource], sg: Resource) -> list[tuple[str, Resource, Mapping[str, Any]]]:
    """(direction, rule resource, normalised rule) for standalone and inline rules of a group.
    Normalised: protocol, ports, cidrs, self-reference, description."""
    out: list[tuple[str, Resource, Mapping[str, Any]]] = []
    for t, direction in ((T_INGRESS, "ingress"), (T_EGRESS, "egress")):
        for r in of_type(resources, t):
            i = inputs(r)
            if refers(r, "securityGroupId", i.get("securityGroupId"), sg):
                ref = i.get("referencedSecurityGroupId")
                norm = {**vpc_rule(i), "self": ref is not None and refers(r, "referencedSecurityGroupId", ref, sg)}
                out.append((direction, r, norm))
    for r in of_type(resources, T_SG_RULE):
        i = inputs(r)
        if refers(r, "securityGroupId", i.get("securityGroupId"), sg):
            out.append((str(i.get("type")), r, classic_rule(i)))
    for direction in ("ingress", "egress"):
        for rule in as_list(inputs(sg).get(direction)):
            out.append((direction, sg, classic_rule(as_map(rule))))
    return out


def vpc_rule(i: Mapping[str, Any]) -> dict[str, Any]:
    """A `SecurityGroupIngressRule`/`EgressRule`, normalised (self-reference not decided)."""
    return {
        "protocol": str(i.get("ipProtocol")),
        "ports": (i.get("fromPort"), i.get("toPort")),
        "cidrs": [c for c in (i.get("cidrIpv4"), i.get("cidrIpv6")) if c],
        "self": False,
        "description": i.get("description"),
    }


def classic_rule(i: Mapping[str, Any]) -> dict[str, Any]:
    """A `SecurityGroupRule` or an inline rule of a `SecurityGroup`, normalised."""
    return {
        "protocol": str(i.get("protocol")),
        "ports": (i.get("fromPort"), i.get("toPort")),
        "cidrs": as_list(i.get("cidrBlocks")) + as_list(i.get("ipv6CidrBlocks")),
        "self": is_true(i.get("self")),
        "description": i.get("description"),
    }


def all_traffic(protocol: str) -> bool:
    return protocol in ("-1", "all")


def efa_interfaces(lt: Resource) -> list[Mapping[str, Any]]:
    return [
        as_map(n)
        for n in as_list(inputs(lt).get("networkInterfaces"))
        if as_map(n).get("interfaceType") in ("efa", "efa-only")
    ]


# --------------------------------------------------------------------------- Kubernetes


def kind_of(r: Resource) -> str:
    return type_of(r).rsplit(":", 1)[-1]


def pod_specs(r: Resource) -> list[tuple[str, Mapping[str, Any]]]:
    """(where, pod spec) of a Kubernetes workload object: Pod, the template of a Deployment,
    DaemonSet, StatefulSet, Job or CronJob, and each replica template of an MPIJob or another
    Kubeflow job (`spec.<x>ReplicaSpecs`)."""
    if not type_of(r).startswith("kubernetes:"):
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
    return [as_map(c) for key in ("initContainers", "containers") for c in as_list(ps.get(key))]


def annotations_of(r: Resource) -> Mapping[str, Any]:
    return as_map(dig(inputs(r), "metadata", "annotations"))


def pod_workloads(resources: Sequence[Resource]) -> Iterator[tuple[Resource, str, Mapping[str, Any]]]:
    for r in resources:
        for where, ps in pod_specs(r):
            yield r, where, ps
