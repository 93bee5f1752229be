"""What the fabric acceptance recipes share (`fabric-gpu`, `fabric-neuron`): the run a platform
team starts on new capacity before anything trains on it. It trains nothing: per-node checks and
the all-reduce across the nodes against the instance type's floor (facts/fabric.py), a size sweep
for the record, and a report in the run's directory (builders: workloads/manifests/fabric_*.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from pydantic import Field, model_validator

from config.base import KeyProblem
from config.problems import problem
from config.workloads.base import AcceptanceRun
from config.workloads.recipe import Converter, NoConversion
from estimates.acceptance import AcceptanceTime, acceptance_time
from estimates.startup import NO_COMPILE, CompileTime
from estimates.step_time import StepTime, UnknownStepTime
from estimates.throughput import RunWork
from facts import fabric, instances

CHECKS_SECONDS = 30 * 60
"""What the acceptance job gives its checks, after its workers' wait: the per-node checks, the gated
all-reduce and the sweep (the modeled length must fit: `problems_on`)."""


class FabricAcceptanceRun(AcceptanceRun):
    """A fabric acceptance run: not a recipe itself; `fabric-gpu` and `fabric-neuron` are."""

    CONVERSION: ClassVar[Converter] = NoConversion("an acceptance run measures the fabric and trains no model")
    COMPILE: ClassVar[CompileTime] = NO_COMPILE
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "it trains nothing: its length is modeled from the all-reduces it runs (estimates/acceptance.py)"
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
            raise KeyProblem(
                "healthCheck.enabled", "the acceptance run is the health check; it cannot be turned off", "forbidden"
            )
        return self

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """On UltraServer members the run checks whole UltraServers: a multiple of their size. Its
        modeled length fits the checks' share of the acceptance job's timeout."""
        out: list[str] = []
        us = instance.ultraserver
        if us is not None and self.nodes % us.instances:
            out.append(
                problem(
                    f"{key}.nodes",
                    "conflict",
                    f"{self.nodes} is not a multiple of {us.instances}: the run checks that its nodes form"
                    f" whole {us.ultraserver_type} UltraServers ({us.instances} x {instance.name} each)",
                )
            )
        length = self.length_on(instance) if instance.name in fabric.FLOORS else None
        if length is not None and length.seconds > CHECKS_SECONDS:
            out.append(
                problem(
                    f"{key}.healthCheck.messageSize",
                    "conflict",
                    f"{self.gated_size(instance)} takes ~{length.seconds:,} s (its"
                    f" all-reduces at the floor's {length.floor_gb_per_second:g} GB/s), more than the"
                    f" {CHECKS_SECONDS:,} s"
                    " the acceptance job gives its checks: a smaller size, sweep: false, or a floor nearer the fabric's"
                    " (healthCheck.minBusBandwidthGBPerSecond)",
                )
            )
        return out

    def gated_size(self, instance: instances.InstanceType) -> str:
        """The all-reduce size the gate runs on `instance` (healthCheck.messageSize or the type's)."""
        return self.health_check.message_size or fabric.FLOORS[instance.name].message_size

    def length_on(self, instance: instances.InstanceType) -> AcceptanceTime:
        """The run's modeled length on `instance` (estimates/acceptance.py)."""
        floor = (
            self.health_check.min_bus_bandwidth_gb_per_second
            or fabric.FLOORS[instance.name].min_bus_bandwidth_gb_per_second
        )
        return acceptance_time(instance, self.nodes, self.gated_size(instance), floor, self.sweep)

    def modeled_seconds(self, instance: instances.InstanceType) -> tuple[float, str] | None:
        seconds = self.length_on(instance)
        return float(seconds.seconds), seconds.basis

    def work(self, instance_type: str) -> RunWork:
        """No throughput: the acceptance run's modeled length (and its support status), for the
        plan's Acceptance lines."""
        length = self.length_on(instances.get(instance_type)) if instance_type in fabric.FLOORS else None
        return replace(super().work(instance_type), trains=False, acceptance=length)
