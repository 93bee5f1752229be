"""Recipe `ddp-cpu`: PyTorch DDP over gloo on the system nodes' CPUs, the first run of a platform
(its builder: workloads/manifests/ddp_cpu.py, its script: workloads/manifests/ddp_cpu_train.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from config.base import KeyProblem
from config.problems import problem
from config.workloads.base import TrainingRun
from config.workloads.recipe import Arguments, Converter, ExampleStacks, HeldAgainst, NoConversion, RecipeDocs, Support
from estimates.checkpoints import CheckpointModel, NotSized
from estimates.startup import NO_COMPILE, CompileTime
from estimates.step_time import StepTime, UnknownStepTime
from facts import images, instances
from facts.names import SYSTEM_NODE_GROUP


class DdpCpuWorkload(TrainingRun):
    """PyTorch DDP over gloo on the system nodes' CPUs, the first run of a platform: the MPI operator,
    Kueue, the shared volume, checkpoints, a restart and a resume, with a public image."""

    RECIPE: ClassVar[str] = "ddp-cpu"
    RUNS_ON_CPU: ClassVar[bool] = True
    STEPS: ClassVar[tuple[str, ...]] = ("train",)
    CHECKPOINTS: ClassVar[CheckpointModel] = NotSized(
        "a model of a few thousand parameters (workloads/manifests/ddp_cpu_train.py): kilobytes per checkpoint"
    )
    COMPILE: ClassVar[CompileTime] = NO_COMPILE
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "it runs on the system nodes, billed with the stack: its length adds no cost of its own"
    )
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="PyTorch DDP over gloo, a small model on synthetic data (`workloads/manifests/ddp_cpu_train.py`)",
        image="public: Horovod's `horovod-cpu:0.28.1` (Ubuntu 20.04, PyTorch 1.12.1, Open MPI 4.1.4, sshd; nothing"
        " built)",
        steps={
            "train": "training MPIJob on the system nodes (health gate: each node's `/shared`; the script written to"
            " the run directory; torchrun on every node; checkpoints, one interruption and the resume)"
        },
        support=Support(
            "the system node group's CPUs",
            "PyTorch 1.12.1 (gloo) in horovod-cpu 0.28.1",
            "current",
            "a platform check (scheduling, storage, restart and resume), not a model recipe",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("dev",)
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("horovod-cpu-0.28.1",),
        "the programs its commands call and the Python its script is written for, against the public image; the"
        " script and its arguments are the project's own, run for real by tests/plan/test_ddp_cpu.py",
    )
    CONVERSION: ClassVar[Converter] = NoConversion(
        "its model is the project's own small network for proving the platform, not a language model"
    )

    recipe: Literal["ddp-cpu"] = Field(description="ddp-cpu")
    node_group: str = Field(SYSTEM_NODE_GROUP, description="The system node group (`system`): it trains on its CPUs.")
    image: str | None = Field(
        images.PUBLIC_CPU_IMAGE,
        description=(
            "Any image with PyTorch, Open MPI and sshd, with an explicit tag or digest; default: a public one "
            "(nothing to build)."
        ),
    )
    processes_per_node: int = Field(
        2, ge=1, le=64, description="gloo ranks torchrun starts per node, at most a worker's vCPUs."
    )
    steps: int = Field(200, ge=1, le=1_000_000, description="Optimizer steps it trains.")
    checkpoint_every_steps: int = Field(50, ge=1, description="Steps between checkpoints in $CHECKPOINT_DIR.")
    checkpoints_to_keep: int = Field(
        2, ge=1, le=100, description="Checkpoints kept in `$CHECKPOINT_DIR` on the shared file system."
    )
    interrupt_once_at_step: int | None = Field(
        None, ge=1, description="Stop the first attempt once, after the first checkpoint at or past this step, so the"
        " launcher's restart and the resume from that checkpoint are proven; the run fails if it never resumed."
    )  # fmt: skip

    @model_validator(mode="after")
    def _interrupt_before_the_end(self) -> DdpCpuWorkload:
        stop = self.interrupt_once_at_step
        if stop is not None and stop >= self.steps:
            raise KeyProblem(
                "interruptOnceAtStep",
                f"{stop} is not before the last step ({self.steps}): nothing to resume",
                "conflict",
            )
        if stop is not None and self.max_retries < 1:
            raise KeyProblem(
                "maxRetries", "0 leaves no restart to resume after interruptOnceAtStep; use at least 1", "conflict"
            )
        return self

    @property
    def optimizer_steps(self) -> int:
        return self.steps

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoint_every_steps

    @property
    def checkpoint_interval_key(self) -> str:
        return "checkpointEverySteps"

    @property
    def checkpoints_kept(self) -> int:
        return self.checkpoints_to_keep

    @property
    def checkpoints_kept_key(self) -> str:
        return "checkpointsToKeep"

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        hc = self.health_check
        unused = [
            n
            for n, v in (
                ("messageSize", hc.message_size),
                ("minBusBandwidthGBPerSecond", hc.min_bus_bandwidth_gb_per_second),
            )
            if v
        ]
        problems: list[str] = [
            problem(f"{key}.healthCheck.{n}", "not-supported", "the CPU gate runs no collective test; leave it out")
            for n in unused
        ]
        if self.processes_per_node > instance.cpu_worker_vcpus:
            problems.append(
                problem(
                    f"{key}.processesPerNode",
                    "conflict",
                    f"{self.processes_per_node} is more than the {instance.cpu_worker_vcpus} vCPUs"
                    f" a worker gets on a {instance.name} (a quarter of a system node)",
                )
            )
        return problems
