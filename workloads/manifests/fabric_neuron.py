"""Recipe `fabric-neuron`: the fabric acceptance run on a Trainium node group (workloads/manifests/fabric.py)."""

from __future__ import annotations

from config.workloads import FabricNeuronRun
from workloads.manifests.fabric import steps as acceptance_steps
from workloads.manifests.objects import Context, Step

MODEL = FabricNeuronRun


def steps(workload_name: str, run: FabricNeuronRun, ctx: Context) -> list[Step]:
    """Image check -> the acceptance MPIJob (awaited)."""
    return acceptance_steps(workload_name, run, ctx)
