"""Offline plan: run the program under Pulumi mocks and show what `pulumi up` would create.

    python -m tools.plan (--stack NAME | --config-file PATH) [--format table|json] [--out DIR]
                         [--lower-outputs FILE] [--deployed PLAN.json]

No AWS account and no Pulumi CLI needed. The policy pack's rules (`policy.rules`) run over
the planned resources. Exit 0 on success, 2 on invalid config (one line per problem on
stderr, naming the key; with `--format json` also `{"problems": [{"path", "kind", "value",
"allowed", "hint", "message"}]}` on stdout, tools.cli.problems_json), 1 on a mandatory policy
violation (one line per violation on stderr, after the plan) or any other failure. The JSON format is one object:
`{"stack", "resources": [{"urn", "type", "name", "custom", "parent", "dependencies",
"protect", "retainOnDelete", "aliases", "deleteBeforeReplace", "ignoreChanges", "replaceOnChanges", "provider",
"inputs"}],
"outputs", "cost", "policy"}` (`provider`: the URN of the provider a custom resource uses;
`aliases`: the URNs the resource was known by; a launch template also has `latestVersion`, the
version EC2 holds after the run: 1, or over `--deployed PLAN.json` one more than deployed when
its data changed).

`--stack NAME` plans your `Pulumi.NAME.yaml` at the root, else `examples/Pulumi.NAME.yaml`
(tools.cli). A layered stack (`layer: cluster` or `runs`) reads its lower stack's outputs: from
the offline plan of `Pulumi.<lower stack>.yaml` beside it (planned first, recursively), or from
`--lower-outputs FILE`, the JSON of `pulumi stack output --json --stack <lower stack>`.
"""

# size: one command: the program under mocks, the plan it prints and writes (JSON, --out), and the
# stack files around it (lower layers, a deployed plan, secrets still to set)

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import config as runtime_config
from pulumi.runtime import rpc

import config
import stack
from config import checks, costs
from config.stackfile import SECRET, UsageError, engine_value, read_stack_file, secret_keys
from estimates import cost
from facts.names import LOWER_LAYER, NODE_GROUP_LABEL, PROJECT
from infra.layers import PLATFORM_OUTPUT
from policy import rules
from tools.cli import add_stack_arguments, bad_input, judged_clock, shown, stack_file, stack_name
from tools.offline import mocks
from tools.offline.plan_table import render_table, violation_line

# --------------------------------------------------------------------------- running


def _plain(v: Any) -> Any:
    """Engine values -> JSON-able values (secrets hidden, resource references as URNs)."""
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
    if isinstance(v, pulumi.FileArchive):
        return f"<archive {v.path}>"
    if isinstance(v, str) and v == rpc.UNKNOWN:
        return "<computed>"
    if isinstance(v, float) and v.is_integer():
        return int(v)  # the engine carries every number as a double
    return v


