"""Recipe `vllm-serve`: vLLM's OpenAI-compatible server as a Deployment that Kueue admits, fed from
/shared and running offline, behind a ClusterIP Service and a NetworkPolicy that admits only the
clients the config names.

The model comes from the Hub (staged once by a Job with egress into the tenant's Hub cache, read
offline with HF_HUB_OFFLINE) or from a finished training run of the same stack (converted by the
training recipe's converter, workloads/manifests/convert.py). Each replica takes the accelerators
its tensor-parallel degree needs, requests equal to limits, and runs as the non-root user.
"""

# size: one recipe's server and its steps; its endpoint, policies, caches, staging and groups are split out
from __future__ import annotations

import dataclasses
import shlex

from config.workloads import VllmServeWorkload
from estimates.staging import hub_download_seconds
from estimates.startup import server_start_seconds
from facts import awaits, leaderworkerset, needs, serving
from facts.names import PRIORITY_LABEL, QUEUE_LABEL
from workloads.manifests.convert import Await, Converter, conversion, model_dir, served_link
from workloads.manifests.hub import cache_dir as hub_cache_dir
from workloads.manifests.hub import offline_env
from workloads.manifests.hub import stage as stage_hub
from workloads.manifests.hub_check import shape_check
from workloads.manifests.lws import LEADER, group_peers, leader_service, worker_template
from workloads.manifests.lws import disruption_budget as group_budget
from workloads.manifests.lws import group_set as leader_worker_set
from workloads.manifests.neuron_cache import cache_dir, cache_env, neuron_scheduling, neuron_server, working_dir
from workloads.manifests.objects import (
    HUGGING_FACE_TOKEN,
    SMALL_POD,
    Context,
    Obj,
    Source,
    Step,
    data_dir,
    env_list,
    image_check,
    labels,
    meta,
    on_node_group,
    secret,
    shared_dirs,
    shared_mount,
    shared_volume,
)
from workloads.manifests.security import container_security, non_root_env, pod_security
from workloads.manifests.serve_endpoint import balanced, draining, load_balancer_ingress, load_balancer_service
from workloads.manifests.serve_policies import client_egress, clients_policy, metrics_policy

MODEL = VllmServeWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""
CONVERTERS: dict[str, Converter] = {}
"""Training recipe -> its converter; filled by workloads.manifests from the recipes' builders."""
PROBE_PERIOD = 10
SCRATCH_GIB = 20
"""/tmp of a server: vLLM's and torch.compile's caches (HOME is there; the root file system is read-only)."""


def startup_seconds(run: VllmServeWorkload, ctx: Context) -> int:
    """What the startup probe allows (estimates.startup.server_start_seconds), for the model served."""
    parameters = run.parameters
    if parameters is None and ctx.source is not None:
        parameters = ctx.source.run.checkpoint_parameters
    return server_start_seconds(ctx.node_group.instance, ctx.file_system_mb_per_second, parameters)


def served_name(workload_name: str) -> str:
    """The model name clients put in requests (`model`): the workload's name."""
    return workload_name


def arguments(workload_name: str, run: VllmServeWorkload, ctx: Context, rank: str = LEADER) -> list[str]:
    """`vllm serve` and its options (held against the pinned vLLM's parser); of a replica larger
    than one node, those of node `rank` of its group (group_options)."""
    hub = run.model.hub
    model = hub if hub else trained_model(workload_name, run, ctx)
    args = ["vllm", "serve", model]
    if hub:
        args += ["--revision", run.model.revision]
    return [
        *args,
        "--served-model-name",
        served_name(workload_name),
        "--host",
        "0.0.0.0",
        "--port",
        str(serving.PORT),
        "--tensor-parallel-size",
        str(run.tensor_parallel),
        "--max-model-len",
        str(run.max_model_len),
        "--max-num-seqs",
        str(run.max_num_seqs),
        "--dtype",
        "bfloat16",
        *(["--pipeline-parallel-size", str(run.pipeline_parallel)] if run.pipeline_parallel > 1 else []),
        *(group_options(run, rank) if run.spans_nodes else []),
    ]


