"""Recipe `fabric-neuron`: the fabric acceptance run on a Trainium node group, with nccom-test over
EFA in the image of images/neuron-fabric (its builder: workloads/manifests/fabric_neuron.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from config.workloads.fabric import FabricAcceptanceRun
from config.workloads.recipe import Arguments, ExampleStacks, HeldAgainst, RecipeDocs, Support
from facts import instances, versions


class FabricNeuronRun(FabricAcceptanceRun):
    """The fabric acceptance run of a Trainium node group: Neuron devices, EFA devices and a
    single-node nccom-test on each node (on a Trn2 UltraServer, every node in a whole one), then
    nccom-test all-reduce across the nodes against the floor."""

    RECIPE: ClassVar[str] = "fabric-neuron"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "neuron-fabric"
    NEURON_FRAMEWORK: ClassVar[versions.Framework | None] = "none"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "accept")
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="`nccom-test` of aws-neuronx-tools 2.32.28.0 (Neuron SDK 2.32.0) across the nodes in MPI mode, as the"
        " Neuron nccom-test guide runs it",
        image="Ubuntu 24.04 + Neuron SDK 2.32.0 runtime, collectives and tools, EFA installer 1.51.0 (no framework)",
        steps={
            "image": "image check Job",
            "accept": "acceptance MPIJob, awaited: per-node checks (UltraServer membership on trn2u), all-reduce"
            " against the floor, sweep, report",
        },
        support=Support(
            "trn1, trn1n, trn2, trn2u",
            "Neuron SDK 2.32.0 runtime, collectives and nccom-test, EFA installer 1.51.0 (no framework)",
            "current",
            "a fabric acceptance run on the Neuron runtime and tools, not a model recipe",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("trn2",)
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("nccom-test-2.32.0",),
        "nccom-test's options, its MPI mode (NEURON_RT_ROOT_COMM_ID, --hosts) and the UltraServer ids it is read with",
    )

    recipe: Literal["fabric-neuron"] = Field(description="fabric-neuron")
