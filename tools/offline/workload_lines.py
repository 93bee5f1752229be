"""The lines the offline plan's table shows for a workload (a `Workload` component of kind
training, serving or acceptance), read from the component's inputs: its steps in order, its time
to the first step, its throughput (step time and basis, tokens/s, MFU, support, what it reads at
start and on a restart) and its checkpoints. The infrastructure components' lines are
tools.offline.plan_table's."""

from __future__ import annotations

from typing import Any

from facts import awaits
from facts.names import component_type
from tools.offline.plan_view import PlanView

WORKLOAD = component_type("workloads", "Workload")


def workload_title(comp: dict[str, Any]) -> str:
    """A workload is headed by its kind, as its component says (`Training first-run`, `Serving chat`)."""
    return f"{str(comp['inputs']['kind']).capitalize()} {comp['name']}"


def _is_acceptance_step(view: PlanView, urn: str) -> bool:
    """A URN of a step of an acceptance run (a child of a workload of that kind)."""
    parent = view.parent_of(urn)
    return parent is not None and parent["type"] == WORKLOAD and parent["inputs"].get("kind") == "acceptance"


def workload_facts(view: PlanView, comp: dict[str, Any]) -> list[str]:
    """A workload's block: its recipe and run, each step in the order it is created (the gate of its
    node group's acceptance run first), then its start-up, throughput and checkpoint lines."""
    i = comp["inputs"]
    facts = [f"recipe {i.get('recipe')}, run {i.get('runId')}, steps in order:"]
    kids = {r["urn"]: r for r in view.children(comp["urn"])}
    outside = {d for r in kids.values() for d in r["dependencies"] if d not in kids and _is_acceptance_step(view, d)}
    gates = sorted(d.split("::")[-1] for d in outside)
    if gates:
        facts.insert(0, f"created once {', '.join(gates)} passed (the acceptance run of its node group)")
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
            awaited = "awaited" if awaits.awaits_completion(obj) else "not awaited"
            if (limit := awaits.timeout_seconds(obj)) is not None:
                awaited += f" at most {limit:,} s"
            line += f": {workers.get('replicas')} workers ({devices}), queue {queue}, {awaited}"
        facts.append(line)
    facts += startup_facts(i.get("startup"))
    facts += throughput_facts(i.get("throughput")) + schedule_facts(i.get("schedule"), i.get("length"))
    return facts + checkpoint_facts(i.get("checkpoints"))


def schedule_facts(schedule: dict[str, Any] | None, length: dict[str, Any] | None) -> list[str]:
    """A training run's learning-rate schedule over its steps, and its length with what else runs on
    its nodes (validation, export): one line each (the throughput line is apart)."""
    out = []
    if schedule:
        out.append(f"schedule: {schedule['line']}")
    elif length:
        out.append("schedule: the run's own code sets it (not modelled)")
    if length:
        out.append(f"length: {length['line']}")
    return out


def startup_facts(s: dict[str, Any] | None) -> list[str]:
    """Time to the first step: the image pulls (every node of the group before the run, the
    launcher's on a system node), the compile on a cache miss and hit. Kueue's pods-ready timeout
    is the cluster layer's; a config check holds it to the launcher's pull."""
    if not s:
        return []
    miss = s.get("compileMinutesOnMiss")  # None (no published figure) is not an input Pulumi keeps
    compiled = "no compile" if miss == 0 else f"compile ~{miss:g} min on a miss" if miss else "compile unknown"
    if miss:
        compiled += f" ({s['compileBasis']}), {s['compileOnHit']} on a hit"
    elif miss is None:
        compiled += f" ({s['compileBasis']})"
    return [
        f"first step: image ~{s['pullSecondsPerGB']:g} s/GB ({s['pullBasis']}) onto every node before the run,"
        f" then the data steps; {compiled}; the launcher's pull within Kueue's pods-ready timeout (config check)"
    ]


def checkpoint_facts(c: dict[str, Any] | None) -> list[str]:
    """Checkpoint size, write time at the file system's throughput, share of training time
    (at the configured interval and the estimated step time), and how many are kept."""
    if not c:
        return []
    writes = c.get("writesPerInterval", 1)
    written = (
        f"~{c['writeSeconds']:,} s to write"
        if writes == 1
        else f"{writes} written per interval in ~{c['writeSeconds']:,} s"
    )
    line = f"checkpoints: {c['sizeGB']:,} GB each, {c['kept']} kept, {written}"
    if c.get("writes") is not None:
        line += f", {c['writes']} written"
    if c.get("writeShare") is not None:
        line += (
            f"; every {c['everySteps']} steps x {c['stepSeconds']:g} s: {c['writeShare']:.1%} of training time writing"
        )
    elif c.get("everySteps") is None:
        minutes = c["writeSeconds"] / 0.02 / 60
        line += f"; written per dataset shard group: 2% or less of training time if a group trains {minutes:.0f}+ min"
    else:
        line += f"; every {c['everySteps']} steps (share unknown: set stepSeconds)"
    if c.get("assumes"):
        line += f"; size assumes {c['assumes']}"
    return [line]


def throughput_facts(t: dict[str, Any] | None) -> list[str]:
    """Two lines: the throughput (or why it is unknown), then support and what the run reads."""
    if not t:
        return []
    step, tokens, mfu = t.get("stepSeconds"), t.get("tokensPerSecond"), t.get("mfu")
    if t.get("acceptance"):  # an acceptance run trains nothing: its modeled length instead
        line = f"acceptance: ~{t['acceptance']['seconds']:,} s ({t['acceptance']['basis']})"
    elif step is None:
        line = f"throughput: unknown ({t.get('stepTimeBasis')})"
    else:
        line = f"throughput: {step:g} s/step ({t.get('stepTimeBasis')})"
        if tokens is not None:
            per_gpu = t.get("tokensPerSecondPerGpu")
            line += f", {tokens:,} tokens/s" + (f" ({per_gpu:,} per GPU)" if per_gpu is not None else "")
    if t.get("mfuBasis"):  # every training run: its MFU and basis, or why there is none
        line += f"; MFU {mfu:.1%}: {t['mfuBasis']}" if mfu is not None else f"; {t['mfuBasis']}"
    if t.get("published"):
        line += f"; published: {t['published']}"
    return [line, f"support: {t.get('support')}{_loads(t.get('loads') or {})}"]


def _loads(loads: dict[str, Any]) -> str:
    """What the run reads before its first step and on a restart (the pulls and the compile are
    the startup line's)."""
    text = ""
    if loads.get("loadSeconds"):
        text += f"; {loads['loadSeconds']:,} s loading weights before the first step"
    if loads.get("resumeLoadSeconds") is not None:
        text += f"; a restart reads the latest checkpoint in ~{loads['resumeLoadSeconds']:,} s"
    return text
