"""The small Kubernetes objects every recipe shares, and the shape of a step.

Every run's checkpoints and logs go to `/shared/<workload>/<runId>/`; data shared by all
runs of a workload (tokenizer, dataset, tokenized corpus, Neuron compile cache) goes to
`/shared/<workload>/data/` and `/shared/<workload>/neuron-cache/`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from config.workloads import RunConfig
from facts.names import RUN_ID_LABEL, app_labels
from infra.platform import NodeGroupFacts

Obj = dict[str, Any]
TENSORBOARD_PORT = 6006
# Data Jobs run on an accelerated node before its training starts (CPU only, no devices): 32
# CPUs, the worker count neuronx-nemo-megatron's tutorial tokenizes with.
DATA_JOB_CPUS = 32
SMALL_POD = {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}}
"""TensorBoard, the shell pod and the image check: every pod has CPU and memory requests and limits."""


@dataclass(frozen=True)
class Context:
    """What the builders need from the platform, as plain values."""

    namespace: str
    storage_claim: str
    shared_mount: str
    node_group: NodeGroupFacts
    image: str
    queue: str | None = None
    """Kueue LocalQueue of the run (`kueue.x-k8s.io/queue-name`); None: not queued."""
    priority_class: str | None = None
    """Kueue WorkloadPriorityClass of the run."""


@dataclass(frozen=True)
class Step:
    """One Kubernetes object of a workload and the steps it must follow."""

    name: str
    """Pulumi resource name (also the object name)."""
    role: str
    """What the step is in its recipe (one of the recipe's STEPS)."""
    obj: Obj
    after: tuple[str, ...] = ()
    awaited: bool = True
    """Whether `pulumi up` waits for it (steps that later steps follow)."""
    secret_data: dict[str, str] = field(default_factory=dict)


def labels(workload_name: str, component: str, run_id: str | None = None) -> dict[str, str]:
    out = app_labels(component, workload_name)
    if run_id:
        out[RUN_ID_LABEL] = run_id
    return out


def meta(name: str, ctx: Context, object_labels: dict[str, str], annotations: dict[str, str] | None = None) -> Obj:
    out: Obj = {"name": name, "namespace": ctx.namespace, "labels": object_labels}
    if annotations:
        out["annotations"] = annotations
    return out


def env_list(values: dict[str, str]) -> list[Obj]:
    return [{"name": k, "value": v} for k, v in sorted(values.items())]


def shared_volume(ctx: Context) -> Obj:
    return {"name": "shared", "persistentVolumeClaim": {"claimName": ctx.storage_claim}}


def shared_mount(ctx: Context) -> Obj:
    return {"name": "shared", "mountPath": ctx.shared_mount}


def on_node_group(ctx: Context) -> Obj:
    ng = ctx.node_group
    return {"nodeSelector": ng.node_selector(), "tolerations": ng.tolerations()}


def short_hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:8]


def run_dir(ctx: Context, workload_name: str, run_id: str) -> str:
    """Checkpoints and logs of one run."""
    return f"{ctx.shared_mount}/{workload_name}/{run_id}"


def checkpoint_dir(ctx: Context, workload_name: str, run_id: str) -> str:
    """Where a run saves its checkpoints and resumes from: `/shared/<workload>/<runId>/checkpoints`."""
    return f"{run_dir(ctx, workload_name, run_id)}/checkpoints"


def data_dir(ctx: Context, workload_name: str) -> str:
    """Data shared by every run of a workload."""
    return f"{ctx.shared_mount}/{workload_name}/data"


