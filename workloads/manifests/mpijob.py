"""The MPIJob every multi-node step runs as: whole-node workers with sshd, a launcher on a
system node that waits for them and runs mpirun."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from config.workloads import RunConfig, TrainingRun
from facts.awaits import SKIP_AWAIT, TIMEOUT, TRUE, WAIT_FOR
from facts.names import NODE_GROUP_LABEL, PRIORITY_LABEL, QUEUE_LABEL, ROLE_LABEL, SYSTEM_NODE_GROUP
from infra.platform import LAUNCHER_LIMITS, LAUNCHER_REQUESTS
from workloads.manifests.objects import (
    Context,
    Obj,
    checkpoint_dir,
    env_list,
    labels,
    meta,
    on_node_group,
    run_dir,
    shared_mount,
    shared_volume,
)
from workloads.manifests.security import (
    WORKER_CAPABILITIES,
    WORKER_EXCEPTION,
    container_security,
    pod_security,
    privileged_exception,
)

MPIJOB_API_VERSION = "kubeflow.org/v2beta1"
HOSTFILE = "/etc/mpi/hostfile"  # where mpi-operator v2 mounts the hostfile in the launcher
# The rendezvous port torchrun binds on the first worker: PyTorch's default, below Linux's ephemeral
# range (32768-60999, the kernel's default in every pod's network namespace; the AMI leaves it). The
# upstream scripts' 41000 is inside it: they reserve it with net.ipv4.ip_local_reserved_ports on
# the host, which an unprivileged pod cannot, so an outgoing connection could hold it first.
MASTER_PORT = 29500
# How long a launcher waits for every worker to answer over SSH before it gives up: long
# enough for a lost node to be replaced (EKS node auto repair, then image pull) and its
# worker pod recreated.
WORKER_WAIT_SECONDS = 1800
WORKER_POLL_SECONDS = 10
WAIT_ENV, POLL_ENV = "WORKER_WAIT_SECONDS", "WORKER_POLL_SECONDS"
# ssh options of the launcher's ssh (wait loop and mpirun): `~/.ssh` is the operator's read-only
# Secret mount, so known_hosts cannot be written, and a recreated worker has new host keys;
# BatchMode makes a refused key fail at once instead of prompting.
SSH_OPTIONS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
# The mpi-operator base image sets StrictModes no: the Secret volume at ~/.ssh is a
# world-writable tmpfs, which sshd's StrictModes refuses (kubernetes/kubernetes#61049).
SSH_PORT = 22
SSHD_COMMAND = "mkdir -p /run/sshd && ssh-keygen -A && exec /usr/sbin/sshd -De -o StrictModes=no"
FORWARDED = ("PATH", "LD_LIBRARY_PATH")

# EFA environment (aws-samples/awsome-distributed-training, 1.architectures/efa-cheatsheet.md):
# with libfabric >= 1.18 and aws-ofi-nccl >= 1.7, FI_EFA_USE_HUGE_PAGE=0 is the one needed setting.
_EFA_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_USE_HUGE_PAGE": "0"}
_ACCELERATOR_ENV = {
    "nvidia": {"NCCL_SOCKET_IFNAME": "^lo,docker,veth", "NCCL_DEBUG": "WARN"},
    "neuron": {"FI_EFA_FORK_SAFE": "1", "CCOM_SOCKET_IFNAME": "eth0", "MALLOC_ARENA_MAX": "64"},
}


@dataclass(frozen=True)
class MPIJobSpec:
    """One MPIJob step of a run: what it is called, what its launcher runs, how it is awaited."""

    name: str
    component: str
    launch: str
    """Shell script of the launcher after it has waited for the workers; `$MPIRUN` is set."""
    image: str | None = None
    """Default: the run's image."""
    awaited: bool = True
    """`pulumi up` waits for the job to succeed (steps that later steps follow)."""
    timeout_seconds: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    processes_per_node: int = 1
    backoff_limit: int = 0
    """Restarts of the launcher after a failure (runPolicy.backoffLimit)."""


def base_env(workload_name: str, run: RunConfig, ctx: Context, job: str) -> dict[str, str]:
    """Environment of every process of a multi-node job: EFA and the accelerator's settings
    (none on the system node group's CPUs), rendezvous, run directories."""
    ng = ctx.node_group
    env = {
        **(_EFA_ENV if ng.instance.efa else {}),
        **(_ACCELERATOR_ENV[ng.accelerator] if ng.accelerated else {}),
        "NNODES": str(run.nodes),
        "NPROC_PER_NODE": str(ng.slots_per_worker),
        "MASTER_ADDR": f"{job}-worker-0.{job}.{ctx.namespace}.svc",
        "MASTER_PORT": str(MASTER_PORT),
        "RUN_ID": run.run_id,
        "RUN_DIR": run_dir(ctx, workload_name, run.run_id),
        "CHECKPOINT_DIR": checkpoint_dir(ctx, workload_name, run.run_id),
        "SHARED_DIR": ctx.shared_mount,
    }
    if isinstance(run, TrainingRun) and run.checkpoint_interval is not None:
        env["CHECKPOINT_EVERY_STEPS"] = str(run.checkpoint_interval)
    return {**env, **run.env}