def lower_outputs(cfg: config.StackConfig, stack_dir: Path | None, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The outputs of a layered stack's lower stack, from the offline plan of its file in `stack_dir`
    (the folder of the layered stack's own file)."""
    lower = cfg.lower_stack_name
    path = (stack_dir or Path()) / f"Pulumi.{lower}.yaml"
    if stack_dir is None or not path.is_file():
        where = f"beside it in {shown(stack_dir)}" if stack_dir else "(no stack file, so no folder to look in)"
        raise UsageError(
            f"lowerStack {cfg.lower_stack}: no {path.name} {where} to plan it from; pass --lower-outputs FILE"
            " (the JSON of `pulumi stack output --json`)"
        )
    if lower in seen:
        raise UsageError(f"lowerStack {cfg.lower_stack}: the stacks read each other in a circle ({' -> '.join(seen)})")
    values = read_stack_file(path)
    wanted = LOWER_LAYER[cfg.layer]
    found = config.parse_stack_values(values).layer
    if found != wanted:
        raise UsageError(
            f"lowerStack {cfg.lower_stack}: {path.name} is a stack of layer {found!r}; the {cfg.layer} layer reads"
            f" a stack of layer {wanted!r}"
        )
    return dict(run(values, lower, stack_dir, seen=(*seen, lower))["outputs"])


def run(
    values: dict[str, Any],
    name: str,
    stack_dir: Path | None = None,
    recorded: dict[str, Any] | None = None,
    seen: tuple[str, ...] = (),
    deployed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the program exactly as `__main__.py` does, under mocks; return the plan dict.

    `deployed`: the plan of the version deployed (a plan dict or `plan.json`): the run continues
    its state where EC2 keeps it (launch-template versions), so an edit shows what `pulumi up`
    over it does (a new template version rolls the node group that names it).

    A layered stack's lower outputs come from `recorded` (a `pulumi stack output --json`), or
    from the offline plan of the lower stack's file in `stack_dir` (the folder of this stack's
    file). Raises
    config.ConfigError on invalid config (before anything is declared) and
    config.stackfile.UsageError when the lower stack cannot be planned.
    """
    cfg = config.parse_stack_values(values)
    referenced = {}
    if cfg.layer in LOWER_LAYER:
        below = recorded if recorded is not None else lower_outputs(cfg, stack_dir, seen or (name,))
        referenced[cfg.lower_stack] = below
    logged = _Warnings()
    monitor = mocks.install(cfg.region, PROJECT, name, referenced, deployed, logged.logger)
    runtime_config.set_all_config({k: engine_value(v) for k, v in values.items()}, secret_keys(values))
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def _program() -> Any:
        declared = stack.build_layer(config.load(offline=True))  # no Hub token needed to plan

        async def collect() -> None:
            for key, value in declared.items():
                out = pulumi.Output.from_input(value)
                outputs[key] = SECRET if await out.is_secret() else _plain(await out.future())

        return pulumi.Output.from_input(asyncio.ensure_future(collect()))

    _program()

    resources = planned_resources(monitor)
    violations = rules.check(resources, rules.Context(protect_stateful_resources=cfg.protect_stateful_resources))
    below = referenced.get(cfg.lower_stack, {})
    return {
        "stack": name,
        "resources": resources,
        "outputs": outputs,
        "cost": cost.summary(
            cost.items(bill_from_plan(resources, cfg.region, costs.block_hours(cfg)), cost.Prices()),
            cost.Prices(),
            costs.runs_from_config(cfg, cost.Prices(), run_node_types(cfg, below)),
            {r["type"] for r in resources},
        ),
        "policy": [v.as_dict() for v in violations],
        **({"warnings": logged.lines} if logged.lines else {}),
    }


class _Warnings(logging.Handler):
    """The stack's own warnings (`pulumi.log.warn` lines that start with checks.WARNING_PREFIX),
    which `pulumi preview` shows and the offline plan repeats on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"{PROJECT}.plan.{id(self)}")
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(checks.WARNING_PREFIX):
            self.lines.append(message.removeprefix(checks.WARNING_PREFIX))


def run_node_types(cfg: config.StackConfig, below: dict[str, Any]) -> dict[str, str]:
    """Node group -> instance type, for pricing runs: the stack's own groups, or the platform's."""
    if cfg.layer == "runs" and PLATFORM_OUTPUT in below:
        groups = below[PLATFORM_OUTPUT].get("nodeGroups") or {}
        return {n: str(g.get("instanceType")) for n, g in groups.items() if isinstance(g, dict)}
    return costs.own_node_types(cfg)


PLANNED_CAPACITY = {"CAPACITY_BLOCK": "capacity-block", "SPOT": "spot"}
"""EKS capacityType -> the capacity kind estimates.cost prices (an ODCR is ON_DEMAND to EKS; its
launch template names the reservation)."""


def planned_node_count(
    name: str | None, itype: str, inputs: Mapping[str, Any], hours: Mapping[str, float], reserved: bool = False
) -> cost.NodeCount:
    """A planned node group as AWS bills it: a Capacity Block at its maxSize (prepaid whatever the
    desired size), with its length from config (`hours`, config.costs.block_hours); an ODCR (an
    ON_DEMAND group whose launch template targets a reservation: `reserved`) at its maxSize too, the
    instances it holds, billed used or not; other groups at their desired size."""
    sizes = inputs.get("scalingConfig") or {}
    kind = PLANNED_CAPACITY.get(str(inputs.get("capacityType")), "on-demand")
    if kind == "capacity-block":
        return cost.NodeCount(name, itype, sizes.get("maxSize", 0), kind, hours.get(name or ""))
    if kind == "on-demand" and reserved:
        return cost.NodeCount(name, itype, sizes.get("maxSize", 0), "reservation")
    return cost.NodeCount(name, itype, sizes.get("desiredSize", 0), kind)


def bill_from_plan(
    resources: Sequence[Mapping[str, Any]], region: str, hours: Mapping[str, float] | None = None
) -> cost.StackBill:
    """What the planned resources have that is billed by the hour (clusters, NAT gateways, node
    groups, FSx), each kind in name order, for estimates.cost; `hours`: each Capacity Block's length."""
    hours = hours or {}
    types = [r.get("type") for r in resources]
    clusters = int(any(t in ("eks:index:Cluster", "aws:eks/cluster:Cluster") for t in types))
    groups, file_systems = [], []
    # Launch templates that target a reservation: an ON_DEMAND group naming one is an ODCR's.
    specs = {str(r.get("id")): (r.get("inputs") or {}).get("capacityReservationSpecification") or {} for r in resources}
    reserving = {i for i, spec in specs.items() if spec.get("capacityReservationTarget")}
    for r in resources:
        t, i = r.get("type"), r.get("inputs") or {}
        if t == "aws:eks/nodeGroup:NodeGroup":
            # The group's name is its label: its EKS name gets a unique suffix at create.
            name = (i.get("labels") or {}).get(NODE_GROUP_LABEL)
            itype = (i.get("instanceTypes") or ["?"])[0]
            reserved = str((i.get("launchTemplate") or {}).get("id")) in reserving
            groups.append(planned_node_count(name, itype, i, hours, reserved))
        elif t == "aws:fsx/lustreFileSystem:LustreFileSystem":
            tier = int(i.get("perUnitStorageThroughput") or 125)
            file_systems.append(cost.FileSystemBill(r.get("name"), float(i.get("storageCapacity") or 0), tier))
    nats = types.count("aws:ec2/natGateway:NatGateway")
    by_name = sorted(groups, key=lambda g: f"node-group/{g.name}")
    fsx = sorted(file_systems, key=lambda f: f"fsx/{f.name}")
    return cost.StackBill(region, clusters, nats, tuple(by_name), tuple(fsx))


def _versions(monitor: mocks.RecordingMonitor, r: mocks.Registration) -> dict[str, Any]:
    """A launch template's `latestVersion` (what EC2 holds after the run), for the next plan."""
    if r.type != mocks.LAUNCH_TEMPLATE or r.urn not in monitor.resources:
        return {}
    return {"latestVersion": int(monitor.resources[r.urn].state["latestVersion"])}


def planned_resources(monitor: mocks.RecordingMonitor) -> list[dict[str, Any]]:
    """Every registration (and read) the program made, as the plan JSON lists it."""
    return [
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
            "aliases": r.aliases,
            "deleteBeforeReplace": r.delete_before_replace,
            "ignoreChanges": r.ignore_changes,
            "replaceOnChanges": r.replace_on_changes,
            "provider": r.provider.rsplit("::", 1)[0] if r.provider else None,
            "inputs": _plain(r.inputs),
            **_versions(monitor, r),
        }
        for r in sorted(monitor.registrations.values(), key=lambda r: r.urn)
    ]