def job(
    name: str,
    ctx: Context,
    job_labels: dict[str, str],
    script: str,
    *,
    env: list[Obj],
    timeout: int,
    resources: Obj | None = None,
) -> Obj:
    """A one-pod data-preparation Job on the node group (CPU only: no devices taken).

    No ttlSecondsAfterFinished: a Job that vanished would be recreated (and rerun) by the
    next `pulumi up`. The script itself skips work whose output is already marked done.
    """
    memory = f"{ctx.node_group.instance.allocatable_memory_gib // 2}Gi"
    cpus = str(DATA_JOB_CPUS)
    resources = resources or {"requests": {"cpu": cpus, "memory": "64Gi"}, "limits": {"cpu": cpus, "memory": memory}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(name, ctx, job_labels, {"pulumi.com/timeoutSeconds": str(timeout)}),
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {"labels": job_labels},
                "spec": {
                    **on_node_group(ctx),
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": ctx.image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/bash", "-c", "set -euo pipefail\n" + script],
                            "env": env,
                            "resources": resources,
                            "volumeMounts": [shared_mount(ctx)],
                        }
                    ],
                    "volumes": [shared_volume(ctx)],
                },
            },
        },
    }


def tensorboard(workload_name: str, ctx: Context) -> list[Obj]:
    """A TensorBoard Deployment and ClusterIP Service over every run of the workload."""
    name = f"{workload_name}-tensorboard"
    tb_labels = labels(workload_name, "tensorboard")
    container = {
        "name": "tensorboard",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "tensorboard",
            "--logdir",
            f"{ctx.shared_mount}/{workload_name}",
            "--bind_all",
            "--port",
            str(TENSORBOARD_PORT),
        ],
        "ports": [{"name": "http", "containerPort": TENSORBOARD_PORT}],
        "readinessProbe": {"tcpSocket": {"port": TENSORBOARD_PORT}, "periodSeconds": 10},
        "resources": SMALL_POD,
        "volumeMounts": [{**shared_mount(ctx), "readOnly": True}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(name, ctx, tb_labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": tb_labels},
            "template": {
                "metadata": {"labels": tb_labels},
                "spec": {"containers": [container], "volumes": [shared_volume(ctx)]},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, ctx, tb_labels),
        "spec": {
            "type": "ClusterIP",
            "selector": tb_labels,
            "ports": [{"name": "http", "port": TENSORBOARD_PORT, "targetPort": "http"}],
        },
    }
    return [deployment, service]


def shell_pod(workload_name: str, ctx: Context) -> Obj:
    """A pod to look at (and edit) /shared: `kubectl exec -it <workload>-shell -- bash`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta(f"{workload_name}-shell", ctx, labels(workload_name, "shell")),
        "spec": {
            "containers": [
                {
                    "name": "shell",
                    "image": ctx.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "infinity"],
                    "resources": SMALL_POD,
                    "volumeMounts": [shared_mount(ctx)],
                }
            ],
            "volumes": [shared_volume(ctx)],
        },
    }


def image_check(workload_name: str, ctx: Context, run: RunConfig) -> Step:
    """A Job that runs the run's image once on its node group. `pulumi up` waits for it, so the
    steps after it neither race the stack's image build (infra/images.py, AWS CodeBuild: the
    pods pull once the build has pushed) nor spend their own time limits on a multi-GB pull.
    Named by the image tag (or a digest of an explicit image): a new image is a new check."""
    key = run.image_tag_or_built or short_hash(run.image)
    name = f"{workload_name}-image-{key}"
    script = 'echo "image present on $(hostname)"'
    return Step(
        name,
        "image",
        job(name, ctx, labels(workload_name, "image"), script, env=[], timeout=3 * 3600, resources=SMALL_POD),
    )


def extras(workload_name: str, ctx: Context, *, tensorboard_on: bool, shell_on: bool) -> list[Step]:
    """TensorBoard and the shell pod, where the run asks for them."""
    out: list[Step] = []
    if tensorboard_on:
        deployment, service = tensorboard(workload_name, ctx)
        out.append(Step(f"{workload_name}-tensorboard", "tensorboard", deployment))
        out.append(Step(f"{workload_name}-tensorboard-svc", "tensorboard", service))
    if shell_on:
        out.append(Step(f"{workload_name}-shell", "shell", shell_pod(workload_name, ctx)))
    return out
