"""The offline plan as a table: resources grouped by top-level component, with the facts a
reviewer checks first (`python -m tools.plan --format table`).

Each top-level component type has a facts function (`FACTS`) or is listed as resources-only
(`RESOURCES_ONLY`); a component is headed by its type's name, or by what it says it is
(`TITLES`: a workload by its kind, `Serving chat`). The functions read the plan through
`tools.offline.plan_view.PlanView`, which records every input and child type asked for, so
tests/plan/test_plan_table.py fails when one is set in no example stack (renamed, or no longer
set) instead of a line silently vanishing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from facts import amis
from facts.names import NODE_GROUP_LABEL, PROJECT, RUNS_DIR, TEAMS_SUB_PATH, component_type
from infra.ci_runner import runner_label
from tools.offline.plan_view import PlanView, Reads
from tools.offline.remote_components import OPAQUE_TYPES, PULUMI_EKS_VERSION
from tools.offline.workload_lines import WORKLOAD, workload_facts, workload_title


def _existing_network_facts(view: PlanView, comp: dict[str, Any], kids: list[dict[str, Any]]) -> list[str]:
    """An existing VPC: what the stack uses of it, what it does not create, what it needs."""
    i = comp["inputs"]
    private = i.get("privateSubnetIds") or {}
    endpoint = view.of_type(kids, "aws:ec2/vpcEndpoint:VpcEndpoint")
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


def _network_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    kids = view.children(comp["urn"])
    if comp["inputs"].get("vpcId"):
        return _existing_network_facts(view, comp, kids)
    vpc = view.of_type(kids, "aws:ec2/vpc:Vpc")
    subnets = view.of_type(kids, "aws:ec2/subnet:Subnet")
    azs = sorted({s["inputs"].get("availabilityZone", "?") for s in subnets})
    facts = [f"VPC {vpc[0]['inputs'].get('cidrBlock')}" if vpc else "no VPC"]
    facts.append(f"AZs {', '.join(azs)}; {len(subnets)} subnets")
    facts.append(f"NAT gateways: {len(view.of_type(kids, 'aws:ec2/natGateway:NatGateway'))}")
    return facts


def _cluster_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    kids = view.children(comp["urn"])
    facts = []
    for c in view.of_type(kids, "eks:index:Cluster"):
        i = c["inputs"]
        public = i.get("endpointPublicAccess")
        facts.append(f"EKS {i.get('name')} v{i.get('version')}, auth {i.get('authenticationMode')}")
        facts.append(
            "endpoint: private"
            + (f" + public from {', '.join(i.get('publicAccessCidrs') or [])}" if public else " only")
        )
        facts.append(f"logs: {', '.join(i.get('enabledClusterLogTypes') or [])}")
        facts.append("secrets: KMS" if i.get("encryptionConfigKeyArn") else "secrets: NOT ENCRYPTED")
        inside = Counter(view.name(r["type"]) for r in view.descendants(c["urn"]))
        addons = [r["inputs"].get("addonName") for r in view.descendants(c["urn"]) if r["type"].endswith(":Addon")]
        facts.append(
            f"pulumi-eks {PULUMI_EKS_VERSION} creates (modelled): "
            + ", ".join(f"{n} {t}" for t, n in sorted(inside.items()))
            + f"; its EKS add-ons: {', '.join(addons) or 'none'}"
        )
    for rule in view.of_type(kids, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        i = rule["inputs"]
        facts.append(f"API (TCP 443) from {i.get('cidrIpv4') or i.get('referencedSecurityGroupId')}")
    for ng in view.of_type(kids, "aws:eks/nodeGroup:NodeGroup"):
        s = ng["inputs"].get("scalingConfig", {})
        facts.append(
            f"node group {(ng['inputs'].get('labels') or {}).get(NODE_GROUP_LABEL)}:"
            f" {', '.join(ng['inputs'].get('instanceTypes', []))}"
            f" x {s.get('desiredSize')} across {len(ng['inputs'].get('subnetIds', []))} subnets"
        )
    return facts


def _provider_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    i = comp["inputs"]
    tags = i.get("defaultTags")
    if isinstance(tags, str):  # provider inputs reach the engine JSON-encoded
        tags = json.loads(tags)
    listed = ", ".join(f"{k}={v}" for k, v in (tags or {}).get("tags", {}).items())
    return [f"region {i.get('region')}; default tags {listed}"]


def _node_group_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    kids = view.children(comp["urn"])
    facts = []
    lts = view.of_type(kids, "aws:ec2/launchTemplate:LaunchTemplate")
    for ng in view.of_type(kids, "aws:eks/nodeGroup:NodeGroup"):
        i = ng["inputs"]
        s = i.get("scalingConfig", {})
        facts.append(
            f"{', '.join(i.get('instanceTypes', []))} x {s.get('desiredSize')}"
            f" (min {s.get('minSize')}, max {s.get('maxSize')}),"
            f" {i.get('amiType')}, capacity {i.get('capacityType')}"
        )
        subnets = view.subnet_azs()
        azs = [subnets[sid] for sid in i.get("subnetIds", []) if sid in subnets]
        facts.append(f"AZ {', '.join(azs)} ({len(i.get('subnetIds', []))} subnet)")
        release = amis.find(str(i.get("releaseVersion") or ""))
        if release is not None:  # pinned so that its driver fits the images run on it (config.amis)
            neuron = str(i.get("amiType", "")).endswith("NEURON")
            driver = f"Neuron driver {release.neuron_driver}" if neuron else f"NVIDIA driver {release.nvidia_driver}"
            facts.append(f"AMI release {release.release_version} ({driver})")
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
    for ng in view.of_type(kids, "aws:eks/nodeGroup:NodeGroup"):
        facts.append(f"update strategy {ng['inputs'].get('updateConfig', {}).get('updateStrategy', 'DEFAULT')}")
    for s in view.of_type(kids, "aws:autoscaling/schedule:Schedule"):
        facts.append(f"scales to {s['inputs'].get('desiredCapacity')} at {s['inputs'].get('startTime')}")
    return facts


def _storage_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    kids = view.children(comp["urn"])
    facts = []
    for fs in view.of_type(kids, "aws:fsx/lustreFileSystem:LustreFileSystem"):
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
    for dra in view.of_type(kids, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"):
        s3 = dra["inputs"].get("s3", {})
        facts.append(
            f"S3 link {dra['inputs'].get('fileSystemPath')} <-> {dra['inputs'].get('dataRepositoryPath')}:"
            f" import {','.join(s3.get('autoImportPolicy', {}).get('events', []))},"
            f" export {','.join(s3.get('autoExportPolicy', {}).get('events', []))}"
        )
    if view.of_type(kids, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"):
        facts.append(_export_retention(view, kids))
    rules = view.of_type(kids, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    facts.append(f"security-group rules: {len(rules)} ingress (TCP 988, 1018-1023)")
    return facts


def _export_retention(view: PlanView, kids: list[dict[str, Any]]) -> str:
    """What the data bucket's lifecycle expires of the exported run outputs (infra.buckets)."""
    expiring = [
        (r.get("filter", {}).get("prefix", ""), r["expiration"]["days"])
        for lc in view.of_type(kids, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
        for r in lc["inputs"].get("rules", [])
        if r.get("expiration", {}).get("days")
    ]
    if not expiring:
        return "run outputs in S3: kept until deleted (storage.exportRetentionDays: none)"
    days = sorted({d for _, d in expiring})
    teams = [p for p, _ in expiring if p.startswith(f"{TEAMS_SUB_PATH}/")]
    shared = [p for p, _ in expiring if p not in teams]
    # A stack may list hundreds of teams (one rule each): past a few, the line counts them.
    named = teams if len(teams) <= 4 else [f"{TEAMS_SUB_PATH}/<team>/{RUNS_DIR}/ of {len(teams)} teams"]
    keys = "storage.exportRetentionDays, exportRetentionTeams" if teams else "storage.exportRetentionDays"
    return (
        f"run outputs in S3 ({', '.join(shared + named)}) expire {'/'.join(map(str, days))} days after export;"
        f" the /shared copy stays ({keys})"
    )


def _registry_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    kids = view.children(comp["urn"])
    return [
        f"ECR {r['inputs'].get('name')}: tags {r['inputs'].get('imageTagMutability')},"
        f" scan on push {r['inputs'].get('imageScanningConfiguration', {}).get('scanOnPush')}"
        for r in view.of_type(kids, "aws:ecr/repository:Repository")
    ]


ADDON_PARTS = {
    component_type("infra", "EksAddon"): "aws:eks/addon:Addon",
    component_type("infra", "HelmAddon"): "kubernetes:helm.sh/v3:Release",
    component_type("infra", "ManifestAddon"): "kubernetes:yaml/v2:ConfigFile",
}
"""The component of one add-on (infra.addons) -> the type of the resource its line describes."""


def _addons_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    found: dict[str, list[dict[str, Any]]] = {t: [] for t in ADDON_PARTS.values()}
    for part in view.children(comp["urn"]):
        if part["type"] in ADDON_PARTS:
            kind = ADDON_PARTS[part["type"]]
            found[kind] += view.of_type(view.children(part["urn"]), kind)
    facts = []
    for r in sorted(found["aws:eks/addon:Addon"], key=lambda r: r["name"]):
        facts.append(f"EKS add-on {r['inputs'].get('addonName')} {r['inputs'].get('addonVersion', '(EKS default)')}")
    for r in sorted(found["kubernetes:helm.sh/v3:Release"], key=lambda r: r["name"]):
        i = r["inputs"]
        facts.append(f"Helm {i.get('name')} {i.get('version')} ({i.get('chart')})")
    for r in sorted(found["kubernetes:yaml/v2:ConfigFile"], key=lambda r: r["name"]):
        facts.append(f"manifest {r['inputs'].get('file')}")
    return facts


def _images_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    kids = view.children(comp["urn"])
    facts = []
    for p in view.of_type(kids, "aws:codebuild/project:Project"):
        env = {v["name"]: v.get("value") for v in p["inputs"].get("environment", {}).get("environmentVariables", [])}
        size = p["inputs"].get("environment", {}).get("computeType")
        facts.append(
            f"CodeBuild {p['inputs'].get('name')}: builds tag {env.get('IMAGE_TAG')} on {size},"
            f" at most {p['inputs'].get('buildTimeout')} min"
        )
    # stack.built_repositories: only the images/ of runs that name no image or tag of their own
    return facts or ["nothing to build: no run takes its image from images/"]


def _ci_runner_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    kids = view.children(comp["urn"])
    facts = []
    for r in view.of_type(kids, "aws:codebuild/project:Project"):
        env = r["inputs"].get("environment") or {}
        vpc = r["inputs"].get("vpcConfig") or {}
        facts.append(
            f"CodeBuild {r['inputs'].get('name')}: {env.get('image')} {env.get('computeType')},"
            f" {len(vpc.get('subnets') or [])} private subnets, source {r['inputs'].get('source', {}).get('location')},"
            f" lives at most {r['inputs'].get('buildTimeout')} min"
        )
        facts.append(f"runs-on: {runner_label(str(r['inputs'].get('name')))}")
    for r in view.of_type(kids, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        facts.append(f"cluster API: TCP {r['inputs'].get('fromPort')} from the runner's security group")
    return facts


def _stack_reference_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    return [f"reads the outputs of stack {comp['inputs'].get('name')}"]


FACTS: dict[str, Callable[[PlanView, dict[str, Any]], list[str]]] = {
    "pulumi:pulumi:StackReference": _stack_reference_facts,
    component_type("infra", "CiRunner"): _ci_runner_facts,
    WORKLOAD: workload_facts,
    component_type("infra", "SharedStorage"): _storage_facts,
    component_type("infra", "Registry"): _registry_facts,
    component_type("infra", "ImageBuilds"): _images_facts,
    component_type("infra", "EksAddons"): _addons_facts,
    component_type("infra", "ClusterAddons"): _addons_facts,
    component_type("infra", "Network"): _network_facts,
    component_type("infra", "Cluster"): _cluster_facts,
    component_type("infra", "AcceleratedNodeGroup"): _node_group_facts,
    "pulumi:providers:aws": _provider_facts,
}


TITLES: dict[str, Callable[[dict[str, Any]], str]] = {WORKLOAD: workload_title}
"""Top-level component types headed by what the component says it is, not by their type's name."""


RESOURCES_ONLY = frozenset(
    {
        component_type("infra", "SharedVolume"),
        component_type("infra", "TeamQueues"),
        component_type("infra", "TenantNamespaces"),
        component_type("infra", "ContainerInsightsLogs"),
        "pulumi:providers:kubernetes",
    }
)
"""Top-level resources whose kind, name and resources line say all the table says of them."""


def render_table(plan: dict[str, Any], reads: Reads | None = None) -> str:
    """Resources grouped by top-level component, with the facts a reviewer checks first;
    `reads` records what the table asked of the plan (tools/offline/plan_view.py)."""
    view = PlanView(plan, reads)
    lines = [f"Offline plan of stack '{plan['stack']}' ({len(plan['resources'])} resources)", ""]
    stack = "pulumi:pulumi:Stack::" + f"{PROJECT}-{plan['stack']}"
    top = [r for r in view.all if r["parent"].endswith(stack)]
    top.sort(key=lambda r: (0 if not r["custom"] else 1, r["type"], r["name"]))
    for comp in top:
        lines.extend(_component_lines(view, comp))
    if plan.get("cost"):
        lines.extend(_cost_lines(plan["cost"]))
    opaque = Counter(r["type"] for r in plan["resources"] if r["type"] in OPAQUE_TYPES)
    if opaque:
        lines.append("Not visible in this plan (inside these, only the real deploy shows what exists):")
        lines.extend(f"    {n} {view.name(t)}: {OPAQUE_TYPES[t]}" for t, n in sorted(opaque.items()))
        lines.append(
            f"    pulumi-eks {PULUMI_EKS_VERSION} Cluster: its children are modelled from its source"
            " (tools/offline/remote_components.py), not run"
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


def _component_lines(view: PlanView, comp: dict[str, Any]) -> list[str]:
    """A top-level component: its kind and name, its facts, its resources, what is protected."""
    title = TITLES.get(comp["type"])
    lines = [title(comp) if title else f"{view.name(comp['type'])} {comp['name']}"]
    describe = FACTS.get(comp["type"])
    if describe is None and view.reads is not None and comp["type"] not in RESOURCES_ONLY:
        view.reads.undescribed.add(comp["type"])
    lines.extend(f"    {fact}" for fact in (describe(view, comp) if describe else []))
    inside = view.descendants(comp["urn"])
    counts = Counter(r["type"] for r in inside if r["custom"] or ":index:" in r["type"])
    if counts:
        lines.append("    resources: " + ", ".join(f"{n} {view.name(t)}" for t, n in sorted(counts.items())))
    protected = [r["name"] for r in inside if r["protect"]]
    if protected:
        lines.append(f"    protected: {', '.join(sorted(protected))}")
    return [*lines, ""]


def _cost_lines(cost: dict[str, Any]) -> list[str]:
    """The cost total, its items and runs, its prices, and what it leaves out."""
    lines = [f"Cost: ${cost.get('totalHourly', 0):,.2f}/hour, ${cost.get('totalMonthly', 0):,.0f}/month"]
    for item in cost.get("items", []):
        lines.append(f"    {item['name']}: {item['quantity']:g} x {item['unit']} = ${item['hourly']:,.3f}/hour")
        if item.get("prepaidTotal") is not None:
            lines.append(f"        prepaid for the block's {item['prepaidHours']:g} h: ${item['prepaidTotal']:,.2f}")
    for run in cost.get("trainingRuns", []):
        if run.get("onSystemNodes"):
            lines.append(
                f"    training run {run['name']}: {run['nodes']} workers on the system nodes"
                f" ({run['instanceType']}, counted above): no cost of its own"
            )
        elif run.get("modeledSeconds") is not None:
            lines.append(
                f"    acceptance run {run['name']}: {run['nodes']} x {run['instanceType']} for"
                f" ~{run['modeledSeconds']:,.0f} s = ${run['total']:,.2f} ({run['stepTimeBasis']})"
            )
        elif run.get("total") is not None:
            lines.append(
                f"    training run {run['name']}: {run['nodes']} x {run['instanceType']} for {run['hours']:,.1f} h"
                f" ({run['steps']} steps x {run['stepSeconds']:g} s{_besides(run)}, {run['stepTimeBasis']})"
                f" = ${run['total']:,.0f}"
            )
        elif run.get("steps") is None and run.get("stepSeconds") is None and "per hour" in run["stepTimeBasis"]:
            lines.append(f"    {run['name']}: ${run['hourly']:,.2f}/hour ({run['stepTimeBasis']})")
        else:
            lines.append(f"    training run {run['name']}: ${run['hourly']:,.2f}/hour; length {run['stepTimeBasis']}")
    lines.append(f"    prices: {cost.get('priceSource')}")
    left_out = cost.get("notCounted") or []
    if left_out:
        lines.append("    not counted (billed besides, by use or size):")
        lines.extend(f"        {item}" for item in left_out)
    return [*lines, ""]


def violation_line(v: dict[str, Any]) -> str:
    return f"policy {v['enforcement']} [{v['rule']}] {v['name']}: {v['message']}"


def _besides(run: dict[str, Any]) -> str:
    """What a run's cost counts besides its steps (its validation and export: its length line)."""
    return f" + {run['besidesSeconds']:,} s validation and export" if run.get("besidesSeconds") else ""
