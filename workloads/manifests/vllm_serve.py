"""Recipe `vllm-serve`: vLLM's OpenAI-compatible server as a Deployment that Kueue admits, fed from
/shared and running offline, behind a ClusterIP Service and a NetworkPolicy that admits only the
clients the config names.

The model comes from the Hub (staged once by a Job with egress into the tenant's Hub cache, read
offline with HF_HUB_OFFLINE) or from a finished training run of the same stack (converted by the
training recipe's converter, workloads/manifests/convert.py). Each replica takes the accelerators
its tensor-parallel degree needs, requests equal to limits, and runs as the non-root user.
"""

from __future__ import annotations

import dataclasses
import shlex

from config.workloads import VllmServeWorkload
from facts import needs, serving
from facts.names import CLOUDWATCH_NAMESPACE, PRIORITY_LABEL, QUEUE_LABEL
from infra import metrics
from infra.tenancy import NETWORK_POLICY_API_VERSION
from workloads.manifests.convert import Converter, conversion, model_dir
from workloads.manifests.hub import cache_dir as hub_cache_dir
from workloads.manifests.hub import offline_env
from workloads.manifests.hub import stage as stage_hub
from workloads.manifests.objects import (
    HUGGING_FACE_TOKEN,
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
from workloads.manifests.serve_endpoint import balanced, load_balancer_ingress, load_balancer_service

MODEL = VllmServeWorkload
"""The config model this builder renders (workloads.manifests.BUILDERS registers the pair)."""
CONVERTERS: dict[str, Converter] = {}
"""Training recipe -> its converter; filled by workloads.manifests from the recipes' builders."""
PROBE_PERIOD = 10
SCRATCH_GIB = 20
"""/tmp of a server: vLLM's and torch.compile's caches (HOME is there; the root file system is read-only)."""


def startup_seconds(run: VllmServeWorkload, ctx: Context) -> int:
    """What the startup probe allows (VllmServeWorkload.startup_seconds), for the model served."""
    parameters = run.parameters
    if parameters is None and ctx.source is not None:
        parameters = ctx.source.run.checkpoint_parameters
    return run.startup_seconds(ctx.node_group.instance, ctx.file_system_mb_per_second, parameters)


def served_name(workload_name: str) -> str:
    """The model name clients put in requests (`model`): the workload's name."""
    return workload_name


def arguments(workload_name: str, run: VllmServeWorkload, ctx: Context) -> list[str]:
    """`vllm serve` and its options (held against the pinned vLLM's parser)."""
    hub = run.model.hub
    model = hub if hub else model_dir(ctx, workload_name, _source(ctx))
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
    ]


def _source(ctx: Context) -> Source:
    assert ctx.source is not None, "a serving run of a training run needs that run (Context.source)"
    return ctx.source


def resources(run: VllmServeWorkload, ctx: Context) -> Obj:
    """A replica's accelerators and its share of the node's CPU and memory (requests = limits, so
    a server is the last pod evicted); no EFA: a replica is one node, its collectives stay inside it."""
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
    if ctx.node_group.accelerator == "neuron":
        # Compiled graphs on /shared: a replica that restarts, or the next one, loads instead of compiling.
        env["NEURON_COMPILED_ARTIFACTS"] = f"{ctx.shared_mount}/{workload_name}/neuron-cache"
    return {**env, **run.env}


