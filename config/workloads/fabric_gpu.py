"""Recipe `fabric-gpu`: the fabric acceptance run on a GPU node group, with nccl-tests over EFA
in the image of images/gpu-fabric (its builder: workloads/manifests/fabric_gpu.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from config.workloads.fabric import FabricAcceptanceRun
from config.workloads.recipe import Arguments, ExampleStacks, HeldAgainst, RecipeDocs, Support
from facts import instances


class FabricGpuRun(FabricAcceptanceRun):
    """The fabric acceptance run of a GPU node group: GPUs, EFA devices and DCGM on each node, then
    nccl-tests all-reduce over EFA against the floor, NCCL's own log proving aws-ofi-nccl carried it."""

    RECIPE: ClassVar[str] = "fabric-gpu"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "nvidia"
    REPOSITORY: ClassVar[str | None] = "gpu-fabric"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "accept")
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="NVIDIA nccl-tests v2.18.5 `all_reduce_perf` with NCCL v2.30.7-1 over EFA (aws-ofi-nccl 1.22.0 of"
        " EFA installer 1.51.0; its packaging read at 1.21.1), as awsome-distributed-ai's micro-benchmarks/nccl-tests"
        " runs it",
        image="CUDA 13.0.2 + EFA installer 1.51.0, NCCL v2.30.7-1, nccl-tests v2.18.5 (the current GPU fabric stack)",
        steps={
            "image": "image check Job",
            "accept": "acceptance MPIJob, awaited: per-node checks, all-reduce against the floor, sweep, report",
        },
        support=Support(
            "p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300",
            "CUDA 13.0.2, EFA installer 1.51.0 (aws-ofi-nccl 1.22.0), NCCL 2.30.7, nccl-tests 2.18.5",
            "current",
            "a fabric acceptance run on the current GPU fabric stack, not a model recipe",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("p4d", "p5en", "p6-b200", "p6-b300")
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("gpu-fabric-stack-2026-11", "aws-ofi-nccl-v1.21.1"),
        "all_reduce_perf's options (nccl-tests v2.18.5) and the aws-ofi-nccl log lines the gate reads",
    )

    recipe: Literal["fabric-gpu"] = Field(description="fabric-gpu")
