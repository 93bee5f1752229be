"""A run's companions beside its steps: TensorBoard over the run's directory and a shell pod,
both on the system nodes (no accelerator taint tolerated, so outside Kueue's accounting)."""

from __future__ import annotations

from workloads.manifests.objects import (
    SMALL_POD,
    TENSORBOARD_PORT,
    Context,
    Obj,
    Step,
    labels,
    meta,
    run_dir,
    shared_mount,
    shared_volume,
)
from workloads.manifests.security import container_security, non_root_env, pod_security, scratch


def tensorboard(workload_name: str, ctx: Context, run_id: str) -> list[Obj]:
    """TensorBoard (Deployment, ClusterIP Service) over the run's directory, not data/ or the cache."""
    name = f"{workload_name}-tensorboard"
    tb_labels = labels(workload_name, "tensorboard")
    tmp, tmp_mount = scratch()
    container = {
        "name": "tensorboard",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "tensorboard",
            "--logdir",
            run_dir(ctx, workload_name, run_id),
            "--bind_all",
            "--port",
            str(TENSORBOARD_PORT),
        ],
        "env": non_root_env(),
        "ports": [{"name": "http", "containerPort": TENSORBOARD_PORT}],
        "readinessProbe": {"tcpSocket": {"port": TENSORBOARD_PORT}, "periodSeconds": 10},
        "livenessProbe": {"tcpSocket": {"port": TENSORBOARD_PORT}, "initialDelaySeconds": 60, "periodSeconds": 30},
        "resources": SMALL_POD,
        "securityContext": container_security(read_only_root=True),
        "volumeMounts": [shared_mount(ctx, read_only=True), tmp_mount],
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
                "spec": {
                    **pod_security(non_root=True),
                    "containers": [container],
                    "volumes": [shared_volume(ctx), tmp],
                },
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


def shell(workload_name: str, ctx: Context) -> Obj:
    """A pod to look at /shared (and edit what the data steps wrote), as the non-root user:
    `kubectl exec -it deploy/<workload>-shell -- bash`. A Deployment rather than a bare Pod:
    the VPC CNI applies NetworkPolicies only to pods with an owner (EKS user guide,
    cni-network-policy considerations), and the shell must stay inside its namespace's."""
    shell_labels = labels(workload_name, "shell")
    container = {
        "name": "shell",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", "infinity"],
        "env": non_root_env(),
        "resources": SMALL_POD,
        "securityContext": container_security(),
        "volumeMounts": [shared_mount(ctx)],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(f"{workload_name}-shell", ctx, shell_labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": shell_labels},
            "template": {
                "metadata": {"labels": shell_labels},
                "spec": {**pod_security(non_root=True), "containers": [container], "volumes": [shared_volume(ctx)]},
            },
        },
    }


def extras(workload_name: str, ctx: Context, run_id: str, *, tensorboard_on: bool, shell_on: bool) -> list[Step]:
    """TensorBoard and the shell pod, where the run asks for them."""
    out: list[Step] = []
    if tensorboard_on:
        deployment, service = tensorboard(workload_name, ctx, run_id)
        out.append(Step(f"{workload_name}-tensorboard", "tensorboard", deployment))
        out.append(Step(f"{workload_name}-tensorboard-svc", "tensorboard", service))
    if shell_on:
        out.append(Step(f"{workload_name}-shell", "shell", shell(workload_name, ctx)))
    return out
