"""The `megatron-bridge` recipe's modelled throughput: a run's step time, tokens per second and the
model FLOPs utilisation they imply, from NVIDIA's published Megatron Bridge performance rows
(facts/megatron_bridge.py PUBLISHED; tests/upstream/megatron-bridge-performance.yaml).

A published row applies to a run of the same model, mode, precision and sequence length on the
row's GPU (SYSTEM_OF_INSTANCE); its tokens per second per GPU is taken as the run's, so the step
is the run's tokens per step over that rate times its GPUs. Parallelism and batch may differ from
the published run's: the estimate says so, with the published shape, so a reader sees what was
measured. Nothing is extrapolated across models, precisions, sequence lengths or GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimates.step_time import PublishedStepTime
from facts import instances
from facts import megatron_bridge as bridge

BASIS = "estimated from NVIDIA's Megatron Bridge performance tables"


@dataclass(frozen=True)
class BridgeShape:
    """What the estimate reads of a run (the recipe's config builds it: its `step_input`)."""

    model: str
    mode: str
    precision: str
    nodes: int
    global_batch_size: int
    seq_length: int


def published_row(run: BridgeShape, instance_type: str) -> bridge.PublishedRun | None:
    """The published row that applies to `run` on `instance_type`, if any."""
    system = bridge.SYSTEM_OF_INSTANCE.get(instance_type)
    seq = run.seq_length
    for row in bridge.PUBLISHED:
        if (row.model, row.system, row.mode, row.precision, row.seq_length) == (
            run.model,
            system,
            run.mode,
            run.precision,
            seq,
        ):
            return row
    return None


def _gpus(run: BridgeShape, instance_type: str) -> int:
    return run.nodes * instances.get(instance_type).accelerator_count


def step_seconds(run: BridgeShape, instance_type: str) -> float | None:
    """Seconds per optimizer step: tokens per step / (published tokens/s/GPU x the run's GPUs)."""
    row = published_row(run, instance_type)
    if row is None:
        return None
    tokens = run.global_batch_size * run.seq_length
    return tokens / (row.tokens_per_second_per_gpu * _gpus(run, instance_type))


def published_mfu(run: BridgeShape, instance_type: str) -> tuple[float, str] | None:
    """Where a published row applies: its model TFLOP/s per GPU against the GPU's dense BF16 peak
    (the MFU), and what was measured (estimates/throughput.py shows both on the throughput line)."""
    row = published_row(run, instance_type)
    if row is None:
        return None
    peak = bridge.PEAK_DENSE_BF16_TFLOPS[row.system]
    fp8 = ""
    if row.precision != "bf16":
        fp8 = f", {row.model_tflops_per_gpu / bridge.PEAK_DENSE_FP8_TFLOPS[row.system]:.1%} of its dense FP8 peak"
    return row.model_tflops_per_gpu / peak, (
        f"{row.system} {row.model} {row.mode} {row.precision}, NeMo {row.container}: {row.shape}:"
        f" {row.tokens_per_second_per_gpu:g} tokens/s/GPU, {row.model_tflops_per_gpu:g} model TFLOP/s/GPU"
        f" (MFU against the GPU's {peak:g} dense BF16 TFLOP/s{fp8})"
    )


STEP_TIME = PublishedStepTime(
    source="NVIDIA Megatron Bridge performance tables at r0.6.0 (docs/performance-summary-archive.md): Llama 3 8B"
    " pre-training FP8-CS on DGX-H100 (14451 tokens/s/GPU) and DGX-B200 (30624), Llama 3 70B pre-training FP8 on"
    " DGX-H100 (1664), Llama 3 70B SFT FP8 on DGX-H100 (1638); H200 (p5e, p5en) at the H100 figure; none for B300",
    basis=BASIS,
    estimate=step_seconds,
    mfu=published_mfu,
)
