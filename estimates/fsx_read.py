"""How long the shared file system's read acceptance (recipe fsx-read) takes, modeled from the fio
job it renders (fio 3.42, tests/upstream/fio-3.42.yaml): fio first lays out every job's file
(writes `size` bytes per job), then reads for `ramp_time` + `runtime` seconds (`time_based`: the
read phase lasts that long whatever the throughput).

The layout's length depends on the file system's throughput, which the plan's per-instance length
does not see; it is bounded at the slowest file system FSx for Lustre sells (1.2 TiB, the smallest
size, at PERSISTENT_2's lowest tier, 125 MB/s per TiB: config/storage.py), so the model is an
upper bound a faster file system only shortens. Process start and the image pull are not modeled.
"""

from __future__ import annotations

from dataclasses import dataclass

SLOWEST_MB_PER_SECOND = 1.2 * 125
"""The least throughput an FSx for Lustre file system has: its smallest size (1.2 TiB) at the
lowest PERSISTENT_2 tier (125 MB/s per TiB; SCRATCH_2 has 200)."""
MB = 10**6
GIB = 2**30


@dataclass(frozen=True)
class ReadTime:
    """The modeled length of one fsx-read run and what it is made of."""

    nodes: int
    jobs_per_node: int
    file_gib: float
    ramp_seconds: int
    read_seconds: int

    @property
    def layout_bytes(self) -> int:
        """What fio writes before it reads: one file of `size` per job on every node."""
        return round(self.nodes * self.jobs_per_node * self.file_gib * GIB)

    @property
    def layout_seconds(self) -> float:
        """The layout at the slowest file system FSx sells (an upper bound)."""
        return self.layout_bytes / (SLOWEST_MB_PER_SECOND * MB)

    @property
    def seconds(self) -> int:
        """Whole seconds, at least 1: layout, then the timed read."""
        return max(1, round(self.layout_seconds + self.ramp_seconds + self.read_seconds))

    @property
    def basis(self) -> str:
        """How the plan names the model."""
        return (
            f"fio lays out {self.layout_bytes / GIB:g} GiB (<= {self.layout_seconds:.0f} s at"
            f" {SLOWEST_MB_PER_SECOND:g} MB/s, the slowest FSx), then reads {self.ramp_seconds} s ramp +"
            f" {self.read_seconds} s"
        )


def read_time(nodes: int, jobs_per_node: int, file_gib: float, ramp_seconds: int, read_seconds: int) -> ReadTime:
    """The fsx-read run's modeled length (see the module docstring)."""
    return ReadTime(nodes, jobs_per_node, file_gib, ramp_seconds, read_seconds)
