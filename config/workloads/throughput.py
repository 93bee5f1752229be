"""A run's throughput line of the plan, one shape for every recipe: seconds per step (configured,
or estimated from the recipe's published measurement, or unknown) and its basis, tokens per second
(per GPU on NVIDIA nodes), the model FLOPs utilisation that implies, the support status of its
recipe, and what it reads before its first step (weights loaded at start) and to resume (the
latest checkpoint read back); the image pulls and the compile are config.startup's.

MFU: where the recipe's estimate comes from a published run that states its own model TFLOP/s
(Megatron Bridge's tables), that figure over the GPU's peak (`published_mfu`); otherwise model
FLOPs (6 per parameter plus attention, PaLM's definition: no recomputation) over the dense BF16
peak of facts/peak_flops.py. A key whose value is not known is left out.
"""

from __future__ import annotations

from typing import Any

from config.checkpoints import write_mb_per_second
from config.storage import StorageConfig
from facts import instances
from facts.peak_flops import PEAK_BF16


def plan(
    run: Any, instance_type: str, step_seconds: float | None, basis: str, storage: StorageConfig | None = None
) -> dict[str, object]:
    """What the plan shows of one run's speed (`run` is a config.workloads RunConfig)."""
    tokens, flops, peak = run.tokens_per_step, run.model_flops_per_token, PEAK_BF16.get(instance_type)
    tokens_per_second = tokens / step_seconds if tokens and step_seconds else None
    instance = instances.CATALOG.get(instance_type)
    facts: dict[str, object | None] = {
        "stepSeconds": None if step_seconds is None else round(step_seconds, 3),
        "stepTimeBasis": basis,
        "tokensPerSecond": None if tokens_per_second is None else round(tokens_per_second),
    }
    if tokens_per_second is not None and instance is not None and instance.accelerator == "nvidia":
        facts["tokensPerSecondPerGpu"] = round(tokens_per_second / (run.nodes * instance.accelerator_count), 1)
    published = run.published_mfu(instance_type) if tokens_per_second is not None else None
    if published is not None:
        facts["mfu"], facts["published"] = round(published[0], 3), published[1]
    elif tokens_per_second is not None and flops is not None and peak is not None:
        facts["mfu"] = round(flops * tokens_per_second / (peak.tflops * 1e12 * run.nodes), 4)
        facts["peak"] = peak.source
    support = run.DOCS.support
    facts["support"] = None if support is None else support.status
    out = {k: v for k, v in facts.items() if v is not None}
    out["loads"] = loads(run, storage)
    return out


def loads(run: Any, storage: StorageConfig | None) -> dict[str, object]:
    """What the run reads before its first step beside its image (config.startup has the pulls and
    the compile): the weights it loads at start and, for a restart, the latest checkpoint, each
    read at the file system's full throughput (without `storage`, nothing)."""
    out: dict[str, object] = {}
    if storage is None:
        return out
    read = write_mb_per_second(storage) * 1e6
    if (weights := run.initial_weight_bytes) is not None:
        out["loadSeconds"] = round(weights / read)
    if run.KIND == "training" and (checkpoint := run.checkpoint_plan(storage)) is not None:
        out["resumeLoadSeconds"] = round(checkpoint.size_bytes / read)
    return out
