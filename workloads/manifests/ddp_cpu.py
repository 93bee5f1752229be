"""Recipe `ddp-cpu`: PyTorch DDP over gloo on the system nodes' CPUs, the first run of a platform.

One training MPIJob, like every recipe's: a launcher on a system node waits for the workers,
runs the health gate (each node's view of the shared file system), writes the training script
(`ddp_cpu_train.py`, kept beside this module) into the run's directory on /shared, where every
worker reads it, and starts one torchrun per node through `$MPIRUN`. Checkpoints go to
$CHECKPOINT_DIR; a restarted launcher resumes from the newest. The image is public
(facts/images.py), so nothing is built first.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from config.workloads import DdpCpuWorkload
from workloads.manifests.healthcheck import training
from workloads.manifests.objects import Context, Step, checkpoint_dir, run_dir

SCRIPT = "ddp_cpu_train.py"
SCRIPT_SOURCE = (Path(__file__).parent / SCRIPT).read_text()
HEREDOC_END = "DDP_CPU_TRAIN_PY"


def launch(workload_name: str, run: DdpCpuWorkload, ctx: Context) -> str:
    """The launcher's training phase: the script onto /shared, then torchrun on every node."""
    rdir = run_dir(ctx, workload_name, run.run_id)
    ckpt = checkpoint_dir(ctx, workload_name, run.run_id)
    args = [f"--steps={run.steps}", f"--checkpoint-every={run.checkpoint_every_steps}"]
    args.append(f"--keep={run.checkpoints_to_keep}")
    if run.interrupt_once_at_step is not None:
        args.append(f"--interrupt-once-at={run.interrupt_once_at_step}")
    command = (
        "torchrun --nproc_per_node=$NPROC_PER_NODE --nnodes=$NNODES --node_rank=$OMPI_COMM_WORLD_RANK"
        f" --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT {SCRIPT} {' '.join(args)}"
    )
    return (
        'echo "== training"\n'
        f"mkdir -p {rdir} {ckpt}\n"
        f"cat > {rdir}/{SCRIPT} <<'{HEREDOC_END}'\n{SCRIPT_SOURCE}{HEREDOC_END}\n"
        f"$MPIRUN bash -c {shlex.quote(f'cd {rdir} && {command}')}\n"
    )


MODEL = DdpCpuWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""


def steps(workload_name: str, run: DdpCpuWorkload, ctx: Context) -> list[Step]:
    """The training MPIJob on the system nodes, after its NetworkPolicy (and its Secret with
    `secretEnv`). No image check: the image is public (nothing to wait for a build of), and its
    pull fits well within Kueue's pods-ready time (30 minutes)."""
    env = {"NPROC_PER_NODE": str(run.processes_per_node), "OMP_NUM_THREADS": "1"}
    return training(workload_name, run, ctx, launch(workload_name, run, ctx), env=env)
