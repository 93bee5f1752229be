"""The small Kubernetes objects every recipe shares, and the shape of a step.

Every run's checkpoints and logs go to `/shared/runs/<workload>/<runId>/` (RUNS_DIR: the S3
prefix `storage.exportRetentionDays` expires, for runs of no team); data shared by all runs of a
workload (tokenizer, dataset, tokenized corpus, Neuron compile cache) goes to
`/shared/<workload>/data/` and `/shared/<workload>/neuron-cache/`, and never expires. A team's
pods see its own directory of the file system (`teams/<team>/`) as `/shared`. Who may write
where: root (the MPI launcher and workers) owns `/shared/<workload>/` and the runs' directories;
the non-root data steps own its `data/` (handed to them by the `<workload>-dirs` step);
everything is readable by all the run's pods.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from config.workloads import RunConfig, TrainingRun
from facts.awaits import TIMEOUT
from facts.images import PULL_SECONDS, Runtime
from facts.names import EGRESS_INTERNET, EGRESS_LABEL, PRIORITY_LABEL, QUEUE_LABEL, RUN_ID_LABEL, RUNS_DIR, app_labels
from facts.nodegroups import NodeGroup
from infra.platform import InternalLoadBalancing
from workloads.manifests.security import (
    DIRS_CAPABILITIES,
    DIRS_EXCEPTION,
    NON_ROOT_UID,
    container_security,
    non_root_env,
    pod_security,
    privileged_exception,
    scratch,
)

Obj = dict[str, Any]
TENSORBOARD_PORT = 6006
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Data Jobs run on an accelerated node before its training starts (CPU only, no devices): 32
# CPUs, the worker count neuronx-nemo-megatron's tutorial tokenizes with. Through the run's Kueue
# queue (queued_labels), so they never compete unaccounted with the runs Kueue admits there.
DATA_JOB_CPUS = 32
SMALL_POD = {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}}
"""TensorBoard, the shell pod, the image check and the directory step: every pod has CPU and
memory requests and limits."""
HUGGING_FACE_TOKEN = "huggingFaceToken"
"""Secret data reference: the stack's Hugging Face token (workloads.deploy fills it in)."""
SECRET_ENV = "secretEnv."
"""Secret data reference prefix: `secretEnv.<NAME>`, a value of the run's `secretEnv`."""


@dataclass(frozen=True)
class Source:
    """A training run a serving run converts: its name and config, which run, the node group it
    ran on and its image (the converter runs there, in that image)."""

    workload: str
    run: TrainingRun
    run_id: str
    node_group: NodeGroup
    image: str


@dataclass(frozen=True)
class Context:
    """What the builders need from the platform, as plain values."""

    namespace: str
    storage_claim: str
    shared_mount: str
    node_group: NodeGroup
    image: str
    shared_sub_path: str = ""
    """The directory of the file system the run's pods see at `shared_mount` ("": all of it)."""
    queue: str | None = None
    """Kueue LocalQueue of the run (`kueue.x-k8s.io/queue-name`); None: not queued."""
    priority_class: str | None = None
    """Kueue WorkloadPriorityClass of the run."""
    runtime: Runtime = field(default_factory=Runtime)
    """What the run's image brings (its Open MPI, Neuron runtime, CUDA): config.amis.image_runtime."""
    source: Source | None = None
    """The training run a serving run converts (recipe vllm-serve with model.workload)."""
    file_system_mb_per_second: float = 1000.0
    """The shared file system's throughput (what a server reads its weights at)."""
    load_balancing: InternalLoadBalancing | None = None
    """Where an internal load balancer goes (a serving run's `endpoint: internalLoadBalancer`)."""
    serving_metrics: bool = False
    """Whether the cluster's CloudWatch add-on scrapes servers (a server admits it then only)."""
    neuron_scheduler: bool = False
    """Whether the cluster runs the Neuron scheduler extension (a Neuron server sharing a node names it)."""

    @property
    def mpirun(self) -> str:
        """How the launcher calls the image's mpirun: by absolute path where the image's Open MPI is
        known (its daemons start from that prefix on every host), else by name."""
        return self.runtime.open_mpi.mpirun if self.runtime.open_mpi else "mpirun"


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
    """Of a Secret: its keys and where each value comes from (HUGGING_FACE_TOKEN, or
    SECRET_ENV + name); the builders never see a secret value, workloads.deploy fills them in."""


def labels(workload_name: str, component: str, run_id: str | None = None, *, internet: bool = False) -> dict[str, str]:
    """The labels of a step's objects; `internet`: its pods may reach HTTPS outside the VPC."""
    out = app_labels(component, workload_name)
    if run_id:
        out[RUN_ID_LABEL] = run_id
    if internet:
        out[EGRESS_LABEL] = EGRESS_INTERNET
    return out


