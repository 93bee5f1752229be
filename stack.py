"""The composition root: config in, components wired in order, stack outputs out.

`__main__.py` calls `build_layer` under the Pulumi engine; `tools.plan` and the tests call it
under mocks. The only reader of the whole `StackConfig`: each component gets its own
section and the shared `StackContext`.

Three builders, one per layer, joined by the contracts of `infra.layers`:
- `build_aws`: network -> shared storage (beside, not after, the cluster) -> cluster -> node
  groups -> registry -> EKS add-ons and their roles -> CI runner; hands on `ClusterInputs`;
- `build_cluster`: add-on charts, MPI operator, Kueue and its queues, each team's namespace
  (NetworkPolicies, its claim of the shared volume); hands on the `Platform` value;
- the training runs (`workloads.deploy`) on that `Platform`.
`build` runs all three in one stack (the quick start); `build_layer` runs the one the
stack's `layer` names, reading the layer below through a stack reference.
"""
# size: the composition root, every layer wired in order in one place a reader follows top to bottom

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pulumi

from config import ConfigError, amis, checks, costs
from config.checks import capacity as capacity_checks
from config.checks.network import addresses_needed
from config.checks.runs import checkpoint_write_seconds
from config.nodegroups import NodeGroupConfig
from config.problems import problem
from config.stack import StackConfig
from config.workloads import RECIPES
from estimates import cost
from facts.names import DEFAULT_QUEUE, STORAGE_CLAIM
from facts.nodegroups import NodeGroup, NodeGroupLaunch
from infra import layers
from infra.addons import catalog
from infra.addons.components import ClusterAddons, ContainerInsightsLogs, EksAddons
from infra.ci_runner import CiRunner, runner_label
from infra.cluster import Cluster, kubernetes_provider
from infra.context import StackContext, aws_provider
from infra.images import ImageBuilds
from infra.layers import KUBECONFIG_OUTPUT, ClusterInputs
from infra.namespaces import TenantNamespaces
from infra.network import Network, load_balancer_inputs
from infra.nodegroups import AcceleratedNodeGroup
from infra.platform import Platform
from infra.queues import TeamQueues, kueue_manager_config, teams_of
from infra.registry import Registry
from infra.storage import FileSystemRef, SharedStorage, SharedVolume
from infra.tenancy import tenants_of
from workloads import deploy
from workloads.plans import run_plans, with_startup

Outputs = dict[str, pulumi.Input[object]]


@dataclass
class AwsLayer:
    """The components of the aws layer and what it hands to the cluster layer."""

    network: Network
    cluster: Cluster
    node_groups: dict[str, AcceleratedNodeGroup]
    storage: SharedStorage
    registry: Registry
    images: ImageBuilds
    eks_addons: EksAddons
    """The EKS managed add-ons and the IAM roles of add-on service accounts (infra.addons)."""
    runner: CiRunner | None
    inputs: ClusterInputs


@dataclass
class ClusterLayer:
    """The components of the cluster layer and the `Platform` it hands to the runs."""

    addons: ClusterAddons
    """The Helm and manifest add-ons (infra.addons)."""
    namespaces: TenantNamespaces
    queues: TeamQueues
    volume: SharedVolume
    platform: Platform


@dataclass
class Infrastructure:
    """The aws and cluster layers of one stack, with the components by name."""

    aws: AwsLayer
    k8s: ClusterLayer

    def __getattr__(self, name: str) -> Any:
        """`network`, `cluster`, `node_groups`, `storage`, `registry`, `images`, `eks_addons` from
        the aws layer; `addons`, `namespaces`, `queues`, `volume`, `platform` from the cluster layer."""
        cluster_layer = ("addons", "namespaces", "queues", "volume", "platform")
        layer = self.__dict__["k8s"] if name in cluster_layer else self.__dict__["aws"]
        return getattr(layer, name)


# --------------------------------------------------------------------------- the layers


