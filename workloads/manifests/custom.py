"""Recipe `custom`: bring your own image and command, run once per node with the same plumbing."""

from __future__ import annotations

import shlex

from config.workloads import CustomWorkload
from workloads.manifests.healthcheck import gated_training
from workloads.manifests.mpijob import MPIJobSpec
from workloads.manifests.objects import Context, Step, extras


def steps(workload_name: str, run: CustomWorkload, ctx: Context) -> list[Step]:
    """Health check -> the user's command on every node, plus TensorBoard."""
    command = shlex.join(run.command)
    if run.working_dir:
        command = f"cd {shlex.quote(run.working_dir)} && {command}"
    # The command must save to $CHECKPOINT_DIR every $CHECKPOINT_EVERY_STEPS steps and resume
    # from the latest checkpoint there when it starts (README: Bring your own model).
    per_node = f"export NODE_RANK=$OMPI_COMM_WORLD_RANK; mkdir -p $RUN_DIR $CHECKPOINT_DIR; {command}"
    train = MPIJobSpec(
        f"{workload_name}-{run.run_id}-train",
        "train",
        f"$MPIRUN bash -c {shlex.quote(per_node)}",
        awaited=False,
        processes_per_node=run.processes_per_node,
        backoff_limit=run.max_retries,
    )
    return [
        *gated_training(workload_name, run, ctx, train, after=()),
        *extras(workload_name, ctx, tensorboard_on=run.tensorboard, shell_on=False),
    ]
