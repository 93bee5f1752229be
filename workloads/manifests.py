"""Pure builders: a workload's config and its node group's facts in, Kubernetes dicts out.

`steps(name, workload, ctx)` returns the ordered steps of one workload. Each step is one
Kubernetes object plus the names of the steps it must follow. Nothing here touches Pulumi,
so the objects can be rendered to YAML for review and validated against the Kubernetes
and MPIJob schemas. `workloads.deploy` applies them.

Every run's checkpoints and logs go to `/shared/<workload>/<runId>/`; data shared by all
runs of a workload (tokenizer, dataset, tokenized corpus, Neuron compile cache) goes to
`/shared/<workload>/data/` and `/shared/<workload>/neuron-cache/`.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from infra import catalog
from infra.config import (
    CustomWorkload,
    Llama2NeuronWorkload,
    ModelConfig,
    NemoGpuWorkload,
    TrainingConfig,
    ranks_per_node,
)
from infra.platform import (
    LAUNCHER_LIMITS,
    LAUNCHER_REQUESTS,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SYSTEM_NODE_GROUP,
    NodeGroupFacts,
)

Workload = Llama2NeuronWorkload | NemoGpuWorkload | CustomWorkload
Obj = dict[str, Any]

MPIJOB_API_VERSION = "kubeflow.org/v2beta1"
HOSTFILE = "/etc/mpi/hostfile"  # where mpi-operator v2 mounts the hostfile in the launcher
MASTER_PORT = 41000
TENSORBOARD_PORT = 6006
# How long a launcher waits for every worker to answer over SSH before it gives up: long
# enough for a lost node to be replaced (EKS node auto repair, then image pull) and its
# worker pod recreated.
WORKER_WAIT_SECONDS = 1800

# Health-check defaults per instance type: (all-reduce size, minimum bus bandwidth GB/s).
# GPU: 90% of the 2-node nccl-tests figures in FACTS.md (p4de 78 GB/s at 2 GiB, p5 487 GB/s
# at 16 GiB), leaving room for run-to-run noise. Neuron: FACTS.md has no nccom-test figure;
# these are floors that catch a fabric running without EFA (TCP gives single-digit GB/s),
# not performance targets; set healthCheck.minBusBandwidthGbps from a healthy run.
HEALTH_CHECK_DEFAULTS: dict[str, tuple[str, float]] = {
    "p4de.24xlarge": ("2G", 70.0),
    "p5.48xlarge": ("16G", 438.0),
    "p5e.48xlarge": ("16G", 438.0),
    "p5en.48xlarge": ("16G", 438.0),
    "trn1.32xlarge": ("2G", 25.0),
    "trn1n.32xlarge": ("2G", 50.0),
    "trn2.48xlarge": ("2G", 50.0),
}

# EFA environment (FACTS.md, awsome-distributed-training efa-cheatsheet): with libfabric
# >= 1.18 and aws-ofi-nccl >= 1.7 FI_EFA_USE_HUGE_PAGE=0 is the one needed setting.
_EFA_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_USE_HUGE_PAGE": "0"}
_ACCELERATOR_ENV = {
    "nvidia": {"NCCL_SOCKET_IFNAME": "^lo,docker,veth", "NCCL_DEBUG": "WARN"},
    "neuron": {"FI_EFA_FORK_SAFE": "1", "CCOM_SOCKET_IFNAME": "eth0", "MALLOC_ARENA_MAX": "64"},
}
# Neuron compiler flags of seed 003 (Amazon Search M5), less the model-specific ones.
_NEURON_CC_FLAGS = "--model-type transformer --distribution-strategy=llm-training --cache_dir="


@dataclass(frozen=True)
class Context:
    """What the builders need from the platform, as plain values."""

    namespace: str
    storage_claim: str
    shared_mount: str
    node_group: NodeGroupFacts
    image: str
    health_check_image: str | None = None
    secret_name: str | None = None
    queue: str | None = None
    """Kueue LocalQueue of the run (`kueue.x-k8s.io/queue-name`); None: not queued."""
    priority_class: str | None = None
    """Kueue WorkloadPriorityClass of the run."""


@dataclass(frozen=True)
class Step:
    """One Kubernetes object of a workload and the steps it must follow."""

    name: str
    """Pulumi resource name (also the object name)."""
    obj: Obj
    after: tuple[str, ...] = ()
    awaited: bool = True
    """Whether `pulumi up` waits for it (steps that later steps follow)."""
    secret_data: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- small pieces


def _labels(workload: str, component: str, run_id: str | None = None) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/name": workload,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "llm-training-eks",
    }
    if run_id:
        labels["llm-training-eks/run-id"] = run_id
    return labels


def _meta(name: str, ctx: Context, labels: dict[str, str], annotations: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": ctx.namespace, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return meta


def _env(values: dict[str, str]) -> list[Obj]:
    return [{"name": k, "value": v} for k, v in sorted(values.items())]


def _shared_volume(ctx: Context) -> Obj:
    return {"name": "shared", "persistentVolumeClaim": {"claimName": ctx.storage_claim}}


def _shared_mount(ctx: Context) -> Obj:
    return {"name": "shared", "mountPath": ctx.shared_mount}


def _on_node_group(ctx: Context) -> Obj:
    ng = ctx.node_group
    return {"nodeSelector": ng.node_selector(), "tolerations": ng.tolerations()}


def _short_hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:8]


def run_dir(ctx: Context, workload: str, run_id: str) -> str:
    """Checkpoints and logs of one run."""
    return f"{ctx.shared_mount}/{workload}/{run_id}"


def checkpoint_dir(ctx: Context, workload: str, run_id: str) -> str:
    """Where a run saves its checkpoints and resumes from: `/shared/<workload>/<runId>/checkpoints`."""
    return f"{run_dir(ctx, workload, run_id)}/checkpoints"


def checkpoint_every_steps(w: Workload) -> int:
    if isinstance(w, CustomWorkload):
        return w.checkpoint_every_steps
    return w.training.checkpoint_every_steps


def data_dir(ctx: Context, workload: str) -> str:
    """Data shared by every run of a workload."""
    return f"{ctx.shared_mount}/{workload}/data"


def ranks(w: Workload, ng: NodeGroupFacts) -> int:
    """Training ranks of a run: nodes x ranks per node."""
    return w.nodes * _ranks_per_node(ng)


def _ranks_per_node(ng: NodeGroupFacts) -> int:
    return ranks_per_node(catalog.ACCELERATED[ng.instance_type])


def base_env(workload: str, w: Workload, ctx: Context, job: str) -> dict[str, str]:
    """Environment of every process of a multi-node job: EFA, rendezvous, run directories."""
    ng = ctx.node_group
    env = {
        **_EFA_ENV,
        **_ACCELERATOR_ENV[ng.accelerator],
        "NNODES": str(w.nodes),
        "NPROC_PER_NODE": str(_ranks_per_node(ng)),
        "MASTER_ADDR": f"{job}-worker-0.{job}.{ctx.namespace}.svc",
        "MASTER_PORT": str(MASTER_PORT),
        "RUN_ID": w.run_id,
        "RUN_DIR": run_dir(ctx, workload, w.run_id),
        "CHECKPOINT_DIR": checkpoint_dir(ctx, workload, w.run_id),
        "CHECKPOINT_EVERY_STEPS": str(checkpoint_every_steps(w)),
        "SHARED_DIR": ctx.shared_mount,
    }
    return {**env, **w.env}


# --------------------------------------------------------------------------- MPIJob


def wait_for_workers(timeout_seconds: int = WORKER_WAIT_SECONDS) -> str:
    """Launcher preamble: wait until every host of the hostfile answers over SSH.

    mpi-operator's `launcherCreationPolicy: WaitForWorkersReady` is not honoured again after
    a suspend/resume (Kueue eviction and readmission; mpi-operator PR #868), and a restarted
    launcher finds a recreated worker still starting. So the launcher waits itself, every
    time it starts, then mpirun runs and training resumes from the latest checkpoint.
    """
    return (
        f"deadline=$((SECONDS + {timeout_seconds}))\n"
        f'for host in $(cut -d" " -f1 {HOSTFILE}); do\n'
        '  until ssh -o ConnectTimeout=5 -o BatchMode=yes -o StrictHostKeyChecking=no "$host" true 2>/dev/null; do\n'
        "    if [ $SECONDS -ge $deadline ]; then\n"
        f'      echo "FAIL: worker $host did not answer within {timeout_seconds}s" >&2; exit 1\n'
        "    fi\n"
        '    echo "waiting for worker $host"; sleep 10\n'
        "  done\n"
        "done\n"
        f'echo "all $(wc -l < {HOSTFILE}) workers answer"\n'
    )


def mpijob(
    workload: str,
    name: str,
    w: Workload,
    ctx: Context,
    *,
    component: str,
    launch: str,
    image: str | None = None,
    awaited: bool = True,
    timeout_seconds: int | None = None,
    env: dict[str, str] | None = None,
    processes_per_node: int = 1,
    backoff_limit: int = 0,
) -> Obj:
    """An MPIJob over `w.nodes` whole nodes of the node group.

    Each worker takes its whole node (every accelerator and EFA device, the allocatable CPU
    and memory, requests = limits so it is the last pod evicted) and a memory-backed
    /dev/shm. The launcher runs on a system node, waits for every worker itself, then runs
    `launch` (a shell script that calls mpirun) with the same environment; it is restarted
    up to `backoff_limit` times. With a queue, the job is labelled for Kueue, which admits
    it all or nothing (its webhook suspends the job until then; we never set `suspend`, so
    `pulumi up` and Kueue do not fight over it).
    """
    ng = ctx.node_group
    image = image or ctx.image
    environment = {**base_env(workload, w, ctx, name), **(env or {})}
    exported = " ".join(f"-x {k}" for k in sorted(environment))
    mpirun = (
        f"mpirun --allow-run-as-root --hostfile {HOSTFILE} --bind-to none --map-by ppr:{processes_per_node}:node"
        f" -np {w.nodes * processes_per_node} {exported}"
    )
    requests = ng.worker_requests()
    labels = _labels(workload, component, w.run_id)
    job_labels = dict(labels)
    if ctx.queue:
        job_labels[QUEUE_LABEL] = ctx.queue
    if ctx.priority_class:
        job_labels[PRIORITY_LABEL] = ctx.priority_class
    annotations = {"pulumi.com/waitFor": "condition=Succeeded"} if awaited else {"pulumi.com/skipAwait": "true"}
    if awaited and timeout_seconds:
        annotations["pulumi.com/timeoutSeconds"] = str(timeout_seconds)
    worker_container = {
        "name": "worker",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # mpi-operator v2 mounts the SSH keys; the image brings sshd (host keys made here).
        "command": ["/bin/bash", "-c", "mkdir -p /run/sshd && ssh-keygen -A && exec /usr/sbin/sshd -De"],
        "env": _env(environment),
        "resources": {"requests": dict(requests), "limits": dict(requests)},
        "volumeMounts": [_shared_mount(ctx), {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    launcher_container = {
        "name": "launcher",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "/bin/bash",
            "-c",
            f"set -euo pipefail\n{wait_for_workers()}export MPIRUN={shlex.quote(mpirun)}\n{launch}",
        ],
        "env": _env(environment),
        # The launcher only runs mpirun (and parses a health check's output) on a system node.
        "resources": {"requests": dict(LAUNCHER_REQUESTS), "limits": dict(LAUNCHER_LIMITS)},
        "volumeMounts": [_shared_mount(ctx)],
    }
    return {
        "apiVersion": MPIJOB_API_VERSION,
        "kind": "MPIJob",
        "metadata": _meta(name, ctx, job_labels, annotations),
        "spec": {
            "slotsPerWorker": _ranks_per_node(ng),
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"backoffLimit": backoff_limit, "cleanPodPolicy": "Running"},
            "sshAuthMountPath": "/root/.ssh",
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "metadata": {"labels": {**labels, "llm-training-eks/role": "launcher"}},
                        "spec": {
                            "nodeSelector": {catalog.NODE_GROUP_LABEL: SYSTEM_NODE_GROUP},
                            "containers": [launcher_container],
                            "volumes": [_shared_volume(ctx)],
                        },
                    },
                },
                "Worker": {
                    "replicas": w.nodes,
                    # A worker whose sshd dies is restarted in place; a worker whose node is
                    # gone is recreated by the operator once its pod is deleted.
                    "restartPolicy": "OnFailure",
                    "template": {
                        "metadata": {"labels": {**labels, "llm-training-eks/role": "worker"}},
                        "spec": {
                            **_on_node_group(ctx),
                            "containers": [worker_container],
                            "volumes": [
                                _shared_volume(ctx),
                                {
                                    "name": "dshm",
                                    "emptyDir": {
                                        "medium": "Memory",
                                        "sizeLimit": f"{ng.allocatable_memory_gib // 4}Gi",
                                    },
                                },
                            ],
                        },
                    },
                },
            },
        },
    }


def node_check(ng: NodeGroupFacts) -> str:
    """Per-node checks, run once on every node before the collective test: the device count
    and the EFA device count the pod was given (against the catalog), then a short
    accelerator self-test. Prints `FAIL <host>: ...` and exits 1 on the first problem.

    Device counts are read from /dev, where the device plugins put exactly what the pod
    was allocated. Self-test: Neuron, a single-node nccom-test all-reduce over every
    NeuronCore (Amazon Search M5's "tensor ops on each device"; HyperPod's nccom local
    test); NVIDIA, DCGM diagnostics level 1 when the image has dcgmi, else a check that no
    GPU reports uncorrectable ECC errors. Not run on hardware in this repository: the
    commands follow the Neuron and DCGM documentation.
    """
    want_dev, want_efa = ng.device_count, ng.efa_count
    if ng.accelerator == "neuron":
        count = "ls /dev/neuron* 2>/dev/null | wc -l"
        kind = "Neuron devices"
        ranks = ranks_per_node(catalog.ACCELERATED[ng.instance_type])
        selftest = (
            f"nccom-test -r {ranks} -b 64M -e 64M -d fp32 allr > /tmp/selftest.out 2>&1"
            ' || { echo "FAIL $h: single-node nccom-test all-reduce failed"; tail -20 /tmp/selftest.out; exit 1; }'
        )
    else:
        count = "nvidia-smi -L | grep -c '^GPU '"
        kind = "GPUs"
        selftest = (
            "if command -v dcgmi >/dev/null; then\n"
            "  nv-hostengine >/dev/null 2>&1 || true\n"
            '  dcgmi diag -r 1 > /tmp/selftest.out 2>&1 || { echo "FAIL $h: dcgmi diag -r 1 failed";'
            " cat /tmp/selftest.out; exit 1; }\n"
            "else\n"
            "  nvidia-smi --query-gpu=ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits"
            " | awk '$1 + 0 > 0 { bad = 1 } END { exit bad }'"
            ' || { echo "FAIL $h: a GPU reports uncorrectable ECC errors"; exit 1; }\n'
            "fi"
        )
    return (
        "h=$(hostname)\n"
        f"dev=$({count})\n"
        f'[ "$dev" -eq {want_dev} ] || {{ echo "FAIL $h: $dev of {want_dev} {kind}"; exit 1; }}\n'
        "efa=$(ls /dev/infiniband/uverbs* 2>/dev/null | wc -l)\n"
        f'[ "$efa" -eq {want_efa} ] || {{ echo "FAIL $h: $efa of {want_efa} EFA devices"; exit 1; }}\n'
        f"{selftest}\n"
        f'echo "OK $h: {want_dev} {kind}, {want_efa} EFA devices, self-test passed"'
    )


def health_check(workload: str, name: str, w: Workload, ctx: Context) -> Obj:
    """An MPIJob over the run's nodes: per-node checks on every node (devices, EFA, a short
    self-test), then the collective test, which fails below the bus-bandwidth threshold."""
    ng = ctx.node_group
    size, floor = HEALTH_CHECK_DEFAULTS[ng.instance_type]
    size = w.health_check.message_size or size
    floor = w.health_check.min_bus_bandwidth_gbps or floor
    total = ranks(w, ng)
    if ng.accelerator == "neuron":
        test = (
            f'hosts=$(cut -d" " -f1 {HOSTFILE} | tr "\\n" " ")\n'
            f"nccom-test -r {total} -N {w.nodes} -b {size} -e {size} -d fp32 allr --hosts $hosts | tee /tmp/out\n"
            "bw=$(awk '/Avg bus bandwidth/ {v=$NF; sub(/GB\\/s/, \"\", v); print v}' /tmp/out)"
        )
    else:
        per_node = ng.device_count
        test = (
            f"mpirun --allow-run-as-root --hostfile {HOSTFILE} --bind-to none --map-by ppr:{per_node}:node"
            f" -np {total} $(env | cut -d= -f1 | grep -E '^(FI_|NCCL_)' | sed 's/^/-x /' | tr '\\n' ' ')"
            f" /opt/nccl-tests/build/all_reduce_perf -b {size} -e {size} -f 2 -g 1 -c 1 -n 50 | tee /tmp/out\n"
            "bw=$(awk '/Avg bus bandwidth/ {print $NF}' /tmp/out)"
        )
    gate = (
        f'awk -v bw="${{bw:-0}}" -v min={floor:g} \'BEGIN {{ if (bw + 0 < min) {{ printf "FAIL: all-reduce bus'
        f' bandwidth %s GB/s is below %s GB/s\\n", bw, min; exit 1 }}; printf "OK: all-reduce bus bandwidth'
        f" %s GB/s >= %s GB/s\\n\", bw, min }}'"
    )
    return mpijob(
        workload,
        name,
        w,
        ctx,
        component="health-check",
        launch=f"$MPIRUN bash -c {shlex.quote(node_check(ng))}\n{test}\n{gate}",
        image=ctx.health_check_image,
        timeout_seconds=1800,
    )


# --------------------------------------------------------------------------- Jobs, TensorBoard, shell


def job(name: str, ctx: Context, labels: dict[str, str], script: str, *, env: list[Obj], timeout: int) -> Obj:
    """A one-pod data-preparation Job on the node group (CPU only: no devices taken).

    No ttlSecondsAfterFinished: a Job that vanished would be recreated (and rerun) by the
    next `pulumi up`. The script itself skips work whose output is already marked done.
    """
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, ctx, labels, {"pulumi.com/timeoutSeconds": str(timeout)}),
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    **_on_node_group(ctx),
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": ctx.image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/bash", "-c", "set -euo pipefail\n" + script],
                            "env": env,
                            "resources": {
                                "requests": {"cpu": "4", "memory": "16Gi"},
                                "limits": {"memory": f"{ctx.node_group.allocatable_memory_gib // 2}Gi"},
                            },
                            "volumeMounts": [_shared_mount(ctx)],
                        }
                    ],
                    "volumes": [_shared_volume(ctx)],
                },
            },
        },
    }


def tensorboard(workload: str, ctx: Context) -> list[Obj]:
    """A TensorBoard Deployment and ClusterIP Service over every run of the workload."""
    name = f"{workload}-tensorboard"
    labels = _labels(workload, "tensorboard")
    logdir = f"{ctx.shared_mount}/{workload}"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, ctx, labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "tensorboard",
                            "image": ctx.image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": [
                                "tensorboard",
                                "--logdir",
                                logdir,
                                "--bind_all",
                                "--port",
                                str(TENSORBOARD_PORT),
                            ],
                            "ports": [{"name": "http", "containerPort": TENSORBOARD_PORT}],
                            "readinessProbe": {"tcpSocket": {"port": TENSORBOARD_PORT}, "periodSeconds": 10},
                            "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
                            "volumeMounts": [{**_shared_mount(ctx), "readOnly": True}],
                        }
                    ],
                    "volumes": [_shared_volume(ctx)],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, ctx, labels),
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [{"name": "http", "port": TENSORBOARD_PORT, "targetPort": "http"}],
        },
    }
    return [deployment, service]


def shell_pod(workload: str, ctx: Context) -> Obj:
    """A pod to look at (and edit) /shared: `kubectl exec -it <workload>-shell -- bash`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(f"{workload}-shell", ctx, _labels(workload, "shell")),
        "spec": {
            "containers": [
                {
                    "name": "shell",
                    "image": ctx.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "infinity"],
                    "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
                    "volumeMounts": [_shared_mount(ctx)],
                }
            ],
            "volumes": [_shared_volume(ctx)],
        },
    }