def wait_for_workers(timeout_seconds: int = WORKER_WAIT_SECONDS) -> str:
    """Launcher preamble: wait until every host of the hostfile answers over SSH.

    mpi-operator's `launcherCreationPolicy: WaitForWorkersReady` is not honoured again after
    a suspend/resume (Kueue eviction and readmission; mpi-operator PR #868), and a restarted
    launcher finds a recreated worker still starting. So the launcher waits itself, every
    time it starts, then mpirun runs and training resumes from the latest checkpoint.
    `$WORKER_WAIT_SECONDS` / `$WORKER_POLL_SECONDS` in the launcher's environment override the
    wait and the poll interval (the launch-chain tests use seconds, not half an hour).
    """
    return (
        f"wait_s=${{{WAIT_ENV}:-{timeout_seconds}}}; poll_s=${{{POLL_ENV}:-{WORKER_POLL_SECONDS}}}\n"
        "deadline=$((SECONDS + wait_s))\n"
        f'for host in $(cut -d" " -f1 {HOSTFILE}); do\n'
        f'  until ssh {SSH_OPTIONS} -o ConnectTimeout=5 "$host" true 2>/dev/null; do\n'
        "    if [ $SECONDS -ge $deadline ]; then\n"
        '      echo "FAIL: worker $host did not answer within ${wait_s}s" >&2; exit 1\n'
        "    fi\n"
        '    echo "waiting for worker $host"; left=$((deadline - SECONDS))\n'
        "    sleep $((left < poll_s ? (left > 0 ? left : 1) : poll_s))\n"
        "  done\n"
        "done\n"
        f'echo "all $(wc -l < {HOSTFILE}) workers answer"\n'
    )


def mpirun_command(nodes: int, per_node: int, exported: list[str], mpirun: str = "mpirun") -> str:
    """mpirun over the hostfile, `per_node` processes on each node, forwarding `exported` and
    always PATH and LD_LIBRARY_PATH: ranks are started by sshd, whose sessions get sshd's
    default environment, not the image's ENV (the MPI examples of awsome-distributed-training
    and Data on EKS pass the same two). `-x` reaches the ranks, not the daemon (orted) that
    starts them: `mpirun` is the image's by absolute path (Context.mpirun), Open MPI's implicit
    --prefix, so orted is found on every host whatever sshd's PATH there."""
    forwarded = " ".join(f"-x {k}" for k in ["PATH", "LD_LIBRARY_PATH", *sorted(set(exported) - set(FORWARDED))])
    return (
        f"{mpirun} --allow-run-as-root --hostfile {HOSTFILE} --bind-to none --map-by ppr:{per_node}:node"
        f" -np {nodes * per_node} {forwarded}"
    )


def launcher_setup() -> str:
    """Launcher preamble: the ssh options of every ssh mpirun starts, set here and not left to
    the image's ssh_config (kubeflow/mpi-operator#580). The operator sets OMPI_MCA_plm_rsh_args
    in the launcher's env after ours (so an `env` entry of ours would lose); the script's
    export wins, and keeps the operator's ConnectionAttempts=10."""
    return (
        f"export OMPI_MCA_plm_rsh_args='-o ConnectionAttempts=10 {SSH_OPTIONS}'\n"
        # `-x LD_LIBRARY_PATH` of a variable the image does not set only draws a warning.
        'export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"\n'
    )


def secret_env_name(workload_name: str) -> str:
    """The Secret that holds a workload's `secretEnv` values."""
    return f"{workload_name}-env"