def group_options(run: VllmServeWorkload, rank: str) -> list[str]:
    """vLLM 0.24.0's multi-node launch without Ray: every node runs `vllm serve` with the group's
    size, its rank and the leader's address (torch.distributed's rendezvous, --master-port on the
    leader); the leader serves HTTP, the others run headless. The rank and address are the
    variables LWS injects into every container, expanded by Kubernetes in the arguments."""
    options = [
        "--distributed-executor-backend",
        serving.MULTI_NODE_EXECUTOR,
        "--nnodes",
        str(run.nodes),
        "--node-rank",
        rank,
        "--master-addr",
        leaderworkerset.env_ref(leaderworkerset.LEADER_ADDRESS_ENV),
        "--master-port",
        str(serving.MASTER_PORT),
    ]
    return options if rank == LEADER else [*options, "--headless"]


def follows(run: VllmServeWorkload) -> bool:
    """A server of a training run that pins no `model.runId` follows the workload: it serves the
    newest run converted whole, and the next run never moves it before that one is done."""
    return run.model.workload is not None and run.model.run_id is None


def trained_model(workload_name: str, run: VllmServeWorkload, ctx: Context) -> str:
    """The folder a server of a training run loads: the pinned run's, or the followed link."""
    source = _source(ctx)
    return served_link(ctx, workload_name, source) if follows(run) else model_dir(ctx, workload_name, source)


def model_wait(workload_name: str, run: VllmServeWorkload, ctx: Context) -> list[Obj]:
    """A following server's first start, before any run of it was converted: an init container
    that waits for the served link's folder to be whole (vLLM would exit on a missing path)."""
    if not follows(run):
        return []
    done = f"{trained_model(workload_name, run, ctx)}/.done"
    return [
        {
            "name": "wait-model",
            "image": ctx.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", f"until test -f {done}; do sleep 30; done"],
            "resources": dict(SMALL_POD),
            "securityContext": container_security(read_only_root=True),
            "volumeMounts": [shared_mount(ctx, read_only=True)],
        }
    ]


def _source(ctx: Context) -> Source:
    assert ctx.source is not None, "a serving run of a training run needs that run (Context.source)"
    return ctx.source


def resources(run: VllmServeWorkload, ctx: Context) -> Obj:
    """A replica's accelerators and its share of the node's CPU and memory (requests = limits, so
    a server is the last pod evicted); no EFA: a replica is one node, its collectives stay inside it.
    A pod of a group larger than one node takes its whole node, EFA devices included, as a
    training worker does."""
    if run.spans_nodes:
        whole = dict(ctx.node_group.worker_requests())
        return {"requests": dict(whole), "limits": dict(whole)}
    it = ctx.node_group.instance
    devices = run.devices(it)
    share = devices / it.accelerator_count
    amounts = {
        ctx.node_group.device_resource: str(devices),
        "cpu": str(max(int(it.allocatable_vcpus * share), 1)),
        "memory": f"{max(int(it.allocatable_memory_gib * share), 1)}Gi",
    }
    return {"requests": dict(amounts), "limits": dict(amounts)}


def environment(workload_name: str, run: VllmServeWorkload, ctx: Context) -> dict[str, str]:
    env = {**dict.fromkeys(("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"), "1"), "HF_HOME": "/tmp/huggingface"}
    if run.model.hub:
        env.update(offline_env(ctx))
    if neuron_server(ctx):
        # Compiled graphs on /shared, keyed by what changes them: a restart or the next replica loads.
        env.update(cache_env(workload_name, run, ctx))
    return {**env, **run.env}


def pod_template(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """A server pod: the node group's placement, non-root, /shared, /dev/shm in memory, /tmp."""
    grace, lifecycle = draining(run)
    container = {**_container(workload_name, run, ctx), **lifecycle}
    if neuron_server(ctx):
        # The image's working directory is root's; vllm-neuron writes local-models/ there.
        container["workingDir"] = working_dir(workload_name, run, ctx)
    devices = run.devices(ctx.node_group.instance)
    shm = max(ctx.node_group.shm_gib * devices // ctx.node_group.instance.accelerator_count, 1)
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(serving.PORT),
        "prometheus.io/path": serving.METRICS_PATH,
    }
    return {
        "metadata": {"labels": labels(workload_name, "serve", run.run_id), "annotations": annotations},
        "spec": {
            **on_node_group(ctx),
            **neuron_scheduling(devices, ctx),
            **pod_security(non_root=True),
            "terminationGracePeriodSeconds": grace,
            **({"initContainers": waits} if (waits := model_wait(workload_name, run, ctx)) else {}),
            "containers": [container],
            "volumes": [
                shared_volume(ctx),
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm}Gi"}},
                {"name": "tmp", "emptyDir": {"sizeLimit": f"{SCRATCH_GIB}Gi"}},
            ],
        },
    }