# --------------------------------------------------------------------------- recipes


def _nemo_overrides(
    workload: str, w: Workload, m: ModelConfig, t: TrainingConfig, ctx: Context, steps: int
) -> list[str]:
    """Hydra overrides of megatron_gpt_pretraining.py shared by neuronx-nemo-megatron and NeMo."""
    ng = ctx.node_group
    out = [
        f"trainer.devices={_ranks_per_node(ng)}",
        f"trainer.num_nodes={w.nodes}",
        f"trainer.max_steps={steps}",
        "trainer.log_every_n_steps=1",
        # Logs in the run directory, checkpoints in <run dir>/checkpoints; a restarted launcher
        # resumes from the latest one there (none yet: start from scratch).
        f"exp_manager.explicit_log_dir={run_dir(ctx, workload, w.run_id)}",
        "exp_manager.create_tensorboard_logger=True",
        "exp_manager.resume_if_exists=True",
        "exp_manager.resume_ignore_no_checkpoint=True",
        "exp_manager.create_checkpoint_callback=True",
        f"+exp_manager.checkpoint_callback_params.every_n_train_steps={t.checkpoint_every_steps}",
        f"model.micro_batch_size={m.micro_batch_size}",
        f"model.global_batch_size={m.global_batch_size}",
        f"model.tensor_model_parallel_size={m.tensor_parallel}",
        f"model.pipeline_model_parallel_size={m.pipeline_parallel}",
        f"model.sequence_parallel={m.sequence_parallel and m.tensor_parallel > 1}",
        f"model.encoder_seq_length={m.seq_length}",
        f"model.max_position_embeddings={m.seq_length}",
        f"model.num_layers={m.num_layers}",
        f"model.hidden_size={m.hidden_size}",
        f"model.ffn_hidden_size={m.ffn_hidden_size}",
        f"model.num_attention_heads={m.num_attention_heads}",
        f"model.num_query_groups={m.num_kv_heads}",
        "model.optim.name=adamw",
        f"model.optim.lr={t.learning_rate:g}",
        f"model.optim.betas=[{t.adam_beta1:g},{t.adam_beta2:g}]",
        f"model.optim.weight_decay={t.weight_decay:g}",
        "model.optim.sched.name=CosineAnnealing",
        f"model.optim.sched.warmup_steps={t.warmup_steps}",
        f"model.optim.sched.constant_steps={t.constant_steps}",
        f"model.optim.sched.min_lr={t.min_learning_rate:g}",
    ]
    return out


