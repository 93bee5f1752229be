"""A stack over time: each node group's capacity window and, on it, each run's phases from its
start, with the cost accrued and what goes wrong (a run that outlasts its block, a block that
idles, a run that cannot start before its block ends).

The phases' lengths are the other estimates' (image pull and compile from `startup`, an
acceptance run's modeled length from `acceptance`, steps x step time and checkpoint writes from
`checkpoints`); this only lays them out. The layout is the one the cluster plays: a node group's
acceptance run first (every other run of the group waits for it, as its Workload does), then the
training runs in the order of the stack file, each as soon as enough nodes of its group are free
(Kueue admits a whole MPIJob or nothing), then the servers, which hold their nodes to the end.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

IDLE_WARNING = dt.timedelta(hours=1)
"""A reserved block with no run on it for longer than this is reported: an hour of a block costs
more than most edits that would fill it."""
OPEN_ENDED = dt.timedelta(hours=24)
"""How far the picture goes past its start when nothing in it ends (servers on on-demand nodes)."""
FOREVER = dt.datetime.max.replace(tzinfo=dt.UTC)
"""When the nodes of a run that holds them to the end are free again."""
MAX_LOSS_SHARE = 0.05
"""Default: a run that would lose more than this share of its steps at its block's end (the
steps since its last checkpoint) is reported."""


@dataclass(frozen=True)
class Capacity:
    """A node group's capacity over time: `opens` (None: from the timeline's start) to `closes`
    (the last moment a run can use the nodes: a Capacity Block's scale-down, an ODCR's end; None:
    open-ended). `hourly` is the group's price per hour at its desired size; `prepaid` is true
    where the whole window is billed whatever runs (a Capacity Block)."""

    group: str
    kind: str
    nodes: int
    hourly: float
    opens: dt.datetime | None = None
    closes: dt.datetime | None = None
    ends: dt.datetime | None = None
    end_key: str = ""
    prepaid: bool = False


@dataclass(frozen=True)
class Phase:
    """One phase of a run; `seconds` None where no estimate exists (the basis says why)."""

    name: str
    seconds: float | None
    basis: str = ""


@dataclass(frozen=True)
class Checkpointing:
    """A training run's cadence: a checkpoint every `every_steps` steps of `step_seconds`, each
    taking `write_seconds` to write (training waits for it)."""

    every_steps: int
    step_seconds: float
    write_seconds: float
    key: str

    @property
    def period(self) -> float:
        return self.every_steps * self.step_seconds + self.write_seconds

    def saved_steps(self, training_seconds: float) -> int:
        """The step of the last checkpoint written `training_seconds` into the training phase."""
        return int(training_seconds // self.period) * self.every_steps

    def done_steps(self, training_seconds: float, steps: int) -> int:
        """Steps done `training_seconds` into the training phase."""
        whole, rest = divmod(training_seconds, self.period)
        return min(steps, int(whole) * self.every_steps + min(self.every_steps, int(rest // self.step_seconds)))


@dataclass(frozen=True)
class RunInput:
    """What the timeline needs of one run: its group and node count, its phases in order (the last
    is the one that holds the nodes: training, serving, acceptance), its steps and checkpoint
    cadence where known, the runs it waits for, and the key that sets its length."""

    name: str
    kind: str
    group: str
    nodes: int
    phases: tuple[Phase, ...]
    steps: int | None = None
    checkpoints: Checkpointing | None = None
    after: tuple[str, ...] = ()
    length_key: str = ""
    lr_phases: tuple[tuple[str, int, int], ...] = ()
    """(label, first step, last step) of each learning-rate phase of its training (warm-up, decay,
    at the floor), from the schedule the plan shows."""
    schedule_key: str = ""


@dataclass(frozen=True)
class Bar:
    run: str
    group: str
    phase: str
    start: dt.datetime
    end: dt.datetime | None
    """None while playing for a bar that holds its nodes to the end (a server, a run of unknown
    length on open-ended capacity); the timeline's end once played."""
    estimated: bool = True
    """False where the phase's length is unknown and the bar runs to the window's close."""