# --------------------------------------------------------------------------- secrets to set

PLACEHOLDER_CIPHERTEXT = "PLACEHOLDER-set-it-with-pulumi-config-set-secret"
"""How the example stack files hold a secret a stack needs: no stack's secrets provider can
decrypt it, so `pulumi preview` and `pulumi up` refuse to start ("failed to decrypt encrypted
configuration value", pulumi/pulumi v3.259.0 pkg/engine/events.go and pkg/cmd/pulumi/cmd/cmd.go)
until `pulumi config set --secret <key> <value>` replaces it for the stack. The offline plan
names each one on stderr, so the step is said before anyone runs Pulumi."""


def placeholder_secrets(path: Path) -> list[str]:
    """The keys of a stack file whose `secure:` value is the placeholder, not a real ciphertext."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    values = doc.get("config") if isinstance(doc, dict) else None
    return sorted(
        key
        for key, value in (values or {}).items()
        if isinstance(value, dict) and str(value.get("secure", "")).startswith(PLACEHOLDER_CIPHERTEXT)
    )


def secrets_to_set(keys: Sequence[str]) -> list[str]:
    """The lines that tell what to do before `pulumi up` about placeholder secrets."""
    return [
        f"before pulumi up: {key} holds a placeholder; set it for your stack with"
        f" `pulumi config set --secret {key.rpartition(':')[2]} <value>` (Pulumi refuses to start until then)"
        for key in keys
    ]


# --------------------------------------------------------------------------- output files


def kubernetes_objects(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The Kubernetes objects of the plan (resources whose inputs are the object)."""
    return [
        r["inputs"]
        for r in plan["resources"]
        if r["type"].startswith("kubernetes:") and "apiVersion" in r["inputs"] and "kind" in r["inputs"]
    ]


