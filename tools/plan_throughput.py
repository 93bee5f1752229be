"""The throughput lines of a TrainingRun in the plan's table, from the inputs config/workloads/throughput.py
gives every run: step time and its basis, tokens/s, MFU and what it rests on; the recipe's support
status and the time to the first step and to resume."""

from __future__ import annotations

from typing import Any


def throughput_facts(t: dict[str, Any] | None) -> list[str]:
    """Two lines: the throughput (or why it is unknown), then support and the first step."""
    if not t:
        return []
    step, tokens, mfu = t.get("stepSeconds"), t.get("tokensPerSecond"), t.get("mfu")
    if step is None:
        line = f"throughput: unknown ({t.get('stepTimeBasis')})"
    else:
        line = f"throughput: {step:g} s/step ({t.get('stepTimeBasis')})"
        if tokens is not None:
            per_gpu = t.get("tokensPerSecondPerGpu")
            line += f", {tokens:,} tokens/s" + (f" ({per_gpu:,} per GPU)" if per_gpu is not None else "")
        if mfu is not None and t.get("published"):
            line += f", MFU {mfu:.1%}; published: {t['published']}"
        elif mfu is not None:
            line += f", MFU {mfu:.1%} of the dense BF16 peak ({t.get('peak')})"
    return [line, f"support: {t.get('support')}; first step: {_first_step(t.get('firstStep') or {})}"]


def _first_step(first: dict[str, Any]) -> str:
    """What comes before the first step, with the times the plan knows."""
    seconds = first.get("compileSeconds")
    compile_time = "unknown" if seconds is None else "none" if seconds == 0 else f"{seconds:g} s"
    text = f"after the image pull (up to {first.get('pullSecondsAtMost', 0):,} s)"
    text += f", compile {compile_time} ({first.get('compileSource')})"
    if first.get("loadSeconds") is not None:
        text += f", {first['loadSeconds']:,} s loading weights"
    if first.get("resumeLoadSeconds") is not None:
        text += f"; a restart reads the latest checkpoint in ~{first['resumeLoadSeconds']:,} s"
    return text
