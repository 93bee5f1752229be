"""Recipe `custom`: bring your own training code (its builder: workloads/manifests/custom.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from config.problems import problem
from config.workloads.base import TrainingRun
from config.workloads.recipe import (
    Arguments,
    Converter,
    ExampleStacks,
    NoConversion,
    NoExampleStack,
    NotHeld,
    RecipeDocs,
    Support,
)
from estimates.checkpoints import CheckpointModel, NotSized
from estimates.startup import CompileTime
from estimates.step_time import StepTime, UnknownStepTime
from facts import instances


class CustomWorkload(TrainingRun):
    """Bring your own training code: any image and command, run once per node."""

    RECIPE: ClassVar[str] = "custom"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "train", "tensorboard")
    CHECKPOINTS: ClassVar[CheckpointModel] = NotSized(
        "your code decides what it saves to $CHECKPOINT_DIR; size the file system for it yourself"
    )
    COMPILE: ClassVar[CompileTime] = CompileTime(None, "your code's compile (if any) is yours to measure", hit="yours")
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime("your code's step time is yours to measure (stepSeconds)")
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="your code",
        image="yours (`image`, explicit tag)",
        steps={
            "image": "image check Job",
            "train": "training MPIJob (health gate, your command on every node)",
            "tensorboard": "optional TensorBoard",
        },
        beside=("tensorboard",),
        support=Support(
            "any accelerated node group",
            "your image (a Neuron image names its SDK, checked against the instance family)",
            "current",
            "your command runs unchanged",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = NoExampleStack(
        "an example needs a user's image: the launch harness plays every example stack's runs and has no stand-in"
        " for one; tests/unit/test_recipes.py builds it with every step on"
    )
    ARGUMENTS: ClassVar[Arguments] = NotHeld("your command is yours: the project renders it unchanged")
    CONVERSION: ClassVar[Converter] = NoConversion(
        "your code writes checkpoints the project knows nothing of: convert them yourself and serve the"
        " Hugging Face folder with model.hub pointing at a repository, or stage it with your own step"
    )

    recipe: Literal["custom"] = Field(description="custom")
    command: list[str] = Field(min_length=1, description="Command run once per node by mpirun (e.g. torchrun ...).")
    processes_per_node: int = Field(1, ge=1, description="Processes mpirun starts per node (1 for torchrun).")
    working_dir: str | None = Field(None, description="Working directory of the command.")
    tensorboard: bool = Field(False, description="TensorBoard over `/shared/<workload>`.")
    steps: int | None = Field(None, ge=1, description="Optimizer steps of the run, for its cost estimate.")
    checkpoint_every_steps: int = Field(
        500, ge=1, description="Exported as CHECKPOINT_EVERY_STEPS; the command saves to $CHECKPOINT_DIR that often."
    )

    @property
    def optimizer_steps(self) -> int | None:
        return self.steps

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        if self.processes_per_node > instance.ranks_per_node:
            return [
                problem(
                    f"{key}.processesPerNode",
                    "conflict",
                    f"{self.processes_per_node} is more than the {instance.ranks_per_node}"
                    f" accelerator ranks of a {instance.name}",
                )
            ]
        return []

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoint_every_steps

    @property
    def checkpoints_kept(self) -> int:
        return 1