def built_repositories(cfg: StackConfig) -> list[str]:
    """The repositories whose image the stack builds (in AWS CodeBuild, from images/). An
    all-in-one stack builds those of its runs that name neither an image nor a tag: nothing is
    built that no run uses. An aws-layer stack does not know the runs: it builds the image of
    every repository of its registry that has a Dockerfile in images/ and whose recipe can train
    with it on one of its node groups (no NeMo image for a Trainium-only environment, no
    TorchNeuron image for a trn1 one)."""
    if cfg.layer == "aws":
        instances = [ng.instance for ng in cfg.node_groups]
        usable = {r.REPOSITORY for r in RECIPES.values() if any(r.built_image_trains_on(i) for i in instances)}
        return sorted(r for r in cfg.registry.repositories if r in usable)
    return sorted(
        {r.REPOSITORY for r in cfg.workloads.values() if r.REPOSITORY and r.image is None and r.image_tag is None}
    )


def build_aws(cfg: StackConfig, *, kubernetes: bool = True) -> AwsLayer:
    """Declare everything that needs only the AWS API. `kubernetes=False` (an aws-layer stack)
    leaves out the Kubernetes provider: nothing here talks to the cluster API."""
    ctx = StackContext.from_config(cfg)
    # Every AWS resource goes through one provider that carries the stack's tags.
    on_aws = pulumi.ResourceOptions(providers=[aws_provider(ctx)])
    network = Network("network", cfg.network, ctx, cfg.availability_zones, opts=on_aws, addresses=addresses_needed(cfg))
    # Takes nothing from the cluster, so FSx and EKS are created in parallel.
    storage = SharedStorage("storage", cfg.storage, ctx, network, cfg.file_system_az, on_aws, cfg.expiring_teams)
    logs = ContainerInsightsLogs("container-insights", cfg.addons.observability, ctx, cfg.scrapes_serving, opts=on_aws)
    # The add-ons' log groups outlive every writer in a destroy: the cluster depends on them.
    after_logs = pulumi.ResourceOptions.merge(on_aws, pulumi.ResourceOptions(depends_on=logs.log_groups))
    cluster = Cluster(
        "cluster",
        cfg.cluster,
        cfg.system_node_group,
        ctx,
        network,
        with_kubernetes_provider=kubernetes,
        opts=after_logs,
    )
    launches = _launches(cfg)
    node_groups = {
        name: AcceleratedNodeGroup(f"ng-{name}", launch, ctx, network, cluster, opts=on_aws)
        for name, launch in launches.items()
    }
    # Every node carries the cluster security group (the system group as EKS gives it, the
    # accelerated groups on each interface of their launch templates), so one pair of rules
    # admits them all and the file system's group keeps 4 rules each way however many node
    # groups there are (EC2 allows 60 per group by default).
    lustre_client_rules = storage.allow_clients({"cluster": cluster.security_group_id})
    registry = Registry("registry", cfg.registry, ctx, cluster.node_role.arn, opts=on_aws)
    groups = {name: launch.group for name, launch in launches.items()}
    addons = _eks_addons(cfg, ctx, cluster, list(groups.values()), storage, logs, on_aws, not kubernetes)
    runner = CiRunner("ci-runner", cfg.ci_runner, ctx, network, cluster, opts=on_aws) if cfg.ci_runner.enabled else None
    fs = storage.file_system
    inputs = ClusterInputs(
        region=cfg.region,
        cluster_name=cluster.name,
        kubeconfig=cluster.kubeconfig,
        node_groups=groups,
        system_group=cfg.system_node_group.node_group(cfg.availability_zones),
        file_system=FileSystemRef(id=fs.id, dns_name=fs.dns_name, mount_name=fs.mount_name),
        storage=cfg.storage,
        registry_urls=dict(registry.urls),
        role_arns=dict(addons.role_arns),
        kubernetes_version=cfg.cluster.kubernetes_version,
        serving_metrics=cfg.scrapes_serving,
        **run_output_expiry(cfg),
        **load_balancer_inputs(cfg.network, network.vpc_id, ctx.cluster_name, cfg.availability_zones, cfg.addons),
        provider=cluster.provider,
        nodes_ready=[cluster.system_node_group],
        role_ready=list(addons.role_policies),
        # Binds once the S3 link exists; mounts once the nodes may reach the file system.
        volume_ready=[*([storage.association] if storage.association else []), *lustre_client_rules],
    )
    rebuilds = {r: repo.rebuild for r, repo in cfg.registry.repositories.items()}
    built = {r: registry.urls[r] for r in built_repositories(cfg)}
    images = ImageBuilds("images", built, ctx, opts=on_aws, rebuilds=rebuilds)
    return AwsLayer(network, cluster, node_groups, storage, registry, images, addons, runner, inputs)


