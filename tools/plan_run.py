"""The lines the offline plan's table shows for a training run: its time to first step and its
checkpoints (tools.plan_table reads them from the run's component inputs)."""

from __future__ import annotations

from typing import Any


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
