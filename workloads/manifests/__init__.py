"""Pure builders: a run's config and its node group's facts in, Kubernetes dicts out.

`steps(workload_name, run, ctx)` returns the ordered steps of one run. Each step is one
Kubernetes object plus the names of the steps it must follow. Nothing here touches Pulumi,
so the objects can be rendered to YAML for review and validated against the Kubernetes
and MPIJob schemas; `workloads.deploy` applies them. Each recipe is one module here (its
`steps`, and `MODEL`, the config model of config/workloads/ it renders).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from config.workloads import Run
from workloads.manifests import (
    admission,
    bert_neuron,
    custom,
    ddp_cpu,
    fabric_gpu,
    fabric_neuron,
    fsx_read,
    llama2_neuron,
    llama3_nxd,
    megatron_bridge,
    nemo_gpu,
    torchtitan_neuron,
    vllm_serve,
)
from workloads.manifests.convert import Converter
from workloads.manifests.objects import Context, Step

BUILDERS: dict[str, Callable[[str, Any, Context], list[Step]]] = {
    module.MODEL.RECIPE: module.steps
    for module in (
        llama2_neuron,
        nemo_gpu,
        bert_neuron,
        custom,
        ddp_cpu,
        megatron_bridge,
        fabric_gpu,
        fabric_neuron,
        fsx_read,
        llama3_nxd,
        torchtitan_neuron,
        vllm_serve,
    )
}
"""Recipe name -> its builder."""
CONVERTERS: dict[str, Converter] = {
    module.MODEL.RECIPE: module.convert
    for module in (llama2_neuron, nemo_gpu, llama3_nxd, torchtitan_neuron, megatron_bridge)
}
"""Training recipe -> the converter of its finished runs to a Hugging Face folder (its builder's `convert`)."""
vllm_serve.CONVERTERS.update(CONVERTERS)

__all__ = ["BUILDERS", "CONVERTERS", "Context", "Step", "steps"]


def steps(workload_name: str, run: Run, ctx: Context) -> list[Step]:
    """Every step of one run, in order; none awaited that Kueue cannot admit now (admission)."""
    groups = admission.context_groups(ctx)
    return [admission.unawaited_where_held(s, groups) for s in BUILDERS[run.recipe](workload_name, run, ctx)]
