"""A run's throughput line of the plan, one shape for every recipe: seconds per step (configured,
or estimated from the recipe's published measurement, or unknown) and its basis, tokens per second
(per GPU on NVIDIA nodes), the model FLOPs utilisation that implies, the support status of its
recipe, and what it reads before its first step (weights loaded at start) and to resume (the
latest checkpoint read back); the image pulls and the compile are estimates.startup's.

MFU, one definition for every recipe: model FLOPs per trained token by one formula
(estimates/flops.py, Megatron Core's, the one behind NVIDIA's published model TFLOP/s) x tokens per
second, over the dense peak of the precision the run's matrix multiplies use (facts/peak_flops.py:
an FP8 run against the FP8 peak). Where the step time is estimated from a published run, the plan
also says what that run measured and how its setup differs from this one (`published`). Every
training run's line states its MFU's basis, or why there is none (`mfuBasis`). A key whose value is
not known is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimates.acceptance import AcceptanceTime
from estimates.checkpoints import FileSystem
from estimates.flops import FORMULA
from facts import instances
from facts.peak_flops import Precision, peak


@dataclass(frozen=True)
class RunWork:
    """What the throughput estimate reads of one run on its node group's instance type (the
    recipe's config builds it: RunConfig.work)."""

    nodes: int
    tokens_per_step: int | None = None
    """Tokens an optimizer step trains on (global batch x sequence length); None: unknown."""
    flops_per_token: float | None = None
    """Model FLOPs per trained token, forward and backward; None: unknown."""
    precision: Precision = "bf16"
    """The precision of the run's matrix multiplies: its MFU is against that peak."""
    published: str | None = None
    """What the published run the step time is estimated from measured, and how this run differs."""
    support: str | None = None
    """The recipe's support status upstream."""
    initial_weight_bytes: int | None = None
    """Bytes of weights loaded before the first step (0: random weights; None: unknown)."""
    checkpoint_bytes: int | None = None
    """Bytes of one checkpoint, read back on a restart (None: not sized)."""
    trains: bool = True
    """False: an acceptance run, which has no step time (its modeled length instead)."""
    acceptance: AcceptanceTime | None = None
    """An acceptance run's modeled length on the instance type (None: no floor for the type)."""


def plan(
    run: RunWork, instance_type: str, step_seconds: float | None, basis: str, storage: FileSystem | None = None
) -> dict[str, object]:
    """What the plan shows of one run's speed on `instance_type`."""
    if not run.trains:
        step_seconds, basis = None, "it trains nothing"
    tokens = run.tokens_per_step
    tokens_per_second = tokens / step_seconds if tokens and step_seconds else None
    instance = instances.CATALOG.get(instance_type)
    facts: dict[str, object | None] = {
        "stepSeconds": None if step_seconds is None else round(step_seconds, 3),
        "stepTimeBasis": basis,
        "tokensPerSecond": None if tokens_per_second is None else round(tokens_per_second),
    }
    if tokens_per_second is not None and instance is not None and instance.accelerator == "nvidia":
        facts["tokensPerSecondPerGpu"] = round(tokens_per_second / (run.nodes * instance.accelerator_count), 1)
    if run.trains:
        facts.update(mfu(run, instance_type, tokens_per_second))
    if step_seconds is not None and basis != "configured":
        facts["published"] = run.published
    facts["support"] = run.support
    out = {k: v for k, v in facts.items() if v is not None}
    out["loads"] = loads(run, storage)
    if run.acceptance is not None:
        out["acceptance"] = run.acceptance.as_dict()
    return out


def mfu(run: RunWork, instance_type: str, tokens_per_second: float | None) -> dict[str, object]:
    """The run's MFU and its basis (the formula, the precision and its peak), or why there is none."""
    top = peak(instance_type, run.precision)
    precision = run.precision.upper()
    if tokens_per_second is None:
        why = "no step time" if run.tokens_per_step else "tokens per step not modelled for the recipe"
        return {"mfuBasis": f"no MFU: {why}"}
    if run.flops_per_token is None:
        return {"mfuBasis": "no MFU: the model's FLOPs per token are not modelled (its shape is not recorded)"}
    if top is None:
        return {"mfuBasis": f"no MFU: no dense {precision} peak recorded for {instance_type}"}
    value = run.flops_per_token * tokens_per_second / (top.tflops * 1e12 * run.nodes)
    return {
        "mfu": round(value, 4),
        "mfuBasis": f"{run.flops_per_token / 1e9:.1f} GFLOP/token ({FORMULA}) over the dense {precision} peak:"
        f" {top.source}",
    }


def loads(run: RunWork, storage: FileSystem | None) -> dict[str, object]:
    """What the run reads before its first step beside its image (estimates.startup has the pulls
    and the compile): the weights it loads at start and, for a restart, the latest checkpoint, each
    read at the file system's full throughput (without `storage`, nothing)."""
    out: dict[str, object] = {}
    if storage is None:
        return out
    read = storage.mb_per_second * 1e6
    if (weights := run.initial_weight_bytes) is not None:
        out["loadSeconds"] = round(weights / read)
    if (checkpoint := run.checkpoint_bytes) is not None:
        out["resumeLoadSeconds"] = round(checkpoint / read)
    return out
