"""Recipe `custom`: bring your own image and command, run once per node with the same plumbing
(health gate at every launch, run directories, checkpoint conventions)."""

from __future__ import annotations

import shlex

from config.workloads import CustomWorkload
from workloads.manifests.companions import extras
from workloads.manifests.healthcheck import training
from workloads.manifests.objects import Context, Step, image_check

MODEL = CustomWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: CustomWorkload, ctx: Context) -> list[Step]:
    """Image check -> the health gate and the user's command on every node, plus TensorBoard."""
    command = shlex.join(run.command)
    if run.working_dir:
        command = f"cd {shlex.quote(run.working_dir)} && {command}"
    # The command must save to $CHECKPOINT_DIR every $CHECKPOINT_EVERY_STEPS steps and resume
    # from the latest checkpoint there when it starts (docs/training.md: Bring your own model).
    per_node = f"export NODE_RANK=$OMPI_COMM_WORLD_RANK; mkdir -p $RUN_DIR $CHECKPOINT_DIR; {command}"
    phases = f'echo "== training"\n$MPIRUN bash -c {shlex.quote(per_node)}\n'
    image = image_check(workload_name, ctx, run)
    return [
        image,
        *training(workload_name, run, ctx, phases, after=(image.name,), processes_per_node=run.processes_per_node),
        *extras(workload_name, ctx, run.run_id, tensorboard_on=run.tensorboard, shell_on=False),
    ]
