"""What an edit does to the work that is running: from the steps of `pulumi up` (plan_diff) and the
two offline plans, the consequences a person cares about, each one line.

- A node group's nodes roll: the group is replaced (a new group comes up, the old one drains), or
  EKS updates its version (terraform-provider-aws internal/service/eks/node_group.go
  resourceNodeGroupUpdate: a change of `launch_template`, `release_version` or `version` calls
  UpdateNodegroupVersion, which replaces every node; labels, taints, scaling and update config go
  through UpdateNodegroupConfig, which replaces none: facts.replacements.EKS_NODE_GROUP_ROLLS). A
  Capacity Block group with nodes: the line names the way through (after the block, or at 0).
- A run restarts: its MPIJob is replaced or deleted, or the nodes under it roll; it resumes from
  its latest checkpoint where it has one, at the modeled cost the plan shows.
- A server rolls: its Deployment or LeaderWorkerSet is updated (a rolling update) or replaced, or
  its nodes roll; it keeps serving where more than one replica stands.
- `pulumi up` waits on a Job (pulumi-kubernetes awaits a Job's completion unless it is annotated
  `pulumi.com/skipAwait`) and whether Kueue can admit it (its node group has nodes).
- A protected resource the edit would delete or replace: `pulumi up` stops there.
- A Capacity Block group's scheduled actions: when the group is raised at a block's start, and a
  scale-down of its own ahead of EKS's (40 minutes before the end) for its runs' last checkpoint.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from facts import awaits, replacements
from facts.capacity_blocks import EKS_SCALE_DOWN_MINUTES_BEFORE_END
from facts.names import NODE_GROUP_LABEL
from tools.offline.plan_diff import Step, Update, under

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
JOB = "kubernetes:batch/v1:Job"
SERVER_KINDS = ("kubernetes:apps/v1:Deployment", "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
WORKLOAD = "llm-training-eks:workloads:Workload"


@dataclass(frozen=True)
class Effect:
    """One consequence: its class, the line people read, whether it disrupts running work (or stops
    `pulumi up`), and the config key or resource it is about."""

    kind: str
    """roll | restart | serve | wait | schedule | protected | unknown"""
    line: str
    disrupts: bool
    subject: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "disrupts": self.disrupts, "subject": self.subject}


class Plans:
    """The two plans and the update between them, indexed the ways the effects read them."""

    def __init__(self, before: Mapping[str, Any], after: Mapping[str, Any], update: Update) -> None:
        self.before = {r["urn"]: r for r in before["resources"]}
        self.after = {r["urn"]: r for r in after["resources"]}
        self.update = update
        self.workloads = {r["name"]: r for r in [*self.before.values(), *self.after.values()] if r["type"] == WORKLOAD}

    def resource(self, urn: str) -> Mapping[str, Any]:
        """The resource as it will be, or as deployed where the edit deletes it."""
        return self.after.get(urn) or self.before[urn]

    def workload_of(self, urn: str) -> str | None:
        """The workload (run) a resource belongs to: its parent Workload component's name."""
        parent = self.resource(urn).get("parent") or ""
        return parent.rsplit("::", 1)[-1] if f"${WORKLOAD}::" in parent or parent.endswith(WORKLOAD) else None


def node_group_of(r: Mapping[str, Any]) -> str | None:
    """The node group a pod template or node group resource is placed on (its node-group label)."""
    inputs = r.get("inputs") or {}
    if r["type"] == NODE_GROUP:
        return (inputs.get("labels") or {}).get(NODE_GROUP_LABEL)
    for spec in _pod_specs(inputs):
        group = (spec.get("nodeSelector") or {}).get(NODE_GROUP_LABEL)
        if group:
            return str(group)
    return None


