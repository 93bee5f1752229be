"""Everything a training run spends on its nodes, in step-equivalents: its optimizer steps, the
validation passes its recipe runs between and after them, and the export it runs on the same
nodes after the last step. The plan's length, cost and checkpoint share read this one place.

Why validation counts: Megatron Bridge 0.6.0 (c9325115) `training/train.py` validates every
`validation.eval_interval` steps and `training/pretrain.py` once more after the last step, each
pass `validation.eval_iters` forward-only iterations of the global batch
(`eval_global_batch_size` defaults to `train.global_batch_size`, config.py). Its SFT recipes
validate every 30 steps for 32 iterations: over 1,000 steps, 34 passes, 1,088 iterations.

A forward-only iteration is taken as a third of a training step: the backward pass computes the
gradients of the activations and of the weights, each as many FLOPs as the forward (the 6N FLOPs
per token of a training step are 2N forward and 4N backward). Only hardware shows the real
share (pipeline bubbles, the loss, data loading).
"""

from __future__ import annotations

from dataclasses import dataclass

FORWARD_SHARE = 1 / 3
"""A forward-only iteration's time as a share of a training step's (2N of 6N FLOPs per token)."""


@dataclass(frozen=True)
class Validation:
    """How a recipe validates: every `interval` steps (None: never between steps), `iters`
    forward-only iterations each, and once more after the last step when `final`."""

    interval: int | None
    iters: int
    final: bool = True
    keys: str = ""
    """The keys that set it, as the line names them."""

    def passes(self, steps: int) -> int:
        """Validation passes over a run of `steps` (those on the last step and after it are one)."""
        during = steps // self.interval if self.interval else 0
        if self.final and not (self.interval and steps % self.interval == 0):
            during += 1
        return during

    def iterations(self, steps: int) -> int:
        return self.passes(steps) * self.iters


@dataclass(frozen=True)
class RunLength:
    """A run's optimizer steps and what else it runs on its nodes."""

    steps: int
    validation: Validation | None = None
    export_bytes: int = 0
    """Bytes the export after the last step reads and writes on the run's first node (0: none)."""
    import_bytes: int = 0
    """Bytes the import before the first step reads and writes (Hugging Face weights into a
    Megatron checkpoint, Megatron Bridge's SFT: its own Job on the run's node group; 0: none)."""

    @property
    def validation_steps(self) -> float:
        """Validation in training-step equivalents."""
        return 0.0 if self.validation is None else self.validation.iterations(self.steps) * FORWARD_SHARE

    def export_seconds(self, mb_per_second: float | None) -> float:
        """The export at the file system's throughput (read once, written once); a floor: the
        conversion's own CPU time is not modelled."""
        if not self.export_bytes or not mb_per_second:
            return 0.0
        return 2 * self.export_bytes / (mb_per_second * 1e6)

    def import_seconds(self, mb_per_second: float | None) -> float:
        """The import at the file system's throughput (read once, written once); a floor, as the export's."""
        if not self.import_bytes or not mb_per_second:
            return 0.0
        return 2 * self.import_bytes / (mb_per_second * 1e6)

    def seconds(self, step_seconds: float, mb_per_second: float | None = None) -> float:
        """Wall time on the nodes: the import, steps and validation at `step_seconds`, the export."""
        conversions = self.import_seconds(mb_per_second) + self.export_seconds(mb_per_second)
        return (self.steps + self.validation_steps) * step_seconds + conversions

    @property
    def validation_share(self) -> float:
        """Validation time over training time."""
        return self.validation_steps / self.steps

    def as_dict(self, step_seconds: float | None, mb_per_second: float | None) -> dict[str, object]:
        """What the plan shows: steps, validation passes and iterations, their share, the export."""
        out: dict[str, object] = {"steps": self.steps, "validationStepEquivalents": round(self.validation_steps, 1)}
        if self.validation is not None:
            out["validationPasses"] = self.validation.passes(self.steps)
            out["validationIterations"] = self.validation.iterations(self.steps)
            out["validationEvery"] = self.validation.interval or 0
            out["validationKeys"] = self.validation.keys
        export = self.export_seconds(mb_per_second)
        if export:
            out["exportSeconds"] = round(export)
        if imported := self.import_seconds(mb_per_second):
            out["importSeconds"] = round(imported)
        if step_seconds is not None:
            out["seconds"] = round(self.seconds(step_seconds, mb_per_second))
        out["line"] = self.line(step_seconds, mb_per_second)
        return out

    def line(self, step_seconds: float | None, mb_per_second: float | None) -> str:
        """`1,000 steps + validation 34 x 32 iterations (every 30 steps and after the last) = +36%
        of the steps' time; export ~40 s; ~1.9 h at 5 s/step`."""
        text = f"{self.steps:,} steps"
        v = self.validation
        if v is not None:
            when = "after the last step"
            if v.interval and v.interval < self.steps:
                when = f"every {v.interval:,} steps" + (" and after the last" if v.final else "")
            text += (
                f" + validation {v.passes(self.steps)} x {v.iters} forward iterations ({when}) ="
                f" +{self.validation_share:.0%} of the steps' time"
            )
        else:
            text += ", no validation"
        if imported := self.import_seconds(mb_per_second):
            text += f"; import {imported:,.0f}+ s before the first step (the file system's time)"
        if export := self.export_seconds(mb_per_second):
            text += (
                f"; export {export:,.0f}+ s on the run's nodes (the file system's time; the conversion's not modelled)"
            )
        if step_seconds is not None:
            hours = self.seconds(step_seconds, mb_per_second) / 3600
            text += f"; ~{hours:,.1f} h at {round(step_seconds, 3):g} s/step"
        return text