def _torchrun(code_dir: str, script: str, args: list[str], prefix: str = "") -> str:
    """The per-node command mpirun starts once on each node."""
    torchrun = (
        f"{prefix}torchrun --nproc_per_node=$NPROC_PER_NODE --nnodes=$NNODES --node_rank=$OMPI_COMM_WORLD_RANK"
        f" --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT {script} " + " ".join(shlex.quote(a) for a in args)
    )
    return f"$MPIRUN bash -c {shlex.quote(f'cd {code_dir} && {torchrun}')}"


def llama2_steps(workload: str, w: Llama2NeuronWorkload, ctx: Context) -> list[Step]:
    """Secret -> tokenizer -> dataset -> tokenize -> precompile -> health check -> train, plus
    TensorBoard and the optional shell pod."""
    data = data_dir(ctx, workload)
    m, t = w.model, w.training
    labels = _labels(workload, "data")
    secret = f"{workload}-hf-token"
    hf_env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "HF_TOKEN"}}}]
    # Data steps are named by what they produce, not by run: a new runId reuses them.
    tok_name = f"{workload}-tokenizer-{_short_hash(w.data.tokenizer)}"
    ds_name = f"{workload}-dataset-{_short_hash(w.data.dataset, w.data.include)}"
    tokenized_key = _short_hash(w.data.tokenizer, w.data.dataset, w.data.include)
    tokenize_name = f"{workload}-tokenize-{tokenized_key}"
    tok_dir = f"{data}/tokenizer-{_short_hash(w.data.tokenizer)}"
    ds_dir = f"{data}/dataset-{_short_hash(w.data.dataset, w.data.include)}"
    out_dir = f"{data}/tokenized-{tokenized_key}"
    vcpus = ctx.node_group.vcpus

    secret_obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _meta(secret, ctx, _labels(workload, "secret")),
    }
    tokenizer_job = job(
        tok_name,
        ctx,
        labels,
        f"test -f {tok_dir}/.done && {{ echo 'tokenizer already downloaded'; exit 0; }}\n"
        f"huggingface-cli download {w.data.tokenizer} tokenizer.model tokenizer.json tokenizer_config.json"
        f" special_tokens_map.json --local-dir {tok_dir}\n"
        f"touch {tok_dir}/.done",
        env=hf_env,
        timeout=1800,
    )
    dataset_job = job(
        ds_name,
        ctx,
        labels,
        f"test -f {ds_dir}/.done && {{ echo 'dataset already downloaded'; exit 0; }}\n"
        f"huggingface-cli download --repo-type dataset {w.data.dataset} --include {shlex.quote(w.data.include)}"
        f" --local-dir {ds_dir}\n"
        f"touch {ds_dir}/.done",
        env=hf_env,
        timeout=4 * 3600,
    )
    tokenize_job = job(
        tokenize_name,
        ctx,
        labels,
        f"test -f {out_dir}/.done && {{ echo 'corpus already tokenized'; exit 0; }}\n"
        f"mkdir -p {out_dir}\n"
        f"find {ds_dir} -name {shlex.quote(w.data.include)} -print0 | sort -z | xargs -0 cat > {out_dir}/corpus.jsonl\n"
        "python3 /workspace/neuronx-nemo-megatron/nemo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"
        f" --input={out_dir}/corpus.jsonl --json-keys=text --tokenizer-library=huggingface"
        f" --tokenizer-type={tok_dir} --dataset-impl=mmap --output-prefix={out_dir}/corpus"
        f" --append-eod --need-pad-id --workers={vcpus}\n"
        f"rm {out_dir}/corpus.jsonl\n"
        f"touch {out_dir}/.done",
        env=[],
        timeout=6 * 3600,
    )
    cache = f"{ctx.shared_mount}/{workload}/neuron-cache"
    neuron_env = {
        "NEURON_COMPILE_CACHE_URL": cache,
        "NEURON_CC_FLAGS": f"{_NEURON_CC_FLAGS}{cache}",
        "NEURON_FUSE_SOFTMAX": "1",
        "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3",
        "XLA_USE_BF16": "1",
    }
    data_args = [f"model.tokenizer.type={tok_dir}", f"model.data.data_prefix=[1.0,{out_dir}/corpus_text_document]"]

    def overrides(steps: int) -> list[str]:
        return [*_nemo_overrides(workload, w, m, t, ctx, steps), *data_args]

    precompile_name = f"{workload}-{w.run_id}-precompile"
    health_name = f"{workload}-{w.run_id}-healthcheck"
    train_name = f"{workload}-{w.run_id}-train"
    script = "megatron_gpt_pretraining.py --config-path=conf --config-name=megatron_llama_config"
    precompile = mpijob(
        workload,
        precompile_name,
        w,
        ctx,
        component="precompile",
        launch=_torchrun(w.code_dir, script, overrides(w.precompile_steps), prefix="neuron_parallel_compile "),
        env=neuron_env,
        timeout_seconds=4 * 3600,
        backoff_limit=w.max_retries,
    )
    train = mpijob(
        workload,
        train_name,
        w,
        ctx,
        component="train",
        launch=_torchrun(w.code_dir, script, overrides(t.max_steps)),
        env=neuron_env,
        awaited=False,
        backoff_limit=w.max_retries,
    )
    steps = [
        Step(secret, secret_obj, secret_data={"HF_TOKEN": ""}),
        Step(tok_name, tokenizer_job, after=(secret,)),
        Step(ds_name, dataset_job, after=(tok_name,)),
        Step(tokenize_name, tokenize_job, after=(ds_name,)),
        Step(precompile_name, precompile, after=(tokenize_name,)),
    ]
    steps += _gated_training(workload, w, ctx, health_name, train_name, train, after=(precompile_name,))
    steps.extend(_extras(workload, ctx, tensorboard_on=w.tensorboard, shell_on=w.shell))
    return steps


