"""How big a run's checkpoints are, how long one interval's take to write to the shared file
system, and whether the file system can hold the ones a run keeps.

Sizes are estimates from the model shape (estimates/model.py): parameters x bytes per parameter of
what the framework saves. Each recipe states its own `CheckpointModel` (config/workloads/<recipe>.py);
nothing here knows a recipe by name. Write time assumes the whole file system's throughput
goes to the checkpoint (FSx for Lustre: storage TiB x throughput tier), which is the best case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3
TB = 1000**4
STORAGE_SHARE = 0.8
"""Share of the file system the kept checkpoints may fill; the rest is for data, logs, caches."""
MAX_WRITE_SHARE = 0.02
"""The example stacks keep checkpoint writing at or under 2% of training time."""


@dataclass(frozen=True)
class CheckpointSize:
    """How a recipe's checkpoints are sized: the run's parameters (from its model shape) x the
    bytes each parameter takes in what the framework saves (weights plus optimizer state)."""

    bytes_per_parameter: int
    why: str
    """What the framework saves per parameter, and where that is read (the source of the number)."""
    written_per_interval: int = 1
    """Checkpoints written at each checkpoint interval (the write time counts each)."""
    kept_beyond: int = 0
    """Checkpoints the framework keeps beyond the run's `checkpointsToKeep` (a `last` copy)."""


@dataclass(frozen=True)
class NotSized:
    """A recipe whose checkpoints the project does not size, and why (no storage check, no write time)."""

    why: str


CheckpointModel = CheckpointSize | NotSized
"""What a recipe says about its checkpoints."""


def shown_seconds(seconds: float) -> float:
    """Seconds to three decimals for the plan, or to three significant digits below a millisecond,
    so a short step never shows (or computes a cost) as zero."""
    return round(seconds, 3) or float(f"{seconds:.3g}")


SCRATCH_MB_PER_TIB = 200
"""SCRATCH_2's baseline throughput, MB/s per TiB (FSx for Lustre performance page)."""


@dataclass(frozen=True)
class FileSystem:
    """The shared file system as the estimates read it (config.storage builds it)."""

    capacity_gib: int
    persistent: bool
    throughput_per_tib: int
    """The PERSISTENT_2 tier, MB/s per TiB (a scratch file system has SCRATCH_MB_PER_TIB)."""

    @property
    def mb_per_second(self) -> float:
        """Aggregate throughput, MB/s (FSx: TiB x MB/s per TiB)."""
        per_tib = self.throughput_per_tib if self.persistent else SCRATCH_MB_PER_TIB
        return self.capacity_gib / 1024 * per_tib


@dataclass(frozen=True)
class CheckpointPlan:
    """One run's checkpoints against the file system."""

    size_bytes: int
    kept: int
    write_seconds: float
    interval_steps: int | None
    """Steps between checkpoints; None when the framework counts otherwise (BERT: per shard)."""
    step_seconds: float | None
    writes: int | None = None
    """Checkpoints the whole run writes, where the recipe counts them as its framework does."""
    total_steps: int | None = None
    """Optimizer steps of the whole run, where the config says: an interval longer than the run
    still writes once, at its end, so the share is counted over the run."""
    assumes: str = ""
    """What the size assumes that the config does not state (the vocabulary)."""
    per_interval: int = 1
    """Checkpoints written at each interval (write_seconds counts them all)."""

    @property
    def kept_bytes(self) -> int:
        return self.size_bytes * self.kept

    @property
    def write_share(self) -> float | None:
        """Share of training time spent writing checkpoints (None: step time or interval unknown)."""
        if self.interval_steps is None or self.step_seconds is None:
            return None
        steps = min(self.interval_steps, self.total_steps or self.interval_steps)
        return self.write_seconds / (self.write_seconds + steps * self.step_seconds)

    def shortest_interval(self, share: float = MAX_WRITE_SHARE) -> int | None:
        """The fewest steps between checkpoints that keeps writing at or under `share` of training
        time (None: step time unknown)."""
        if self.step_seconds is None:
            return None
        return math.ceil(self.write_seconds * (1 - share) / (share * self.step_seconds))

    def as_dict(self) -> dict[str, object]:
        share = self.write_share
        out: dict[str, object] = {
            "sizeGB": round(self.size_bytes / 1e9, 1),
            "kept": self.kept,
            "writeSeconds": round(self.write_seconds),
            "everySteps": self.interval_steps,
            "stepSeconds": None if self.step_seconds is None else shown_seconds(self.step_seconds),
            "writeShare": None if share is None else round(share, 4),
            "writesPerInterval": self.per_interval,
            **({"assumes": self.assumes} if self.assumes else {}),
        }
        if self.writes is not None:
            out["writes"] = self.writes
        return out


@dataclass(frozen=True)
class CheckpointInput:
    """What the checkpoint estimate reads of one run (its recipe's config builds it:
    RunConfig.checkpoint_input)."""

    model: CheckpointModel
    parameters: int | None
    """Parameters a checkpoint holds (None: unknown, e.g. bring-your-own code)."""
    kept: int
    """Checkpoints the run keeps on the shared file system at once."""
    interval_steps: int | None
    writes: int | None = None
    """Checkpoints the whole run writes, counted as its framework saves (None: not counted)."""
    total_steps: int | None = None
    """Optimizer steps of the run, where its writes are counted (an interval longer than the run
    still writes once, at its end)."""
    assumes: str = ""

    @property
    def size_bytes(self) -> int | None:
        """Bytes of one checkpoint (None: the recipe does not size them, or no parameter count)."""
        if isinstance(self.model, NotSized) or self.parameters is None:
            return None
        return self.parameters * self.model.bytes_per_parameter


def plan(run: CheckpointInput, storage: FileSystem, step_seconds: float | None = None) -> CheckpointPlan | None:
    """The checkpoint plan of one run (None when its recipe does not size its checkpoints, or
    the run has no parameter count): what the run keeps, plus what the framework keeps beyond;
    the write time of every checkpoint one interval writes."""
    model, size = run.model, run.size_bytes
    if isinstance(model, NotSized) or size is None:
        return None
    seconds = model.written_per_interval * size / (storage.mb_per_second * 1e6)
    kept = run.kept + model.kept_beyond
    per = model.written_per_interval
    return CheckpointPlan(
        size, kept, seconds, run.interval_steps, step_seconds, run.writes, run.total_steps, run.assumes, per
    )
