"""Offline plan: run the program under Pulumi mocks and show what `pulumi up` would create.

    python -m infra.plan (--stack NAME | --config-file PATH) [--format table|json] [--out DIR]

No AWS account and no Pulumi CLI needed. The policy pack's rules (`policy.rules`) run over
the planned resources. Exit 0 on success, 2 on invalid config (one line per problem on
stderr, naming the key), 1 on a mandatory policy violation (one line per violation on
stderr, after the plan) or any other failure. See DESIGN.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from infra import config

SECRET = "[secret]"
ROOT = Path(__file__).resolve().parent.parent


class PlanError(Exception):
    """A failure that is not a config problem (exit 1)."""


class UsageError(Exception):
    """The command line or stack file cannot be used (exit 2)."""


# --------------------------------------------------------------------------- reading stacks


def read_stack_file(path: Path) -> dict[str, Any]:
    """The flat `config:` map of a Pulumi stack file; `secure:` values become placeholders."""
    if not path.is_file():
        stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in path.parent.glob("Pulumi.*.yaml"))
        raise UsageError(f"{path.name}: no such stack file; stacks here: {', '.join(stacks) or 'none'}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UsageError(f"{path.name}: not valid YAML: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise UsageError(f"{path.name}: expected a top-level 'config:' map")
    values = doc.get("config") or {}

    def unsecret(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"secure"}:
                return SECRET
            return {k: unsecret(x) for k, x in v.items()}
        if isinstance(v, list):
            return [unsecret(x) for x in v]
        return v

    return {k: unsecret(v) for k, v in values.items()}


def engine_value(v: Any) -> str:
    """A config value as the Pulumi engine hands it to the program: text, objects as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """`--stack NAME | --config-file PATH`, the same for every command of the project."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="stack name: reads Pulumi.NAME.yaml")
    source.add_argument("--config-file", type=Path, help="any file in the stack-file format")


def stack_file(args: argparse.Namespace) -> Path:
    return Path(args.config_file) if args.config_file else ROOT / f"Pulumi.{args.stack}.yaml"


def secret_keys(values: dict[str, Any]) -> list[str]:
    """The stack file's keys whose values were stored encrypted."""
    return [k for k, v in values.items() if v == SECRET]


def parse_values(values: dict[str, Any]) -> config.StackConfig:
    """Validate stack-file values (raises config.ConfigError)."""
    return config.parse(
        config.from_stack_values(values), secret_keys=[k.rpartition(":")[2] for k in secret_keys(values)]
    )


def bad_input(e: Exception, stderr: Any) -> int:
    """Report an unusable stack file or invalid config, one line per problem; exit code 2."""
    lines = e.problems if isinstance(e, config.ConfigError) else [f"error: {e}"]
    for line in lines:
        print(line, file=stderr)
    return 2


# --------------------------------------------------------------------------- running


def _plain(v: Any) -> Any:
    """Engine values -> JSON-able values (secrets hidden, resource references as URNs)."""
    import pulumi
    from pulumi.runtime import rpc

    if isinstance(v, dict):
        if v.get(rpc._special_sig_key) == rpc._special_secret_sig:
            inner = v.get("value")
            # A secret map keeps its keys (a Secret's stringData stays a valid object).
            return {k: SECRET for k in sorted(inner)} if isinstance(inner, dict) else SECRET
        return {k: _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, pulumi.Resource):
        return f"<resource {type(v).__name__}>"
    if isinstance(v, str) and v == rpc.UNKNOWN:
        return "<computed>"
    if isinstance(v, float) and v.is_integer():
        return int(v)  # the engine carries every number as a double
    return v


def run(values: dict[str, Any], stack: str) -> dict[str, Any]:
    """Run the program exactly as `__main__.py` does, under mocks; return the plan dict.

    Raises config.ConfigError on invalid config (before anything is declared).
    """
    cfg = parse_values(values)

    import pulumi
    from pulumi.runtime import config as runtime_config

    from infra import mocks, program

    monitor = mocks.install(cfg.region, config.PROJECT, stack)
    runtime_config.set_all_config({k: engine_value(v) for k, v in values.items()}, secret_keys(values))
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def _program() -> Any:
        declared = program.build(config.load())

        async def collect() -> None:
            for key, value in declared.items():
                out = pulumi.Output.from_input(value)
                outputs[key] = SECRET if await out.is_secret() else _plain(await out.future())

        return pulumi.Output.from_input(asyncio.ensure_future(collect()))

    _program()

    resources = [
        {
            "urn": r.urn,
            "id": monitor.resources[r.urn].id if r.urn in monitor.resources else None,
            "type": r.type,
            "name": r.name,
            "custom": r.custom,
            "parent": r.parent,
            "dependencies": r.dependencies,
            "protect": r.protect,
            "retainOnDelete": r.retain_on_delete,
            "inputs": _plain(r.inputs),
        }
        for r in sorted(monitor.registrations.values(), key=lambda r: r.urn)
    ]
    from infra import cost
    from policy import rules

    violations = rules.check(resources, rules.Context(protect_stateful_resources=cfg.protect_stateful_resources))
    return {
        "stack": stack,
        "resources": resources,
        "outputs": outputs,
        "cost": cost.summary(
            cost.items_from_plan(resources, cfg.region, cost.Prices()),
            cost.Prices(),
            cost.runs_from_config(cfg, cost.Prices()),
        ),
        "policy": [v.as_dict() for v in violations],
    }