def nemo_steps(workload: str, w: NemoGpuWorkload, ctx: Context) -> list[Step]:
    """Health check -> NeMo pretraining MPIJob, plus TensorBoard."""
    health_name = f"{workload}-{w.run_id}-healthcheck"
    train_name = f"{workload}-{w.run_id}-train"
    data = (
        [f"model.data.data_prefix=[1.0,{w.data_prefix}]"]
        if w.data_prefix
        else ["model.data.data_impl=mock", "model.data.data_prefix=[]"]
    )
    args = [
        *_nemo_overrides(workload, w, w.model, w.training, ctx, w.training.max_steps),
        "trainer.precision=bf16-mixed",
        *data,
        *(f"{k}={v}" for k, v in sorted(w.overrides.items())),
    ]
    script = f"megatron_gpt_pretraining.py --config-path=conf --config-name={w.config_name}"
    train = mpijob(
        workload,
        train_name,
        w,
        ctx,
        component="train",
        launch=_torchrun(w.code_dir, script, args),
        awaited=False,
        backoff_limit=w.max_retries,
    )
    steps = _gated_training(workload, w, ctx, health_name, train_name, train, after=())
    steps.extend(_extras(workload, ctx, tensorboard_on=w.tensorboard, shell_on=False))
    return steps


def custom_steps(workload: str, w: CustomWorkload, ctx: Context) -> list[Step]:
    """Health check -> the user's command on every node, with the same plumbing."""
    health_name = f"{workload}-{w.run_id}-healthcheck"
    train_name = f"{workload}-{w.run_id}-train"
    command = shlex.join(w.command)
    if w.working_dir:
        command = f"cd {shlex.quote(w.working_dir)} && {command}"
    # The command must save to $CHECKPOINT_DIR every $CHECKPOINT_EVERY_STEPS steps and resume
    # from the latest checkpoint there when it starts (README: Bring your own model).
    per_node = f"export NODE_RANK=$OMPI_COMM_WORLD_RANK; mkdir -p $RUN_DIR $CHECKPOINT_DIR; {command}"
    launch = f"$MPIRUN bash -c {shlex.quote(per_node)}"
    train = mpijob(
        workload,
        train_name,
        w,
        ctx,
        component="train",
        launch=launch,
        awaited=False,
        processes_per_node=w.processes_per_node,
        backoff_limit=w.max_retries,
    )
    steps = _gated_training(workload, w, ctx, health_name, train_name, train, after=())
    steps.extend(_extras(workload, ctx, tensorboard_on=w.tensorboard, shell_on=False))
    return steps


