"""What the fabric acceptance recipes share (`fabric-gpu`, `fabric-neuron`): the run a platform
team starts on new capacity before anything trains on it. It trains nothing: per-node checks and
the all-reduce across the nodes against the instance type's floor (facts/fabric.py), a size sweep
for the record, and a report in the run's directory (builders: workloads/manifests/fabric_*.py)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from config.base import KeyProblem
from config.checkpoints import CheckpointModel, NotSized
from config.startup import NO_COMPILE, CompileTime
from config.workloads.base import RunConfig
from config.workloads.recipe import Converter, NoConversion, StepTime, UnknownStepTime
from facts import instances


class FabricAcceptanceRun(RunConfig):
    """A fabric acceptance run: not a recipe itself; `fabric-gpu` and `fabric-neuron` are."""

    GATES_NODE_GROUP: ClassVar[bool] = True
    CHECKPOINTS: ClassVar[CheckpointModel] = NotSized("it trains nothing and writes no checkpoint")
    CONVERSION: ClassVar[Converter] = NoConversion("an acceptance run measures the fabric and trains no model")
    COMPILE: ClassVar[CompileTime] = NO_COMPILE
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "it trains nothing: it runs for minutes (bounded by the acceptance job's timeout), billed as the nodes' time"
    )

    nodes: int = Field(ge=2, description="Nodes to accept (at least 2: the all-reduce crosses EFA only between nodes).")
    sweep: bool = Field(
        True,
        description="Also run the all-reduce from 8M up to the gated size, doubling, and keep it as JSON in the"
        " run's directory (not gated).",
    )
    max_retries: int = Field(
        0, ge=0, le=0, description="Restarts of the launcher: none (a failed acceptance is the answer)."
    )

    @model_validator(mode="after")
    def _gate_is_the_run(self) -> FabricAcceptanceRun:
        if not self.health_check.enabled:
            raise KeyProblem("healthCheck.enabled", "the acceptance run is the health check; it cannot be turned off")
        return self

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """On UltraServer members the run checks whole UltraServers: a multiple of their size."""
        us = instance.ultraserver
        if us is not None and self.nodes % us.instances:
            return [
                f"{key}.nodes: {self.nodes} is not a multiple of {us.instances}: the run checks that its nodes form"
                f" whole {us.ultraserver_type} UltraServers ({us.instances} x {instance.name} each)"
            ]
        return []

    @property
    def checkpoint_interval(self) -> None:
        return None

    @property
    def checkpoints_kept(self) -> int:
        return 0
