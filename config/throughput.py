"""A run's modeled throughput for the plan: seconds per step (configured, or estimated from the
recipe's published measurement), tokens per second, the model FLOPs utilisation that implies
against the accelerators' dense BF16 peak, the support status of its recipe, and what it does
before its first step that has a published time.

MFU here is model FLOPs (6 per parameter plus attention, PaLM's definition: no recomputation)
over peak; a published sample's own MFU may count differently.
"""

from __future__ import annotations

from config.workloads import RunConfig
from facts.peak_flops import PEAK_BF16


def plan(run: RunConfig, instance_type: str, step_seconds: float | None, basis: str) -> dict[str, object]:
    """What the plan shows of one run's speed; a key whose value is not known is left out."""
    tokens, flops, peak = run.tokens_per_step, run.model_flops_per_token, PEAK_BF16.get(instance_type)
    tokens_per_second = tokens / step_seconds if tokens and step_seconds else None
    mfu = None
    if tokens_per_second is not None and flops is not None and peak is not None:
        mfu = flops * tokens_per_second / (peak.tflops * 1e12 * run.nodes)
    first = run.FIRST_STEP
    support = run.DOCS.support
    facts: dict[str, object | None] = {
        "stepSeconds": None if step_seconds is None else round(step_seconds, 3),
        "stepTimeBasis": basis,
        "tokensPerSecond": None if tokens_per_second is None else round(tokens_per_second),
        "mfu": None if mfu is None else round(mfu, 4),
        "peak": None if peak is None else peak.source,
        "compileSeconds": first.compile_seconds,
        "compileSource": first.source,
        "support": None if support is None else support.status,
    }
    return {k: v for k, v in facts.items() if v is not None}