def _gated_training(
    workload: str,
    w: Workload,
    ctx: Context,
    health_name: str,
    train_name: str,
    train: Obj,
    *,
    after: tuple[str, ...],
) -> list[Step]:
    """The health check (when enabled) after `after`, then training after it; training is
    never awaited, so `pulumi up` does not block for the run."""
    steps: list[Step] = []
    if w.health_check.enabled:
        steps.append(Step(health_name, health_check(workload, health_name, w, ctx), after=after))
        after = (health_name,)
    steps.append(Step(train_name, train, after=after, awaited=False))
    return steps


def _extras(workload: str, ctx: Context, *, tensorboard_on: bool, shell_on: bool) -> list[Step]:
    out: list[Step] = []
    if tensorboard_on:
        deployment, service = tensorboard(workload, ctx)
        out.append(Step(f"{workload}-tensorboard", deployment))
        out.append(Step(f"{workload}-tensorboard-svc", service))
    if shell_on:
        out.append(Step(f"{workload}-shell", shell_pod(workload, ctx)))
    return out


def steps(workload: str, w: Workload, ctx: Context) -> list[Step]:
    """Every step of one workload, in order."""
    if isinstance(w, Llama2NeuronWorkload):
        return llama2_steps(workload, w, ctx)
    if isinstance(w, NemoGpuWorkload):
        return nemo_steps(workload, w, ctx)
    return custom_steps(workload, w, ctx)
