"""Recipe `fabric-gpu`: the fabric acceptance run on a GPU node group (workloads/manifests/fabric.py)."""

from __future__ import annotations

from config.workloads import FabricGpuRun
from workloads.manifests.fabric import steps as acceptance_steps
from workloads.manifests.objects import Context, Step

MODEL = FabricGpuRun


def steps(workload_name: str, run: FabricGpuRun, ctx: Context) -> list[Step]:
    """Image check -> the acceptance MPIJob (awaited)."""
    return acceptance_steps(workload_name, run, ctx)