# --------------------------------------------------------------------------- table


def _children(plan: dict[str, Any], urn: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["parent"] == urn]


def _of_type(rs: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [r for r in rs if r["type"] == type_]


def _network_facts(plan: dict[str, Any], comp: dict[str, Any]) -> list[str]:
    kids = _children(plan, comp["urn"])
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
    for ng in _of_type(kids, "aws:eks/nodeGroup:NodeGroup"):
        s = ng["inputs"].get("scalingConfig", {})
        facts.append(
            f"node group {ng['inputs'].get('nodeGroupName')}: {', '.join(ng['inputs'].get('instanceTypes', []))}"
            f" x {s.get('desiredSize')} across {len(ng['inputs'].get('subnetIds', []))} subnets"
        )
    return facts


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
        subnets = {r["id"]: r for r in plan["resources"] if r["type"] == "aws:ec2/subnet:Subnet"}
        azs = [subnets[sid]["inputs"].get("availabilityZone", "?") for sid in i.get("subnetIds", []) if sid in subnets]
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
            f" placement group: {'yes' if li.get('placement') else 'no'}"
        )
    for sub in comp.get("_subnets", []):
        facts.append(sub)
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
            devices = ", ".join(f"{k}: {v}" for k, v in sorted(req.get("requests", {}).items()) if "/" in k)
            queue = obj.get("metadata", {}).get("labels", {}).get("kueue.x-k8s.io/queue-name")
            awaited = (
                "awaited" if "pulumi.com/waitFor" in obj.get("metadata", {}).get("annotations", {}) else "not awaited"
            )
            line += f": {workers.get('replicas')} workers ({devices}), queue {queue}, {awaited}"
        facts.append(line)
    return facts


FACTS: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[str]]] = {
    "llm-training-eks:workloads:TrainingRun": _training_run_facts,
    "llm-training-eks:infra:SharedStorage": _storage_facts,
    "llm-training-eks:infra:Registry": _registry_facts,
    "llm-training-eks:infra:ClusterAddons": _addons_facts,
    "llm-training-eks:infra:Network": _network_facts,
    "llm-training-eks:infra:Cluster": _cluster_facts,
    "llm-training-eks:infra:AcceleratedNodeGroup": _node_group_facts,
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
    top = [
        r
        for r in plan["resources"]
        if r["parent"].endswith("pulumi:pulumi:Stack::" + f"{config.PROJECT}-{plan['stack']}")
    ]
    top.sort(key=lambda r: (0 if not r["custom"] else 1, r["type"], r["name"]))
    for comp in top:
        lines.append(f"{comp['type'].split(':')[-1]} {comp['name']}")
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
            if run.get("total") is not None:
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
    violations = plan.get("policy") or []
    if violations:
        lines.append(f"Policy: {len(violations)} violation(s)")
        lines.extend(f"    {_violation_line(v)}" for v in violations)
    else:
        lines.append("Policy: every rule passes")
    lines.append("")
    lines.append("Outputs: " + ", ".join(sorted(plan["outputs"])))
    return "\n".join(lines) + "\n"


def _violation_line(v: dict[str, Any]) -> str:
    return f"policy {v['enforcement']} [{v['rule']}] {v['name']}: {v['message']}"


# --------------------------------------------------------------------------- output files


def kubernetes_objects(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The Kubernetes objects of the plan (resources whose inputs are the object)."""
    return [
        r["inputs"]
        for r in plan["resources"]
        if r["type"].startswith("kubernetes:") and "apiVersion" in r["inputs"] and "kind" in r["inputs"]
    ]


def write_out(plan: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(to_json(plan))
    k8s_dir = out / "kubernetes"
    by_name: dict[str, int] = defaultdict(int)
    for obj in kubernetes_objects(plan):
        meta = obj.get("metadata", {})
        stem = f"{obj['kind'].lower()}-{meta.get('namespace', 'cluster')}-{meta.get('name', 'unnamed')}"
        by_name[stem] += 1
        if by_name[stem] > 1:
            stem += f"-{by_name[stem]}"
        k8s_dir.mkdir(exist_ok=True)
        (k8s_dir / f"{stem}.yaml").write_text(yaml.safe_dump(obj, sort_keys=True))


def to_json(plan: dict[str, Any]) -> str:
    return json.dumps(plan, indent=2, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m infra.plan", description=__doc__.split("\n")[0] if __doc__ else None
    )
    add_stack_arguments(parser)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--out", type=Path, help="also write plan.json and every Kubernetes object as YAML here")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)

    path = stack_file(args)
    stack = args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
    try:
        values = read_stack_file(path)
        plan = run(values, stack)
    except (UsageError, config.ConfigError) as e:
        return bad_input(e, stderr)
    except Exception as e:  # noqa: BLE001 - the contract: any other failure is exit 1, no traceback
        print(f"error: the program failed under mocks: {type(e).__name__}: {e}", file=stderr)
        return 1

    stdout.write(to_json(plan) if args.format == "json" else render_table(plan))
    if args.out:
        write_out(plan, args.out)
    blocking = [v for v in plan.get("policy") or [] if v["enforcement"] == "mandatory"]
    for v in blocking:
        print(_violation_line(v), file=stderr)
    return 1 if blocking else 0


if __name__ == "__main__":
    sys.exit(main())
