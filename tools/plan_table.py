"""The offline plan as a table: resources grouped by top-level component, with the facts a
reviewer checks first (`python -m tools.plan --format table`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from facts.names import PROJECT, component_type
from infra.ci_runner import runner_label
from tools.remote_components import OPAQUE_TYPES, PULUMI_EKS_VERSION


def _children(plan: dict[str, Any], urn: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["parent"] == urn]


def _of_type(rs: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [r for r in rs if r["type"] == type_]


def _existing_network_facts(comp: dict[str, Any], kids: list[dict[str, Any]]) -> list[str]:
    """An existing VPC: what the stack uses of it, what it does not create, what it needs."""
    i = comp["inputs"]
    private = i.get("privateSubnetIds") or {}
    endpoint = _of_type(kids, "aws:ec2/vpcEndpoint:VpcEndpoint")
    facts = [
        f"existing VPC {i.get('vpcId')}: creates no VPC, subnets, NAT gateway or internet gateway",
        "private subnets: " + ", ".join(f"{az} {sid}" for az, sid in private.items()),
        "public subnets: "
        + (", ".join(f"{az} {sid}" for az, sid in (i.get("publicSubnetIds") or {}).items()) or "none"),
        "S3 gateway endpoint: "
        + (f"created on {', '.join(endpoint[0]['inputs'].get('routeTableIds', []))}" if endpoint else "the VPC's own"),
        "free addresses needed (VPC CNI, WARM_ENI_TARGET=1): "
        + ", ".join(f"{az} {n:,}" for az, n in (i.get("addressesNeeded") or {}).items()),
    ]
    return facts


def _subnet_azs(plan: dict[str, Any]) -> dict[str, str]:
    """Subnet id -> AZ: of the subnets the plan creates, and of an existing VPC's subnets."""
    azs = {
        r["id"]: r["inputs"].get("availabilityZone", "?")
        for r in plan["resources"]
        if r["type"] == "aws:ec2/subnet:Subnet"
    }
    for r in plan["resources"]:
        if r["type"] == component_type("infra", "Network"):
            for key in ("privateSubnetIds", "publicSubnetIds"):
                azs.update({sid: az for az, sid in (r["inputs"].get(key) or {}).items()})
    return azs


def _network_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    if comp["inputs"].get("vpcId"):
        return _existing_network_facts(comp, kids)
    vpc = _of_type(kids, "aws:ec2/vpc:Vpc")
    subnets = _of_type(kids, "aws:ec2/subnet:Subnet")
    azs = sorted({s["inputs"].get("availabilityZone", "?") for s in subnets})
    facts = [f"VPC {vpc[0]['inputs'].get('cidrBlock')}" if vpc else "no VPC"]
    facts.append(f"AZs {', '.join(azs)}; {len(subnets)} subnets")
    facts.append(f"NAT gateways: {len(_of_type(kids, 'aws:ec2/natGateway:NatGateway'))}")
    return facts


