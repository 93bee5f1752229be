"""The guardrail rules, as plain functions over plan-style resources.

A resource is a mapping shaped like an entry of the offline plan's `resources`
(`{"urn", "id", "type", "name", "protect", "dependencies", "inputs"}`, inputs camelCase as
the engine sees them). `check(resources, context)` runs every rule and returns the
violations. The same functions serve three callers: the offline plan (`infra.plan`), the
CrossGuard pack (`policy/__main__.py`, for `pulumi preview --policy-pack policy`) and the
tests, which give each rule one passing and one failing fixture.

Every rule tolerates the absence of the resource types it looks at, so it keeps passing as
storage, registry and workloads land.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infra import catalog

Resource = Mapping[str, Any]
Enforcement = Literal["mandatory", "advisory"]

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
ACCELERATOR_RESOURCES = (catalog.NEURON_RESOURCE, catalog.NEURONCORE_RESOURCE, catalog.NVIDIA_RESOURCE)


@dataclass(frozen=True)
class Context:
    """What the rules need beyond the resources."""

    protect_stateful_resources: bool = True
    """The stack's `protectStatefulResources`: false turns rule 8 off on purpose."""
    reservation_azs: Mapping[str, str] = field(default_factory=dict)
    """Capacity reservation id -> its AZ, where known (preflight looks them up)."""


@dataclass(frozen=True, order=True)
class Violation:
    """One broken rule on one resource."""

    rule: str
    name: str
    urn: str
    message: str
    enforcement: Enforcement

    def line(self) -> str:
        """One line for a terminal or CI log: enforcement, rule, resource, what to do."""
        return f"policy {self.enforcement} [{self.rule}] {self.name}: {self.message}"

    def as_dict(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "name": self.name,
            "urn": self.urn,
            "message": self.message,
            "enforcement": self.enforcement,
        }


