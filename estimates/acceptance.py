"""How long a fabric acceptance run takes, modeled from the commands it renders: every all-reduce
its tools run (the gated size, the sweep, Neuron's per-node self-test), counted as each tool
counts them, each taking the time a ring all-reduce needs at the floor's bus bandwidth; plus the
per-node check DCGM documents. What no source times (process start, NCCL or Neuron runtime
set-up, nccom-test building its NEFFs) is named, not guessed: the plan shows the acceptance job's
timeout beside the model as the bound.

Sources (tests/upstream/all-reduce-iterations.yaml): nccl-tests v2.18.5 src/common.cu (per size:
a warm-up, then out-of-place and in-place, each one sync, `-n` timed and `-c` checked all-reduces)
and src/all_reduce.cu (bus bandwidth = algorithm bandwidth x 2(r-1)/r, GB = 10^9 bytes);
nccom-test.rst of Neuron SDK 2.32.0 (`-n` 20 and `-w` 5 by default, GB = GiB, the same factor);
the DCGM dcgmi-diag reference (level 1: "normally lasting seconds").
"""

from __future__ import annotations

from dataclasses import dataclass

from facts import fabric, instances
from facts.fabric import size_bytes
from facts.nodegroups import placement

DCGM_LEVEL_1_SECONDS = 60
"""The GPU per-node check, `dcgmi diag -r 1`: "quick deployment checks, normally lasting seconds"
(DCGM dcgmi-diag reference); counted as a minute."""


@dataclass(frozen=True)
class Collectives:
    """One all-reduce command of the run: its sizes, operations per size and ranks."""

    what: str
    sizes: tuple[int, ...]
    """Bytes of each size it runs."""
    per_size: int
    """All-reduces per size, as the tool counts them."""
    ranks: int
    unit: int
    """Bytes of the tool's GB."""

    def seconds(self, floor_gb_per_second: float) -> float:
        """A ring all-reduce of s bytes moves s x 2(r-1)/r per rank: its time at the floor's bus bandwidth."""
        factor = 2 * (self.ranks - 1) / self.ranks
        return sum(self.per_size * s * factor / (floor_gb_per_second * self.unit) for s in self.sizes)

    def describe(self) -> str:
        return (
            f"{self.what} {_size(self.sizes[0])}"
            + (f"-{_size(self.sizes[-1])}" if len(self.sizes) > 1 else "")
            + f" x {self.per_size} all-reduces"
            + (" per size" if len(self.sizes) > 1 else "")
        )


@dataclass(frozen=True)
class AcceptanceTime:
    """The modeled length of one acceptance run and what it is made of."""

    collectives: tuple[Collectives, ...]
    floor_gb_per_second: float
    fixed_seconds: int
    fixed_basis: str

    @property
    def seconds(self) -> int:
        # Whole seconds, but never 0: a run that moves any bytes takes time, and a length of 0
        # would price the run at nothing (estimates.cost refuses a zero step time).
        moved = sum(c.seconds(self.floor_gb_per_second) for c in self.collectives)
        return max(1, round(moved + self.fixed_seconds))

    @property
    def basis(self) -> str:
        """One line: what the model counts and what it leaves out."""
        parts = ", ".join(c.describe() for c in self.collectives)
        fixed = f"; {self.fixed_basis}" if self.fixed_basis else ""
        return (
            f"modeled: {parts} at the floor's {self.floor_gb_per_second:g} GB/s{fixed};"
            " process start and NCCL/Neuron runtime set-up not modeled"
        )

    def as_dict(self) -> dict[str, object]:
        return {"seconds": self.seconds, "basis": self.basis}


def _size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def doubling(start: int, end: int) -> tuple[int, ...]:
    """The sizes of `-b start -e end -f 2`: start, doubling, up to end."""
    sizes, s = [], start
    while s <= end:
        sizes.append(s)
        s *= 2
    return tuple(sizes)


def nccl_tests(what: str, sizes: tuple[int, ...], iters: int, ranks: int) -> Collectives:
    """all_reduce_perf with `-c 1`: per size a warm-up, then out-of-place and in-place runs of one
    sync, `iters` timed and one checked all-reduce each."""
    return Collectives(what, sizes, fabric.NCCL_TESTS_WARMUP + 2 * (1 + iters + 1), ranks, 10**9)


def nccom_test(what: str, sizes: tuple[int, ...], ranks: int) -> Collectives:
    """nccom-test with its default operations: measured plus warm-up, per size."""
    return Collectives(what, sizes, fabric.NCCOM_TEST_ITERS + fabric.NCCOM_TEST_WARMUP, ranks, fabric.NCCOM_TEST_GIB)


def acceptance_time(
    instance: instances.InstanceType, nodes: int, size: str, floor: float, sweep: bool
) -> AcceptanceTime:
    """The modeled length of an acceptance run of `nodes` x `instance` gated at `size` (and, with
    `sweep`, sweeping up to it) against `floor` GB/s."""
    gated = size_bytes(size)
    swept = doubling(size_bytes(fabric.SWEEP_FROM), gated) if sweep else ()
    ranks = placement(instance, nodes).ranks
    if instance.accelerator == "neuron":
        self_test = size_bytes(fabric.SELFTEST_SIZE)
        runs = [
            nccom_test("per-node self-test", (self_test,), instance.ranks_per_node),
            nccom_test("gate", (gated,), ranks),
        ]
        runs += [nccom_test("sweep", swept, ranks)] if swept else []
        return AcceptanceTime(tuple(runs), floor, 0, "")
    runs = [nccl_tests("gate", (gated,), fabric.GATE_ITERS, ranks)]
    runs += [nccl_tests("sweep", swept, fabric.SWEEP_ITERS, ranks)] if swept else []
    dcgm = f"DCGM level 1 on each node at once, counted as {DCGM_LEVEL_1_SECONDS} s (documented as seconds)"
    return AcceptanceTime(tuple(runs), floor, DCGM_LEVEL_1_SECONDS, dcgm)