@dataclass(frozen=True)
class Warning:
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass
class Timeline:
    start: dt.datetime
    end: dt.datetime
    capacities: tuple[Capacity, ...]
    bars: list[Bar] = field(default_factory=list)
    warnings: list[Warning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    segments: list[tuple[str, str, dt.datetime, dt.datetime]] = field(default_factory=list)
    """(run, learning-rate phase, start, end) within each training bar."""
    checkpoints: list[tuple[str, dt.datetime, int]] = field(default_factory=list)
    """(run, when written, step) of each checkpoint a training run completes within its window."""
    cost: list[tuple[dt.datetime, float]] = field(default_factory=list)
    """Cost accrued since the start at each change of rate (piecewise linear between points)."""


def _order(runs: Sequence[RunInput]) -> list[RunInput]:
    """Acceptance runs, then training runs in the stack file's order, then servers; a run after
    the runs it waits for."""
    rank = {"acceptance": 0, "training": 1, "serving": 2}
    return sorted(runs, key=lambda r: rank.get(r.kind, 1))


def play(
    capacities: Sequence[Capacity],
    runs: Sequence[RunInput],
    start: dt.datetime,
    fixed_hourly: float = 0.0,
    max_loss: float = MAX_LOSS_SHARE,
) -> Timeline:
    """Lay out `runs` on `capacities` from `start`; `fixed_hourly` is what the stack costs besides
    its node groups (control plane, NAT, system nodes, file system)."""
    caps = {c.group: c for c in capacities}
    free = {c.group: [max(start, c.opens or start)] * c.nodes for c in capacities}
    ends: dict[str, dt.datetime] = {}
    t = Timeline(start, start, tuple(capacities))
    holds: list[tuple[str, dt.datetime, dt.datetime | None]] = []
    holds_forever: set[str] = set()
    for run in _order(runs):
        cap = caps.get(run.group)
        slots = sorted(free.get(run.group, []))
        ready, refused, forever = _start(run, cap, slots, ends, holds_forever)
        if refused is not None or ready is None or cap is None:
            t.warnings += [refused] if refused is not None else []
            if forever:  # what waits for this run waits for ever too
                holds_forever.add(run.name)
            continue
        end = _lay_out(t, run, cap, ready, max_loss)
        if end is not None:
            ends[run.name] = end
        else:
            holds_forever.add(run.name)
        free[run.group] = slots[run.nodes :] + [end or FOREVER] * run.nodes
        holds.append((run.group, ready, end))
    finite = [b.end for b in t.bars if b.end is not None] + [c.ends for c in capacities if c.ends is not None]
    open_ended = any(b.end is None for b in t.bars) or not finite
    t.end = max([*finite, *([start + OPEN_ENDED] if open_ended else [])])
    t.bars = [b if b.end is not None else Bar(b.run, b.group, b.phase, b.start, t.end, b.estimated) for b in t.bars]
    holds = [(g, s, e or t.end) for g, s, e in holds]
    t.warnings += _idle(capacities, holds, start)
    t.cost = _cost(capacities, start, t.end, fixed_hourly)
    return t


def _start(
    run: RunInput,
    cap: Capacity | None,
    slots: list[dt.datetime],
    ends: dict[str, dt.datetime],
    never: set[str],
) -> tuple[dt.datetime | None, Warning | None, bool]:
    """When `run` can start (its nodes free, the runs it waits for done), or why it cannot and
    whether that is for ever (behind a run that never ends in the picture)."""
    if cap is None or run.nodes > cap.nodes:
        have = cap.nodes if cap else 0
        return None, Warning(f"workloads.{run.name}.nodes", f"needs {run.nodes} nodes, {run.group} has {have}"), False
    waits = [a for a in run.after if a in never]
    if waits:
        return (
            None,
            Warning(
                f"workloads.{run.name}",
                f"{run.name} waits for {', '.join(waits)}, which never end(s) in this picture (its length is"
                " unknown or it holds its nodes)",
            ),
            True,
        )
    ready = max([slots[run.nodes - 1], *(ends[a] for a in run.after if a in ends)])
    if ready >= FOREVER:
        why = f"{run.name} waits for {run.group}'s nodes, held by runs that never end in this picture"
        return None, Warning(f"workloads.{run.name}", why), True
    if cap.closes is not None and ready >= cap.closes:
        return (
            None,
            Warning(
                cap.end_key or f"workloads.{run.name}.nodeGroup",
                f"{run.name} cannot start before {run.group}'s capacity closes at {_iso(cap.closes)}"
                f" (ready at {_iso(ready)})",
            ),
            False,
        )
    return ready, None, False


def _lay_out(t: Timeline, run: RunInput, cap: Capacity, at: dt.datetime, max_loss: float) -> dt.datetime | None:
    """Bars of one run from `at`; returns when its nodes are free again (None: never, it holds them
    to the end of open-ended capacity)."""
    closes = cap.closes
    for phase in run.phases:
        if phase.seconds is None:
            if phase is run.phases[-1] or phase.name in ("training", "acceptance"):
                t.bars.append(Bar(run.name, run.group, phase.name, at, closes, estimated=False))
                t.warnings.append(
                    Warning(
                        run.length_key or f"workloads.{run.name}",
                        f"{run.name}: {phase.name} length unknown ({phase.basis})",
                    )
                )
                return closes
            t.notes.append(f"{run.name}: {phase.name} not modeled ({phase.basis})")
            continue
        if run.kind == "serving" and phase is run.phases[-1]:  # a server holds its nodes to the end
            t.bars.append(Bar(run.name, run.group, phase.name, at, closes))
            return closes
        end = at + dt.timedelta(seconds=phase.seconds)
        if phase.name == "training" and run.checkpoints is not None and run.steps:
            _checkpoints(t, run, run.checkpoints, at, min(end, closes or end))
        if phase.name == "training" and run.steps:
            _lr_segments(t, run, phase.seconds, at, min(end, closes or end))
        if closes is not None and end > closes:
            t.bars.append(Bar(run.name, run.group, phase.name, at, closes))
            t.warnings.append(_outlasts(run, cap, phase, at))
            _check_loss(t, run, cap, phase, at, max_loss)
            return closes
        t.bars.append(Bar(run.name, run.group, phase.name, at, end))
        at = end
    return at


def _checkpoints(t: Timeline, run: RunInput, ck: Checkpointing, start: dt.datetime, until: dt.datetime) -> None:
    """The checkpoints written between `start` (the training phase's) and `until`."""
    n = 1
    while n * ck.every_steps <= (run.steps or 0) and start + dt.timedelta(seconds=n * ck.period) <= until:
        t.checkpoints.append((run.name, start + dt.timedelta(seconds=n * ck.period), n * ck.every_steps))
        n += 1


def _step_time(run: RunInput, seconds: float, start: dt.datetime, step: int) -> dt.datetime:
    """When the training phase (of `seconds`, from `start`) reaches `step`: steps at the cadence's
    step time plus the checkpoint writes before it, else evenly over the phase."""
    ck = run.checkpoints
    if ck is not None:
        return start + dt.timedelta(seconds=step * ck.step_seconds + (step // ck.every_steps) * ck.write_seconds)
    return start + dt.timedelta(seconds=seconds * step / (run.steps or 1))


def _lr_segments(t: Timeline, run: RunInput, seconds: float, start: dt.datetime, until: dt.datetime) -> None:
    """The learning-rate phases over the training bar; a schedule that ends before the run is warned."""
    for label, first, last in run.lr_phases:
        if label == "at the floor":
            t.warnings.append(
                Warning(
                    run.schedule_key or f"workloads.{run.name}",
                    f"{run.name}'s learning rate sits at its floor for its last {last - first:,} steps"
                    f" (from step {first:,}): its schedule ends before the run",
                )
            )
        a, b = _step_time(run, seconds, start, first), min(_step_time(run, seconds, start, last), until)
        if a < b:
            t.segments.append((run.name, label, a, b))


def _outlasts(run: RunInput, cap: Capacity, phase: Phase, at: dt.datetime) -> Warning:
    """A run still in `phase` when its capacity closes: the steps it reached and its last checkpoint."""
    assert cap.closes is not None
    into = (cap.closes - at).total_seconds()
    text = f"{run.name} outlasts {run.group}'s capacity ({cap.kind}, closes {_iso(cap.closes)}) in its {phase.name}"
    if phase.name == "training" and run.checkpoints is not None and run.steps:
        ck = run.checkpoints
        saved = ck.saved_steps(into)
        text += (
            f": about step {ck.done_steps(into, run.steps):,} of {run.steps:,}, last checkpoint at step {saved:,}"
            if saved
            else f": no checkpoint written before step {ck.every_steps:,}"
        )
    return Warning(run.length_key or cap.end_key, text)


def _check_loss(t: Timeline, run: RunInput, cap: Capacity, phase: Phase, at: dt.datetime, max_loss: float) -> None:
    """The steps since the last checkpoint, lost at the capacity's close, over `max_loss` of the run."""
    ck = run.checkpoints
    if phase.name != "training" or ck is None or not run.steps or cap.closes is None:
        return
    into = (cap.closes - at).total_seconds()
    lost = ck.done_steps(into, run.steps) - ck.saved_steps(into)
    if lost > max_loss * run.steps:
        t.warnings.append(
            Warning(
                ck.key,
                f"{run.name} loses {lost:,} steps ({lost / run.steps:.0%} of the run, over"
                f" {max_loss:.0%}) at {_iso(cap.closes)}: checkpoint every {ck.every_steps:,} steps",
            )
        )


def _idle(
    capacities: Sequence[Capacity], holds: Sequence[tuple[str, dt.datetime, dt.datetime | None]], start: dt.datetime
) -> list[Warning]:
    """Prepaid windows with no run on any of their nodes for longer than IDLE_WARNING."""
    out = []
    for cap in capacities:
        if not cap.prepaid or cap.closes is None:
            continue
        at = max(start, cap.opens or start)
        busy = sorted((s, e) for g, s, e in holds if g == cap.group and e is not None)
        for s, e in [*busy, (cap.closes, cap.closes)]:
            if s - at > IDLE_WARNING:
                hours = (s - at).total_seconds() / 3600
                out.append(
                    Warning(
                        cap.end_key,
                        f"{cap.group}'s {cap.kind} idles {hours:.1f} h, {_iso(at)} to {_iso(s)},"
                        f" paid at ${cap.hourly:,.2f}/h",
                    )
                )
            at = max(at, e)
    return out


def _cost(
    capacities: Sequence[Capacity], start: dt.datetime, end: dt.datetime, fixed: float
) -> list[tuple[dt.datetime, float]]:
    """Accrued cost at each change of rate: the fixed part throughout; each group from its window's
    open to its close (a prepaid block to its end, used or not)."""
    spans = [(start, end, fixed)]
    for c in capacities:
        until = (c.ends if c.prepaid else c.closes) or end
        spans.append((max(start, c.opens or start), min(end, until), c.hourly))
    times = sorted(
        {start, end, *(s for s, _, _ in spans if start <= s <= end), *(e for _, e, _ in spans if start <= e <= end)}
    )
    out, total = [(start, 0.0)], 0.0
    for a, b in itertools.pairwise(times):
        rate = sum(h for s, e, h in spans if s <= a and b <= e)
        total += rate * (b - a).total_seconds() / 3600
        out.append((b, round(total, 2)))
    return out


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%MZ")


def hours(seconds: float) -> str:
    """A length as people read it: 45 s, 12 min, 3.5 h, 2.1 d."""
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
