"""What an edit of a stack does to the work that is running, before `pulumi up` (make diff).

Both offline plans, the steps of the update per component, and their consequences.

    python -m tools.diff (--stack NAME | --config-file PATH) (--file EDITED | --base GITREF)
                         [--format table|json]

The stack's file is one side: with --file it is the "before" (deployed) and EDITED the "after";
with --base it is the "after" and the same file at GITREF (`git show`) the "before". Both are
planned offline (tools.plan.run, no AWS, no Pulumi CLI); the update between them is
tools.offline.plan_diff's, the consequences tools.offline.edit_effects's, and each node group whose
bill changes is priced before and after as the plans price it (estimates.cost: per capacity kind).

Exit 0: nothing running is touched; 3: the edit disrupts running work (nodes under runs roll, a
run restarts, a server stops serving) or `pulumi up` would stop (a protected resource deleted, an
awaited Job Kueue cannot admit); 2: invalid config or arguments; 1: the program failed under mocks.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import config
from config.stackfile import UsageError, read_stack_file
from tools import plan as planner
from tools.cli import ROOT, add_stack_arguments, bad_input, judged_clock, stack_file, stack_name
from tools.offline import edit_effects
from tools.offline.edit_effects import Effect, Plans, RunFacts
from tools.offline.plan_diff import Update, diff

DISRUPTED = 3
SYMBOLS = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}


def _before_after(args: argparse.Namespace, stderr: Any) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """The two stack files' values (before, after) and the folder layered stacks are read from."""
    path = stack_file(args, stderr)
    current = read_stack_file(path)
    if args.file is not None:
        return current, read_stack_file(Path(args.file)), path.parent
    try:
        rel = path.resolve().relative_to(ROOT)
    except ValueError as e:
        raise UsageError(f"--base {args.base}: {path} is not in this repository") from e
    shown = subprocess.run(
        ["git", "show", f"{args.base}:{rel.as_posix()}"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        first = (shown.stderr.strip().splitlines() or ["git show failed"])[0][:200]
        raise UsageError(f"--base {args.base[:80]}: no {rel.as_posix()} there ({first})")
    with tempfile.TemporaryDirectory() as tmp:
        deployed = Path(tmp) / path.name
        deployed.write_text(shown.stdout)
        return read_stack_file(deployed), current, path.parent


def run_facts(values: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, RunFacts]:
    """What the effects say of each run of the deployed stack: its kind, group and how it comes
    back after a restart (its checkpoint cadence, read-back and the modeled cost at its group's
    price), a server's replicas and whether its group has room for one more during a roll."""
    cfg = config.parse_stack_values(dict(values))
    inputs = {r["name"]: r["inputs"] for r in plan["resources"] if r["type"] == edit_effects.WORKLOAD}
    hourly = {i["name"].removeprefix("node-group/"): i["unitPriceHourly"] for i in plan["cost"]["items"]}
    groups = {g.name: g for g in cfg.node_groups}
    out = {}
    for name, run in cfg.workloads.items():
        i = inputs.get(name, {})
        price = hourly.get(run.node_group, 0.0) * run.nodes
        group = groups.get(run.node_group)
        if run.KIND == "serving" and group is not None:
            others = sum(r.nodes for n, r in cfg.workloads.items() if n != name and r.node_group == group.name)
            out[name] = _server(run, group.desired_size - others, group.instance)
        elif run.KIND == "serving":
            out[name] = _server(run, 0, None)
        else:
            out[name] = RunFacts(run.KIND, run.node_group, _restart(i, price))
    return out


def _restart(inputs: Mapping[str, Any], hourly: float) -> str:
    """How a training run comes back: from its latest checkpoint, losing up to one interval."""
    ck = inputs.get("checkpoints") or {}
    loads = (inputs.get("throughput") or {}).get("loads") or {}
    every, step = ck.get("everySteps"), ck.get("stepSeconds") or (inputs.get("throughput") or {}).get("stepSeconds")
    if not every:
        return "from its first step (no checkpoint)"
    text = f"from its latest checkpoint (every {every:,} steps)"
    if step:
        lost = every * step + (loads.get("resumeLoadSeconds") or 0)
        text += f", up to {lost / 60:,.0f} min of work lost and re-read, up to ${lost / 3600 * hourly:,.0f}"
    return text


def _server(run: Any, free_nodes: int, instance: Any) -> RunFacts:
    """A server's facts: room for one more replica where the nodes its group has left over (after
    the other runs on it) hold its replicas plus one (a replica's nodes, or one node)."""
    replicas = int(getattr(run, "replicas", 1))
    spare = instance is not None and run.nodes_needed(instance) + (run.nodes if run.spans_nodes else 1) <= free_nodes
    return RunFacts("serving", run.node_group, "a replica's start", replicas, spare)


def components(update: Update, plans: Plans) -> dict[str, list[str]]:
    """The touched resources under each component (`Type name`), one line each."""
    out: dict[str, list[str]] = defaultdict(list)
    for urn, step in sorted(update.touched().items()):
        r = plans.resource(urn)
        if not r["custom"]:  # a component's own inputs are not diffed by the engine: its children are
            continue
        comp = _component(r.get("parent") or "")
        op = step.op + (" (delete first)" if step.op == "replace" and step.delete_first else "")
        if step.op == "replace" and not step.delete_first:
            op += " (create first)"
        detail = f": {', '.join(step.changed[:4])}" + (" ..." if len(step.changed) > 4 else "") if step.changed else ""
        kind = r["type"].rsplit(":", 1)[-1]
        out[comp].append(f"{SYMBOLS.get(step.op, '?')} {kind} {r['name']} {op}{detail}")
    return dict(out)


def _component(urn: str) -> str:
    """`Type name` of a component URN (urn:pulumi:<stack>::<project>::<parents$>type::name)."""
    parts = urn.split("::")
    if len(parts) < 4 or parts[2].endswith("pulumi:pulumi:Stack"):
        return "Stack"
    return f"{parts[2].rsplit('$', 1)[-1].rsplit(':', 1)[-1]} {parts[-1]}"


def _priced(item: Mapping[str, Any] | None) -> str:
    """A node group's cost item as the plan prices it (estimates.cost: each capacity kind as AWS bills it)."""
    if item is None:
        return "none"
    rate = f"{item['unitPriceHourly']:,.4f}".rstrip("0").rstrip(".")
    text = f"{item['quantity']:g} x {item['unit']} at ${rate}/h = ${item['hourly']:,.2f}/h"
    if item.get("prepaidTotal") is not None:
        text += f", prepaid ${item['prepaidTotal']:,.2f} for {item['prepaidHours']:,.0f} h"
    return text


def cost_lines(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Each node group whose bill the edit changes (count, capacity kind, rate or prepaid block):
    its priced figures before and after, the plan's own (facts/prices.py)."""

    def groups(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        items = plan.get("cost", {}).get("items", [])
        return {i["name"].removeprefix("node-group/"): i for i in items if i.get("kind") == "nodes"}

    old, new = groups(before), groups(after)
    return [
        f"node group {n}: {_priced(old.get(n))} -> {_priced(new.get(n))}"
        for n in sorted({*old, *new})
        if _priced(old.get(n)) != _priced(new.get(n))
    ]


def report(update: Update, plans: Plans, found: list[Effect], cost: Sequence[str] = ()) -> dict[str, Any]:
    """The diff as data (FORMAT=json); `cost`: the node groups' changed bills (`cost_lines`)."""
    counts: dict[str, int] = defaultdict(int)
    for urn, step in update.touched().items():
        counts[step.op] += 1 if plans.resource(urn)["custom"] else 0
    return {
        "steps": dict(sorted(counts.items())),
        "components": components(update, plans),
        "effects": [e.as_dict() for e in found],
        "cost": list(cost),
        "disrupts": any(e.disrupts for e in found),
    }


def as_table(data: Mapping[str, Any], stack: str) -> str:
    """The terminal's and the pull request's view: consequences first, then per component."""
    counts = ", ".join(f"{n} to {op}" for op, n in data["steps"].items()) or "no changes"
    lines = [f"Edit of stack '{stack}': {counts}"]
    effects = data["effects"]
    lines += ["", "What it does to running work:" if effects else "What it does to running work: nothing"]
    lines += [f"    {'!' if e['disrupts'] else '-'} {e['line']}" for e in effects]
    if data.get("cost"):
        lines += ["", "What it costs (the plan's prices, facts/prices.py):"] + [f"    $ {c}" for c in data["cost"]]
    for comp, steps in data["components"].items():
        lines += ["", comp] + [f"    {s}" for s in steps]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None) -> int:
    """The command line."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m tools.diff", description="What an edit of a stack does.")
    add_stack_arguments(parser)
    side = parser.add_mutually_exclusive_group(required=True)
    side.add_argument("--file", type=Path, help="the edited stack file (the stack's own file is the deployed one)")
    side.add_argument("--base", help="a git ref: the stack's file there is the deployed one, the current the edit")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    json_out = stdout if args.format == "json" else None
    try:
        with judged_clock(stack_file(args)):
            before_values, after_values, folder = _before_after(args, stderr)
            before = planner.run(before_values, stack_name(args), folder)
            # over the deployed plan: a changed launch template gets EC2's next version (a roll)
            after = planner.run(after_values, stack_name(args), folder, deployed=before)
            run_facts_before = run_facts(before_values, before)
            after_cfg = config.parse_stack_values(dict(after_values))
    except (UsageError, config.ConfigError) as e:
        return bad_input(e, stderr, json_out)
    except Exception as e:  # noqa: BLE001 - the contract: any other failure is exit 1, no traceback
        print(f"error: the program failed under mocks: {type(e).__name__}: {e}", file=stderr)
        return 1
    update = diff(before, after, strict=False)
    plans = Plans(before, after, update)
    groups = {g.name: g.desired_size for g in after_cfg.node_groups}
    found = edit_effects.effects(plans, groups, run_facts_before)
    data = report(update, plans, found, cost_lines(before, after))
    stdout.write(json.dumps(data, indent=2) + "\n" if json_out else as_table(data, stack_name(args)))
    return DISRUPTED if data["disrupts"] else 0


if __name__ == "__main__":
    sys.exit(main())