def run_output_expiry(cfg: StackConfig) -> dict[str, Any]:
    """What the aws layer tells the cluster layer of its run-output expiry (infra.layers)."""
    return {"expires_after": cfg.storage.exports_expire_after, "expiring_teams": cfg.expiring_teams}


def _eks_addons(
    cfg: StackConfig,
    ctx: StackContext,
    cluster: Cluster,
    groups: list[NodeGroup],
    storage: SharedStorage,
    logs: ContainerInsightsLogs,
    opts: pulumi.ResourceOptions,
    replaces_addons: bool,
) -> EksAddons:
    """The aws layer's part of the add-on catalog: the EKS add-ons, the IAM roles of the add-ons
    these node groups need (`replaces_addons`: see EksAddons)."""
    scrape = cfg.serving_namespaces if cfg.scrapes_serving else None
    inputs = catalog.EksInputs(cfg.addons, ctx.cluster_name, ctx.region, scrape)
    roles = catalog.RoleInputs(ctx.cluster_name, storage.file_system.arn)
    entries = catalog.aws_entries(groups, cfg.addons)
    return EksAddons("eks-addons", entries, cluster, ctx, inputs, roles, logs.log_groups, opts, replaces_addons)


def _launches(cfg: StackConfig) -> dict[str, NodeGroupLaunch]:
    """Every accelerated group as the aws layer launches it, on a pinned AMI release whose
    driver fits the images run on it (config.amis; config_problems refused the stack when none
    fits): the one place the stack file's node groups become `NodeGroup`s."""
    now = capacity_checks.judged_at()
    return {
        ng.name: ng.launch(
            cfg.node_group_az(ng),
            _release_version(cfg, ng),
            f"nodeGroups[{i}].maxSize",
            now,
            checkpoint_write_seconds(cfg.workloads, ng.name, cfg.storage),
        )
        for i, ng in enumerate(cfg.node_groups)
    }


def _release_version(cfg: StackConfig, ng: NodeGroupConfig) -> str:
    release = amis.pinned_release(cfg, ng)
    if release is None:  # config_problems reports it; a program built without that check stops here
        raise ConfigError(amis.release_problems(cfg))
    return release.release_version


def _tenant_objects(key: str, tenants: TenantNamespaces, volume: SharedVolume, queues: TeamQueues) -> list[Any]:
    """What the runs of one tenant (a team, or `default`) are created after: its namespace, the
    namespace's NetworkPolicies, its claim and its queues."""
    return [
        tenants.namespaces[key],
        *tenants.network_policies[key],
        volume.claims[key],
        *queues.team_objects.get(key, []),
    ]


