"""The `schedule:` and `validation:` sections of a training run whose recipe has a learning-rate
schedule and validation of its own to size (Megatron Bridge's library recipes): the keys, and the
refusal of a schedule that cannot fit the run. The figures are estimates.schedule's and
estimates.run_length's."""

from __future__ import annotations

from pydantic import Field, model_validator

from config.base import KeyProblem, Model
from config.training import TrainingConfig
from estimates import schedule
from estimates.run_length import RunLength, Validation
from facts.megatron_bridge import RecipeSchedule


def library(s: RecipeSchedule) -> schedule.LibrarySchedule:
    """A Megatron Bridge library recipe's own schedule (facts/megatron_bridge.py) as the estimate reads it."""
    return schedule.LibrarySchedule(s.warmup_iters, s.decay_iters, s.train_iters, s.lr, s.min_lr)


class ScheduleConfig(Model):
    """Warm-up, decay and floor of the learning rate over the run's own steps; unset keys size the
    library recipe's schedule to the run (its warm-up share, a decay ending at the last step, its
    floor ratio)."""

    warmup_steps: int | None = Field(
        None,
        ge=0,
        description="Linear warm-up steps; below the decay's end.",
        json_schema_extra={"x-default": "the library recipe's warm-up share of its decay, of the run's steps"},
    )
    warmup_fraction: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="Warm-up as a share of the decay (instead of warmupSteps).",
        json_schema_extra={"x-default": "the library recipe's"},
    )
    decay_steps: int | None = Field(
        None,
        ge=1,
        description="The step the decay ends at; later steps train at the floor. More than the run's steps: the run"
        " is the start of a longer schedule.",
        json_schema_extra={"x-default": "the run's steps"},
    )
    min_lr_ratio: float | None = Field(
        None,
        ge=0,
        le=1,
        description="The floor as a share of the peak learning rate (optimizer.min_lr = ratio x optimizer.lr).",
        json_schema_extra={"x-default": "the library recipe's (min_lr / lr)"},
    )

    @model_validator(mode="after")
    def _one_warmup(self) -> ScheduleConfig:
        if self.warmup_steps is not None and self.warmup_fraction is not None:
            raise KeyProblem("warmupFraction", "set warmupSteps or warmupFraction, not both", "conflict")
        return self

    def sized(self, library: schedule.LibrarySchedule, steps: int) -> schedule.Schedule:
        """The schedule the run renders (estimates.schedule.sized)."""
        return schedule.sized(
            library, steps, self.warmup_steps, self.warmup_fraction, self.decay_steps, self.min_lr_ratio
        )

    def refuse_misfit(self, library: schedule.LibrarySchedule, steps: int) -> None:
        """Raise the first way the schedule cannot fit the run, naming its key under `schedule`."""
        renamed = {"warmupSteps": "warmupFraction"} if self.warmup_fraction is not None else {}
        refuse_misfit(self.sized(library, steps), renamed, "schedule.")


class ValidationConfig(Model):
    """How often the run validates and for how long: passes run on the run's nodes, so they count in
    its length, its cost and its checkpoint share."""

    interval: int | None = Field(
        None,
        ge=1,
        description="Steps between validation passes (validation.eval_interval); one more runs after the last step.",
        json_schema_extra={"x-default": "the library recipe's (SFT: 30, pretrain: 2,000 Llama 3.1, 500 Qwen3)"},
    )
    iters: int | None = Field(
        None,
        ge=1,
        description="Forward iterations of the global batch per pass (validation.eval_iters).",
        json_schema_extra={"x-default": "the library recipe's (32)"},
    )

    def length(self, recipe: RecipeSchedule, steps: int, export_bytes: int, import_bytes: int = 0) -> RunLength:
        """The run's steps, its validation (these keys, else the library recipe's), its import and export."""
        interval, iters = self.interval or recipe.eval_interval, self.iters or recipe.eval_iters
        validation = Validation(interval, iters, keys="validation.interval, validation.iters")
        return RunLength(steps, validation, export_bytes, import_bytes)


def refuse_misfit(sized: schedule.Schedule, keys: dict[str, str], prefix: str) -> None:
    """Raise the first way `sized` cannot fit its run (estimates.schedule.problems), naming the
    run's key: `prefix` + the problem's key, or the key `keys` maps it to."""
    for key, message in schedule.problems(sized):
        raise KeyProblem(keys.get(key, prefix + key), message, "conflict")


def megatron_schedule(t: TrainingConfig) -> schedule.Schedule:
    """What NeMo's CosineAnnealing does with the rendered model.optim.sched keys (NeMo r2.0.0rc1 and
    neuronx-nemo-megatron 2.21 nemo/core/optim/lr_scheduler.py WarmupAnnealHoldPolicy): linear
    warm-up, cosine decay ending `constant_steps` before trainer.max_steps, then min_lr."""
    end = t.max_steps - t.constant_steps
    source = "training.warmupSteps, constantSteps, minLearningRate"
    return schedule.Schedule(t.max_steps, t.warmup_steps, end, t.min_learning_rate / t.learning_rate, "cosine", source)


def megatron_length(steps: int) -> RunLength:
    """The Megatron recipes validate once, at the end, on one batch (trainer.val_check_interval = the
    run's steps, limit_val_batches 1: as upstream's launch scripts)."""
    return RunLength(steps, Validation(steps, 1, keys="trainer.val_check_interval, limit_val_batches"))