def process_env(workload_name: str, run: RunConfig, environment: dict[str, str]) -> list[Obj]:
    """The containers' environment: plain values, then each `secretEnv` name taken from the
    workload's Secret (never its value in the object)."""
    secret = secret_env_name(workload_name)
    refs = [{"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k}}} for k in sorted(run.secret_env)]
    return [*env_list(environment), *refs]


def _worker(
    workload_name: str, run: RunConfig, ctx: Context, image: str, environment: dict[str, str], pod_labels: Obj
) -> Obj:
    """Each worker takes its whole node (every accelerator and EFA device, the allocatable CPU
    and memory; a quarter of a system node for CPU runs), requests = limits so it is the last
    pod evicted, and a memory-backed /dev/shm. It runs sshd as root with the capabilities sshd
    needs (workloads.manifests.security)."""
    requests = ctx.node_group.worker_requests()
    container = {
        "name": "worker",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # mpi-operator v2 mounts the SSH keys; the image brings sshd (host keys made here).
        "command": ["/bin/bash", "-c", SSHD_COMMAND],
        # Ready once sshd listens: what the launcher (and Kueue's waitForPodsReady) wait for.
        # No liveness probe: a worker that stops answering under load must not be killed for it.
        "readinessProbe": {"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 10},
        "env": process_env(workload_name, run, environment),
        "resources": {"requests": dict(requests), "limits": dict(requests)},
        "securityContext": container_security(add=WORKER_CAPABILITIES),
        "volumeMounts": [shared_mount(ctx), {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    dshm = {"medium": "Memory", "sizeLimit": f"{ctx.node_group.shm_gib}Gi"}
    return {
        "replicas": run.nodes,
        # A worker whose sshd dies is restarted in place; a worker whose node is gone is
        # recreated by the operator once its pod is deleted.
        "restartPolicy": "OnFailure",
        "template": {
            "metadata": {"labels": {**pod_labels, ROLE_LABEL: "worker"}},
            "spec": {
                **on_node_group(ctx),
                **pod_security(non_root=False),
                "containers": [container],
                "volumes": [shared_volume(ctx), {"name": "dshm", "emptyDir": dshm}],
            },
        },
    }


def _launcher(
    workload_name: str,
    run: RunConfig,
    spec: MPIJobSpec,
    ctx: Context,
    image: str,
    environment: dict[str, str],
    pod_labels: Obj,
) -> Obj:
    """The launcher waits for every worker, then runs the step's script with `$MPIRUN` set; as
    root (the operator's key at /root/.ssh), without any capability."""
    mpirun = mpirun_command(run.nodes, spec.processes_per_node, [*environment, *run.secret_env], ctx.mpirun)
    container = {
        "name": "launcher",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "/bin/bash",
            "-c",
            f"set -euo pipefail\n{launcher_setup()}{wait_for_workers()}"
            f"export MPIRUN={shlex.quote(mpirun)}\n{spec.launch}",
        ],
        "env": process_env(workload_name, run, environment),
        # The launcher only runs mpirun (and parses a health check's output) on a system node.
        "resources": {"requests": dict(LAUNCHER_REQUESTS), "limits": dict(LAUNCHER_LIMITS)},
        "securityContext": container_security(),
        "volumeMounts": [shared_mount(ctx)],
    }
    return {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "metadata": {"labels": {**pod_labels, ROLE_LABEL: "launcher"}},
            "spec": {
                "nodeSelector": {NODE_GROUP_LABEL: SYSTEM_NODE_GROUP},
                **pod_security(non_root=False),
                "containers": [container],
                "volumes": [shared_volume(ctx)],
            },
        },
    }


def mpijob(workload_name: str, run: RunConfig, ctx: Context, spec: MPIJobSpec) -> Obj:
    """An MPIJob over `run.nodes` whole nodes of the node group.

    The launcher runs on a system node and is restarted up to `spec.backoff_limit` times. With
    a queue, the job is labelled for Kueue, which admits it all or nothing (its webhook
    suspends the job until then; we never set `suspend`, so `pulumi up` and Kueue do not
    fight over it).
    """
    image = spec.image or ctx.image
    # The run's own `env` last: it tunes what the recipe sets (config keeps it off the platform's variables).
    environment = {**base_env(workload_name, run, ctx, spec.name), **spec.env, **run.env}
    pod_labels = labels(workload_name, spec.component, run.run_id, internet=run.internet_egress)
    job_labels = dict(pod_labels)
    if ctx.queue:
        job_labels[QUEUE_LABEL] = ctx.queue
    if ctx.priority_class:
        job_labels[PRIORITY_LABEL] = ctx.priority_class
    annotations = {WAIT_FOR: "condition=Succeeded"} if spec.awaited else {SKIP_AWAIT: TRUE}
    if spec.awaited and spec.timeout_seconds:
        annotations[TIMEOUT] = str(spec.timeout_seconds)
    annotations.update(privileged_exception("worker", WORKER_EXCEPTION))
    return {
        "apiVersion": MPIJOB_API_VERSION,
        "kind": "MPIJob",
        "metadata": meta(spec.name, ctx, job_labels, annotations),
        "spec": {
            "slotsPerWorker": ctx.node_group.slots_per_worker,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"backoffLimit": spec.backoff_limit, "cleanPodPolicy": "Running"},
            "sshAuthMountPath": "/root/.ssh",
            "mpiReplicaSpecs": {
                "Launcher": _launcher(workload_name, run, spec, ctx, image, environment, pod_labels),
                "Worker": _worker(workload_name, run, ctx, image, environment, pod_labels),
            },
        },
    }
