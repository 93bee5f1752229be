"""A run's throughput line of the plan, one shape for every recipe: seconds per step (configured,
or estimated from the recipe's published measurement, or unknown) and its basis, tokens per second
(per GPU on NVIDIA nodes), the model FLOPs utilisation that implies, the support status of its
recipe, and what it reads before its first step (weights loaded at start) and to resume (the
latest checkpoint read back); the image pulls and the compile are estimates.startup's.

MFU: where the recipe's estimate comes from a published run that states its own model TFLOP/s
(Megatron Bridge's tables, estimates/bridge.py), that figure over the GPU's peak (`published_mfu`);
otherwise model FLOPs (6 per parameter plus attention, PaLM's definition: no recomputation, see
estimates/model.py) over the dense BF16 peak of facts/peak_flops.py. A key whose value is not known
is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimates.acceptance import AcceptanceTime
from estimates.checkpoints import FileSystem
from facts import instances
from facts.peak_flops import PEAK_BF16


@dataclass(frozen=True)
class RunWork:
    """What the throughput estimate reads of one run on its node group's instance type (the
    recipe's config builds it: RunConfig.work)."""

    nodes: int
    tokens_per_step: int | None = None
    """Tokens an optimizer step trains on (global batch x sequence length); None: unknown."""
    flops_per_token: float | None = None
    """Model FLOPs per trained token, forward and backward; None: unknown."""
    published_mfu: tuple[float, str] | None = None
    """The MFU of the published run the step time is estimated from, and what was measured."""
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
    tokens, flops, peak = run.tokens_per_step, run.flops_per_token, PEAK_BF16.get(instance_type)
    tokens_per_second = tokens / step_seconds if tokens and step_seconds else None
    instance = instances.CATALOG.get(instance_type)
    facts: dict[str, object | None] = {
        "stepSeconds": None if step_seconds is None else round(step_seconds, 3),
        "stepTimeBasis": basis,
        "tokensPerSecond": None if tokens_per_second is None else round(tokens_per_second),
    }
    if tokens_per_second is not None and instance is not None and instance.accelerator == "nvidia":
        facts["tokensPerSecondPerGpu"] = round(tokens_per_second / (run.nodes * instance.accelerator_count), 1)
    published = run.published_mfu if tokens_per_second is not None else None
    if published is not None:
        facts["mfu"], facts["published"] = round(published[0], 3), published[1]
    elif tokens_per_second is not None and flops is not None and peak is not None:
        facts["mfu"] = round(flops * tokens_per_second / (peak.tflops * 1e12 * run.nodes), 4)
        facts["peak"] = peak.source
    facts["support"] = run.support
    out = {k: v for k, v in facts.items() if v is not None}
    out["loads"] = loads(run, storage)
    if run.acceptance is not None:
        out["acceptance"] = run.acceptance.as_dict()
    return out


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