def group_set(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """A replica larger than one node: a LeaderWorkerSet group of `nodes` pods (workloads.manifests.lws)."""
    leader = pod_template(workload_name, run, ctx)
    # Workers serve no client: their own component, outside the Service and the clients' policy.
    worker_labels = labels(workload_name, "serve-worker", run.run_id)
    worker = worker_template(leader, arguments(workload_name, run, ctx, rank=_WORKER_RANK), worker_labels)
    object_labels = labels(workload_name, "serve", run.run_id)
    return leader_worker_set(f"{workload_name}-serve", ctx, object_labels, leader, worker, run.nodes, run.replicas)


_WORKER_RANK = leaderworkerset.env_ref(leaderworkerset.WORKER_INDEX_ENV)


def server(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """The Deployment: replicas replaced one at a time and never surged (a surge would need
    accelerators the queue may not have), labelled for Kueue."""
    pod_labels = labels(workload_name, "serve", run.run_id)
    object_labels = dict(pod_labels)
    if ctx.queue:
        object_labels[QUEUE_LABEL] = ctx.queue
    if ctx.priority_class:
        object_labels[PRIORITY_LABEL] = ctx.priority_class
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        # `pulumi up` returns once it is created: Kueue admits each replica when the quota allows.
        "metadata": meta(f"{workload_name}-serve", ctx, object_labels, {awaits.SKIP_AWAIT: awaits.TRUE}),
        "spec": {
            "replicas": run.replicas,
            "selector": {"matchLabels": labels(workload_name, "serve")},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": pod_template(workload_name, run, ctx),
        },
    }


def _container(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """The server: probes on its health endpoint (the startup probe covering the modeled start),
    read-only root with /tmp for its caches, non-root."""
    health = {"httpGet": {"path": serving.HEALTH_PATH, "port": "http"}, "periodSeconds": PROBE_PERIOD}
    startup = startup_seconds(run, ctx)
    return {
        "name": "vllm",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "command": arguments(workload_name, run, ctx),
        "env": [*non_root_env(), *env_list(environment(workload_name, run, ctx))],
        "ports": [{"name": "http", "containerPort": serving.PORT}],
        "startupProbe": {**health, "timeoutSeconds": 5, "failureThreshold": startup // PROBE_PERIOD},
        "readinessProbe": {**health, "timeoutSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**health, "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 5},
        "resources": resources(run, ctx),
        "securityContext": container_security(read_only_root=True),
        "volumeMounts": [
            shared_mount(ctx),
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def disruption_budget(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """Voluntary evictions (a node drain, an upgrade) take `maxUnavailable` replicas at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(f"{workload_name}-serve", ctx, labels(workload_name, "serve")),
        "spec": {"maxUnavailable": run.max_unavailable, "selector": {"matchLabels": labels(workload_name, "serve")}},
    }


def service(workload_name: str, ctx: Context) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(workload_name, ctx, labels(workload_name, "serve")),
        "spec": {
            "type": "ClusterIP",
            "selector": labels(workload_name, "serve"),
            "ports": [{"name": "http", "port": serving.PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _model_steps(workload_name: str, run: VllmServeWorkload, ctx: Context, dirs: str) -> list[Step]:
    """The Hub model staged (with the stack's token as a file: a gated repository needs it), or
    the training run converted."""
    if run.model.hub:
        data = {"HF_TOKEN": HUGGING_FACE_TOKEN}
        token = secret(f"{workload_name}-hf-token", ctx, labels(workload_name, "secret"), "model", data)
        # The Job runs in the server's image: its huggingface-hub's command line.
        pinned = serving.image_for_name(ctx.image) or serving.image_for(ctx.node_group.instance)
        cli = pinned.hub_cli if pinned else needs.HUB_CLI_1
        # Awaited as long as the weights take to land on /shared (a 405B model on 1,200 GiB: ~1.5 h).
        seconds = hub_download_seconds(
            (run.parameters or 0) * serving.BYTES_PER_PARAMETER, ctx.file_system_mb_per_second
        )
        # A model whose shape the plan does not know is checked once its config.json is on /shared.
        check, after = shape_check(workload_name, run, hub_cache_dir(ctx)), (dirs, token.name)
        hub = stage_hub(workload_name, ctx, run.hub_repos, after, token.name, cli, seconds, check)
        return [token, dataclasses.replace(hub, role="model")]
    source = _source(ctx)
    convert = CONVERTERS[source.run.RECIPE]
    wait = Await(follows(run), run.model.wait_for_run_minutes)
    step = conversion(workload_name, ctx, convert, (dirs,), wait)
    return [dataclasses.replace(step, role="model")]


def steps(workload_name: str, run: VllmServeWorkload, ctx: Context) -> list[Step]:
    """Image check -> shared directories -> the model (staged or converted) -> the server, then
    its disruption budget, Service and NetworkPolicies."""
    # Named by the image the config pins, never by the image resolved at deploy time.
    pinned = run.image_on(ctx.node_group.instance) or ctx.image
    image = image_check(workload_name, ctx, run.model_copy(update={"image": pinned}))
    keyed = (cache_dir(workload_name, run, ctx), working_dir(workload_name, run, ctx)) if neuron_server(ctx) else ()
    kept = (f"{ctx.shared_mount}/{workload_name}/neuron-cache",)  # root's: a next key is made in it
    dirs = shared_dirs(workload_name, ctx, after=(image.name,), also=(hub_cache_dir(ctx), *keyed), kept=kept)
    model = _model_steps(workload_name, run, ctx, dirs.name)
    name = f"{workload_name}-serve"
    after = (name,)
    # The NLB's Service before the servers: the controller's webhook gives a pod its readiness
    # gate at creation only when a load balancer already targets it.
    balancer = _load_balancer_steps(workload_name, run, ctx, (model[-1].name,))
    first = (model[-1].name, *(s.name for s in balancer))
    if run.spans_nodes:
        serve = [
            Step(name, "serve", group_set(workload_name, run, ctx), after=first, awaited=False),
            Step(
                f"{name}-pdb",
                "serve",
                group_budget(name, ctx, labels(workload_name, "serve"), run.max_unavailable, run.nodes),
                after=after,
            ),
            Step(f"{name}-peers", "serve", group_peers(name, ctx), after=after),
        ]
        svc = leader_service(workload_name, name, ctx, labels(workload_name, "serve"), serving.PORT)
    else:
        serve = [
            Step(name, "serve", server(workload_name, run, ctx), after=first, awaited=False),
            Step(f"{name}-pdb", "serve", disruption_budget(workload_name, run, ctx), after=after),
        ]
        svc = service(workload_name, ctx)
    return [
        image,
        dirs,
        *model,
        *balancer,
        *serve,
        Step(f"{workload_name}-svc", "service", svc, after=after),
        Step(f"{workload_name}-clients", "clients", clients_policy(workload_name, run, ctx), after=after),
        Step(f"{workload_name}-clients-egress", "clients", client_egress(workload_name, run, ctx), after=after),
        # Only where the CloudWatch add-on runs the scraper the policy would admit.
        *_metrics_steps(workload_name, ctx, after),
    ]


def _metrics_steps(workload_name: str, ctx: Context, after: tuple[str, ...]) -> list[Step]:
    """The policy that admits the CloudWatch add-on's scraper: only where the add-on runs it."""
    if not ctx.serving_metrics:
        return []
    return [Step(f"{workload_name}-metrics", "clients", metrics_policy(workload_name, ctx), after=after)]


def _load_balancer_steps(
    workload_name: str, run: VllmServeWorkload, ctx: Context, after: tuple[str, ...]
) -> list[Step]:
    """With `endpoint: internalLoadBalancer`: the NLB's Service and the policy that admits its traffic
    (workloads.manifests.serve_endpoint)."""
    if not balanced(run):
        return []
    return [
        Step(f"{workload_name}-lb", "service", load_balancer_service(workload_name, run, ctx), after=after),
        Step(f"{workload_name}-lb-ingress", "service", load_balancer_ingress(workload_name, ctx), after=after),
    ]


def shell_words(run: VllmServeWorkload, workload_name: str, ctx: Context) -> str:
    """The server's command as one line (for the docs and the plan)."""
    return shlex.join(arguments(workload_name, run, ctx))


__all__ = ["MODEL", "data_dir", "steps"]
