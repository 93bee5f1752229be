"""Recipe `fsx-read`: the shared file system's read acceptance. Every node of the run reads /shared
with fio (pinned: images/fio builds fio 3.42) at once; the launcher sums the nodes' read
throughput and passes when it reaches a share of what the file system is provisioned for
(capacity TiB x MB/s per TiB, PERSISTENT_2's perUnitStorageThroughput). Its builder:
workloads/manifests/fsx_read.py; its modeled length: estimates/fsx_read.py."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Literal

from pydantic import Field

from config.problems import problem
from config.workloads.base import AcceptanceRun
from config.workloads.fabric import CHECKS_SECONDS
from config.workloads.recipe import Arguments, Converter, ExampleStacks, HeldAgainst, NoConversion, RecipeDocs, Support
from estimates.fsx_read import ReadTime, read_time
from estimates.startup import NO_COMPILE, CompileTime
from estimates.step_time import StepTime, UnknownStepTime
from estimates.throughput import RunWork
from facts import instances

RAMP_SECONDS = 10
"""fio's ramp_time: reads before it counts (the clients' caches and the servers' first requests)."""
BLOCK_SIZE = "1M"
"""fio's bs: large sequential reads, what a data loader and a checkpoint load do on Lustre."""


class FsxReadRun(AcceptanceRun):
    """The shared file system's read acceptance: fio on every node at once reading its own files on
    /shared, summed against the file system's provisioned throughput."""

    RECIPE: ClassVar[str] = "fsx-read"
    REPOSITORY: ClassVar[str | None] = "fio"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "accept")
    COMPILE: ClassVar[CompileTime] = NO_COMPILE
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "it trains nothing: its length is modeled from the fio job it runs (estimates/fsx_read.py)"
    )
    CONVERSION: ClassVar[Converter] = NoConversion("an acceptance run measures the file system and trains no model")
    UNUSED_KEYS: ClassVar[tuple[str, ...]] = ("health_check", "step_seconds")
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="fio 3.42 (axboe/fio tag fio-3.42): sequential 1 MiB reads, `numjobs` per node, time-based,"
        " JSON output summed over the nodes",
        image="Horovod's CPU image 0.28.1 (its Open MPI and sshd) + fio 3.42 built from source",
        steps={
            "image": "image check Job",
            "accept": "acceptance MPIJob, awaited: fio on every node at once, summed against the provisioned"
            " throughput, report",
        },
        support=Support(
            "any node group (it reads /shared; no accelerator used)",
            "fio 3.42, Open MPI 4.1.4 (horovod-cpu 0.28.1)",
            "current",
            "fio 3.42 is fio's latest release (2026-04-06); an acceptance run, not a model recipe",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("p4d",)
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("fio-3.42", "horovod-cpu-0.28.1"),
        "fio's options and the JSON fields the launcher sums (fio 3.42); the image's programs (horovod-cpu)",
    )

    recipe: Literal["fsx-read"] = Field(description="fsx-read")
    jobs_per_node: int = Field(
        4, ge=1, le=64, description="fio jobs (numjobs) on each node, each reading its own file."
    )
    file_size_gib: int = Field(
        1, ge=1, le=64, description="Size of each job's file (fio lays it out before reading), GiB."
    )
    read_seconds: int = Field(
        60, ge=10, le=1800, description="How long fio reads (runtime, time_based), after a 10 s ramp."
    )
    min_share: float = Field(
        0.8,
        gt=0,
        le=1,
        description="The share of the file system's provisioned throughput (capacity TiB x throughputPerTib) the"
        " nodes' summed reads must reach.",
    )
    max_retries: int = Field(
        0, ge=0, le=0, description="Restarts of the launcher: none (a failed acceptance is the answer)."
    )

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """Its modeled length fits the checks' share of the acceptance job's timeout."""
        length = self.length()
        if length.seconds <= CHECKS_SECONDS:
            return []
        return [
            problem(
                f"{key}.fileSizeGib",
                "conflict",
                f"~{length.seconds:,} s ({length.basis}) is more than the {CHECKS_SECONDS:,} s the acceptance job"
                " gives its checks: smaller files, fewer jobsPerNode or a shorter readSeconds",
            )
        ]

    def length(self) -> ReadTime:
        """The run's modeled length (estimates/fsx_read.py)."""
        return read_time(self.nodes, self.jobs_per_node, self.file_size_gib, RAMP_SECONDS, self.read_seconds)

    def modeled_seconds(self, instance: instances.InstanceType) -> tuple[float, str] | None:
        """The same on every instance type: the file system, not the node, sets it."""
        length = self.length()
        return float(length.seconds), length.basis

    def work(self, instance_type: str) -> RunWork:
        """No throughput: it trains nothing (the plan prices its modeled length instead)."""
        return replace(super().work(instance_type), trains=False)
