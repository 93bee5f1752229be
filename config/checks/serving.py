"""The rules of serving runs (recipe vllm-serve) that span config sections: the training run a
server converts, and the replicas against their node group, memory and Kueue's readiness timeout."""

from __future__ import annotations

from collections.abc import Mapping

from config.aws import acm_certificate_region
from config.base import did_you_mean
from config.checks.groups import Groups
from config.checks.neuron_placement import neuron_replicas_placed
from config.checks.serving_fit import served_models_fit, serving_fit
from config.problems import problem
from config.stack import StackConfig
from config.workloads import RECIPES, VllmServeWorkload, WorkloadConfig
from config.workloads.recipe import NoConversion, RunExport
from estimates.startup import server_start_seconds
from facts import serving


def serving_source(name: str, run: VllmServeWorkload, workloads: Mapping[str, WorkloadConfig]) -> list[str]:
    """A served training run exists in this stack, its recipe has a converter, and it lives in
    the serving run's tenant (the same view of /shared)."""
    key, wanted = f"workloads.{name}.model.workload", run.model.workload
    if wanted is None:
        return []
    trained = workloads.get(wanted)
    if trained is None or isinstance(trained, VllmServeWorkload):
        runs = [n for n, r in workloads.items() if not isinstance(r, VllmServeWorkload)]
        known = ", ".join(runs) or "none"
        said = f"{wanted!r} is not a training run of this stack{did_you_mean(wanted, runs)}; runs: {known}"
        return [problem(key, "not-supported", said, value=repr(wanted), allowed=known)]
    if isinstance(trained.CONVERSION, NoConversion):
        convertible = ", ".join(r for r, m in RECIPES.items() if not isinstance(m.CONVERSION, NoConversion))
        said = (
            f"recipe {trained.RECIPE} of {wanted!r} has no converter to a Hugging Face model"
            f" ({trained.CONVERSION.why}); servable recipes: {convertible}"
        )
        return [problem(key, "conflict", said, value=repr(wanted), allowed=f"a run of {convertible}")]
    export = trained.CONVERSION
    if isinstance(export, RunExport) and not trained.model_dump(by_alias=True).get(export.key):
        said = f"must be true for {name!r} to serve {wanted!r}: its run's Hugging Face export ({export.follows})"
        return [
            problem(f"workloads.{wanted}.{export.key}", "conflict", f"{said} is what the server loads", allowed="true")
        ]
    if trained.team != run.team:
        team = trained.team or "none"
        said = f"must be {wanted!r}'s ({team}): the converted model is on that team's /shared"
        return [problem(f"workloads.{name}.team", "conflict", said, value=repr(run.team), allowed=team)]
    seq = trained.model_shape.seq_length if trained.model_shape else None
    if seq is not None and run.max_model_len > seq:
        said = f"{run.max_model_len} is longer than the {seq} tokens {wanted!r} trained at"
        return [
            problem(
                f"workloads.{name}.maxModelLen",
                "conflict",
                said,
                value=str(run.max_model_len),
                allowed=f"at most {seq}",
            )
        ]
    return []