def queued_labels(ctx: Context, object_labels: dict[str, str]) -> dict[str, str]:
    """A Job's labels, with the run's Kueue queue and priority on an accelerated group: Kueue hands
    such nodes whole to admitted runs, so a pod there outside its accounting takes CPU an admitted
    worker counted on (which waits until waitForPodsReady evicts it) and never reclaims a team's
    borrowed nodes. Queued, the Job waits for quota like a run (Kueue's webhook suspends it) and
    reclaims borrowed quota by preemption. The system group's quota is the launchers' room."""
    if not (ctx.queue and ctx.node_group.accelerated):
        return object_labels
    out = {**object_labels, QUEUE_LABEL: ctx.queue}
    if ctx.priority_class:
        out[PRIORITY_LABEL] = ctx.priority_class
    return out


def meta(name: str, ctx: Context, object_labels: dict[str, str], annotations: dict[str, str] | None = None) -> Obj:
    out: Obj = {"name": name, "namespace": ctx.namespace, "labels": object_labels}
    if annotations:
        out["annotations"] = annotations
    return out


def secret(name: str, ctx: Context, object_labels: dict[str, str], role: str, data: dict[str, str]) -> Step:
    """A Secret step: its keys and where each value comes from (Step.secret_data); the object
    never holds a value, workloads.deploy sets `stringData` as a Pulumi secret."""
    obj = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta(name, ctx, object_labels)}
    return Step(name, role, obj, secret_data=dict(data))


def env_list(values: dict[str, str]) -> list[Obj]:
    return [{"name": k, "value": v} for k, v in sorted(values.items())]


def shared_volume(ctx: Context) -> Obj:
    return {"name": "shared", "persistentVolumeClaim": {"claimName": ctx.storage_claim}}


def shared_mount(ctx: Context, *, read_only: bool = False) -> Obj:
    """`/shared`: the run's team directory of the file system (or all of it without teams)."""
    out: Obj = {"name": "shared", "mountPath": ctx.shared_mount}
    if ctx.shared_sub_path:
        out["subPath"] = ctx.shared_sub_path
    if read_only:
        out["readOnly"] = True
    return out


def on_node_group(ctx: Context) -> Obj:
    ng = ctx.node_group
    return {"nodeSelector": ng.node_selector(), "tolerations": ng.tolerations()}


def short_hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:8]


def run_dir(ctx: Context, workload_name: str, run_id: str) -> str:
    """Checkpoints and logs of one run: `/shared/runs/<workload>/<runId>`. Under one top-level
    directory so their S3 copies share the prefix the export retention names (infra.buckets)."""
    return f"{ctx.shared_mount}/{RUNS_DIR}/{workload_name}/{run_id}"


def former_run_dir(ctx: Context, workload_name: str, run_id: str) -> str:
    """Where a run's directory was before run outputs moved under RUNS_DIR."""
    return f"{ctx.shared_mount}/{workload_name}/{run_id}"


def adopt_run_dir(ctx: Context, workload_name: str, run_id: str) -> str:
    """Shell lines moving a run's directory from its former place into `run_dir` (a rename on
    the same file system: atomic, nothing copied) and leaving a relative symlink behind, so
    anything holding the old path still reaches it, and a resumed run finds its checkpoints. Run
    by the run's launcher before anything else: the first of the run's steps to write there (the
    Jobs before it write only the workload's data), replaced with the MPIJob when a stack from
    before takes this layout. Does nothing once moved, when there is nothing to move, or when
    the new place already exists (the old one then stays where it is)."""
    old, new = former_run_dir(ctx, workload_name, run_id), run_dir(ctx, workload_name, run_id)
    parent, link = new.rpartition("/")[0], f"../{RUNS_DIR}/{workload_name}/{run_id}"
    return (
        f"if [ -d {old} ] && [ ! -L {old} ] && [ ! -e {new} ]; then mkdir -p {parent}"
        f' && mv {old} {new} && ln -s {link} {old} && echo "moved {old} to {new}"; fi\n'
    )


TRAINED = ".trained"
"""Written into the run's directory by the training launcher when the run has finished (its
script ran to the end): what a conversion for serving waits for."""


def trained_marker(ctx: Context, workload_name: str, run_id: str) -> str:
    return f"{run_dir(ctx, workload_name, run_id)}/{TRAINED}"


def checkpoint_dir(ctx: Context, workload_name: str, run_id: str) -> str:
    """Where a run saves its checkpoints and resumes from: `/shared/runs/<workload>/<runId>/checkpoints`."""
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
    mounts: tuple[tuple[Obj, Obj], ...] = (),
) -> Obj:
    """A one-pod data-preparation Job on the node group (CPU only: no devices taken), as the
    non-root user, writing under /shared; `mounts`: more (volume, volumeMount) pairs.

    No ttlSecondsAfterFinished: a Job that vanished would be recreated (and rerun) by the
    next `pulumi up`. The script itself skips work whose output is already marked done.
    """
    memory = f"{ctx.node_group.instance.allocatable_memory_gib // 2}Gi"
    cpus = str(DATA_JOB_CPUS)
    resources = resources or {"requests": {"cpu": cpus, "memory": "64Gi"}, "limits": {"cpu": cpus, "memory": memory}}
    container = {
        "name": "main",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c", "set -euo pipefail\n" + script],
        "env": [*non_root_env(), *env],
        "resources": resources,
        "securityContext": container_security(),
        "volumeMounts": [shared_mount(ctx), *(m for _, m in mounts)],
    }
    return _job(name, ctx, job_labels, timeout, container, [shared_volume(ctx), *(v for v, _ in mounts)], non_root=True)


