"""The `megatron-bridge` recipe's modelled throughput: a run's step time and tokens per second from
NVIDIA's published Megatron Bridge performance rows (facts/megatron_bridge.py PUBLISHED;
tests/upstream/megatron-bridge-performance.yaml).

A published row applies to a run of the same model, mode, precision and sequence length on the
row's GPU (SYSTEM_OF_INSTANCE); its tokens per second per GPU is taken as the run's, so the step
is the run's tokens per step over that rate times its GPUs. The rows are NVIDIA's tuned
performance recipes, mostly on one node; the run is the library recipe, on its own nodes and
parallelism: the plan says how the two differ (published_setup), so a reader sees what was
measured. The MFU is estimates/throughput.py's, the same formula and peak as every recipe. Nothing
is extrapolated across models, precisions, sequence lengths or GPUs.
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
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    virtual_pipeline: int | None = None
    micro_batch_size: int = 1
    recipe: str = ""
    """The library recipe the run builds on (its exported name)."""


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


def published_setup(run: BridgeShape, instance_type: str) -> str | None:
    """Where a published row applies: what it measured, and how the run's setup differs from it
    (GPU, nodes, parallelism, batch, recipe; the precision is the same, rows only match their own)."""
    row = published_row(run, instance_type)
    if row is None:
        return None
    measured = (
        f"{row.system} {row.model} {row.mode} {row.precision}, NeMo {row.container} performance recipe: {row.shape}:"
        f" {row.tokens_per_second_per_gpu:g} tokens/s/GPU, {row.model_tflops_per_gpu:g} model TFLOP/s/GPU"
    )
    return f"{measured}; this run differs: {'; '.join(differences(run, row, instance_type))}"


def differences(run: BridgeShape, row: bridge.PublishedRun, instance_type: str) -> list[str]:
    """How the run's setup differs from the published row's, one phrase each."""
    it = instances.get(instance_type)
    row_nodes = max(1, row.gpus // it.accelerator_count)
    out: list[str] = []
    if it.accelerator_name and it.accelerator_name not in row.system:
        out.append(f"{it.accelerator_name}, at the {row.system} figure")
    if run.nodes != row_nodes:
        out.append(f"{run.nodes} nodes over EFA, not {row_nodes}" + (" (NVLink only)" if row_nodes == 1 else ""))
    ours = (run.tensor_parallel, run.pipeline_parallel, run.context_parallel, run.virtual_pipeline or None)
    theirs = (row.tensor_parallel, row.pipeline_parallel, row.context_parallel, row.virtual_pipeline)
    if ours != theirs or row.fsdp:
        vp = f" VP{run.virtual_pipeline}" if run.virtual_pipeline and run.virtual_pipeline > 1 else ""
        fsdp = f", no FSDP (the row: FSDP{row.fsdp})" if row.fsdp else ""
        out.append(f"TP{run.tensor_parallel} PP{run.pipeline_parallel} CP{run.context_parallel}{vp}{fsdp}")
    if (run.global_batch_size, run.micro_batch_size) != (row.global_batch_size, row.micro_batch_size):
        out.append(f"GBS {run.global_batch_size} MBS {run.micro_batch_size}")
    out.append(
        f"the library recipe {run.recipe or run.model} of Bridge {bridge.BRIDGE_VERSION} (NeMo 26.08), not the"
        " tuned performance recipe"
    )
    return out


STEP_TIME = PublishedStepTime(
    source="NVIDIA Megatron Bridge performance tables at r0.6.0 (docs/performance-summary-archive.md): Llama 3 8B"
    " pre-training FP8-CS on DGX-H100 (14451 tokens/s/GPU) and DGX-B200 (30624), Llama 3 70B pre-training FP8 on"
    " DGX-H100 (1664), Llama 3 70B SFT FP8 on DGX-H100 (1638); H200 (p5e, p5en) at the H100 figure; none for B300",
    basis=BASIS,
    estimate=step_seconds,
    setup=published_setup,
)