def serving_fits(name: str, run: VllmServeWorkload, cfg: StackConfig, groups: Groups) -> list[str]:
    """A served run's replicas fit its node group, its weights a replica's memory, and its
    modeled start Kueue's waitForPodsReady (a replica not ready by then is evicted)."""
    ng = groups.get(run.node_group)
    if ng is None or ng.instance.accelerator is None:
        return []
    parameters = run.served_parameters(cfg.workloads)
    problems: list[str] = []
    if run.nodes_needed(ng.instance) > ng.max_nodes:
        problems.append(
            problem(
                f"workloads.{name}.replicas",
                "conflict",
                f"{run.replicas} replicas of {run.devices(ng.instance)} devices need {run.nodes_needed(ng.instance)}"
                f" nodes; node group {ng.name!r} has at most {ng.max_nodes} ({ng.max_key})",
                value=str(run.replicas),
            )
        )
    memory = serving.device_memory_gib(ng.instance)
    weights = (parameters or 0) * serving.BYTES_PER_PARAMETER / 2**30
    devices = run.replica_placement(ng.instance).devices
    room = devices * (memory or 0) * serving.MEMORY_SHARE
    if run.parameters is None and memory and weights > room:
        problems.append(
            problem(
                f"workloads.{name}.tensorParallel",
                "conflict",
                f"{run.model.workload!r}'s {weights:,.0f} GiB of bf16 weights do not fit"
                f" {devices} x {memory} GiB at {serving.MEMORY_SHARE:.0%};"
                " raise tensorParallel",
                hint="raise tensorParallel",
            )
        )
    startup = server_start_seconds(ng.instance, cfg.storage.file_system.mb_per_second, parameters)
    limit = cfg.queueing.pods_ready_timeout_minutes * 60
    compile_ = ", the Neuron compile" if ng.instance.accelerator == "neuron" else ""
    if startup >= limit:
        problems.append(
            problem(
                "queueing.podsReadyTimeoutMinutes",
                "conflict",
                f"a replica of workloads.{name} may take {startup // 60} minutes to"
                f" start (its weights from /shared, the engine{compile_}); Kueue would evict it after {limit // 60};"
                f" raise it above {startup // 60 + 1}",
                value=str(limit // 60),
                allowed=f"more than {startup // 60 + 1}",
            )
        )
    return problems


def serving_recovers(name: str, run: VllmServeWorkload, cfg: StackConfig, groups: Groups) -> list[str]:
    """A replica that restarts (its container, or its group) is not ready again before its modeled
    start; Kueue 0.19.2 evicts and requeues a running workload whose pods stay not ready longer than
    waitForPodsReady.recoveryTimeout (apis/config/v1beta2/configuration_types.go, RecoveryTimeout),
    spending its requeue limit on every restart. Refused rather than raised here: the timeout is the
    cluster's, and it also decides how long a training run missing a node waits before its requeue."""
    ng = groups.get(run.node_group)
    if ng is None or ng.instance.accelerator is None:
        return []
    parameters = run.served_parameters(cfg.workloads)
    startup = server_start_seconds(ng.instance, cfg.storage.file_system.mb_per_second, parameters)
    limit = cfg.queueing.recovery_timeout_minutes * 60
    if startup < limit:
        return []
    need = startup // 60 + 1
    said = (
        f"a replica of workloads.{name} that restarts is ready again only after its {startup // 60}-minute"
        f" start; Kueue would evict and requeue it after {limit // 60}; raise it above {need}"
        " (training runs missing a node then also wait that long before their requeue)"
    )
    return [
        problem(
            "queueing.recoveryTimeoutMinutes", "conflict", said, value=str(limit // 60), allowed=f"more than {need}"
        )
    ]


def serving_needs_leader_worker_set(cfg: StackConfig) -> list[str]:
    """A serving run larger than one node is a LeaderWorkerSet: its controller must be installed
    (without it the object is refused by the API server: no such kind)."""
    if cfg.addons.leader_worker_set is not False:
        return []
    spanning = [n for n, r in cfg.workloads.items() if isinstance(r, VllmServeWorkload) and r.spans_nodes]
    if not spanning:
        return []
    runs = ", ".join(f"workloads.{n}" for n in spanning)
    said = f"false, but {runs} spans nodes (a LeaderWorkerSet); set it true or leave it unset"
    return [problem("addons.leaderWorkerSet", "conflict", said, value="false", allowed="true or unset")]


def balancer_missing(cfg: StackConfig) -> str | None:
    """Why this stack (all in one) has nowhere to put an internal load balancer; None: it has."""
    if not cfg.addons.load_balancer_controller:
        return "needs the AWS Load Balancer Controller: set addons.loadBalancerController: true (aws layer)"
    if cfg.network.existing:
        return (
            "is not supported in an existing VPC (network.vpcId): the stack does not know its private subnets'"
            " CIDRs, which the server's NetworkPolicy must admit; use clusterIP"
        )
    return None


def serving_endpoint(name: str, run: VllmServeWorkload, region: str, missing: str | None) -> list[str]:
    """An internal load balancer only where the controller runs in a VPC the stack made, and its
    certificate in the load balancer's region (an NLB's listener takes certificates of its own region)."""
    if run.endpoint != "internalLoadBalancer":
        return []
    if missing is not None:
        return [
            problem(
                f"workloads.{name}.endpoint",
                "conflict",
                f"internalLoadBalancer {missing}",
                value="'internalLoadBalancer'",
            )
        ]
    if run.certificate_arn and (where := acm_certificate_region(run.certificate_arn)) != region:
        said = f"the certificate is in {where}; the load balancer is in {region} (aws:region)"
        return [
            problem(
                f"workloads.{name}.certificateArn",
                "conflict",
                f"{said}: request or import it in {region}",
                allowed=f"a certificate in {region}",
                hint=f"request or import it in {region}",
            )
        ]
    return []


def serving_problems(cfg: StackConfig, groups: Groups, balancer: str | None = "derive") -> list[str]:
    """Every serving run against its source, its node group and its endpoint. `balancer`: why the
    platform has no internal load balancing (None: it has); by default, this stack's own config."""
    missing = balancer_missing(cfg) if balancer == "derive" else balancer
    out = serving_needs_leader_worker_set(cfg) + served_models_fit(cfg)
    where = f" in the cluster layer ({cfg.lower_stack})" if cfg.layer == "runs" else ""
    out += neuron_replicas_placed(cfg, groups, where)
    for name, run in cfg.workloads.items():
        if isinstance(run, VllmServeWorkload):
            out += serving_source(name, run, cfg.workloads) or [
                *(serving_fits(name, run, cfg, groups) or serving_fit(name, run, cfg, groups)),
                *serving_recovers(name, run, cfg, groups),
            ]
            out += serving_endpoint(name, run, cfg.region, missing)
    return out


def layered_serving(workloads: Mapping[str, WorkloadConfig], leader_worker_set: bool, lower_stack: str) -> list[str]:
    """A runs-layer serving run across nodes needs the LeaderWorkerSet controller, which the
    cluster layer installs only when asked (it does not see the runs)."""
    return [
        problem(
            f"workloads.{name}.nodes",
            "conflict",
            f"{run.nodes} nodes a replica make a LeaderWorkerSet, but the cluster layer ({lower_stack}) runs no"
            " LeaderWorkerSet controller: set addons.leaderWorkerSet: true there and deploy it",
            value=str(run.nodes),
            hint=f"set addons.leaderWorkerSet: true in {lower_stack} and deploy it",
        )
        for name, run in sorted(workloads.items())
        if isinstance(run, VllmServeWorkload) and run.spans_nodes and not leader_worker_set
    ]


WARNING_PREFIX = "llm-training-eks: "
"""Starts each warning line a stack logs (`pulumi.log.warn`) that the offline plan repeats on stderr."""


def unscraped_servers(workloads: Mapping[str, WorkloadConfig], scraped: bool, lower_stack: str) -> list[str]:
    """Warnings, not refusals: a runs-layer server is scraped only where the aws layer runs the
    CloudWatch add-on's serving scraper (`addons.observability.servingMetrics`, which the aws
    layer cannot default from runs it does not see). `false` may be the user's choice, so the
    server deploys; the line names the key that turns its metrics on."""
    if scraped:
        return []
    return [
        f"{WARNING_PREFIX}workloads.{name}: its /metrics are not scraped: the aws layer under {lower_stack}"
        " runs no serving scraper (addons.observability.servingMetrics is false there); set"
        " addons.observability.servingMetrics: true in the aws stack and deploy it, then this stack"
        for name, run in sorted(workloads.items())
        if isinstance(run, VllmServeWorkload)
    ]