def _job(
    name: str,
    ctx: Context,
    job_labels: dict[str, str],
    timeout: int,
    container: Obj,
    volumes: list[Obj],
    *,
    non_root: bool,
    annotations: dict[str, str] | None = None,
) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(name, ctx, queued_labels(ctx, job_labels), {TIMEOUT: str(timeout), **(annotations or {})}),
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {"labels": job_labels},
                "spec": {
                    **on_node_group(ctx),
                    **pod_security(non_root=non_root),
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def shared_dirs(
    workload_name: str,
    ctx: Context,
    after: tuple[str, ...] = (),
    also: tuple[str, ...] = (),
    kept: tuple[str, ...] = (),
) -> Step:
    """The step that makes `/shared/<workload>/` (root's, like the runs' directories) and hands
    its `data/` (and the directories `also` names, shared by the tenant's runs) to the non-root
    user of the data steps. Runs as root with CHOWN alone; once per workload (its name never
    changes), and harmless to repeat. Without CAP_DAC_OVERRIDE root makes directories only in
    its own, so the parents of what a later run of this Job adds (`kept`: a compile cache whose
    keys change with the config) stay root's, and are given back to root where an earlier run
    handed them over (tests/plan/test_day2_cache_dirs.py)."""
    name = f"{workload_name}-dirs"
    top, owned = f"{ctx.shared_mount}/{workload_name}", " ".join([data_dir(ctx, workload_name), *also])
    script = f"mkdir -p {owned}\nchown {NON_ROOT_UID}:{NON_ROOT_UID} {owned}\nls -ld {top} {owned}"
    if kept:
        roots = " ".join(kept)
        script = f"mkdir -p {roots}\nchown 0:0 {roots}\n{script.replace('ls -ld', f'ls -ld {roots}', 1)}"
    container = {
        "name": "dirs",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c", "set -euo pipefail\n" + script],
        "resources": SMALL_POD,
        "securityContext": container_security(add=DIRS_CAPABILITIES, read_only_root=True),
        "volumeMounts": [shared_mount(ctx)],
    }
    exception = privileged_exception("dirs", DIRS_EXCEPTION)
    obj = _job(
        name,
        ctx,
        labels(workload_name, "dirs"),
        600,
        container,
        [shared_volume(ctx)],
        non_root=False,
        annotations=exception,
    )
    return Step(name, "dirs", obj, after=after)


def image_check(workload_name: str, ctx: Context, run: RunConfig) -> Step:
    """A Job that runs the run's image once on every node of its node group (one pod per node:
    required anti-affinity on the host name), so the image is on every node before the run.
    `pulumi up` waits for it, so the steps after it neither race the stack's image build
    (infra/images.py, AWS CodeBuild: the pods pull once the build has pushed) nor spend their
    own time limits on a multi-GB pull; and Kueue's pods-ready timeout, which counts from the
    MPIJob's admission until every pod is ready, never waits on a worker's pull (the workers may
    land on any nodes of the group, so all of them are warmed).
    Named by the image tag (or a digest of an explicit image): a new image is a new check. It
    needs nothing but the image: non-root, read-only, no /shared. A build that failed or never
    ran is reported at once by `python -m tools.images check`, which the deploy runs first."""
    key = run.image_tag_or_built or short_hash(run.image)
    name = f"{workload_name}-image-{key}"
    tmp, tmp_mount = scratch()
    container = {
        "name": "main",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c", 'set -euo pipefail\necho "image present on $(hostname)"'],
        "env": non_root_env(),
        "resources": SMALL_POD,
        "securityContext": container_security(read_only_root=True),
        "volumeMounts": [tmp_mount],
    }
    # Bounded by the longest the image can take to appear: its build's timeouts (every attempt)
    # and the pull; an image named in full or by imageTag is only pulled.
    built = run.built_image if run.image_tag is None else None
    timeout = built.ready_within_seconds if built else PULL_SECONDS
    check_labels = labels(workload_name, "image")
    obj = _job(name, ctx, check_labels, timeout, container, [tmp], non_root=True)
    obj["spec"].update(parallelism=max(ctx.node_group.nodes, 1), completions=max(ctx.node_group.nodes, 1))
    one_per_node = [{"labelSelector": {"matchLabels": check_labels}, "topologyKey": HOSTNAME_LABEL}]
    obj["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": one_per_node}
    }
    return Step(name, "image", obj)
