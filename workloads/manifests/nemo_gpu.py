"""Recipe `nemo-gpu`: NVIDIA NeMo pretraining on GPU nodes, gated by an nccl-tests health check."""

from __future__ import annotations

from config.workloads import NemoGpuWorkload
from workloads.manifests.healthcheck import gated_training
from workloads.manifests.megatron import nemo_overrides, torchrun
from workloads.manifests.mpijob import MPIJobSpec
from workloads.manifests.objects import Context, Step, extras


def steps(workload_name: str, run: NemoGpuWorkload, ctx: Context) -> list[Step]:
    """Health check -> NeMo pretraining MPIJob, plus TensorBoard."""
    data = (
        [f"model.data.data_prefix=[1.0,{run.data_prefix}]"]
        if run.data_prefix
        else ["model.data.data_impl=mock", "model.data.data_prefix=[]"]
    )
    args = [
        *nemo_overrides(workload_name, run, run.model, run.training, ctx, run.training.max_steps),
        "trainer.precision=bf16-mixed",
        *data,
        *(f"{k}={v}" for k, v in sorted(run.overrides.items())),
    ]
    script = f"megatron_gpt_pretraining.py --config-path=conf --config-name={run.config_name}"
    train = MPIJobSpec(
        f"{workload_name}-{run.run_id}-train",
        "train",
        torchrun(run.code_dir, script, args),
        awaited=False,
        backoff_limit=run.max_retries,
    )
    return [
        *gated_training(workload_name, run, ctx, train, after=()),
        *extras(workload_name, ctx, tensorboard_on=run.tensorboard, shell_on=False),
    ]
