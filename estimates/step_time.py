"""Where a run's seconds per optimizer step come from: configured, a recipe's published
measurement (its STEP_TIME, a PublishedStepTime), or unknown. The step time sets a run's cost, its
checkpoint share and its tokens/s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PublishedStepTime:
    """A step-time estimate from a published measurement, for the cost of a run that sets no
    `stepSeconds`."""

    source: str
    """The publication, its version and the numbers the estimate scales."""
    basis: str
    """How the plan names the estimate (its `stepTimeBasis`)."""
    estimate: Callable[[Any, str], float | None]
    """(the run's step input, instance type of its node group) -> seconds per optimizer step; None
    where the published measurement does not apply (another shape or instance type). The step input
    is what the recipe's config builds for its source (RunConfig.step_input)."""
    setup: Callable[[Any, str], str | None] | None = None
    """(step input, instance type) -> what the published run measured and how its setup differs from
    the run's (nodes, parallelism, precision, recipe), for the plan to say beside the estimate."""


@dataclass(frozen=True)
class UnknownStepTime:
    """No published step time the project holds for the recipe: a run's cost needs `stepSeconds`."""

    why: str


@dataclass(frozen=True)
class SampleRun:
    """What a per-node sample reads of a run (its recipe's config builds it: its `step_input`)."""

    nodes: int
    global_batch_size: int
    shape: str
    """The run's shape in the sample's terms (a preset, a parallelism): the sample applies to its own only."""


@dataclass(frozen=True)
class PerNodeSample:
    """A published throughput in sequences per second, scaled linearly per node: it applies to a run
    of the sample's shape on one of its instance types."""

    sequences_per_second_per_node: float
    shape: str
    instance_types: tuple[str, ...]
    measured: str = ""
    """The published run: its nodes, parallelism, batch, precision and software."""
    nodes: int = 0
    """Nodes of the published run (0: not stated)."""
    global_batch_size: int = 0
    """Global batch of the published run (0: not stated)."""

    def step_seconds(self, run: SampleRun, instance_type: str) -> float | None:
        """The run's global batch at the sample's sequences per second per node (None: another
        shape or instance type)."""
        if run.shape != self.shape or instance_type not in self.instance_types:
            return None
        return run.global_batch_size / (self.sequences_per_second_per_node * run.nodes)

    def setup(self, run: SampleRun, instance_type: str) -> str | None:
        """What was measured and how the run differs from it, where the sample applies."""
        if self.step_seconds(run, instance_type) is None:
            return None
        differs = []
        if self.nodes and run.nodes != self.nodes:
            differs.append(f"{run.nodes} nodes, not {self.nodes}: scaled linearly per node, no fabric cost modelled")
        if self.global_batch_size and run.global_batch_size != self.global_batch_size:
            differs.append(f"global batch {run.global_batch_size}, not {self.global_batch_size}")
        return f"{self.measured}; this run: " + ("; ".join(differs) if differs else "the same setup")


StepTime = PublishedStepTime | UnknownStepTime
"""What a recipe says about its step time."""


def estimated(source: StepTime, step_input: object, instance_type: str) -> tuple[float, str] | None:
    """Seconds per step on `instance_type` from the recipe's published measurement, and how the
    plan names it (None: no published measurement applies)."""
    if not isinstance(source, PublishedStepTime):
        return None
    seconds = source.estimate(step_input, instance_type)
    return None if seconds is None else (seconds, source.basis)


def published_setup(source: StepTime, step_input: object, instance_type: str) -> str | None:
    """What the recipe's published measurement ran on `instance_type` and how the run differs from
    it (None: no published measurement applies)."""
    if not isinstance(source, PublishedStepTime) or source.setup is None:
        return None
    return source.setup(step_input, instance_type)


def step_time(configured: float | None, published: tuple[float, str] | None, key: str) -> tuple[float | None, str]:
    """Seconds per step of a run and its basis: configured, estimated from its recipe's published
    measurement, or unknown (`key`: the run's stepSeconds key, which the basis names)."""
    if configured is not None:
        return configured, "configured"
    if published is not None:
        return published
    return None, f"no published step time applies: set {key} from a measured step"