def _cluster_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    facts = []
    for c in _of_type(kids, "eks:index:Cluster"):
        i = c["inputs"]
        public = i.get("endpointPublicAccess")
        facts.append(f"EKS {i.get('name')} v{i.get('version')}, auth {i.get('authenticationMode')}")
        facts.append(
            "endpoint: private"
            + (f" + public from {', '.join(i.get('publicAccessCidrs') or [])}" if public else " only")
        )
        facts.append(f"logs: {', '.join(i.get('enabledClusterLogTypes') or [])}")
        facts.append("secrets: KMS" if i.get("encryptionConfigKeyArn") else "secrets: NOT ENCRYPTED")
        inside = Counter(_short(r["type"]) for r in _descendants(plan, c["urn"]))
        addons = [r["inputs"].get("addonName") for r in _descendants(plan, c["urn"]) if r["type"].endswith(":Addon")]
        facts.append(
            f"pulumi-eks {PULUMI_EKS_VERSION} creates (modelled): "
            + ", ".join(f"{n} {t}" for t, n in sorted(inside.items()))
            + f"; its EKS add-ons: {', '.join(addons) or 'none'}"
        )
    for rule in _of_type(kids, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        i = rule["inputs"]
        facts.append(f"API (TCP 443) from {i.get('cidrIpv4') or i.get('referencedSecurityGroupId')}")
    for ng in _of_type(kids, "aws:eks/nodeGroup:NodeGroup"):
        s = ng["inputs"].get("scalingConfig", {})
        facts.append(
            f"node group {ng['inputs'].get('nodeGroupName')}: {', '.join(ng['inputs'].get('instanceTypes', []))}"
            f" x {s.get('desiredSize')} across {len(ng['inputs'].get('subnetIds', []))} subnets"
        )
    return facts


def _provider_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    i = comp["inputs"]
    tags = i.get("defaultTags")
    if isinstance(tags, str):  # provider inputs reach the engine JSON-encoded
        tags = json.loads(tags)
    listed = ", ".join(f"{k}={v}" for k, v in (tags or {}).get("tags", {}).items())
    return [f"region {i.get('region')}; default tags {listed}"]


def _node_group_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    facts = []
    lts = _of_type(kids, "aws:ec2/launchTemplate:LaunchTemplate")
    for ng in _of_type(kids, "aws:eks/nodeGroup:NodeGroup"):
        i = ng["inputs"]
        s = i.get("scalingConfig", {})
        facts.append(
            f"{', '.join(i.get('instanceTypes', []))} x {s.get('desiredSize')}"
            f" (min {s.get('minSize')}, max {s.get('maxSize')}),"
            f" {i.get('amiType')}, capacity {i.get('capacityType')}"
        )
        subnets = _subnet_azs(plan)
        azs = [subnets[sid] for sid in i.get("subnetIds", []) if sid in subnets]
        facts.append(f"AZ {', '.join(azs)} ({len(i.get('subnetIds', []))} subnet)")
    for lt in lts:
        li = lt["inputs"]
        nics = li.get("networkInterfaces", [])
        efa = [n for n in nics if n.get("interfaceType") in ("efa", "efa-only")]
        facts.append(f"EFA interfaces: {len(efa)} on {len({n.get('networkCardIndex') for n in efa})} network cards")
        target = li.get("capacityReservationSpecification", {}).get("capacityReservationTarget", {})
        market = li.get("instanceMarketOptions", {}).get("marketType")
        if target:
            facts.append(f"capacity target: {target.get('capacityReservationId')}" + (f" ({market})" if market else ""))
        md = li.get("metadataOptions", {})
        facts.append(
            f"IMDS tokens {md.get('httpTokens')}, hop limit {md.get('httpPutResponseHopLimit')};"
            f" placement group: {li.get('placement', {}).get('groupName', 'none')}"
        )
    for ng in _of_type(kids, "aws:eks/nodeGroup:NodeGroup"):
        facts.append(f"update strategy {ng['inputs'].get('updateConfig', {}).get('updateStrategy', 'DEFAULT')}")
    for s in _of_type(kids, "aws:autoscaling/schedule:Schedule"):
        facts.append(f"scales to {s['inputs'].get('desiredCapacity')} at {s['inputs'].get('startTime')}")
    return facts


def _storage_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    facts = []
    for fs in _of_type(kids, "aws:fsx/lustreFileSystem:LustreFileSystem"):
        i = fs["inputs"]
        facts.append(
            f"FSx for Lustre {i.get('deploymentType')} {i.get('storageCapacity')} GiB,"
            f" {i.get('perUnitStorageThroughput', '-')} MB/s/TiB, {i.get('dataCompressionType')},"
            f" Lustre {i.get('fileSystemTypeVersion')}"
        )
        facts.append(
            f"backups: {i.get('automaticBackupRetentionDays', 0)} days;"
            f" final backup on delete: {'yes' if i.get('skipFinalBackup') is False else 'NO'}"
        )
    for dra in _of_type(kids, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"):
        s3 = dra["inputs"].get("s3", {})
        facts.append(
            f"S3 link {dra['inputs'].get('fileSystemPath')} <-> {dra['inputs'].get('dataRepositoryPath')}:"
            f" import {','.join(s3.get('autoImportPolicy', {}).get('events', []))},"
            f" export {','.join(s3.get('autoExportPolicy', {}).get('events', []))}"
        )
    rules = _of_type(kids, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    facts.append(f"security-group rules: {len(rules)} ingress (TCP 988, 1018-1023)")
    return facts


def _registry_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    return [
        f"ECR {r['inputs'].get('name')}: tags {r['inputs'].get('imageTagMutability')},"
        f" scan on push {r['inputs'].get('imageScanningConfiguration', {}).get('scanOnPush')}"
        for r in _of_type(kids, "aws:ecr/repository:Repository")
    ]


def _addons_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    facts = []
    for r in _of_type(kids, "aws:eks/addon:Addon"):
        facts.append(f"EKS add-on {r['inputs'].get('addonName')} {r['inputs'].get('addonVersion', '(EKS default)')}")
    for r in _of_type(kids, "kubernetes:helm.sh/v3:Release"):
        i = r["inputs"]
        facts.append(f"Helm {i.get('name')} {i.get('version')} ({i.get('chart')})")
    for r in _of_type(kids, "kubernetes:yaml/v2:ConfigFile"):
        facts.append(f"manifest {r['inputs'].get('file')}")
    return facts


def _training_run_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    i = comp["inputs"]
    facts = [f"recipe {i.get('recipe')}, run {i.get('runId')}, steps in order:"]
    kids = {r["urn"]: r for r in _children(plan, comp["urn"])}
    depth: dict[str, int] = {}

    def _depth(urn: str) -> int:
        if urn not in depth:
            depth[urn] = 1 + max((_depth(d) for d in kids[urn]["dependencies"] if d in kids), default=0)
        return depth[urn]

    for r in sorted(kids.values(), key=lambda r: (_depth(r["urn"]), r["urn"])):
        obj = r["inputs"]
        kind = obj.get("kind", r["type"].split(":")[-1])
        name = obj.get("metadata", {}).get("name", r["name"])
        line = f"{kind} {name}"
        if kind == "MPIJob":
            workers = obj.get("spec", {}).get("mpiReplicaSpecs", {}).get("Worker", {})
            req = workers.get("template", {}).get("spec", {}).get("containers", [{}])[0].get("resources", {})
            requests = sorted(req.get("requests", {}).items())
            # Accelerator and EFA devices; a CPU run's workers take CPUs and memory only.
            devices = ", ".join(f"{k}: {v}" for k, v in requests if "/" in k) or ", ".join(
                f"{k}: {v}" for k, v in requests
            )
            queue = obj.get("metadata", {}).get("labels", {}).get("kueue.x-k8s.io/queue-name")
            awaited = (
                "awaited" if "pulumi.com/waitFor" in obj.get("metadata", {}).get("annotations", {}) else "not awaited"
            )
            line += f": {workers.get('replicas')} workers ({devices}), queue {queue}, {awaited}"
        facts.append(line)
    return facts + _checkpoint_facts(i.get("checkpoints"))


def _checkpoint_facts(c: dict[str, Any] | None) -> list[str]:
    """Checkpoint size, write time at the file system's throughput, share of training time
    (at the configured interval and the estimated step time), and how many are kept."""
    if not c:
        return []
    line = f"checkpoints: {c['sizeGB']:,} GB each, {c['kept']} kept, ~{c['writeSeconds']:,} s to write"
    if c.get("writeShare") is not None:
        line += (
            f"; every {c['everySteps']} steps x {c['stepSeconds']:g} s: {c['writeShare']:.1%} of training time writing"
        )
    elif c.get("everySteps") is None:
        minutes = c["writeSeconds"] / 0.02 / 60
        line += f"; written per dataset shard group: 2% or less of training time if a group trains {minutes:.0f}+ min"
    else:
        line += f"; every {c['everySteps']} steps (share unknown: set stepSeconds)"
    return [line]


def _images_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    facts = []
    for p in _of_type(kids, "aws:codebuild/project:Project"):
        env = {v["name"]: v.get("value") for v in p["inputs"].get("environment", {}).get("environmentVariables", [])}
        size = p["inputs"].get("environment", {}).get("computeType")
        facts.append(
            f"CodeBuild {p['inputs'].get('name')}: builds tag {env.get('IMAGE_TAG')} on {size},"
            f" at most {p['inputs'].get('buildTimeout')} min"
        )
    return facts


def _ci_runner_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
    facts = []
    for r in _of_type(kids, "aws:codebuild/project:Project"):
        env = r["inputs"].get("environment") or {}
        vpc = r["inputs"].get("vpcConfig") or {}
        facts.append(
            f"CodeBuild {r['inputs'].get('name')}: {env.get('image')} {env.get('computeType')},"
            f" {len(vpc.get('subnets') or [])} private subnets, source {r['inputs'].get('source', {}).get('location')},"
            f" lives at most {r['inputs'].get('buildTimeout')} min"
        )
        facts.append(f"runs-on: {runner_label(str(r['inputs'].get('name')))}")
    for r in _of_type(kids, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        facts.append(f"cluster API: TCP {r['inputs'].get('fromPort')} from the runner's security group")
    return facts


def _stack_reference_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    return [f"reads the outputs of stack {comp['inputs'].get('name')}"]


FACTS: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[str]]] = {
    "pulumi:pulumi:StackReference": _stack_reference_facts,
    component_type("infra", "CiRunner"): _ci_runner_facts,
    component_type("workloads", "TrainingRun"): _training_run_facts,
    component_type("infra", "SharedStorage"): _storage_facts,
    component_type("infra", "Registry"): _registry_facts,
    component_type("infra", "ImageBuilds"): _images_facts,
    component_type("infra", "ClusterAddons"): _addons_facts,
    component_type("infra", "Network"): _network_facts,
    component_type("infra", "Cluster"): _cluster_facts,
    component_type("infra", "AcceleratedNodeGroup"): _node_group_facts,
    "pulumi:providers:aws": _provider_facts,
}


def _descendants(plan: dict[str, Any], urn: str) -> list[dict[str, Any]]:
    out = []
    for r in _children(plan, urn):
        out.append(r)
        out.extend(_descendants(plan, r["urn"]))
    return out


def _short(type_token: str) -> str:
    if type_token.startswith("pulumi:providers:"):
        return f"{type_token.split(':')[-1]} provider"
    return type_token.split(":")[-1]


def render_table(plan: dict[str, Any]) -> str:
    """Resources grouped by top-level component, with the facts a reviewer checks first."""
    lines = [f"Offline plan of stack '{plan['stack']}' ({len(plan['resources'])} resources)", ""]
    top = [r for r in plan["resources"] if r["parent"].endswith("pulumi:pulumi:Stack::" + f"{PROJECT}-{plan['stack']}")]
    top.sort(key=lambda r: (0 if not r["custom"] else 1, r["type"], r["name"]))
    for comp in top:
        lines.append(f"{_short(comp['type'])} {comp['name']}")
        for fact in FACTS.get(comp["type"], lambda p, c: [])(plan, comp):
            lines.append(f"    {fact}")
        counts = Counter(r["type"] for r in _descendants(plan, comp["urn"]) if r["custom"] or ":index:" in r["type"])
        if counts:
            lines.append("    resources: " + ", ".join(f"{n} {_short(t)}" for t, n in sorted(counts.items())))
        protected = [r["name"] for r in _descendants(plan, comp["urn"]) if r["protect"]]
        if protected:
            lines.append(f"    protected: {', '.join(sorted(protected))}")
        lines.append("")
    if plan.get("cost"):
        cost = plan["cost"]
        lines.append(f"Cost: ${cost.get('totalHourly', 0):,.2f}/hour, ${cost.get('totalMonthly', 0):,.0f}/month")
        for item in cost.get("items", []):
            lines.append(f"    {item['name']}: {item['quantity']:g} x {item['unit']} = ${item['hourly']:,.3f}/hour")
        for run in cost.get("trainingRuns", []):
            if run.get("onSystemNodes"):
                lines.append(
                    f"    training run {run['name']}: {run['nodes']} workers on the system nodes"
                    f" ({run['instanceType']}, counted above): no cost of its own"
                )
            elif run.get("total") is not None:
                lines.append(
                    f"    training run {run['name']}: {run['nodes']} x {run['instanceType']} for {run['hours']:,.1f} h"
                    f" ({run['steps']} steps x {run['stepSeconds']:g} s, {run['stepTimeBasis']}) = ${run['total']:,.0f}"
                )
            else:
                lines.append(
                    f"    training run {run['name']}: ${run['hourly']:,.2f}/hour; length {run['stepTimeBasis']}"
                )
        lines.append(f"    prices: {cost.get('priceSource')}")
        lines.append("")
    opaque = Counter(r["type"] for r in plan["resources"] if r["type"] in OPAQUE_TYPES)
    if opaque:
        lines.append("Not visible in this plan (inside these, only the real deploy shows what exists):")
        lines.extend(f"    {n} {_short(t)}: {OPAQUE_TYPES[t]}" for t, n in sorted(opaque.items()))
        lines.append(
            f"    pulumi-eks {PULUMI_EKS_VERSION} Cluster: its children are modelled from its source"
            " (tools/remote_components.py), not run"
        )
        lines.append("")
    violations = plan.get("policy") or []
    if violations:
        lines.append(f"Policy: {len(violations)} violation(s)")
        lines.extend(f"    {violation_line(v)}" for v in violations)
    else:
        lines.append("Policy: every rule passes")
    lines.append("")
    lines.append("Outputs: " + ", ".join(sorted(plan["outputs"])))
    return "\n".join(lines) + "\n"


def violation_line(v: dict[str, Any]) -> str:
    return f"policy {v['enforcement']} [{v['rule']}] {v['name']}: {v['message']}"