Finding = tuple[Resource, str]
Check = Callable[[Sequence[Resource], Context], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A named check with one enforcement level."""

    id: str
    description: str
    enforcement: Enforcement
    check: Check

    def run(self, resources: Sequence[Resource], context: Context) -> list[Violation]:
        return sorted(
            Violation(self.id, str(r.get("name", "")), str(r.get("urn", "")), msg, self.enforcement)
            for r, msg in self.check(resources, context)
        )


# --------------------------------------------------------------------------- helpers


def _of(resources: Sequence[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if r.get("type") in types]


def _inputs(r: Resource) -> Mapping[str, Any]:
    i = r.get("inputs")
    return i if isinstance(i, Mapping) else {}


def _get(obj: Any, *path: str | int) -> Any:
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


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _true(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() == "true")


def _false(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.lower() == "false")


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def _known(v: Any) -> bool:
    return isinstance(v, str) and bool(v) and v != "<computed>"


def _refers(r: Resource, target: Resource, value: Any) -> bool:
    """`value` (an input of r) names `target`: by physical id or name when known, else by
    the dependency the engine recorded (ids are unknown during a real preview)."""
    ids = {target.get("id"), _inputs(target).get("bucket"), _inputs(target).get("name")}
    if _known(value) and value in {i for i in ids if _known(i)}:
        return True
    return not _known(value) and target.get("urn") in _list(r.get("dependencies"))


def _tags(r: Resource) -> Mapping[str, Any]:
    t = _inputs(r).get("tags")
    return t if isinstance(t, Mapping) else {}


def _is_world(cidr: Any) -> bool:
    if not isinstance(cidr, str):
        return False
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def _subnet_azs(resources: Sequence[Resource], subnet_ids: list[Any]) -> set[str]:
    azs = set()
    for s in _of(resources, T_SUBNET):
        if s.get("id") in subnet_ids and isinstance(_inputs(s).get("availabilityZone"), str):
            azs.add(_inputs(s)["availabilityZone"])
    return azs


def _efa_interfaces(lt: Resource) -> list[Mapping[str, Any]]:
    return [
        n
        for n in _list(_inputs(lt).get("networkInterfaces"))
        if isinstance(n, Mapping) and n.get("interfaceType") in ("efa", "efa-only")
    ]


def _launch_template_of(resources: Sequence[Resource], ng: Resource) -> Resource | None:
    ref = _inputs(ng).get("launchTemplate") or {}
    for lt in _of(resources, T_LAUNCH_TEMPLATE):
        if _known(ref.get("id")) and ref.get("id") == lt.get("id"):
            return lt
        if _known(ref.get("name")) and ref.get("name") == _inputs(lt).get("name"):
            return lt
    for lt in _of(resources, T_LAUNCH_TEMPLATE):
        if lt.get("urn") in _list(ng.get("dependencies")):
            return lt
    return None


def _security_groups_of(resources: Sequence[Resource], lt: Resource) -> list[Resource]:
    i = _inputs(lt)
    ids = set(_list(i.get("vpcSecurityGroupIds")))
    for n in _list(i.get("networkInterfaces")):
        ids.update(_list(_get(n, "securityGroups")))
    return [
        sg
        for sg in _of(resources, T_SG)
        if sg.get("id") in ids or (sg.get("urn") in _list(lt.get("dependencies")) and not _known(sg.get("id")))
    ]


def _rules_of(resources: Sequence[Resource], sg: Resource) -> list[tuple[str, Resource, Mapping[str, Any]]]:
    """(direction, rule resource, normalised rule) for standalone and inline rules of a group.
    Normalised: protocol, cidrs, referenced group (or "self"), description."""
    out: list[tuple[str, Resource, Mapping[str, Any]]] = []
    for t, direction in ((T_INGRESS, "ingress"), (T_EGRESS, "egress")):
        for r in _of(resources, t):
            i = _inputs(r)
            if not _refers(r, sg, i.get("securityGroupId")):
                continue
            ref = i.get("referencedSecurityGroupId")
            is_self = (_known(ref) and ref == i.get("securityGroupId")) or (
                ref is not None and not _known(ref) and _refers(r, sg, ref)
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
    for r in _of(resources, T_SG_RULE):
        i = _inputs(r)
        if _refers(r, sg, i.get("securityGroupId")):
            out.append(
                (
                    str(i.get("type")),
                    r,
                    {
                        "protocol": str(i.get("protocol")),
                        "cidrs": _list(i.get("cidrBlocks")) + _list(i.get("ipv6CidrBlocks")),
                        "self": _true(i.get("self")),
                        "description": i.get("description"),
                    },
                )
            )
    for direction in ("ingress", "egress"):
        for rule in _list(_inputs(sg).get(direction)):
            if isinstance(rule, Mapping):
                out.append(
                    (
                        direction,
                        sg,
                        {
                            "protocol": str(rule.get("protocol")),
                            "cidrs": _list(rule.get("cidrBlocks")) + _list(rule.get("ipv6CidrBlocks")),
                            "self": _true(rule.get("self")),
                            "description": rule.get("description"),
                        },
                    )
                )
    return out


def _all_traffic(protocol: str) -> bool:
    return protocol in ("-1", "all")


def _kind(r: Resource) -> str:
    return str(r.get("type", "")).rsplit(":", 1)[-1]


def pod_specs(r: Resource) -> list[tuple[str, Mapping[str, Any]]]:
    """(where, pod spec) of a Kubernetes workload object: Pod, the template of a Deployment,
    DaemonSet, StatefulSet, Job or CronJob, and each replica template of an MPIJob or another
    Kubeflow job (`spec.<x>ReplicaSpecs`)."""
    if not str(r.get("type", "")).startswith("kubernetes:"):
        return []
    obj = _inputs(r)
    kind = _kind(r)
    spec = _map(obj.get("spec"))
    found: list[tuple[str, Any]] = []
    if kind == "Pod":
        found.append(("spec", spec))
    elif kind in _TEMPLATE_KINDS:
        found.append(("spec.template.spec", _get(spec, "template", "spec")))
    elif kind == "CronJob":
        found.append(("spec.jobTemplate.spec.template.spec", _get(spec, "jobTemplate", "spec", "template", "spec")))
    else:
        for key, replicas in sorted(spec.items()):
            if key.endswith("ReplicaSpecs") and isinstance(replicas, Mapping):
                for role, rs in sorted(replicas.items()):
                    found.append((f"spec.{key}.{role}.template.spec", _get(rs, "template", "spec")))
    return [(where, ps) for where, ps in found if isinstance(ps, Mapping)]


def _containers(ps: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for key in ("initContainers", "containers") for c in _list(ps.get(key)) if isinstance(c, Mapping)]


def _workloads(resources: Sequence[Resource]) -> Iterator[tuple[Resource, str, Mapping[str, Any]]]:
    for r in resources:
        for where, ps in pod_specs(r):
            yield r, where, ps


# --------------------------------------------------------------------------- rule 1


def check_eks_control_plane(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """EKS: no public endpoint open to 0.0.0.0/0; private endpoint on; KMS secrets
    encryption; all control-plane log types."""
    for r in _of(resources, T_EKS_COMPONENT, T_EKS_CLUSTER):
        i = _inputs(r)
        if r.get("type") == T_EKS_COMPONENT:
            # pulumi-eks defaults: public endpoint on, private off, open to the world.
            public = i.get("endpointPublicAccess", True)
            private = i.get("endpointPrivateAccess", False)
            cidrs = _list(i.get("publicAccessCidrs"))
            key_arn = i.get("encryptionConfigKeyArn")
        else:
            vpc = _map(i.get("vpcConfig"))
            public = vpc.get("endpointPublicAccess", True)
            private = vpc.get("endpointPrivateAccess", False)
            cidrs = _list(vpc.get("publicAccessCidrs"))
            enc = i.get("encryptionConfig")
            key_arn = _get(enc, "provider", "keyArn") if "secrets" in _list(_get(enc, "resources")) else None
        if _true(public) and (not cidrs or any(_is_world(c) for c in cidrs)):
            yield (
                r,
                "public API endpoint is open to 0.0.0.0/0; turn it off (cluster.publicAccessCidrs: []) "
                "or list your networks in cluster.publicAccessCidrs",
            )
        if not _true(private):
            yield r, "private API endpoint is off; nodes must reach the API inside the VPC (endpointPrivateAccess)"
        if not key_arn:
            yield r, "Kubernetes secrets are not encrypted with a KMS key (encryptionConfigKeyArn)"
        missing = [t for t in EKS_LOG_TYPES if t not in _list(i.get("enabledClusterLogTypes"))]
        if missing:
            yield r, f"control-plane log types not enabled: {', '.join(missing)}"


# --------------------------------------------------------------------------- rule 2


def check_launch_templates(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """Launch templates: IMDSv2 required, hop limit 1 (2 only by explicit exception),
    encrypted volumes, no public IPs."""
    for lt in _of(resources, T_LAUNCH_TEMPLATE):
        i = _inputs(lt)
        md = _map(i.get("metadataOptions"))
        if md.get("httpTokens") != "required":
            yield lt, "IMDSv2 is not required (metadataOptions.httpTokens must be 'required')"
        hop = md.get("httpPutResponseHopLimit")
        excepted = bool(_tags(lt).get(HOP_LIMIT_EXCEPTION_TAG))
        if hop != 1 and not (hop == 2 and excepted):
            hint = f"; 2 only with tag {HOP_LIMIT_EXCEPTION_TAG}=<reason>" if hop == 2 else ""
            yield lt, f"IMDS hop limit is {hop}, must be 1 so pods cannot use the node role{hint}"
        for bdm in _list(i.get("blockDeviceMappings")):
            ebs = _get(bdm, "ebs")
            if isinstance(ebs, Mapping) and not _true(ebs.get("encrypted")):
                yield lt, f"EBS volume {_get(bdm, 'deviceName')} is not encrypted (ebs.encrypted)"
        for n in _list(i.get("networkInterfaces")):
            if _true(_get(n, "associatePublicIpAddress")):
                yield lt, f"network interface on card {_get(n, 'networkCardIndex')} gets a public IP"


# --------------------------------------------------------------------------- rule 3


def check_security_groups(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """Security groups: no ingress from 0.0.0.0/0; EFA groups allow all traffic to and from
    themselves (ingress and egress)."""
    for sg in _of(resources, T_SG):
        for direction, rule, norm in _rules_of(resources, sg):
            if direction == "ingress" and any(_is_world(c) for c in norm["cidrs"]):
                yield rule, f"ingress from the whole internet ({', '.join(norm['cidrs'])}) into {sg.get('name')}"
    for lt in _of(resources, T_LAUNCH_TEMPLATE):
        if not _efa_interfaces(lt):
            continue
        groups = _security_groups_of(resources, lt)
        ok = False
        for sg in groups:
            dirs = {d for d, _, n in _rules_of(resources, sg) if n["self"] and _all_traffic(n["protocol"])}
            ok = ok or {"ingress", "egress"} <= dirs
        if not ok:
            yield (
                lt,
                "EFA interfaces need a security group that allows all traffic to and from itself, in both "
                "directions (EFA error 4126 otherwise); none of this template's groups does",
            )


def check_rule_descriptions(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """Security-group rules say why they exist."""
    seen: set[tuple[str, str]] = set()
    for sg in _of(resources, T_SG):
        for direction, rule, norm in _rules_of(resources, sg):
            key = (str(rule.get("urn")), repr(sorted(norm.items())))
            if key not in seen and not norm["description"]:
                seen.add(key)
                yield rule, f"{direction} rule of {sg.get('name')} has no description"


# --------------------------------------------------------------------------- rule 4


def check_efa_node_groups(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """EFA node groups: one subnet, one AZ, one instance type, one EFA interface per network
    card of the instance type; the capacity target in the same AZ."""
    for ng in _of(resources, T_NODE_GROUP):
        lt = _launch_template_of(resources, ng)
        if lt is None or not _efa_interfaces(lt):
            continue
        i = _inputs(ng)
        subnets = _list(i.get("subnetIds"))
        types = _list(i.get("instanceTypes"))
        if len(subnets) != 1:
            yield ng, f"EFA node group spans {len(subnets)} subnets; EFA collectives need one subnet in one AZ"
        azs = _subnet_azs(resources, subnets)
        if len(azs) > 1:
            yield ng, f"EFA node group spans AZs {', '.join(sorted(azs))}; use one"
        if len(types) != 1:
            yield ng, f"EFA node group has {len(types)} instance types; use exactly one"
        elif types[0] not in catalog.CATALOG or not catalog.CATALOG[types[0]].efa:
            yield ng, f"{types[0]} is not an EFA instance type of the catalog"
        else:
            want = catalog.CATALOG[types[0]].efa_interfaces
            got = len(_efa_interfaces(lt))
            if got != want:
                yield ng, f"launch template {lt.get('name')} has {got} EFA interfaces; {types[0]} has {want} EFA cards"
        target = _get(_inputs(lt), "capacityReservationSpecification", "capacityReservationTarget")
        rid = _get(target, "capacityReservationId")
        placement_az = _get(_inputs(lt), "placement", "availabilityZone")
        target_az = context.reservation_azs.get(rid) if isinstance(rid, str) else None
        for label, az in (("capacity reservation " + str(rid), target_az), ("placement", placement_az)):
            if isinstance(az, str) and azs and az not in azs:
                yield ng, f"{label} is in {az} but the node group's subnet is in {', '.join(sorted(azs))}"


# --------------------------------------------------------------------------- rule 5


def _tolerates(tolerations: list[Any], taint: catalog.Taint) -> bool:
    for t in tolerations:
        if not isinstance(t, Mapping) or t.get("key") != taint.key:
            continue
        if t.get("effect") not in (None, "", taint.effect):
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint.value:
            return True
    return False


def check_accelerator_taints(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """Accelerated nodes carry the catalog's taints; workloads that ask for accelerators
    tolerate exactly those taints (no blanket tolerations)."""
    for ng in _of(resources, T_NODE_GROUP):
        for t in _list(_inputs(ng).get("instanceTypes")):
            inst = catalog.CATALOG.get(t)
            if inst is None or inst.accelerator is None:
                continue
            have = {(_get(x, "key"), _get(x, "value"), _get(x, "effect")) for x in _list(_inputs(ng).get("taints"))}
            for taint in inst.taints:
                if (taint.key, taint.value, taint.eks_effect) not in have:
                    yield ng, f"{t} nodes lack the taint {taint.key}={taint.value}:{taint.effect}"
    taints_by_resource = {
        res: inst.taints
        for inst in catalog.ACCELERATED.values()
        for res in (inst.device_resource, catalog.NEURONCORE_RESOURCE if inst.accelerator == "neuron" else None)
        if res
    }
    for r, where, ps in _workloads(resources):
        tolerations = _list(ps.get("tolerations"))
        for t in tolerations:
            if isinstance(t, Mapping) and not t.get("key") and t.get("operator") == "Exists":
                yield r, f"{where} tolerates every taint; tolerate the accelerator taints by key"
        asked = sorted(
            {
                res
                for c in _containers(ps)
                for part in ("requests", "limits")
                for res in (_get(c, "resources", part) or {})
                if res in taints_by_resource
            }
        )
        for res in asked:
            for taint in taints_by_resource[res]:
                if not _tolerates(tolerations, taint):
                    yield (
                        r,
                        f"{where} requests {res} but does not tolerate {taint.key}={taint.value}:{taint.effect}",
                    )


# --------------------------------------------------------------------------- rule 6


def check_ecr(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """ECR: immutable tags, scan on push, KMS encryption."""
    for r in _of(resources, T_ECR):
        i = _inputs(r)
        if i.get("imageTagMutability") not in ("IMMUTABLE", "IMMUTABLE_WITH_EXCLUSION"):
            yield r, "image tags are mutable; set imageTagMutability: IMMUTABLE so a tag always means one image"
        if not _true(_get(i, "imageScanningConfiguration", "scanOnPush")):
            yield r, "images are not scanned on push (imageScanningConfiguration.scanOnPush)"
        if _get(i, "encryptionConfigurations", 0, "encryptionType") not in ("KMS", "KMS_DSSE"):
            yield r, "repository is not encrypted with KMS (encryptionConfigurations[0].encryptionType: KMS)"


# --------------------------------------------------------------------------- rule 7


def check_storage(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """FSx: persistent deployment, backups on, final backup on delete, security group limited
    to nodes. S3 buckets: versioned, encrypted, public access blocked."""
    for fs in _of(resources, T_FSX):
        i = _inputs(fs)
        deployment = str(i.get("deploymentType") or "SCRATCH_1")
        persistent = deployment.startswith("PERSISTENT")
        if not persistent and not _tags(fs).get(SCRATCH_EXCEPTION_TAG):
            yield (
                fs,
                f"deploymentType {deployment} is not replicated; use PERSISTENT_2 for checkpoints "
                f"(or tag {SCRATCH_EXCEPTION_TAG}=<reason> for throwaway data)",
            )
        if persistent:
            days = i.get("automaticBackupRetentionDays")
            if not isinstance(days, (int, float)) or days < 1:
                yield fs, "automatic backups are off (automaticBackupRetentionDays: 1 to 90)"
            if not _false(i.get("skipFinalBackup")):
                yield fs, "no final backup on delete (skipFinalBackup defaults to true; set it to false)"
        sg_ids = _list(i.get("securityGroupIds"))
        if not sg_ids:
            yield fs, "no security group: the VPC default group applies; allow Lustre ports from the nodes only"
        for sg in _of(resources, T_SG):
            if sg.get("id") not in sg_ids and not (
                sg.get("urn") in _list(fs.get("dependencies")) and not _known(sg.get("id"))
            ):
                continue
            for direction, rule, norm in _rules_of(resources, sg):
                if direction == "ingress" and norm["cidrs"]:
                    yield (
                        rule,
                        f"file-system group {sg.get('name')} admits {', '.join(norm['cidrs'])}; "
                        "admit the node security groups instead",
                    )
    for b in _of(resources, *T_BUCKETS):
        i = _inputs(b)
        versioned = _true(_get(i, "versioning", "enabled")) or any(
            _refers(v, b, _inputs(v).get("bucket"))
            and _get(_inputs(v), "versioningConfiguration", "status") == "Enabled"
            for v in _of(resources, *T_VERSIONING)
        )
        if not versioned:
            yield b, "bucket is not versioned (BucketVersioning with status Enabled)"
        encrypted = bool(i.get("serverSideEncryptionConfiguration")) or any(
            _refers(e, b, _inputs(e).get("bucket")) and _list(_inputs(e).get("rules")) for e in _of(resources, *T_SSE)
        )
        if not encrypted:
            yield b, "bucket has no server-side encryption configuration (SSE-KMS or SSE-S3)"
        blocked = any(
            _refers(p, b, _inputs(p).get("bucket"))
            and all(
                _true(_inputs(p).get(k))
                for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
            )
            for p in _of(resources, T_PUBLIC_ACCESS_BLOCK)
        )
        if not blocked:
            yield b, "public access is not blocked (BucketPublicAccessBlock with all four settings true)"


# --------------------------------------------------------------------------- rule 8


def check_stateful_protected(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """FSx, S3 buckets, ECR and KMS keys are protected unless the stack turns it off on purpose."""
    if not context.protect_stateful_resources:
        return
    for r in _of(resources, *STATEFUL_TYPES):
        if not r.get("protect"):
            yield (
                r,
                "holds data but is not protected; create it with infra.protection.stateful() "
                "(or set protectStatefulResources: false for a throwaway stack)",
            )


# --------------------------------------------------------------------------- rule 9


def _pinned(image: Any) -> bool:
    if not isinstance(image, str) or not image:
        return False
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    return ":" in last and last.rsplit(":", 1)[1] not in ("", "latest")


def _device_plugin(r: Resource, c: Mapping[str, Any]) -> bool:
    names = (str(_get(_inputs(r), "metadata", "name") or ""), str(c.get("name") or ""), str(c.get("image") or ""))
    return any("device-plugin" in n for n in names)


def check_pods(resources: Sequence[Resource], context: Context) -> Iterator[Finding]:
    """Pods: pinned image tags, not privileged (device plugins excepted), requests and limits
    set, not in the `default` namespace."""
    for r, where, ps in _workloads(resources):
        ns = _get(_inputs(r), "metadata", "namespace")
        if ns in (None, "", "default"):
            yield r, "runs in the default namespace; give it its own namespace"
        for c in _containers(ps):
            name = c.get("name")
            if not _pinned(c.get("image")):
                yield r, f"{where} container {name}: image {c.get('image')!r} is not pinned to a tag or digest"
            if _true(_get(c, "securityContext", "privileged")) and not _device_plugin(r, c):
                yield r, f"{where} container {name} is privileged; only device plugins may be"
            res = _map(c.get("resources"))
            if not res.get("requests") or not res.get("limits"):
                yield r, f"{where} container {name} lacks resource requests and limits"
    for rel in _of(resources, T_HELM_RELEASE):
        if _inputs(rel).get("namespace") in (None, "", "default"):
            yield rel, "Helm release installs into the default namespace; set namespace"


# --------------------------------------------------------------------------- the pack

RULES: tuple[Rule, ...] = (
    Rule("eks-control-plane", "EKS: private endpoint, no 0.0.0.0/0, KMS secrets, all logs", "mandatory",
         check_eks_control_plane),
    Rule("launch-template-hardening", "IMDSv2, hop limit 1, encrypted volumes, no public IPs", "mandatory",
         check_launch_templates),
    Rule("security-groups", "No ingress from 0.0.0.0/0; EFA groups self-referencing all traffic", "mandatory",
         check_security_groups),
    Rule("security-group-rule-descriptions", "Every security-group rule has a description", "advisory",
         check_rule_descriptions),
    Rule("efa-node-groups", "EFA node groups: one subnet, AZ, type; interfaces = EFA cards", "mandatory",
         check_efa_node_groups),
    Rule("accelerator-taints", "Accelerated nodes tainted; workloads tolerate exactly those", "mandatory",
         check_accelerator_taints),
    Rule("ecr-repositories", "ECR: immutable tags, scan on push, KMS", "mandatory", check_ecr),
    Rule("storage-durability", "FSx persistent with backups, SG to nodes; S3 versioned, encrypted, private",
         "mandatory", check_storage),
    Rule("stateful-protected", "FSx, S3, ECR and KMS are protected from deletion", "mandatory",
         check_stateful_protected),
    Rule("pod-security", "Pinned images, no privileged pods, requests/limits, not in default", "mandatory",
         check_pods),
)  # fmt: skip


def check(resources: Sequence[Resource], context: Context | None = None) -> list[Violation]:
    """Every rule over the resources; violations sorted by rule, resource and message."""
    ctx = context or Context()
    return [v for rule in RULES for v in rule.run(resources, ctx)]


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.enforcement == "mandatory"]
