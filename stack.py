"""The composition root: config in, components wired in order, stack outputs out.

`__main__.py` calls `build` under the Pulumi engine; `tools.plan` and the tests call it
under mocks. The only reader of the whole `StackConfig`: each component gets its own
section and the shared `StackContext`. Data flows one way: network -> shared storage
(beside, not after, the cluster) -> cluster -> node groups -> registry and add-ons ->
Kueue queues -> the `Platform` value -> training runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from config import checkpoints
from config.stack import StackConfig
from facts.names import STORAGE_CLAIM, WORKLOADS_NAMESPACE
from infra import cost
from infra.addons import ClusterAddons
from infra.cluster import Cluster
from infra.context import StackContext
from infra.images import ImageBuilds
from infra.network import Network
from infra.nodegroups import AcceleratedNodeGroup
from infra.platform import NodeGroupFacts, Platform
from infra.queues import TeamQueues, kueue_manager_config, teams_of
from infra.registry import Registry
from infra.storage import SharedStorage, SharedVolume
from workloads import deploy


@dataclass
class Infrastructure:
    """The components the program declared, for the layers built on top of them."""

    network: Network
    cluster: Cluster
    node_groups: dict[str, AcceleratedNodeGroup]
    storage: SharedStorage
    registry: Registry
    images: ImageBuilds
    addons: ClusterAddons
    queues: TeamQueues
    volume: SharedVolume
    platform: Platform


def built_repositories(cfg: StackConfig) -> list[str]:
    """The repositories whose image the stack builds (in AWS CodeBuild, from images/): those of
    the runs that name neither an image nor a tag. Nothing is built that no run uses."""
    return sorted(
        {r.REPOSITORY for r in cfg.workloads.values() if r.REPOSITORY and r.image is None and r.image_tag is None}
    )


def build_infrastructure(cfg: StackConfig) -> Infrastructure:
    """Declare the platform's resources; return the components and the `Platform` value."""
    ctx = StackContext.from_config(cfg)
    network = Network("network", cfg.network, ctx, cfg.availability_zones)
    # Takes nothing from the cluster, so FSx and EKS are created in parallel.
    storage = SharedStorage("storage", cfg.storage, ctx, network, cfg.file_system_az)
    cluster = Cluster("cluster", cfg.cluster, cfg.system_node_group, ctx, network)
    node_groups = {
        ng.name: AcceleratedNodeGroup(f"ng-{ng.name}", ng, ctx, cfg.node_group_az(ng), network, cluster)
        for ng in cfg.node_groups
    }
    storage.allow_clients(
        {"cluster": cluster.security_group_id, **{name: ng.security_group_id for name, ng in node_groups.items()}}
    )
    registry = Registry("registry", cfg.registry, ctx, cluster.node_role.arn)
    facts = {ng.name: NodeGroupFacts.from_config(ng, cfg.node_group_az(ng)) for ng in cfg.node_groups}
    addons = ClusterAddons(
        "addons",
        cfg.addons,
        ctx,
        cluster,
        list(facts.values()),
        storage.file_system.arn,
        kueue_manager_config(cfg.queueing),
    )
    # Flavors and queues once Kueue runs; the LocalQueues need the workloads namespace.
    queues = TeamQueues(
        "queues", teams_of(cfg.teams, facts), facts, cluster.provider, depends_on=[addons.kueue, addons.namespace]
    )
    volume = SharedVolume(
        "shared-volume",
        cfg.storage.storage_capacity_gib,
        storage,
        addons.namespace,
        STORAGE_CLAIM,
        cluster.provider,
        # The claim binds only once the file system's data repository is linked.
        depends_on=[storage.association] if storage.association else None,
    )
    platform = Platform(
        provider=cluster.provider,
        namespace=WORKLOADS_NAMESPACE,
        storage_claim=STORAGE_CLAIM,
        node_groups=facts,
        registry_urls=dict(registry.urls),
        depends_on=[addons.namespace, volume.claim, addons.mpi_operator, *addons.releases.values(), *queues.objects],
        queues=queues.queues,
        priority_classes=queues.priority_classes,
    )
    images = ImageBuilds("images", {r: registry.urls[r] for r in built_repositories(cfg)}, ctx)
    return Infrastructure(network, cluster, node_groups, storage, registry, images, addons, queues, volume, platform)


def checkpoint_plans(cfg: StackConfig) -> dict[str, dict[str, object]]:
    """Each run's checkpoint size, write time and share of training time (for the plan)."""
    plans = {}
    for name, run in cfg.workloads.items():
        plan = checkpoints.plan(
            run.RECIPE,
            run.model_shape,
            run.checkpoints_kept,
            run.checkpoint_interval,
            cfg.storage,
            cost.estimated_step_seconds(cfg, name)[0],
        )
        if plan is not None:
            plans[name] = plan.as_dict()
    return plans


def build(cfg: StackConfig) -> dict[str, pulumi.Input[object]]:
    """Declare every resource of the stack; return the stack outputs."""
    infra = build_infrastructure(cfg)
    deploy.deploy(cfg.workloads, cfg.hugging_face_token, infra.platform, checkpoint_plans(cfg))
    return {
        "clusterName": infra.cluster.name,
        "kubeconfig": infra.cluster.kubeconfig,
        "vpcId": infra.network.vpc_id,
        "oidcProviderArn": infra.cluster.oidc_provider_arn,
        "nodeGroups": {
            name: {
                "instanceType": ng.config.instance_type,
                "desiredSize": ng.config.desired_size,
                "availabilityZone": ng.availability_zone,
                "capacity": ng.config.capacity.type,
            }
            for name, ng in infra.node_groups.items()
        },
        "fileSystemId": infra.storage.file_system.id,
        "fileSystemAvailabilityZone": infra.storage.availability_zone,
        "dataBucket": infra.storage.bucket.bucket,
        "registryUrls": infra.registry.urls,
        # USD from the dated price table (facts/prices.py); see `python -m tools.cost --live`.
        **cost.stack_outputs(cfg),
    }