def build_cluster(cfg: StackConfig, inputs: ClusterInputs) -> ClusterLayer:
    """Declare everything that needs the Kubernetes API but outlives a run, on the aws layer's
    `inputs` (with its live resources to wait for when one stack holds both layers)."""
    provider = inputs.provider or kubernetes_provider("cluster-k8s", inputs.kubeconfig, pulumi.ResourceOptions())
    tenants = tenants_of(cfg.teams, bool(cfg.queueing.default_queue))
    namespaces = TenantNamespaces("tenants", tenants, provider, readiness_gates=cfg.addons.load_balancer_controller)
    addons = ClusterAddons(
        "addons",
        catalog.cluster_entries(list(inputs.node_groups.values()), inputs.role_arns, cfg.leader_worker_set, cfg.addons),
        inputs,
        cfg.addons,
        kueue_manager_config(cfg.queueing, cfg.leader_worker_set),
        inputs.kubernetes_version or cfg.cluster.kubernetes_version,
        provider,
    )
    groups = inputs.run_groups  # runs and quotas may use the system group; queues once Kueue runs
    teams = teams_of(cfg.teams, groups, bool(cfg.queueing.default_queue))
    queues = TeamQueues("queues", teams, groups, provider, addons.release("kueue"), namespaces.namespaces)
    volume = SharedVolume(
        "shared-volume",
        inputs.storage.storage_capacity_gib,
        inputs.file_system,
        namespaces.namespaces,
        STORAGE_CLAIM,
        provider,
        depends_on=inputs.volume_ready or None,
    )
    platform = Platform(
        provider=provider,
        leader_worker_set=cfg.leader_worker_set,
        neuron_scheduler=cfg.addons.neuron_scheduler,
        pods_ready_timeout_minutes=cfg.queueing.pods_ready_timeout_minutes,
        recovery_timeout_minutes=cfg.queueing.recovery_timeout_minutes,
        namespaces={key: t.namespace for key, t in tenants.items()},
        shared_sub_paths={key: t.sub_path for key, t in tenants.items()},
        storage_claim=STORAGE_CLAIM,
        node_groups=groups,
        registry_urls=dict(inputs.registry_urls),
        # What every run waits for, and what only the runs of one team wait for (their namespace,
        # its policies, claim and queues): declared per team, so the plan grows with runs + teams.
        depends_on=[addons.manifest("mpi-operator"), *addons.releases.values(), *queues.flavors],
        tenant_depends_on={key: _tenant_objects(key, namespaces, volume, queues) for key in tenants},
        queues=queues.queues,
        priority_classes=queues.priority_classes,
        teams=dict(cfg.teams),
        storage=inputs.storage,
        load_balancing=inputs.load_balancing,
        serving_metrics=inputs.serving_metrics,
    )
    return ClusterLayer(addons, namespaces, queues, volume, platform)


def build_infrastructure(cfg: StackConfig) -> Infrastructure:
    """Declare the platform's resources (aws and cluster layers in one stack)."""
    aws_layer = build_aws(cfg)
    return Infrastructure(aws_layer, build_cluster(cfg, aws_layer.inputs))


# --------------------------------------------------------------------------- stacks


def build(cfg: StackConfig) -> Outputs:
    """Declare every resource of an all-in-one stack; return the stack outputs."""
    infra = build_infrastructure(cfg)
    platform = infra.k8s.platform
    types = {name: g.instance.name for name, g in platform.node_groups.items()}
    plans = with_startup(run_plans(cfg.workloads, cfg.storage, cfg, types), cfg.workloads, platform.node_groups)
    deploy.deploy(cfg.workloads, cfg.hugging_face_token, platform, plans)
    return _aws_outputs(cfg, infra.aws)


def _aws_outputs(cfg: StackConfig, layer: AwsLayer) -> Outputs:
    """The outputs people read (`pulumi stack output clusterName`, `dataBucket`, ...)."""
    outputs: Outputs = {
        "clusterName": layer.cluster.name,
        "kubeconfig": layer.cluster.kubeconfig,
        "vpcId": layer.network.vpc_id,
        "oidcProviderArn": layer.cluster.oidc_provider_arn,
        "nodeGroups": {
            name: {
                "instanceType": ng.launch.group.instance.name,
                "desiredSize": ng.launch.group.nodes,
                "availabilityZone": ng.availability_zone,
                "capacity": ng.launch.capacity.kind,
            }
            for name, ng in layer.node_groups.items()
        },
        "fileSystemId": layer.storage.file_system.id,
        "fileSystemAvailabilityZone": layer.storage.availability_zone,
        "dataBucket": layer.storage.bucket.bucket,
        "registryUrls": layer.registry.urls,
        # USD from the dated price table (facts/prices.py); see `python -m tools.cost --live`.
        **costs.stack_outputs(cfg),
    }
    if layer.runner is not None:
        outputs["ciRunner"] = {
            kind: {"project": project, "label": runner_label(project)}
            for kind, project in layer.runner.projects.items()
        }
    return outputs


def aws_stack(cfg: StackConfig) -> Outputs:
    """An aws-layer stack: the AWS resources, the contract for the cluster layer, the runner."""
    layer = build_aws(cfg, kubernetes=False)
    outputs = _aws_outputs(cfg, layer)
    outputs[layers.AWS_LAYER_OUTPUT] = layers.aws_layer_output(layer.inputs)
    return outputs


