"""The throughput lines of a TrainingRun in the plan's table, from the inputs estimates/throughput.py
gives every run: step time and its basis, tokens/s, MFU and what it rests on; the recipe's support
status, the weights read before the first step and the checkpoint read on a restart."""

from __future__ import annotations

from typing import Any


def throughput_facts(t: dict[str, Any] | None) -> list[str]:
    """Two lines: the throughput (or why it is unknown), then support and what the run reads."""
    if not t:
        return []
    step, tokens, mfu = t.get("stepSeconds"), t.get("tokensPerSecond"), t.get("mfu")
    if t.get("acceptance"):  # an acceptance run trains nothing: its modeled length instead
        line = f"acceptance: ~{t['acceptance']['seconds']:,} s ({t['acceptance']['basis']})"
    elif step is None:
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
    return [line, f"support: {t.get('support')}{_loads(t.get('loads') or {})}"]


def _loads(loads: dict[str, Any]) -> str:
    """What the run reads before its first step and on a restart (the pulls and the compile are
    the startup line's)."""
    text = ""
    if loads.get("loadSeconds"):
        text += f"; {loads['loadSeconds']:,} s loading weights before the first step"
    if loads.get("resumeLoadSeconds") is not None:
        text += f"; a restart reads the latest checkpoint in ~{loads['resumeLoadSeconds']:,} s"
    return text
