"""A training run's learning-rate schedule over its own steps: linear warm-up, then a decay to a
floor, then the floor. What a library recipe's schedule becomes when the run is shorter or
longer than the run the recipe was written for, and what a schedule that cannot fit is.

Why a run's schedule is sized here and not left to the recipe: a library recipe's warm-up and
decay are tuned for its own length (Megatron Bridge 0.6.0's Llama 3.1 pretrain warms up 2,000
of 1,168,251 steps; its Qwen3 SFT decays over 100 steps to a floor of 0), so a run that
overrides only its step count keeps a schedule sized for another run. Megatron Core
(core_r0.19.0 megatron/core/optimizer_param_scheduler.py `get_lr`) holds the learning rate at
`min_lr` past `lr_decay_steps`: with a floor of 0, every step past the decay changes no weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Style = Literal["cosine", "linear"]

LONGEST_FLOOR_SHARE = 0.1
"""The share of a run's steps that may train at the floor after the decay ends: more is a decay
ending long before the run does (the steps after it train at the minimum learning rate)."""


@dataclass(frozen=True)
class LibrarySchedule:
    """A library recipe's own schedule, as its source sets it (facts read at a pinned version)."""

    warmup_steps: int
    decay_steps: int | None
    """None: the recipe decays over the run's own steps (Bridge's `lr_decay_iters=None`)."""
    steps: int
    """The run length the recipe is written for (its `train_iters`)."""
    peak_lr: float
    min_lr: float
    style: Style = "cosine"

    @property
    def decay_end(self) -> int:
        """The step the recipe's decay ends at, for its own length."""
        return self.decay_steps if self.decay_steps is not None else self.steps

    @property
    def warmup_fraction(self) -> float:
        """The recipe's warm-up as a share of its decay: what a run of another length keeps."""
        return self.warmup_steps / self.decay_end

    @property
    def min_lr_ratio(self) -> float:
        return self.min_lr / self.peak_lr


@dataclass(frozen=True)
class Schedule:
    """What a run renders: warm-up steps, the step its decay ends at, its floor as a share of the
    peak, over the run's `steps`; `source` says where each value came from."""

    steps: int
    warmup_steps: int
    decay_end: int
    min_lr_ratio: float
    style: Style = "cosine"
    source: str = ""

    @property
    def floor_steps(self) -> int:
        """Steps trained at the floor after the decay ended (0 when it ends at or after the last)."""
        return max(0, self.steps - self.decay_end)

    def line(self) -> str:
        """One line of the plan: `warm-up 100 steps, cosine decay to step 1000, min lr 10%`."""
        decay = (
            "constant after warm-up" if self.style == "constant" else f"{self.style} decay to step {self.decay_end:,}"
        )
        text = f"warm-up {self.warmup_steps:,} steps, {decay}, min lr {self.min_lr_ratio:.0%}"
        if self.floor_steps:
            text += f", {self.floor_steps:,} steps at the floor"
        return text + (f" ({self.source})" if self.source else "")

    def as_dict(self) -> dict[str, object]:
        return {
            "steps": self.steps,
            "warmupSteps": self.warmup_steps,
            "decayEnd": self.decay_end,
            "minLrRatio": round(self.min_lr_ratio, 4),
            "style": self.style,
            "line": self.line(),
        }


def sized(
    library: LibrarySchedule,
    steps: int,
    warmup_steps: int | None = None,
    warmup_fraction: float | None = None,
    decay_steps: int | None = None,
    min_lr_ratio: float | None = None,
) -> Schedule:
    """The library recipe's schedule sized to a run of `steps`: decay to the run's last step,
    warm-up the same share of the decay as the recipe's own (at least 1 step where the recipe
    warms up at all), the same floor ratio; each value the run sets wins."""
    decay_end = decay_steps if decay_steps is not None else steps
    if warmup_steps is not None:
        warmup, how = warmup_steps, "set"
    else:
        fraction = warmup_fraction if warmup_fraction is not None else library.warmup_fraction
        warmup = round(fraction * decay_end)
        if library.warmup_steps and warmup_fraction is None:
            warmup = max(warmup, 1)
        how = "set" if warmup_fraction is not None else "the recipe's share"
    ratio = min_lr_ratio if min_lr_ratio is not None else library.min_lr_ratio
    source = f"warm-up {how}, {'decay set' if decay_steps is not None else 'decay over the run'}"
    return Schedule(steps, warmup, decay_end, ratio, library.style, source)


def problems(schedule: Schedule) -> list[tuple[str, str]]:
    """(key, message) for a schedule that cannot fit its run: a warm-up at or past the decay's end
    or the last step (Megatron Core asserts lr_warmup_steps < lr_decay_steps; a warm-up as long as
    the run never reaches the peak), a decay ending long before the last step."""
    s, out = schedule, []
    end = min(s.steps, s.decay_end)
    if s.warmup_steps >= end:
        out.append(
            (
                "warmupSteps",
                f"warm-up {s.warmup_steps:,} steps reaches step {end:,} where the"
                f" {'decay ends' if s.decay_end <= s.steps else 'run ends'}: the run never trains past its warm-up;"
                f" keep it below {end:,} (e.g. warmupFraction: 0.05)",
            )
        )
    if s.floor_steps > LONGEST_FLOOR_SHARE * s.steps:
        out.append(
            (
                "decaySteps",
                f"decay ends at step {s.decay_end:,} of {s.steps:,}: the last {s.floor_steps:,} steps"
                f" ({s.floor_steps / s.steps:.0%}) train at the minimum learning rate; leave decaySteps unset (the"
                f" run's steps) or set it to at least {s.steps - int(LONGEST_FLOOR_SHARE * s.steps):,}",
            )
        )
    return out