def check_out_dir(out: Path | None) -> None:
    """`--out` names a directory (made if missing): refused before the plan runs, not after."""
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory; give a directory (it is made if missing)")


def write_out(plan: dict[str, Any], out: Path) -> str:
    """Write plan.json and every Kubernetes object as YAML under `out`; return what was written
    (one line, for stderr: stdout carries only the plan)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(to_json(plan))
    k8s_dir = out / "kubernetes"
    by_name: dict[str, int] = defaultdict(int)
    objects = kubernetes_objects(plan)
    for obj in objects:
        meta = obj.get("metadata", {})
        stem = f"{obj['kind'].lower()}-{meta.get('namespace', 'cluster')}-{meta.get('name', 'unnamed')}"
        by_name[stem] += 1
        if by_name[stem] > 1:
            stem += f"-{by_name[stem]}"
        k8s_dir.mkdir(exist_ok=True)
        (k8s_dir / f"{stem}.yaml").write_text(yaml.safe_dump(obj, sort_keys=True))
    written = f"wrote {out / 'plan.json'} ({len(plan['resources'])} resources)"
    if objects:
        written += f" and {len(objects)} Kubernetes objects as YAML in {k8s_dir}/"
    return written


def recorded_outputs(path: Path | None, option: str = "--lower-outputs") -> dict[str, Any] | None:
    """A lower stack's outputs recorded with `pulumi stack output --json`."""
    if path is None:
        return None
    try:
        outputs = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{option} {path}: not a readable JSON file: {e}") from None
    if not isinstance(outputs, dict):
        raise UsageError(f"{option} {path}: expected the JSON object of `pulumi stack output --json`")
    return outputs


def deployed_plan(path: Path | None) -> dict[str, Any] | None:
    """The plan.json (`--format json` or `--out`) of the version deployed, for `--deployed`."""
    plan = recorded_outputs(path, "--deployed")
    if plan is None:
        return None
    resources = plan.get("resources")
    if not isinstance(resources, list) or not all(
        isinstance(r, dict) and "urn" in r and "type" in r for r in resources
    ):
        raise UsageError(f"--deployed {path}: expected a plan.json (an object with resources: [{{urn, type, ...}}])")
    return plan


def to_json(plan: dict[str, Any]) -> str:
    return json.dumps(plan, indent=2, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m tools.plan", description=__doc__.split("\n")[0] if __doc__ else None
    )
    add_stack_arguments(parser)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--out", type=Path, help="also write plan.json and every Kubernetes object as YAML here (stderr says what)"
    )
    parser.add_argument(
        "--deployed",
        type=Path,
        help="the plan.json of the version deployed: continue its state (launch-template versions), so an edit"
        " shows the node groups it rolls",
    )
    parser.add_argument(
        "--lower-outputs",
        type=Path,
        help="a layered stack: its lower stack's outputs (`pulumi stack output --json`) instead of its offline plan",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)

    # An example stack is planned at the example clock (config.checks.capacity.EXAMPLE_CLOCK), so
    # its dated Capacity Blocks plan on any date; every other stack file at the real clock.
    with contextlib.ExitStack() as scope:
        try:
            check_out_dir(args.out)
            path = stack_file(args, stderr)
            scope.enter_context(judged_clock(path))
            values = read_stack_file(path)
            deployed = deployed_plan(args.deployed)
            plan = run(values, stack_name(args), path.parent, recorded_outputs(args.lower_outputs), deployed=deployed)
        except (UsageError, config.ConfigError) as e:
            return bad_input(e, stderr, stdout if args.format == "json" else None)
        except Exception as e:  # noqa: BLE001 - the contract: any other failure is exit 1, no traceback
            print(f"error: the program failed under mocks: {type(e).__name__}: {e}", file=stderr)
            return 1

        stdout.write(to_json(plan) if args.format == "json" else render_table(plan))
        if args.out:
            try:
                print(write_out(plan, args.out), file=stderr)
            except OSError as e:
                return bad_input(UsageError(f"--out {args.out}: cannot write there: {e.strerror or e}"), stderr)
        for line in [
            *(f"warning: {w}" for w in plan.get("warnings", [])),
            *secrets_to_set(placeholder_secrets(path)),
            *config.offline_warnings(config.parse_stack_values(values)),
        ]:
            print(line, file=stderr)
        blocking = [v for v in plan.get("policy") or [] if v["enforcement"] == "mandatory"]
        for v in blocking:
            print(violation_line(v), file=stderr)
        return 1 if blocking else 0


if __name__ == "__main__":
    sys.exit(main())