def _pod_specs(inputs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod specs of a Job, MPIJob worker, Deployment or LeaderWorkerSet."""
    spec = inputs.get("spec") or {}
    found = []
    if "template" in spec:
        found.append(spec["template"].get("spec") or {})
    for replica in (spec.get("mpiReplicaSpecs") or {}).values():
        found.append((replica.get("template") or {}).get("spec") or {})
    lws = (spec.get("leaderWorkerTemplate") or {}).get("workerTemplate")
    if lws:
        found.append(lws.get("spec") or {})
    return found


def rolls(step: Step) -> tuple[str, ...]:
    """Why a node group's nodes roll in this step (empty: they do not)."""
    if step.type != NODE_GROUP or step.op not in ("replace", "update"):
        return ()
    if step.op == "replace":
        return step.changed
    return tuple(p for p in step.changed if under(p, replacements.EKS_NODE_GROUP_ROLLS))


def effects(plans: Plans, groups: Mapping[str, int], runs: Mapping[str, RunFacts]) -> list[Effect]:
    """Every consequence of the update, node rolls first. `groups` is each node group's node count
    after the edit; `runs` what the effects say of each run (its kind, group, restart cost)."""
    out: list[Effect] = []
    rolled: dict[str, tuple[str, ...]] = {}
    for urn, step in sorted(plans.update.steps.items()):
        why = rolls(step)
        group = node_group_of(plans.resource(urn))
        if why and group:
            rolled[group] = why
    for group, why in sorted(rolled.items()):
        on = sorted(name for name, r in runs.items() if r.group == group and r.kind != "acceptance")
        nodes = _nodes_before(plans, group)
        text = f"node group {group}: its {nodes} node(s) roll ({', '.join(why)})"
        text += f"; on them: {', '.join(f'{n} ({runs[n].kind})' for n in on)}" if on else "; nothing runs on them"
        if nodes > 0 and _capacity_block(plans, group):
            text += f"; {BLOCK_WAY_THROUGH}"
        out.append(Effect("roll", text, bool(on) and nodes > 0, f"nodeGroups.{group}"))
    out += _run_effects(plans, runs, rolled)
    out += _job_waits(plans, groups)
    out += _block_schedules(plans)
    for urn, step in sorted(plans.update.steps.items()):
        if step.blocked:
            name = urn.rsplit("::", 1)[-1]
            out.append(Effect("protected", f"refused: {step.op} of protected {step.type} {name}; `pulumi up` stops"
                              " there and nothing after it deploys", True, urn))  # fmt: skip
        elif step.unknown:
            out.append(Effect("unknown", f"{step.type} {urn.rsplit('::', 1)[-1]}: changed ({', '.join(step.changed)});"
                              " its replacement rules were not read (facts/replacements.py): it may be replaced",
                              False, urn))  # fmt: skip
    return out


# EKS user guide, capacity-blocks-mng: a Capacity Block group is updated only at desired size 0. A roll
# needs new nodes while the old drain, and a block has no instance beyond the ones it runs.
BLOCK_WAY_THROUGH = (
    "a Capacity Block group rolls only at desired size 0 (preflight refuses it with nodes): make this edit"
    " after the block ends, or deploy desiredSize: 0 and minSize: 0 first"
)


def _capacity_block(plans: Plans, group: str) -> bool:
    """Whether the node group launches into a Capacity Block (EKS capacityType CAPACITY_BLOCK)."""
    return any(
        r["type"] == NODE_GROUP and node_group_of(r) == group and r["inputs"].get("capacityType") == "CAPACITY_BLOCK"
        for r in plans.before.values()
    )


def _nodes_before(plans: Plans, group: str) -> int:
    for r in plans.before.values():
        if r["type"] == NODE_GROUP and node_group_of(r) == group:
            return int((r["inputs"].get("scalingConfig") or {}).get("desiredSize") or 0)
    return 0


@dataclass(frozen=True)
class RunFacts:
    """What the effects say of one run (from the before plan's config and estimates)."""

    kind: str
    group: str
    restart: str
    """How a training run comes back (its checkpoint and the modeled cost), a server's start."""
    replicas: int = 0
    spare_replica: bool = False
    """A server: whether its group has room for one more replica during a rolling update."""


def _run_effects(plans: Plans, runs: Mapping[str, RunFacts], rolled: Mapping[str, tuple[str, ...]]) -> list[Effect]:
    """Runs whose MPIJob is replaced, deleted or started, servers that roll, and every run on a
    node group whose nodes roll."""
    ops: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for urn, step in sorted(plans.update.steps.items()):
        name = plans.workload_of(urn)
        r = plans.resource(urn)
        if name is not None and name in runs and step.op != "same" and r["type"] in (MPIJOB, *SERVER_KINDS):
            ops[name][step.op].append(str((r["inputs"].get("metadata") or {}).get("name") or r["name"]))
    out = []
    for name, run in sorted(runs.items()):
        seen = ops.get(name, {})
        nodes = f"its nodes roll ({run.group})" if run.group in rolled else ""
        if run.kind == "training":
            out += _training(name, run, seen, nodes)
        elif run.kind == "serving" and (seen.get("update") or seen.get("replace") or nodes):
            replaced = bool(seen.get("replace"))
            why = "is replaced (delete first)" if replaced else "rolls its replicas" if seen.get("update") else nodes
            keeps = (run.replicas > 1 or run.spare_replica) and not replaced
            how = (
                "keeps serving (one replica at a time" + (", a spare one first)" if run.spare_replica else ")")
                if keeps
                else f"stops serving until a replica is back ({run.restart})"
            )
            out.append(Effect("serve", f"server {name}: {why}; {how}", not keeps, f"workloads.{name}"))
    return out


def _training(name: str, run: RunFacts, seen: Mapping[str, list[str]], nodes: str) -> list[Effect]:
    """A training run's lines: a new run started beside the deleted one, a replaced MPIJob, or
    nodes rolling under it."""
    stopped, started, replaced = seen.get("delete", []), seen.get("create", []), seen.get("replace", [])
    key = f"workloads.{name}"
    out = []
    if stopped:
        out.append(Effect("restart", f"run {name}: {', '.join(stopped)} is deleted: the run stops (its checkpoints"
                           " stay on /shared)", True, key))  # fmt: skip
    if started:
        out.append(Effect("restart", f"run {name}: {', '.join(started)} starts", False, key))
    if replaced or (nodes and not stopped):
        why = f"its MPIJob {', '.join(replaced)} is replaced" if replaced else nodes
        out.append(Effect("restart", f"run {name}: {why}; it restarts {run.restart}", True, key))
    return out


def _job_waits(plans: Plans, groups: Mapping[str, int]) -> list[Effect]:
    """Jobs (and awaited MPIJobs) the update creates or replaces, which `pulumi up` waits for."""
    out = []
    for urn, step in sorted(plans.update.steps.items()):
        if step.op not in ("create", "replace") or urn not in plans.after:
            continue
        r = plans.after[urn]
        awaited = awaits.awaits_completion(r["inputs"])
        held = node_group_of(r)
        if not awaited and r["type"] == JOB and held is not None and groups.get(held, 1) == 0:
            name = urn.rsplit("::", 1)[-1]
            line = f"{name} waits in Kueue until node group {held} has nodes (`pulumi up` does not wait for it)"
            out.append(Effect("wait", line, False, f"nodeGroups.{held}.desiredSize"))
            continue
        if not awaited:
            continue
        group = node_group_of(r)
        limit = awaits.timeout_seconds(r["inputs"])
        within = f" up to {int(limit):,} s" if limit else ""
        name = urn.rsplit("::", 1)[-1]
        if group is not None and groups.get(group, 1) == 0:
            line = (f"`pulumi up` waits{within} for {name}, which Kueue cannot admit: node group {group} has 0 nodes;"
                    " it fails at the timeout")  # fmt: skip
            out.append(Effect("wait", line, True, f"nodeGroups.{group}.desiredSize"))
        else:
            out.append(
                Effect("wait", f"`pulumi up` waits{within} for {name} on node group {group or 'any'}", False, urn)
            )
    return out


SCHEDULE = "aws:autoscaling/schedule:Schedule"
START, END = "-capacity-block-start", "-capacity-block-end"


def _block_schedules(plans: Plans) -> list[Effect]:
    """What an edit does to a Capacity Block group's scheduled actions (infra/nodegroups.py): the
    scale-up at the block's start, and the group's own scale-down, which exists only where 30 minutes
    plus its runs' longest checkpoint write exceed EKS's own action (estimates/capacity_blocks.py)."""
    out = []
    for urn, step in sorted(plans.update.steps.items()):
        r = plans.resource(urn)
        name = str(r["name"])
        if r["type"] != SCHEDULE or step.op == "same" or not name.endswith((START, END)):
            continue
        group = name.removeprefix("ng-").removesuffix(START).removesuffix(END)
        i, eks = r["inputs"], f"EKS's own scale-down ({EKS_SCALE_DOWN_MINUTES_BEFORE_END} min before the block ends)"
        if name.endswith(START):
            line = (f"node group {group}: no scale-up at a block's start any more" if step.op == "delete"
                    else f"node group {group}: raised to {i.get('desiredCapacity')} node(s) at {i.get('startTime')},"
                    " the block's start")  # fmt: skip
        elif step.op == "delete":
            line = f"node group {group}: its own scale-down goes; {eks} drains it"
        else:
            line = (f"node group {group}: scaled to 0 at {i.get('startTime')}, ahead of {eks}: time for its"
                    " runs' last checkpoint to land")  # fmt: skip
        out.append(Effect("schedule", line, False, urn))
    return out