def cluster_stack(cfg: StackConfig) -> Outputs:
    """A cluster-layer stack on the aws layer's outputs; exports the `Platform` for the runs."""
    ref, values = layers.read_lower_stack(cfg.layer, cfg.lower_stack)
    inputs = layers.parse_aws_layer(values, ref.require_output(KUBECONFIG_OUTPUT), cfg.lower_stack)
    problems = checks.team_problems(cfg.teams, inputs.run_groups)
    accelerated = sum(1 for g in inputs.run_groups.values() if g.accelerated)
    problems += checks.flavors_fit(cfg.teams, accelerated, where="teams", default_queue=cfg.queueing.default_queue)
    aws = f"the aws stack {cfg.lower_stack}"
    problems += checks.run_outputs_expire(cfg.teams, inputs.expires_after, inputs.expiring_teams, aws)
    if inputs.region != cfg.region:
        problems.insert(
            0,
            problem(
                "aws:region", "conflict", f"{cfg.region}, but the aws layer ({cfg.lower_stack}) is in {inputs.region}"
            ),
        )
    if problems:
        raise ConfigError(problems)
    platform = build_cluster(cfg, inputs).platform
    return {
        layers.PLATFORM_OUTPUT: layers.platform_output(platform),
        KUBECONFIG_OUTPUT: pulumi.Output.secret(inputs.kubeconfig),
    }


def on_cluster_queues(cfg: StackConfig, platform: Platform) -> StackConfig:
    """`cfg` with the cluster layer's Kueue timeouts and Neuron scheduler extension (a runs stack
    sets neither `queueing` nor `addons`)."""
    timeout = {k: getattr(platform, k) for k in ("pods_ready_timeout_minutes", "recovery_timeout_minutes")}
    addons = cfg.addons.model_copy(update={"neuron_scheduler": platform.neuron_scheduler})
    return cfg.model_copy(update={"queueing": cfg.queueing.model_copy(update=timeout), "addons": addons})


def runs_stack(cfg: StackConfig) -> Outputs:
    """A runs-layer stack: the training runs on the cluster layer's `Platform`."""
    ref, values = layers.read_lower_stack(cfg.layer, cfg.lower_stack)
    platform = layers.parse_platform(values, None, cfg.lower_stack)
    groups = platform.node_groups
    balancer = None if platform.load_balancing else layers.NO_BALANCER
    problems = [
        *checks.images_exist(cfg.workloads, platform.registry_urls),
        *checks.runs_problems(cfg.workloads, groups),
        *checks.checkpoints_fit(cfg.workloads, platform.storage),
        *checks.serving_problems(on_cluster_queues(cfg, platform), groups, balancer),
        *checks.checkpoint_share(cfg.workloads, groups, platform.storage),
        *checks.run_teams(
            cfg.workloads,
            platform.teams,
            checks.unowned_nodes(platform.teams, groups, True) if DEFAULT_QUEUE in platform.queues else None,
        ),
        *amis.layered_run_problems(
            cfg.workloads, {name: (g.instance, g.release_version) for name, g in platform.node_groups.items()}
        ),
        *checks.layered_serving(cfg.workloads, platform.leader_worker_set, cfg.lower_stack),
    ]
    if problems:
        raise ConfigError(problems)
    for line in checks.unscraped_servers(cfg.workloads, platform.serving_metrics, cfg.lower_stack):
        pulumi.log.warn(line)
    provider = kubernetes_provider("cluster-k8s", ref.require_output(KUBECONFIG_OUTPUT), pulumi.ResourceOptions())
    types = {name: g.instance.name for name, g in platform.node_groups.items()}
    plans = with_startup(run_plans(cfg.workloads, platform.storage, cfg, types), cfg.workloads, platform.node_groups)
    deploy.deploy(cfg.workloads, cfg.hugging_face_token, dataclasses.replace(platform, provider=provider), plans)
    return {
        "runs": {name: run.run_id for name, run in sorted(cfg.workloads.items())},
        "runCosts": cost.run_costs(costs.runs_from_config(cfg, cost.Prices(), types)),
    }


def build_layer(cfg: StackConfig) -> Outputs:
    """Declare what the stack's `layer` holds; ConfigError when the lower stack's outputs do not fit."""
    builders = {"all": build, "aws": aws_stack, "cluster": cluster_stack, "runs": runs_stack}
    return builders[cfg.layer](cfg)