def server(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """The Deployment: replicas replaced one at a time and never surged (a surge would need
    accelerators the queue may not have), labelled for Kueue."""
    pod_labels = labels(workload_name, "serve", run.run_id)
    object_labels = dict(pod_labels)
    if ctx.queue:
        object_labels[QUEUE_LABEL] = ctx.queue
    if ctx.priority_class:
        object_labels[PRIORITY_LABEL] = ctx.priority_class
    container = _container(workload_name, run, ctx)
    devices = run.devices(ctx.node_group.instance)
    shm = max(ctx.node_group.shm_gib * devices // ctx.node_group.instance.accelerator_count, 1)
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(serving.PORT),
        "prometheus.io/path": serving.METRICS_PATH,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        # `pulumi up` returns once it is created: Kueue admits each replica when the quota allows.
        "metadata": meta(f"{workload_name}-serve", ctx, object_labels, {"pulumi.com/skipAwait": "true"}),
        "spec": {
            "replicas": run.replicas,
            "selector": {"matchLabels": labels(workload_name, "serve")},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": annotations},
                "spec": {
                    **on_node_group(ctx),
                    **pod_security(non_root=True),
                    "terminationGracePeriodSeconds": 60,
                    "containers": [container],
                    "volumes": [
                        shared_volume(ctx),
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm}Gi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": f"{SCRATCH_GIB}Gi"}},
                    ],
                },
            },
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


def disruption_budget(workload_name: str, ctx: Context) -> Obj:
    """Voluntary evictions (a node drain, an upgrade) take one replica at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(f"{workload_name}-serve", ctx, labels(workload_name, "serve")),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels(workload_name, "serve")}},
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


CLIENT_LABEL = "llm-training-eks/client-of"
"""What a client pod in the server's namespace carries when `clients.podLabels` names none:
`llm-training-eks/client-of: <workload>` (no pod is a client by default)."""


def client_labels(workload_name: str, run: VllmServeWorkload) -> dict[str, str]:
    return dict(run.clients.pod_labels) or {CLIENT_LABEL: workload_name}


def clients_policy(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """Who reaches the server, on its port only: the pods of its own namespace that carry the
    client labels (`clients.podLabels`, or `llm-training-eks/client-of: <workload>`), and the pods
    of the namespaces `clients.namespaces` names (those with `clients.podLabels`, or all of them)."""
    peers: list[Obj] = [{"podSelector": {"matchLabels": client_labels(workload_name, run)}}]
    for ns in run.clients.namespaces:
        peers.append(
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "podSelector": {"matchLabels": dict(run.clients.pod_labels)},
            }
        )
    port = [{"protocol": "TCP", "port": serving.PORT}]
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(f"{workload_name}-clients", ctx, labels(workload_name, "network")),
        "spec": {
            "podSelector": {"matchLabels": labels(workload_name, "serve")},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": port}],
        },
    }


def client_egress(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """The clients of the server's own namespace may open connections to it (their namespace
    denies egress by default)."""
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(f"{workload_name}-clients-egress", ctx, labels(workload_name, "network")),
        "spec": {
            "podSelector": {"matchLabels": client_labels(workload_name, run)},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"podSelector": {"matchLabels": labels(workload_name, "serve")}}],
                    "ports": [{"protocol": "TCP", "port": serving.PORT}],
                }
            ],
        },
    }


def metrics_policy(workload_name: str, ctx: Context) -> Obj:
    """The CloudWatch add-on's serving scraper (infra.metrics: its namespace, and the labels its
    operator gives its pods) reaches the server's port, where vLLM answers /metrics; nothing else
    is admitted by this policy. The scraper runs on the pod network, so these selectors match it."""
    scraper = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": CLOUDWATCH_NAMESPACE}},
        "podSelector": {"matchLabels": metrics.scraper_pod_labels()},
    }
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(f"{workload_name}-metrics", ctx, labels(workload_name, "network")),
        "spec": {
            "podSelector": {"matchLabels": labels(workload_name, "serve")},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [scraper], "ports": [{"protocol": "TCP", "port": serving.PORT}]}],
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
        hub = stage_hub(workload_name, ctx, run.hub_repos, (dirs, token.name), token_secret=token.name, cli=cli)
        return [token, dataclasses.replace(hub, role="model")]
    source = _source(ctx)
    convert = CONVERTERS[source.run.RECIPE]
    step = conversion(workload_name, ctx, convert, (dirs,), run.model.wait_for_run_minutes)
    return [dataclasses.replace(step, role="model")]


def steps(workload_name: str, run: VllmServeWorkload, ctx: Context) -> list[Step]:
    """Image check -> shared directories -> the model (staged or converted) -> the server, then
    its disruption budget, Service and NetworkPolicies."""
    # Named by the image the config pins, never by the image resolved at deploy time.
    pinned = run.image_on(ctx.node_group.instance) or ctx.image
    image = image_check(workload_name, ctx, run.model_copy(update={"image": pinned}))
    also = (hub_cache_dir(ctx), f"{ctx.shared_mount}/{workload_name}/neuron-cache")
    dirs = shared_dirs(workload_name, ctx, after=(image.name,), also=also)
    model = _model_steps(workload_name, run, ctx, dirs.name)
    name = f"{workload_name}-serve"
    deployment = server(workload_name, run, ctx)
    after = (name,)
    return [
        image,
        dirs,
        *model,
        Step(name, "serve", deployment, after=(model[-1].name,), awaited=False),
        Step(f"{name}-pdb", "serve", disruption_budget(workload_name, ctx), after=after),
        Step(f"{workload_name}-svc", "service", service(workload_name, ctx), after=after),
        Step(f"{workload_name}-clients", "clients", clients_policy(workload_name, run, ctx), after=after),
        Step(f"{workload_name}-clients-egress", "clients", client_egress(workload_name, run, ctx), after=after),
        Step(f"{workload_name}-metrics", "clients", metrics_policy(workload_name, ctx), after=after),
        *_load_balancer_steps(workload_name, run, ctx, after),
    ]


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
